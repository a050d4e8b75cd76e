//! A run of ManifestWorks sent over one `ApplyWorks` stream: the hub writes up to a few hundred
//! at once and answers each by its position, so a file of thousands of works costs one call.
//! Outcomes come back in document order. A hub that does not serve the stream (an older one)
//! gets the works one call each, as before.

use super::{Outcome, apply_each, describe, work_line};
use crate::hub::Hub;
use anyhow::anyhow;
use flotilla_api::ocm::Document;
use std::sync::atomic::{AtomicBool, Ordering};
use tonic::Code;

/// Applies `run` (ManifestWork documents only) and says what came of each, in order, printing
/// each applied work's line as soon as every work before it is answered. When the stream
/// breaks, the works it did not answer are reported not applied and `lost` is set.
pub async fn apply_run(hub: &Hub, run: Vec<(usize, Document)>, lost: &AtomicBool) -> Vec<Outcome> {
    let what: Vec<String> = run.iter().map(|(i, d)| describe(*i, d)).collect();
    let metas: Vec<_> = run
        .iter()
        .map(|(_, d)| match d {
            Document::Work(w) => w.metadata.clone().unwrap_or_default(),
            _ => Default::default(),
        })
        .collect();
    let works: Vec<_> = run
        .iter()
        .filter_map(|(_, d)| match d {
            Document::Work(w) => Some(w.clone()),
            _ => None,
        })
        .collect();
    let mut outcomes: Vec<Option<anyhow::Result<String>>> = what.iter().map(|_| None).collect();
    let mut printed = 0;
    let mut api = hub.works();
    match api.apply_works(futures::stream::iter(works)).await {
        Err(status) if status.code() == Code::Unimplemented => {
            let outcomes = apply_each(hub, run, lost).await;
            for (_, o) in &outcomes {
                if let Some(Ok(line)) = o {
                    println!("{line}");
                }
            }
            return outcomes;
        }
        Err(status) => {
            let e = hub.error(status);
            if format!("{e:#}").starts_with("cannot reach the hub") {
                lost.store(true, Ordering::Relaxed);
            }
            let message = format!("{e:#}");
            for o in &mut outcomes {
                *o = Some(Err(anyhow!("{message}")));
            }
        }
        Ok(response) => {
            let mut answers = response.into_inner();
            loop {
                match answers.message().await {
                    Ok(Some(a)) => {
                        let Some(slot) = outcomes.get_mut(a.index as usize) else {
                            continue;
                        };
                        *slot = Some(if a.code == 0 {
                            let generation = a.metadata.map_or(0, |m| m.generation);
                            Ok(work_line(&metas[a.index as usize], generation))
                        } else {
                            Err(hub.error(tonic::Status::new(Code::from(a.code), a.message)))
                        });
                        printed = print_from(&outcomes, printed);
                    }
                    Ok(None) => break,
                    Err(status) => {
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
                }
            }
        }
    }
    print_from(&outcomes, printed);
    what.into_iter().zip(outcomes).collect()
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
