//! One task per ManifestWorkReplicaSet. It reconciles when its placements' decisions change,
//! when one of its works changes, when the rollout asks to be looked at again (a soak ends, a
//! deadline passes), when a cluster's labels move it to another per-target variant (followed
//! only while the set has variants: a plain set is not woken by the fleet's cluster writes),
//! and every 30 s: the rollout step (`flotilla_rollout::step`) decides which
//! clusters get the current template now; clusters that left the decisions lose their work.
//! A reconcile gathers the works (what the rules read of each, [`WorkFacts`]: never their specs)
//! and the placements' decisions, asks [`plan`] (pure) what to do and what the status is, and
//! carries it out. Work changes are reconciled no sooner than [`pace`] says: at least twice the
//! last reconcile's duration out; a changed status reaches the views at once and the bucket at
//! most once a second.

mod pace;
mod plan;

use super::rules::variant::{self, Picks};
use super::rules::{self, REPLICASET_LABEL, WorkFacts};
use super::{Deps, ReplicaSetInventory};
use crate::inventory::Change;
use crate::keys::ObjectRef;
use crate::store::Bucket;
use flotilla_api::v1::{
    ManagedCluster, ManifestWork, ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::{mpsc, oneshot};

/// Condition: every placement exists.
pub const COND_PLACEMENT_VERIFIED: &str = "PlacementVerified";
/// Condition: every placement's rollout is complete.
pub const COND_PLACEMENT_ROLLED_OUT: &str = "PlacementRolledOut";
/// Condition: every work is applied.
pub const COND_MANIFESTWORK_APPLIED: &str = "ManifestworkApplied";

/// Messages to a replica set actor.
pub enum Msg {
    /// A new spec (or the same with new metadata).
    Spec(Box<ManifestWorkReplicaSet>),
    /// Delete the replica set (and its works, unless orphaned); answers when done.
    Delete(oneshot::Sender<()>),
}

/// How often the actor reconciles without any event.
const RESYNC: Duration = Duration::from_secs(30);

struct Actor {
    rs: ManifestWorkReplicaSet,
    deps: Deps,
    bucket: Bucket<ManifestWorkReplicaSet>,
    views: ReplicaSetInventory,
    /// The works' owner label (`<namespace>.<name>`), computed once: it is compared with every
    /// work change the hub broadcasts.
    owner: String,
    /// With per-target variants: each decided cluster's decision group and pick at the last
    /// reconcile (a cluster change that moves a pick reconciles at once).
    picked: Picks,
    /// How long the last reconcile took to read and decide (work changes wait twice that:
    /// [`pace`]).
    last: Duration,
    /// When the status was last written to the bucket.
    persisted: Option<tokio::time::Instant>,
    /// When the status held, newer than the bucket's, is written ([`pace::persist_at`]).
    persist: Option<tokio::time::Instant>,
}

/// Starts the actor of `rs`.
pub fn spawn(
    rs: ManifestWorkReplicaSet,
    deps: Deps,
    bucket: Bucket<ManifestWorkReplicaSet>,
    views: ReplicaSetInventory,
    tasks: &crate::tasks::TaskGroup,
) -> mpsc::Sender<Msg> {
    let (tx, rx) = mpsc::channel(16);
    let (namespace, name) = name_of(&rs);
    let actor = Actor {
        rs,
        deps,
        bucket,
        views,
        owner: rules::owner_label(&namespace, &name),
        picked: Picks::new(),
        last: Duration::ZERO,
        persisted: None,
        persist: None,
    };
    let span = tracing::info_span!("replicaset", namespace = %namespace, name = %name);
    tasks.spawn(tracing::Instrument::instrument(actor.run(rx), span));
    tx
}

fn name_of(rs: &ManifestWorkReplicaSet) -> (String, String) {
    let m = rs.metadata.clone().unwrap_or_default();
    (m.namespace, m.name)
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let (namespace, _) = name_of(&self.rs);
        let mut placements = self.deps.placements.subscribe();
        let mut works = self.deps.works.subscribe();
        let mut clusters = self.follow_clusters(None);
        // When the next reconcile is due: always set, so that a busy loop never pushes the
        // resync back; each event may only bring it forward.
        let mut next = tokio::time::Instant::now();
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Msg::Spec(rs)) => {
                        self.rs = *rs;
                        clusters = self.follow_clusters(clusters);
                        next = tokio::time::Instant::now();
                    }
                    Some(Msg::Delete(done)) => {
                        self.cascade().await;
                        let _ = done.send(());
                        return;
                    }
                    None => return,
                },
                change = placements.recv() => {
                    let relevant = match &change {
                        Ok(c) => self.refs().any(|p| *c.key == *ObjectRef::new(&namespace, p).inventory_key()),
                        Err(_) => true,
                    };
                    if relevant {
                        next = next.min(soon());
                    }
                }
                change = works.recv() => {
                    let relevant = match &change {
                        Ok(c) => self.owns(&c.object),
                        Err(_) => true,
                    };
                    if relevant {
                        // Statuses stream in: paced to what a reconcile costs.
                        let wait = pace::after_work_change(self.last, RESYNC);
                        next = next.min(tokio::time::Instant::now() + wait);
                    }
                }
                change = next_change(&mut clusters) => {
                    // A label change can move a cluster to another per-target variant; changes
                    // missed (lagged) may have.
                    let relevant = match &change {
                        Ok(c) => self.moved(&c.key, &c.object),
                        Err(RecvError::Lagged(_)) => true,
                        Err(RecvError::Closed) => {
                            clusters = None;
                            false
                        }
                    };
                    if relevant {
                        next = next.min(soon());
                    }
                }
                () = sleep_until(self.persist) => {
                    self.persist_status().await;
                }
                () = tokio::time::sleep_until(next) => {
                    let recheck = self.reconcile().await;
                    next = tokio::time::Instant::now() + recheck.unwrap_or(RESYNC).min(RESYNC);
                }
            }
        }
    }

    /// The cluster changes to follow: while the set has per-target variants, `held` or a new
    /// subscription (the reconcile a new spec starts covers what a new one missed); without,
    /// none, so that a plain set is not woken by every cluster write of the fleet.
    fn follow_clusters(
        &self,
        held: Option<broadcast::Receiver<Change<ManagedCluster>>>,
    ) -> Option<broadcast::Receiver<Change<ManagedCluster>>> {
        if variant::variants(&self.rs).is_empty() {
            return None;
        }
        held.or_else(|| Some(self.deps.inventory.subscribe()))
    }

    /// Whether a label change moved a decided cluster to another per-target variant.
    fn moved(&self, cluster: &str, mc: &ManagedCluster) -> bool {
        let Some(was) = self.picked.get(cluster) else {
            return false;
        };
        let labels = mc.metadata.as_ref().map(|m| &m.labels);
        let f = variant::Facts {
            name: cluster,
            labels,
            group: &was.group,
        };
        variant::pick(variant::variants(&self.rs), &f) != was.pick
    }

    fn refs(&self) -> impl Iterator<Item = &str> {
        self.rs
            .spec
            .iter()
            .flat_map(|s| s.placement_refs.iter().map(|p| p.name.as_str()))
    }

    fn owns(&self, w: &crate::cluster::StoredWork) -> bool {
        w.metadata
            .as_ref()
            .and_then(|m| m.labels.get(REPLICASET_LABEL))
            .is_some_and(|o| *o == self.owner)
    }

    /// The works this replica set made, by cluster, as the rules read them.
    fn my_works(&self) -> BTreeMap<String, WorkFacts> {
        facts_of(&self.deps.works, &self.owner)
    }

    /// One reconciliation; returns when to look again.
    async fn reconcile(&mut self) -> Option<Duration> {
        let started = tokio::time::Instant::now();
        let (namespace, name) = name_of(&self.rs);
        let hash = rules::template_hash(&self.rs);
        let works = self.my_works();
        let placements: Vec<Option<plan::Decided>> = self
            .refs()
            .map(|p| {
                let view = self.deps.placements.get(&namespace, p)?;
                let scheduled = view.placement.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.r#type == "PlacementSatisfied")
                });
                Some(plan::Decided {
                    scheduled,
                    clusters: view.decided_by_group(),
                })
            })
            .collect();
        let decided = placements.iter().flatten().flat_map(|d| {
            d.clusters
                .iter()
                .map(|(c, g)| (c.as_str(), g.name.as_str()))
        });
        let picks = picks(&self.rs, &self.deps, decided);
        let mut plan = plan::plan(
            &self.rs,
            &hash,
            &picks,
            &works,
            &placements,
            SystemTime::now(),
        );
        // What pacing counts: reading and deciding, not the waits on the works written next
        // (a big round of starts would otherwise hold the next step back).
        self.last = started.elapsed();
        for (cluster, placement) in &plan.start {
            let pick = variant::pick_of(&picks, cluster);
            let wanted = variant::hash(&self.rs, &hash, pick).unwrap_or(&hash);
            let spec = variant::template(&self.rs, pick).or_else(|| rules::template_of(&self.rs));
            let work = rules::work_for(&self.rs, cluster, placement, wanted, spec);
            let applied = match self.deps.clusters.get_or_spawn(cluster) {
                Ok(handle) => handle.apply_work(work).await,
                Err(e) => Err(e),
            };
            if let Err(e) = applied {
                tracing::warn!(cluster = %cluster, error = %e, "starting the work failed; retrying");
                let retry = Duration::from_secs(2);
                plan.recheck = Some(plan.recheck.map_or(retry, |r| r.min(retry)));
            }
        }
        self.picked = picks;
        for cluster in &plan.remove {
            if let Some(handle) = self.deps.clusters.get(cluster) {
                tracing::info!(cluster = %cluster, "cluster left the decisions; removing its work");
                if let Err(e) = handle.delete_work(name.clone()).await {
                    tracing::warn!(cluster = %cluster, error = %e, "removing the work failed");
                }
            }
        }
        let status = plan::status(&self.rs, &mut plan, &works);
        self.write_status(status).await;
        plan.recheck
    }

    /// Holds `st` as the status, unless it is the one held: in the views at once, in the
    /// bucket now or at most a second after its last write ([`pace::persist_at`]).
    async fn write_status(&mut self, st: ManifestWorkReplicaSetStatus) {
        if self.rs.status.as_ref() == Some(&st) {
            return;
        }
        self.rs.status = Some(st);
        let (ns, name) = name_of(&self.rs);
        self.views
            .upsert(&ObjectRef::new(&ns, &name).inventory_key(), self.rs.clone());
        let now = tokio::time::Instant::now();
        let at = pace::persist_at(self.persisted, now);
        if at <= now {
            self.persist_status().await;
        } else {
            self.persist = Some(self.persist.map_or(at, |p| p.min(at)));
        }
    }

    /// Writes the status held to the bucket, over whatever spec revision is stored now.
    async fn persist_status(&mut self) {
        self.persist = None;
        self.persisted = Some(tokio::time::Instant::now());
        let key = {
            let (ns, name) = name_of(&self.rs);
            ObjectRef::new(&ns, &name)
        };
        // Compare-and-set on the stored revision: an apply or a rollout command written
        // meanwhile wins, and the next reconciliation writes the status again.
        let saved = match self.bucket.get(&key.store_key()).await {
            Ok(Some((stored, _))) if stored.status == self.rs.status => Ok(()),
            Ok(Some((stored, revision))) => {
                let mut next = stored;
                next.status = self.rs.status.clone();
                self.bucket
                    .write(&key.store_key(), &next, revision)
                    .await
                    .map(|_| ())
            }
            // Deleted meanwhile: its actor is being stopped.
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = saved {
            // Tried again a second later (an outage, or an apply written meanwhile).
            tracing::debug!(error = %e, "replica set status not saved this time; retrying");
            self.persist = Some(tokio::time::Instant::now() + pace::PERSIST_EVERY);
        }
    }

    /// Deletes the works unless the replica set orphans them.
    async fn cascade(&self) {
        let orphan = self
            .rs
            .spec
            .as_ref()
            .is_some_and(|s| s.cascade_deletion_policy == "Orphan");
        if orphan {
            return;
        }
        let (_, name) = name_of(&self.rs);
        for cluster in self.my_works().keys() {
            if let Some(handle) = self.deps.clusters.get(cluster)
                && let Err(e) = handle.delete_work(name.clone()).await
            {
                tracing::warn!(cluster = %cluster, error = %e, "deleting a work of the replica set failed");
            }
        }
    }
}

