//! The hub's fetch pool: one task that queues fetch requests by GitRepo and runs at most
//! `workers` worker processes at once, at most one per host, so a slow or hostile server holds
//! one slot, never the fleet's fetching (design §10.1, "Fetcher"). A request for a GitRepo
//! already queued replaces the queued one (its caller is told `Superseded`); one already running
//! is queued behind itself. Dropping every handle, or the shutdown future ending, stops the task
//! and kills the running workers (their `Child` is killed on drop).

use std::{collections::HashSet, future::Future, path::PathBuf};

use thiserror::Error;
use tokio::{
    sync::{mpsc, oneshot},
    task::JoinSet,
};

use crate::{
    launch::{Finished, LaunchError, Worker},
    protocol::FetchRequest,
};

/// Why a pooled fetch produced no answer.
#[derive(Debug, Error)]
pub enum PoolError {
    /// The worker failed.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A newer request for the same GitRepo replaced this one before it started.
    #[error("superseded by a newer fetch of the same GitRepo")]
    Superseded,
    /// The pool stopped.
    #[error("the fetch pool stopped")]
    Stopped,
}

/// One queued fetch.
#[derive(Debug)]
struct Job {
    key: String,
    host: String,
    cache: PathBuf,
    request: FetchRequest,
    respond_to: oneshot::Sender<Result<Finished, PoolError>>,
}

/// The pool's handle.
#[derive(Debug, Clone)]
pub struct Pool {
    tx: mpsc::Sender<Job>,
}

impl Pool {
    /// Starts the pool task; it ends when `shutdown` completes or every handle is dropped.
    pub fn spawn(
        worker: Worker,
        workers: usize,
        mailbox: usize,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> (Pool, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(mailbox.max(1));
        let task = tokio::spawn(run(worker, workers.max(1), rx, shutdown));
        (Pool { tx }, task)
    }

    /// Fetches `request` for GitRepo `key` into `cache`, when a slot and its host are free.
    pub async fn fetch(
        &self,
        key: impl Into<String>,
        cache: PathBuf,
        request: FetchRequest,
    ) -> Result<Finished, PoolError> {
        let (respond_to, answer) = oneshot::channel();
        let job = Job {
            key: key.into(),
            host: host_of(&request.url),
            cache,
            request,
            respond_to,
        };
        self.tx.send(job).await.map_err(|_| PoolError::Stopped)?;
        answer.await.unwrap_or(Err(PoolError::Stopped))
    }
}

/// The host part of a URL (`""` for `file://` and anything without one): the unit of "one
/// fetch per host at a time".
pub fn host_of(url: &str) -> String {
    let Some((_, rest)) = url.split_once("://") else {
        return String::new();
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host.to_ascii_lowercase()
}

/// Which queued jobs start now: in arrival order, skipping a GitRepo already running and a host
/// already busy, until `free` slots are used. Pure.
pub fn startable(
    queued: &[(&str, &str)],
    running_keys: &HashSet<String>,
    running_hosts: &HashSet<String>,
    free: usize,
) -> Vec<usize> {
    let mut hosts: HashSet<&str> = running_hosts.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    for (i, (key, host)) in queued.iter().enumerate() {
        if out.len() == free {
            break;
        }
        if running_keys.contains(*key) || hosts.contains(host) {
            continue;
        }
        hosts.insert(host);
        out.push(i);
    }
    out
}

async fn run(
    worker: Worker,
    workers: usize,
    mut rx: mpsc::Receiver<Job>,
    shutdown: impl Future<Output = ()>,
) {
    let mut queue: Vec<Job> = Vec::new();
    let mut running: JoinSet<(String, String)> = JoinSet::new();
    let mut keys = HashSet::new();
    let mut hosts = HashSet::new();
    tokio::pin!(shutdown);
    loop {
        let pairs: Vec<(&str, &str)> = queue
            .iter()
            .map(|j| (j.key.as_str(), j.host.as_str()))
            .collect();
        let start = startable(&pairs, &keys, &hosts, workers - running.len());
        for i in start.into_iter().rev() {
            let job = queue.remove(i);
            keys.insert(job.key.clone());
            hosts.insert(job.host.clone());
            let worker = worker.clone();
            running.spawn(async move {
                let done = worker
                    .fetch(&job.cache, &job.request)
                    .await
                    .map_err(PoolError::from);
                let _ = job.respond_to.send(done);
                (job.key, job.host)
            });
        }
        tokio::select! {
            () = &mut shutdown => break,
            job = rx.recv() => match job {
                Some(job) => {
                    if let Some(old) = queue.iter().position(|q| q.key == job.key) {
                        let old = std::mem::replace(&mut queue[old], job);
                        let _ = old.respond_to.send(Err(PoolError::Superseded));
                    } else {
                        queue.push(job);
                    }
                }
                // Every handle is gone, so no caller waits for an answer.
                None => break,
            },
            Some(done) = running.join_next(), if !running.is_empty() => {
                if let Ok((key, host)) = done {
                    keys.remove(&key);
                    hosts.remove(&host);
                }
            }
        }
    }
    // Dropping the set aborts the fetches; their children are killed on drop. Queued callers
    // see their sender dropped: `Stopped`.
    running.shutdown().await;
}

#[cfg(test)]
mod tests;
