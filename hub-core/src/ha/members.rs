//! Who is alive: every hub puts a heartbeat key (`<hub-id>`, value [`HubInfo`]) every renew
//! interval into a bucket whose keys age out after the TTL, and watches the bucket. A hub is live
//! while its last heartbeat arrived less than a TTL ago by the watcher's own monotonic clock
//! (nats-server 2.9 tells nobody when a key ages out) and it has not deleted its key.

use super::lease::{CallError, HubInfo, within};
use async_nats::jetstream::kv;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A hub as last seen.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Its heartbeat.
    pub info: HubInfo,
    /// When it arrived here.
    pub at: Instant,
    /// When this incarnation was first seen here.
    pub since: Instant,
}

/// The hubs seen, by id.
#[derive(Debug, Default)]
pub struct Roster {
    hubs: HashMap<String, Seen>,
}

impl Roster {
    /// Records a heartbeat received at `now`.
    pub fn heard(&mut self, info: HubInfo, now: Instant) {
        let since = match self.hubs.get(&info.hub) {
            Some(s) if s.info.incarnation == info.incarnation => s.since,
            _ => now,
        };
        self.hubs.insert(
            info.hub.clone(),
            Seen {
                info,
                at: now,
                since,
            },
        );
    }

    /// Records a hub's leaving (its key deleted).
    pub fn left(&mut self, hub: &str) {
        self.hubs.remove(hub);
    }

    /// The hubs heard from within `ttl` of `now`, sorted by id.
    pub fn live(&self, now: Instant, ttl: Duration) -> Vec<Seen> {
        let mut live: Vec<Seen> = self
            .hubs
            .values()
            .filter(|s| now.saturating_duration_since(s.at) < ttl)
            .cloned()
            .collect();
        live.sort_by(|a, b| a.info.hub.cmp(&b.info.hub));
        live
    }
}

/// The membership bucket and the roster its watch feeds.
#[derive(Clone)]
pub struct Members {
    kv: kv::Store,
    roster: Arc<Mutex<Roster>>,
    /// Silence after which the watch is replaced.
    stall: Duration,
}

impl Members {
    /// Membership over `kv`; a watch silent for `stall` (a few heartbeat intervals) is replaced.
    pub fn new(kv: kv::Store, stall: Duration) -> Self {
        Self {
            kv,
            roster: Arc::new(Mutex::new(Roster::default())),
            stall,
        }
    }

    /// Puts this hub's heartbeat.
    pub async fn beat(&self, me: &HubInfo, timeout: Duration) -> Result<(), CallError> {
        let value = bytes::Bytes::from(serde_json::to_vec(me).expect("plain struct"));
        within(timeout, self.kv.put(&me.hub, value)).await.map(drop)
    }

    /// Removes this hub's heartbeat (a graceful stop).
    pub async fn leave(&self, hub: &str, timeout: Duration) {
        if let Ok(Err(e)) = tokio::time::timeout(timeout, self.kv.delete(hub)).await {
            tracing::warn!(error = %e, "removing the hub's heartbeat failed");
        }
    }

    /// The live hubs now.
    pub fn live(&self, ttl: Duration) -> Vec<Seen> {
        self.roster
            .lock()
            .expect("roster lock")
            .live(Instant::now(), ttl)
    }

    /// Follows the bucket into the roster until `stop` resolves.
    pub async fn watch(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            let mut watch = match self.kv.watch_all().await {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e, "watching hub heartbeats failed; retrying");
                    tokio::select! {
                        _ = stop.changed() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            // The watch is an ephemeral consumer on one NATS node and nothing tells the client
            // when that node dies; this hub's own heartbeat arrives every renew interval, so a
            // long silence means a new watch (which starts with every live heartbeat).
            let mut silence = tokio::time::interval(self.stall);
            silence.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut heard = Instant::now();
            loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = silence.tick() => {
                        if heard.elapsed() >= self.stall {
                            tracing::warn!("hub heartbeat watch silent; re-watching");
                            break;
                        }
                    }
                    next = watch.next() => match next {
                        Some(Ok(entry)) => {
                            heard = Instant::now();
                            let mut roster = self.roster.lock().expect("roster lock");
                            match entry.operation {
                                kv::Operation::Put => {
                                    if let Some(info) = HubInfo::decode(&entry.value) {
                                        roster.heard(info, Instant::now());
                                    }
                                }
                                kv::Operation::Delete | kv::Operation::Purge => roster.left(&entry.key),
                            }
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "hub heartbeat watch failed; re-watching");
                            break;
                        }
                        None => break,
                    }
                }
            }
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(id: &str, inc: &str) -> HubInfo {
        HubInfo {
            hub: id.into(),
            incarnation: inc.into(),
            grpc: String::new(),
            metrics: String::new(),
            draining: false,
            version: String::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn hubs_are_live_for_a_ttl_after_their_last_heartbeat() {
        let ttl = Duration::from_secs(15);
        let mut r = Roster::default();
        let t0 = Instant::now();
        r.heard(hub("b", "1"), t0);
        r.heard(hub("a", "1"), t0);
        let ids = |r: &Roster, now| -> Vec<String> {
            r.live(now, ttl).into_iter().map(|s| s.info.hub).collect()
        };
        assert_eq!(ids(&r, t0), vec!["a", "b"]);
        r.heard(hub("a", "1"), t0 + Duration::from_secs(10));
        assert_eq!(ids(&r, t0 + Duration::from_secs(16)), vec!["a"]);
        r.left("a");
        assert!(ids(&r, t0 + Duration::from_secs(16)).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_incarnation_starts_its_membership_anew() {
        let mut r = Roster::default();
        let t0 = Instant::now();
        r.heard(hub("a", "1"), t0);
        r.heard(hub("a", "1"), t0 + Duration::from_secs(3));
        let since =
            |r: &Roster| r.live(t0 + Duration::from_secs(4), Duration::from_secs(15))[0].since;
        assert_eq!(since(&r), t0);
        r.heard(hub("a", "2"), t0 + Duration::from_secs(4));
        assert_eq!(since(&r), t0 + Duration::from_secs(4));
    }
}