/// Each decided cluster's per-target pick and group (`decided`: `(cluster, group)` over the
/// placements, in order; the first decision of a cluster counts), from the cluster inventory's
/// labels read in place; empty without variants.
pub(super) fn picks<'a>(
    rs: &ManifestWorkReplicaSet,
    deps: &Deps,
    decided: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Picks {
    variant::picks(rs, decided, |c| deps.inventory.get(c))
}

/// The works of the replica set whose owner label is `owner`, by cluster (from the works
/// inventory's owner index: in their number, not the fleet's), as the rules read them: each
/// shared with the inventory, its conditions alone decoded (a reconcile reads them all, often).
pub(super) fn facts_of(
    works: &crate::inventory::WorkInventory,
    owner: &str,
) -> BTreeMap<String, WorkFacts> {
    works
        .owned_by(owner)
        .into_iter()
        .filter_map(|(_, w)| {
            let cluster = w.metadata.as_ref()?.namespace.clone();
            Some((cluster, WorkFacts::of(w)))
        })
        .collect()
}

/// The works of the replica set whose owner label is `owner`, by cluster, decoded whole (a
/// set's rows quote a failed manifest's status).
pub(super) fn works_of(
    works: &crate::inventory::WorkInventory,
    owner: &str,
) -> BTreeMap<String, Arc<ManifestWork>> {
    works
        .owned_by(owner)
        .into_iter()
        .filter_map(|(_, w)| {
            let cluster = w.metadata.as_ref()?.namespace.clone();
            // Statuses are held encoded: decoded for this set's works only.
            Some((cluster, Arc::new(w.to_work())))
        })
        .collect()
}

/// The next change from `feed`; never, without one.
async fn next_change<T: Clone>(feed: &mut Option<broadcast::Receiver<T>>) -> Result<T, RecvError> {
    match feed {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; never, without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(100)
}
