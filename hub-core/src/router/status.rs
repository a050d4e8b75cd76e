//! The status side of the spokes' conversation: one durable pull consumer per shard and epoch
//! on `FLOTILLA_STATUS`, its heartbeats and re-subscriptions; each message goes to
//! [`super::dispatch`], which decodes, checks and routes it.

use super::{LEGACY_STATUS_CONSUMER, RouterConfig};
use crate::cluster::Clusters;
use crate::metrics::Metrics;
use async_nats::jetstream::{self, consumer};
use flotilla_bus::subjects;
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The status consumer of one shard under one epoch: a new owner reads the latest message of
/// every subject of its shard at once (actors de-duplicate by `sequenceid`/`statushash`), and a
/// late acknowledgement from the previous owner lands on the previous consumer, not this one.
#[derive(Debug, Clone)]
pub struct StatusFeed {
    /// The shard.
    pub shard: u32,
    /// The holder's epoch.
    pub epoch: u64,
}

/// Idle heartbeat of the status pulls.
const PULL_HEARTBEAT: Duration = Duration::from_secs(2);
/// How long one status pull waits on the server.
const PULL_EXPIRES: Duration = Duration::from_secs(10);

/// Missed heartbeats in a row (each one 2 × [`PULL_HEARTBEAT`] of silence) after which a
/// shard's pull is made again: its node is taken for lost.
const MISSES_BEFORE_RESUBSCRIBE: u32 = 3;
/// A blind shard sees again after this long without another missed heartbeat (more than one
/// miss period: the heartbeats are arriving).
const HEARTBEAT_SETTLE: Duration = Duration::from_secs(6);

/// The longest wait before a shard's status consumer is asked for again.
const RESUBSCRIBE_MAX: Duration = Duration::from_secs(10);

/// The wait after the `failures`-th failure in a row: 0.1–0.2 s after the first (a lost node is
/// noticed within seconds), doubling to [`RESUBSCRIBE_MAX`].
fn resubscribe_wait(failures: usize) -> Duration {
    flotilla_bus::connect::backoff(failures, RESUBSCRIBE_MAX)
}

/// Prefix of every shard status consumer's name.
const FEED_PREFIX: &str = "flotilla-status-s";

impl StatusFeed {
    /// The consumer's durable name.
    pub fn name(&self) -> String {
        format!("{FEED_PREFIX}{:02}-e{}", self.shard, self.epoch)
    }

    fn is_older_of_same_shard(&self, name: &str) -> bool {
        let prefix = format!("{FEED_PREFIX}{:02}-e", self.shard);
        name.strip_prefix(&prefix)
            .and_then(|e| e.parse::<u64>().ok())
            .is_some_and(|e| e < self.epoch)
    }
}

