//! A run of ManifestWorks sent over one `ApplyWorks` stream: the hub writes up to a few hundred
//! at once and answers each by its position, so a file of thousands of works costs one call.
//! Outcomes come back in document order. A hub that does not serve the stream (an older one)
//! gets the works one call each, as before.
//!
//! Applying a work is idempotent: the works the hub answers UNAVAILABLE (its store did not answer
//! in time) are sent again over a new stream after the hub's [`Backoff`], one line on stderr
//! per round, until they are answered otherwise or `--retry-seconds` is spent.

use super::{Outcome, apply_each, describe, work_line};
use crate::hub::{Backoff, Hub};
use anyhow::anyhow;
use flotilla_api::ocm::Document;
use flotilla_api::v1::ManifestWork;
use std::sync::atomic::{AtomicBool, Ordering};
use tonic::{Code, Status};

/// Applies `run` (ManifestWork documents only) and says what came of each, in order, printing
/// each applied work's line as soon as every work before it is answered. When the stream
/// breaks, the works it did not answer are reported not applied and `lost` is set.
pub async fn apply_run(hub: &Hub, run: Vec<(usize, Document)>, lost: &AtomicBool) -> Vec<Outcome> {
    let what: Vec<String> = run.iter().map(|(i, d)| describe(*i, d)).collect();
    let works: Vec<ManifestWork> = run
        .iter()
        .map(|(_, d)| match d {
            Document::Work(w) => w.clone(),
            _ => ManifestWork::default(),
        })
        .collect();
    let mut outcomes: Vec<Option<anyhow::Result<String>>> = what.iter().map(|_| None).collect();
    let mut printed = 0;
    let mut backoff = hub.backoff();
    // The works (by position in `run`) to send in this round.
    let mut pending: Vec<usize> = (0..works.len()).collect();
    loop {
        let (unavailable, message) =
            match send(hub, &works, &pending, &mut outcomes, &mut printed).await {
                Round::Unimplemented => {
                    // Works, one by one: nothing here is a GitRepo's to force.
                    let outcomes = apply_each(hub, run, lost, false).await;
                    for (_, o) in &outcomes {
                        if let Some(Ok(line)) = o {
                            println!("{line}");
                        }
                    }
                    return outcomes;
                }
                Round::Over => break,
                Round::Failed(status) => {
                    let e = hub.error(status);
                    let message = format!("{e:#}");
                    if message.starts_with("cannot reach the hub") {
                        lost.store(true, Ordering::Relaxed);
                    }
                    for &i in &pending {
                        outcomes[i] = Some(Err(anyhow!("{message}")));
                    }
                    break;
                }
                Round::Broken(status) => {
                    // The works not answered may or may not have been written.
                    lost.store(true, Ordering::Relaxed);
                    let e = hub.error(status);
                    for o in outcomes.iter_mut().filter(|o| o.is_none()) {
                        *o = Some(Err(anyhow!(
                            "sent, but never answered ({e:#}): it may or may not be applied"
                        )));
                    }
                    break;
                }
                Round::Unavailable { works, message } => (works, message),
            };
        let said = if unavailable.len() > 1 {
            format!("for {} works: {message}", unavailable.len())
        } else {
            message.clone()
        };
        match backoff.unavailable(&said) {
            Some(wait) => {
                tokio::time::sleep(wait).await;
                pending = unavailable;
            }
            None => {
                let gave_up = gave_up(hub, &backoff, &message);
                for i in unavailable {
                    outcomes[i] = Some(Err(anyhow!("{gave_up}")));
                }
                break;
            }
        }
    }
    print_from(&outcomes, printed);
    what.into_iter().zip(outcomes).collect()
}

/// What one round of the stream came to.
enum Round {
    /// The hub does not serve `ApplyWorks` (an older one).
    Unimplemented,
    /// Every work sent was answered with something other than UNAVAILABLE.
    Over,
    /// The call was refused, or the hub could not be reached: nothing of the round was written.
    Failed(Status),
    /// The stream broke after it started: the works not answered may or may not be written.
    Broken(Status),
    /// These works (positions in the run) were answered UNAVAILABLE, the last time with
    /// `message` — or the whole round was.
    Unavailable {
        /// The works to send again.
        works: Vec<usize>,
        /// The hub's last UNAVAILABLE message.
        message: String,
    },
}

/// Sends the `pending` works of `works` over one stream, putting the outcome of each work
/// answered with anything but UNAVAILABLE in `outcomes` (and printing the lines that are due
/// from `printed` on).
async fn send(
    hub: &Hub,
    works: &[ManifestWork],
    pending: &[usize],
    outcomes: &mut [Option<anyhow::Result<String>>],
    printed: &mut usize,
) -> Round {
    let batch: Vec<ManifestWork> = pending.iter().map(|&i| works[i].clone()).collect();
    let mut answers = match hub.works().apply_works(futures::stream::iter(batch)).await {
        Ok(response) => response.into_inner(),
        Err(status) if status.code() == Code::Unimplemented => return Round::Unimplemented,
        Err(status) if Backoff::retries(&status) => {
            return Round::Unavailable {
                works: pending.to_vec(),
                message: status.message().to_string(),
            };
        }
        Err(status) => return Round::Failed(status),
    };
    let mut unavailable = Vec::new();
    let mut message = String::new();
    loop {
        match answers.message().await {
            Ok(Some(a)) => {
                let Some(&i) = pending.get(a.index as usize) else {
                    continue;
                };
                if a.code == Code::Unavailable as i32 {
                    unavailable.push(i);
                    message = a.message;
                    continue;
                }
                outcomes[i] = Some(if a.code == 0 {
                    let generation = a.metadata.map_or(0, |m| m.generation);
                    let meta = works[i].metadata.clone().unwrap_or_default();
                    Ok(work_line(&meta, generation))
                } else {
                    Err(hub.error(Status::new(Code::from(a.code), a.message)))
                });
                *printed = print_from(outcomes, *printed);
            }
            Ok(None) => break,
            // The hub broke the stream saying it is unavailable: what it did not answer is
            // sent again with the rest.
            Err(status) if Backoff::retries(&status) => {
                message = status.message().to_string();
                let unanswered: Vec<usize> = pending
                    .iter()
                    .copied()
                    .filter(|i| outcomes[*i].is_none() && !unavailable.contains(i))
                    .collect();
                unavailable.extend(unanswered);
                break;
            }
            Err(status) => return Round::Broken(status),
        }
    }
    if unavailable.is_empty() {
        Round::Over
    } else {
        unavailable.sort_unstable();
        Round::Unavailable {
            works: unavailable,
            message,
        }
    }
}

/// The failure of a work the hub was still unavailable for when the budget ran out.
fn gave_up(hub: &Hub, backoff: &Backoff, message: &str) -> String {
    let e = hub.error(Status::unavailable(message));
    format!("{}: {e:#}", backoff.gave_up())
}

/// Prints the lines of the applied works from `first` on while each is answered; returns the
/// first not answered yet.
fn print_from(outcomes: &[Option<anyhow::Result<String>>], first: usize) -> usize {
    let mut next = first;
    while let Some(Some(answered)) = outcomes.get(next) {
        if let Ok(line) = answered {
            println!("{line}");
        }
        next += 1;
    }
    next
}
