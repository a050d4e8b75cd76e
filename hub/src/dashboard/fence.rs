//! A live stream's fence (issue 48): what one viewer's page may be told. A viewer with a CSV
//! fleet role needs none. Anyone else's stream shows only the clusters its grants let it see
//! (their transitions, and counts over them, not the fleet's), only changes of objects in its
//! namespaces, and follows the grants: a cluster moving between sets recounts, a reload of the
//! grants file ends the stream with `event: reset` (the page reads itself again under the new
//! grants — review r1 §6: access that outlived a reload).

use super::history::{Counts, History, Transition};
use super::live::{Kind, LiveEvent};
use crate::grants::live::Current;
use crate::grpc::auth::Identity;
use crate::grpc::guard::{Teams, Visibility};
use flotilla_hub_core::setindex::Published;
use std::sync::{Arc, RwLock};
use tokio::sync::watch;

/// What one stream may show, and the changes that alter it.
pub struct Fence {
    teams: Teams,
    caller: Identity,
    sees: Visibility,
    /// The counts over the clusters it sees (unused when it sees everything).
    counts: Counts,
    /// Reloads of the grants: the stream ends on one.
    reloads: watch::Receiver<Arc<Current>>,
    /// The set index: clusters moving between sets.
    moves: watch::Receiver<Arc<Published>>,
}

/// What the stream does after a change of the grants or the set index.
pub enum Next {
    /// The grants were reloaded: tell the page to read itself again, and end.
    Reset,
    /// Clusters moved between sets: the counts over what it sees now.
    Summary(Counts),
}

impl Fence {
    /// The fence of `caller`'s stream by `teams` (none: it sees everything, whatever is
    /// reloaded — an open hub or a CSV fleet role); its counts from `history`.
    pub fn of(teams: &Teams, caller: &Identity, history: &History) -> Option<Self> {
        let live = teams.live()?;
        let reloads = teams.reloads(Some(caller))?;
        let mut moves = live.index().subscribe();
        moves.mark_unchanged();
        let sees = teams.visibility(Some(caller));
        let counts = history.counts_where(|c| sees.cluster(c));
        Some(Self {
            teams: teams.clone(),
            caller: caller.clone(),
            sees,
            counts,
            reloads,
            moves,
        })
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
    /// A [`LiveEvent::Summary`] is the fleet's: the stream sends its own counts instead
    /// ([`Fence::summary`]).
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

    /// What a summary event says to this stream: its own counts, unless it sees everything.
    pub fn summary(&self, fleet: Counts) -> Counts {
        if self.sees.is_all() {
            fleet
        } else {
            self.counts
        }
    }

    fn count(&mut self, t: &Transition) {
        if let Some(from) = t.from {
            self.counts.sub(from);
        }
        if let Some(to) = t.to {
            self.counts.add(to);
        }
    }

    /// Waits for a reload of the grants or a move of clusters between sets, and says what the
    /// stream does about it (the counts recomputed from `history` after a move).
    pub async fn changed(&mut self, history: &RwLock<History>) -> Next {
        tokio::select! {
            reloaded = self.reloads.changed() => match reloaded {
                Ok(()) => Next::Reset,
                // The hub is stopping; the stream's shutdown ends it.
                Err(_) => std::future::pending().await,
            },
            moved = self.moves.changed() => {
                if moved.is_err() {
                    return std::future::pending().await;
                }
                self.sees = self.teams.visibility(Some(&self.caller));
                let sees = &self.sees;
                self.counts = history.read().expect("history lock").counts_where(|c| sees.cluster(c));
                Next::Summary(self.counts)
            }
        }
    }
}
