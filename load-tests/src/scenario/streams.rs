//! Works applied over `ApplyWorks` streams instead of one `ApplyWork` call each: the works are
//! dealt round-robin to `--streams` streams that run at once, and every answer is handed back
//! with the instant its work was sent.

use anyhow::{Context, Result};
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{ApplyWorkResult, ManifestWork};
use futures::StreamExt as _;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tonic::transport::Channel;

/// One answered work: its index in the caller's list, the hub's answer, when it was sent.
pub struct Answer {
    pub index: usize,
    pub result: ApplyWorkResult,
    pub sent: Instant,
}

/// Applies `works` over `streams` streams at once. Returns every answer, and the indexes of
/// works that got none (a stream that broke: the hub went away).
pub async fn apply(
    api: &WorkServiceClient<Channel>,
    works: Vec<ManifestWork>,
    streams: usize,
) -> Result<(Vec<Answer>, Vec<usize>)> {
    let streams = streams.max(1);
    let mut dealt: Vec<Vec<(usize, ManifestWork)>> = (0..streams).map(|_| Vec::new()).collect();
    for (i, w) in works.into_iter().enumerate() {
        dealt[i % streams].push((i, w));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for share in dealt.into_iter().filter(|s| !s.is_empty()) {
        let api = api.clone();
        tasks.spawn(one_stream(api, share));
    }
    let (mut answers, mut missing) = (Vec::new(), Vec::new());
    while let Some(r) = tasks.join_next().await {
        let (a, m) = r.context("stream task")?;
        answers.extend(a);
        missing.extend(m);
    }
    Ok((answers, missing))
}

async fn one_stream(
    mut api: WorkServiceClient<Channel>,
    share: Vec<(usize, ManifestWork)>,
) -> (Vec<Answer>, Vec<usize>) {
    let indexes: Vec<usize> = share.iter().map(|(i, _)| *i).collect();
    let sent: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; share.len()]));
    let stamps = sent.clone();
    let request = futures::stream::iter(share.into_iter().enumerate()).map(move |(k, (_, w))| {
        stamps.lock().expect("sent lock")[k] = Some(Instant::now());
        w
    });
    let mut answered = vec![false; indexes.len()];
    let mut answers = Vec::with_capacity(indexes.len());
    match api.apply_works(request).await {
        Ok(response) => {
            let mut stream = response.into_inner();
            loop {
                match stream.message().await {
                    Ok(Some(result)) => {
                        let k = result.index as usize;
                        let Some(&index) = indexes.get(k) else {
                            tracing::error!(index = k, "the hub answered a work never sent");
                            continue;
                        };
                        answered[k] = true;
                        let at = sent.lock().expect("sent lock")[k].unwrap_or_else(Instant::now);
                        answers.push(Answer {
                            index,
                            result,
                            sent: at,
                        });
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "ApplyWorks stream broke");
                        break;
                    }
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "ApplyWorks stream refused"),
    }
    let missing = indexes
        .iter()
        .zip(&answered)
        .filter(|(_, a)| !**a)
        .map(|(i, _)| *i)
        .collect();
    (answers, missing)
}
