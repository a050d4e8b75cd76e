//! A live stream's fence (issue 48): what one viewer's page may be told. A viewer with a CSV
//! fleet role needs none. Anyone else's stream shows only the clusters its grants let it see
//! (their transitions, and counts over them, not the fleet's), only changes of objects in its
//! namespaces, and follows the grants: a cluster moving between sets is counted in or out, a
//! reload of the grants file ends the stream with `event: reset` (the page reads itself again
//! under the new grants — review r1 §6: access that outlived a reload).
//!
//! The counts are kept per stream from the state it counted for each cluster it sees (the
//! team's part of the fleet, not the fleet): a transition says "the cluster is now `to`", so a
//! transition the recount already saw is not counted twice (review r4 §4). A move of clusters
//! between sets re-checks only the clusters that moved (`Published::since`), the fleet only
//! when any may have (review r4 §5), and the page is sent its counts only when they changed —
//! never the rhythm of the rest of the fleet's changes (review r4 §6).

use super::history::{Availability, Counts, History, Transition};
use super::live::{Kind, LiveEvent};
use crate::grants::index::Changed;
use crate::grants::live::Current;
use crate::grpc::auth::Identity;
use crate::grpc::guard::{Teams, Visibility};
use flotilla_hub_core::setindex::Published;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use tokio::sync::watch;

/// What one stream may show, and the changes that alter it.
pub struct Fence {
    teams: Teams,
    caller: Identity,
    sees: Visibility,
    /// The state counted for each cluster it sees (empty when it sees everything).
    seen: HashMap<Arc<str>, Availability>,
    /// The counts over `seen`.
    counts: Counts,
    /// The counts the page was last sent.
    sent: Counts,
    /// The set index's generation `seen` follows.
    generation: u64,
    /// Reloads of the grants: the stream ends on one.
    reloads: watch::Receiver<Arc<Current>>,
    /// The set index: clusters moving between sets.
    moves: watch::Receiver<Arc<Published>>,
}

/// What the stream does after a change of the grants or the set index.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// The grants were reloaded: tell the page to read itself again, and end.
    Reset,
    /// Clusters moved between sets and its counts changed: the counts now.
    Summary(Counts),
}

impl Fence {
    /// The fence of `caller`'s stream by `teams` (none: it sees everything, whatever is
    /// reloaded — an open hub or a CSV fleet role); its counts from `history`.
    pub fn of(teams: &Teams, caller: &Identity, history: &History) -> Option<Self> {
        let live = teams.live()?;
        let reloads = teams.reloads(Some(caller))?;
        let mut moves = live.index().subscribe();
        let generation = moves.borrow_and_update().view.generation();
        let sees = teams.visibility(Some(caller));
        let mut fence = Self {
            teams: teams.clone(),
            caller: caller.clone(),
            sees,
            seen: HashMap::new(),
            counts: Counts::default(),
            sent: Counts::default(),
            generation,
            reloads,
            moves,
        };
        fence.recount(history);
        fence.sent = fence.counts;
        Some(fence)
    }

    /// Whether it may be told about cluster `name`.
    pub fn cluster(&self, name: &str) -> bool {
        self.sees.cluster(name)
    }

    /// The counts over the clusters it sees.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Whether the page may be told `event`; a transition of a cluster it sees is counted.
    /// A [`LiveEvent::Summary`] is the fleet's: the stream sends its own counts instead, when
    /// they changed ([`Fence::summary_changed`]).
    pub fn admits(&mut self, event: &LiveEvent) -> bool {
        match event {
            LiveEvent::Transition(t) => {
                let seen = self.sees.cluster(&t.cluster);
                if seen {
                    self.count(t);
                }
                seen
            }
            LiveEvent::Summary(_) => true,
            LiveEvent::Changed { kind, key } => match kind {
                // A cluster-scoped catalogue object: its page shows only what the viewer sees.
                Kind::AddOn => true,
                Kind::Placement | Kind::Rollout | Kind::Policy => match key.split_once('/') {
                    Some((namespace, _)) => self.sees.namespace(namespace),
                    // "Many of the kind changed": the page reads itself, filtered.
                    None => true,
                },
            },
        }
    }

    /// What the first summary says to this stream: its own counts, unless it sees everything.
    pub fn summary(&self, fleet: Counts) -> Counts {
        if self.sees.is_all() {
            fleet
        } else {
            self.counts
        }
    }

    /// What the fleet's summary `fleet` says to this stream: the fleet's counts when it sees
    /// everything, else its own — `None` when they are what it was last sent.
    pub fn summary_changed(&mut self, fleet: Counts) -> Option<Counts> {
        if self.sees.is_all() {
            return Some(fleet);
        }
        self.unsent()
    }

    fn unsent(&mut self) -> Option<Counts> {
        (self.counts != self.sent).then(|| {
            self.sent = self.counts;
            self.counts
        })
    }

    /// Counts transition `t` as "the cluster is now `t.to`", against the state counted for
    /// it (not `t.from`): idempotent, so one the last recount already saw changes nothing.
    fn count(&mut self, t: &Transition) {
        if self.sees.is_all() {
            return;
        }
        self.set(&t.cluster, t.to);
    }

    fn set(&mut self, name: &Arc<str>, now: Option<Availability>) {
        let before = match now {
            Some(a) => self.seen.insert(name.clone(), a),
            None => self.seen.remove(name),
        };
        if before == now {
            return;
        }
        if let Some(b) = before {
            self.counts.sub(b);
        }
        if let Some(a) = now {
            self.counts.add(a);
        }
    }

    /// Counts the clusters it sees from `history` (a scan of the fleet).
    fn recount(&mut self, history: &History) {
        self.seen.clear();
        self.counts = Counts::default();
        if self.sees.is_all() {
            return;
        }
        let sees = &self.sees;
        self.seen = history.states_where(|c| sees.cluster(c));
        for a in self.seen.values() {
            self.counts.add(*a);
        }
    }

    /// After the set index published `published`: what it sees now, and the clusters that
    /// moved since the generation it followed counted in or out (all of them recounted when
    /// the index cannot say which moved).
    fn moved(&mut self, published: &Published, history: &RwLock<History>) {
        self.sees = self.teams.visibility(Some(&self.caller));
        let moved = published.since(self.generation);
        self.generation = published.view.generation();
        if self.sees.is_all() {
            return;
        }
        let history = history.read().expect("history lock");
        match moved {
            Changed::All => self.recount(&history),
            Changed::Some(names) => {
                for name in names {
                    let now = match self.sees.cluster(&name) {
                        true => history.state(&name),
                        false => None,
                    };
                    self.set(&name, now);
                }
            }
        }
    }

    /// Waits for a reload of the grants, or a move of clusters between sets that changes its
    /// counts, and says what the stream does about it.
    pub async fn changed(&mut self, history: &RwLock<History>) -> Next {
        loop {
            tokio::select! {
                reloaded = self.reloads.changed() => match reloaded {
                    Ok(()) => return Next::Reset,
                    // The hub is stopping; the stream's shutdown ends it.
                    Err(_) => return std::future::pending().await,
                },
                moved = self.moves.changed() => {
                    if moved.is_err() {
                        return std::future::pending().await;
                    }
                    let published = self.moves.borrow_and_update().clone();
                    self.moved(&published, history);
                    if let Some(counts) = self.unsent() {
                        return Next::Summary(counts);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