/// Creates (or opens) a shard's status consumer, removing the consumers of its earlier epochs
/// and the single consumer of hubs before shards.
pub async fn status_consumer(
    stream: &jetstream::stream::Stream,
    feed: &StatusFeed,
    config: &RouterConfig,
) -> Result<consumer::Consumer<consumer::pull::Config>, String> {
    let name = feed.name();
    let consumer = stream
        .get_or_create_consumer(
            &name,
            consumer::pull::Config {
                durable_name: Some(name.clone()),
                filter_subject: subjects::status_of_shard(feed.shard),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: config.ack_wait,
                max_ack_pending: config.max_ack_pending,
                deliver_policy: consumer::DeliverPolicy::LastPerSubject,
                // Stored like the stream (file, its replicas): a NATS restart or the loss of one
                // node of a cluster keeps it and what it has delivered.
                // A consumer nobody reads (its hub died with it) goes away by itself.
                inactive_threshold: Duration::from_secs(300),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut names = stream.consumer_names();
    let mut stale = Vec::new();
    while let Some(Ok(n)) = names.next().await {
        if n == LEGACY_STATUS_CONSUMER || feed.is_older_of_same_shard(&n) {
            stale.push(n);
        }
    }
    for n in stale {
        if let Err(e) = stream.delete_consumer(&n).await {
            tracing::debug!(consumer = %n, error = %e, "removing a stale status consumer failed");
        }
    }
    Ok(consumer)
}

/// Removes a shard's status consumer (the shard was handed over).
pub async fn remove_status_consumer(stream: &jetstream::stream::Stream, feed: &StatusFeed) {
    if let Err(e) = stream.delete_consumer(&feed.name()).await {
        tracing::debug!(consumer = %feed.name(), error = %e, "removing the status consumer failed");
    }
}

/// Consumes one shard's status until `shutdown` flips, re-establishing the consumer after
/// errors (NATS restarts). Messages are handled only while the shard's fence holds.
pub async fn run_status(
    stream: jetstream::stream::Stream,
    feed: StatusFeed,
    fence: crate::ha::Fence,
    clusters: Clusters,
    metrics: Arc<Metrics>,
    config: RouterConfig,
    mut shutdown: watch::Receiver<bool>,
) {
    let sight = clusters.sight(feed.shard);
    let blind = || {
        if let Some(s) = &sight {
            s.lost();
        }
    };
    // Failures in a row: the waits before asking the server again double (to
    // RESUBSCRIBE_MAX), so 32 shards do not each ask an overloaded server every second.
    let mut failures = 0;
    // Reports on their way to the controllers' hub: the next message is read only while fewer
    // than FORWARDS_IN_FLIGHT wait for the holder. They outlive a pull: before a new one is
    // made they are answered (at most report::FORWARD_TIMEOUT), so their messages are
    // acknowledged or handed back rather than left for ack_wait; on shutdown or a lost fence
    // they are dropped (delivered again).
    let mut in_flight = super::dispatch::InFlight::new();
    // The stream leader's clock as this shard's messages show it (kept across re-subscriptions).
    let mut clock = super::clock::ServerClock::default();
    loop {
        blind();
        if *shutdown.borrow() || !fence.is_valid() {
            return;
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            () = async { while in_flight.next().await.is_some() {} } => {}
        }
        let mut messages = match pull(&stream, &feed, &config).await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(shard = feed.shard, error = %e, "status consumer unavailable; retrying");
                failures += 1;
                tokio::select! {
                    _ = shutdown.changed() => return,
                    () = tokio::time::sleep(resubscribe_wait(failures)) => continue,
                }
            }
        };
        tracing::debug!(
            shard = feed.shard,
            epoch = feed.epoch,
            "consuming the shard's status"
        );
        if let Some(s) = &sight {
            s.regained();
        }
        // A missed heartbeat makes the shard blind (no lease is judged) but keeps the pull: an
        // overloaded server answers late, and a pull re-made every 4 s was never answered at all
        // (the 100,000-cluster fanout stopped consuming). Only MISSES_BEFORE_RESUBSCRIBE misses
        // in a row (a lost node) re-make it; a stretch without a miss, or a message, ends the
        // blindness.
        let mut missed = 0;
        let mut blind_since: Option<tokio::time::Instant> = None;
        loop {
            let settled = blind_since.map(|t| t + HEARTBEAT_SETTLE);
            let room = in_flight.len() < crate::report::FORWARDS_IN_FLIGHT;
            tokio::select! {
                // Forwards first: a backlog of messages must not keep them from being sent.
                biased;
                _ = shutdown.changed() => return,
                Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
                () = sleep_until_some(settled) => {
                    blind_since = None;
                    missed = 0;
                    if let Some(s) = &sight {
                        s.regained();
                    }
                }
                next = messages.next(), if room => match next {
                    // Left unacknowledged once the fence is gone: the next owner reads it.
                    Some(Ok(_)) if !fence.is_valid() => return,
                    Some(Ok(msg)) => {
                        failures = 0;
                        missed = 0;
                        if blind_since.take().is_some()
                            && let Some(s) = &sight
                        {
                            s.regained();
                        }
                        super::dispatch::handle_status(&clusters, &metrics, &config, msg, &mut in_flight, &mut clock)
                            .await;
                    }
                    Some(Err(e))
                        if e.kind() == consumer::pull::MessagesErrorKind::MissingHeartbeat
                            && missed + 1 < MISSES_BEFORE_RESUBSCRIBE =>
                    {
                        missed += 1;
                        blind();
                        blind_since = Some(tokio::time::Instant::now());
                        tracing::debug!(shard = feed.shard, missed, "status heartbeat missed; waiting");
                    }
                    Some(Err(e)) => {
                        tracing::warn!(shard = feed.shard, error = %e, "status stream error; re-subscribing");
                        failures += 1;
                        tokio::time::sleep(resubscribe_wait(failures)).await;
                        break;
                    }
                    None => break,
                }
            }
        }
    }
}

/// The shard's consumer and a pull on it. Short pulls with heartbeats: a consumer lost with its
/// NATS node is noticed within seconds (after the client's defaults it took 30 s, and clusters
/// of a test fleet with a 10 s grace went Unknown).
async fn pull(
    stream: &jetstream::stream::Stream,
    feed: &StatusFeed,
    config: &RouterConfig,
) -> Result<consumer::pull::Stream, Box<dyn std::error::Error + Send + Sync>> {
    let consumer = status_consumer(stream, feed, config).await?;
    Ok(consumer
        .stream()
        .heartbeat(PULL_HEARTBEAT)
        .expires(PULL_EXPIRES)
        .messages()
        .await?)
}

/// Sleeps until `at`; never, without one.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
