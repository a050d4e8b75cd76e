//! Idle cluster actors without a task (I/O).
//!
//! At 100,000 clusters almost every actor is idle almost all the time: nothing queued, nothing
//! to write, no spec waiting for its status — only its lease deadline and maybe a work's TTL
//! ahead. Such an actor parks in its own mailbox ([`crate::mailbox::Parker`]) and its task
//! ends; the next message spawns it again into its shard's tasks. The deadlines it still has
//! go to its shard's alarm task ([`ring`], one per shard, over [`alarms::Alarms`]), which sends
//! the actor a [`Msg::Tick`] when one is due: the woken actor's own timers then decide what
//! fired, as if it had waited in its task.
//!
//! What parks is clean by rule (the run loop parks only with nothing queued, nothing to write,
//! no spec awaiting its status and no overdue TTL; `timers::park_alarm`), so a shard that stops drops its
//! parked actors with its registry entries: nothing is lost. A parked actor reached after that
//! (a caller still holding its handle) sees the shard stopped as it is woken, and ends.

pub mod alarms;

use super::{ClusterHandle, Msg};
use dashmap::DashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Where a shard's actors set their alarms. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AlarmClock {
    tx: mpsc::UnboundedSender<(String, Option<Instant>)>,
}

impl AlarmClock {
    /// A clock and the receiving end its [`ring`] task takes.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<(String, Option<Instant>)>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }

    /// Wakes `cluster`'s actor at `at` (replacing its alarm); `None` clears it. Nothing happens
    /// once the shard stopped.
    pub fn set(&self, cluster: &str, at: Option<Instant>) {
        let _ = self.tx.send((cluster.to_string(), at));
    }
}

/// A shard's alarm task: keeps the parked actors' deadlines and ticks each actor whose deadline
/// is due, until the shard stops.
pub async fn ring(
    mut set: mpsc::UnboundedReceiver<(String, Option<Instant>)>,
    registry: Arc<DashMap<String, ClusterHandle>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut alarms = alarms::Alarms::default();
    let sleep = tokio::time::sleep_until(Instant::now());
    tokio::pin!(sleep);
    loop {
        let next = alarms.next();
        if let Some(at) = next
            && sleep.deadline() != at
        {
            sleep.as_mut().reset(at);
        }
        tokio::select! {
            _ = stop.changed() => break,
            change = set.recv() => match change {
                Some((cluster, at)) => alarms.set(&cluster, at),
                None => break,
            },
            () = &mut sleep, if next.is_some() => {
                for cluster in alarms.due(Instant::now()) {
                    // A busy actor (its mailbox full) runs its own timers: the tick is not
                    // needed. One gone (deleted, or its shard stopped) needs none.
                    if let Some(actor) = registry.get(&*cluster).map(|h| h.clone()) {
                        let _ = actor.try_send(Msg::Tick);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
