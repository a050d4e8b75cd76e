//! One task per ManifestWorkReplicaSet. It reconciles when its placements' decisions change,
//! when one of its works changes, when the rollout asks to be looked at again (a soak ends, a
//! deadline passes), and every 30 s: the rollout step (`flotilla_rollout::step`) decides which
//! clusters get the current template now; clusters that left the decisions lose their work.

use super::rules::{self, REPLICASET_LABEL};
use super::{Deps, ReplicaSetInventory};
use crate::keys::ObjectRef;
use crate::store::Bucket;
use flotilla_api::meta::{self, status};
use flotilla_api::v1::{Condition, ManifestWork, ManifestWorkReplicaSet, PlacementSummary};
use flotilla_rollout::Cluster;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};
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
        let mut next = Some(tokio::time::Instant::now());
        loop {
            let wake = next.unwrap_or_else(|| tokio::time::Instant::now() + RESYNC);
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Msg::Spec(rs)) => {
                        self.rs = *rs;
                        next = Some(tokio::time::Instant::now());
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
                        next = Some(soon());
                    }
                }
                change = works.recv() => {
                    let relevant = match &change {
                        Ok(c) => self.owns(&c.object),
                        Err(_) => true,
                    };
                    if relevant {
                        next = Some(soon().min(next.unwrap_or_else(soon)));
                    }
                }
                () = tokio::time::sleep_until(wake) => {
                    next = self
                        .reconcile()
                        .await
                        .map(|d| tokio::time::Instant::now() + d.min(RESYNC));
                }
            }
        }
    }

    fn refs(&self) -> impl Iterator<Item = &str> {
        self.rs
            .spec
            .iter()
            .flat_map(|s| s.placement_refs.iter().map(|p| p.name.as_str()))
    }

    fn owns(&self, w: &ManifestWork) -> bool {
        w.metadata
            .as_ref()
            .and_then(|m| m.labels.get(REPLICASET_LABEL))
            .is_some_and(|o| *o == self.owner)
    }

    /// The works this replica set made, by cluster.
    fn my_works(&self) -> BTreeMap<String, std::sync::Arc<ManifestWork>> {
        self.deps
            .works
            .snapshot()
            .into_iter()
            .filter(|w| self.owns(w))
            .filter_map(|w| {
                let cluster = w.metadata.as_ref()?.namespace.clone();
                Some((cluster, w))
            })
            .collect()
    }

    /// One reconciliation; returns when to look again.
    async fn reconcile(&mut self) -> Option<Duration> {
        let (namespace, name) = name_of(&self.rs);
        let hash = rules::template_hash(&self.rs);
        let now = SystemTime::now();
        let works = self.my_works();
        let mut wanted: BTreeMap<String, String> = BTreeMap::new();
        let mut summaries = Vec::new();
        let mut missing = Vec::new();
        let mut rolled_out = true;
        let mut stopped = Vec::new();
        let mut recheck: Option<Duration> = None;
        let refs = self
            .rs
            .spec
            .as_ref()
            .map(|s| s.placement_refs.clone())
            .unwrap_or_default();
        for (i, pref) in refs.iter().enumerate() {
            let Some(view) = self.deps.placements.get(&namespace, &pref.name) else {
                missing.push(pref.name.clone());
                rolled_out = false;
                continue;
            };
            // A placement not scheduled yet has no decisions to go by: wait for them (an empty
            // decision set now does not mean a complete rollout), and keep the works it has.
            let scheduled = view.placement.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.r#type == "PlacementSatisfied")
            });
            if !scheduled {
                rolled_out = false;
                for (cluster, w) in &works {
                    let from_here = w
                        .metadata
                        .as_ref()
                        .and_then(|m| m.labels.get(rules::PLACEMENT_LABEL))
                        .is_some_and(|p| *p == pref.name);
                    if from_here {
                        wanted.entry(cluster.clone()).or_insert(pref.name.clone());
                    }
                }
                recheck =
                    Some(recheck.map_or(Duration::from_secs(1), |r| r.min(Duration::from_secs(1))));
                continue;
            }
            let path = format!("spec.placementRefs[{i}].rolloutStrategy");
            let strategy = match crate::rollout::strategy(pref.rollout_strategy.as_ref(), &path) {
                Ok(s) => s,
                Err(e) => {
                    stopped.push(e.join("; "));
                    rolled_out = false;
                    continue;
                }
            };
            let mut clusters = Vec::new();
            for (c, group) in view.decided_by_group() {
                if wanted.contains_key(&c) {
                    continue; // an earlier placement already covers it
                }
                wanted.insert(c.clone(), pref.name.clone());
                let (status, since) = rules::status_of(works.get(&c).map(|w| &**w), &hash);
                clusters.push(Cluster {
                    name: c,
                    group,
                    status,
                    since,
                });
            }
            let paused = self.rs.hub.as_ref().is_some_and(|h| h.paused);
            let round = crate::rollout::round(&strategy, &path, &clusters, now, paused);
            for cluster in &round.start {
                let work = rules::work_for(&self.rs, cluster, &pref.name, &hash);
                let applied = match self.deps.clusters.get_or_spawn(cluster) {
                    Ok(handle) => handle.apply_work(work).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = applied {
                    tracing::warn!(cluster = %cluster, error = %e, "starting the work failed; retrying");
                    recheck = Some(
                        recheck.map_or(Duration::from_secs(2), |r| r.min(Duration::from_secs(2))),
                    );
                }
            }
            if !round.step.complete {
                rolled_out = false;
            }
            if !round.stopped_reason.is_empty() {
                stopped.push(format!("{}: {}", pref.name, round.stopped_reason));
            }
            let placement_works: Vec<&ManifestWork> = clusters
                .iter()
                .filter_map(|c| works.get(&c.name).map(|w| &**w))
                .collect();
            summaries.push(PlacementSummary {
                name: pref.name.clone(),
                summary: Some(rules::summary(placement_works.into_iter())),
                waiting: round.waiting.len() as i32,
                stopped_reason: round.stopped_reason,
                notes: round.notes,
                decision_groups: round.groups,
            });
            if let Some(r) = round.step.recheck_after {
                recheck = Some(recheck.map_or(r, |x| x.min(r)));
            }
        }
        // Clusters that left every placement's decisions lose their work.
        for (cluster, w) in &works {
            if wanted.contains_key(cluster) {
                continue;
            }
            let deleting = w
                .metadata
                .as_ref()
                .is_some_and(|m| m.deletion_timestamp.is_some());
            if !deleting && let Some(handle) = self.deps.clusters.get(cluster) {
                tracing::info!(cluster = %cluster, "cluster left the decisions; removing its work");
                if let Err(e) = handle.delete_work(name.clone()).await {
                    tracing::warn!(cluster = %cluster, error = %e, "removing the work failed");
                }
            }
        }
        // No cluster decided yet (a new placement, or one selecting nothing): not rolled out.
        let empty = wanted.is_empty();
        if empty {
            rolled_out = false;
        }
        if self.rs.hub.as_ref().is_some_and(|h| h.paused) && !rolled_out {
            stopped.push("paused (flotilla rollout resume)".into());
        }
        self.write_status(summaries, &missing, rolled_out, &stopped, &works, empty)
            .await;
        recheck
    }

    async fn write_status(
        &mut self,
        summaries: Vec<PlacementSummary>,
        missing: &[String],
        rolled_out: bool,
        stopped: &[String],
        works: &BTreeMap<String, std::sync::Arc<ManifestWork>>,
        empty: bool,
    ) {
        let generation = self.rs.metadata.as_ref().map(|m| m.generation).unwrap_or(0);
        let total = rules::summary(works.values().map(|w| &**w));
        let mut st = self.rs.status.clone().unwrap_or_default();
        let mut set = |t: &str, ok: bool, reason: &str, message: String| {
            meta::set_condition(
                &mut st.conditions,
                t,
                if ok { status::TRUE } else { status::FALSE },
                reason,
                &message,
            );
            if let Some(c) = st
                .conditions
                .iter_mut()
                .find(|c: &&mut Condition| c.r#type == t)
            {
                c.observed_generation = generation;
            }
        };
        if missing.is_empty() {
            set(COND_PLACEMENT_VERIFIED, true, "AsExpected", String::new());
        } else {
            set(
                COND_PLACEMENT_VERIFIED,
                false,
                "PlacementDecisionNotFound",
                format!(
                    "spec.placementRefs: placement(s) {} not found",
                    missing.join(", ")
                ),
            );
        }
        if rolled_out {
            set(COND_PLACEMENT_ROLLED_OUT, true, "Complete", String::new());
        } else if empty && missing.is_empty() {
            set(
                COND_PLACEMENT_ROLLED_OUT,
                false,
                "NoDecisions",
                "the placements select no cluster yet".into(),
            );
        } else if self.rs.hub.as_ref().is_some_and(|h| h.paused) {
            set(
                COND_PLACEMENT_ROLLED_OUT,
                false,
                "Paused",
                stopped.join("; "),
            );
        } else if !stopped.is_empty() {
            set(
                COND_PLACEMENT_ROLLED_OUT,
                false,
                "Stopped",
                stopped.join("; "),
            );
        } else {
            set(
                COND_PLACEMENT_ROLLED_OUT,
                false,
                "Progressing",
                String::new(),
            );
        }
        let applied = total.total > 0 && total.applied == total.total;
        set(
            COND_MANIFESTWORK_APPLIED,
            applied,
            if applied {
                "AsExpected"
            } else {
                "NotAsExpected"
            },
            format!("{}/{} works applied", total.applied, total.total),
        );
        st.summary = Some(total);
        st.placement_summaries = summaries;
        if self.rs.status.as_ref() == Some(&st) {
            return;
        }
        self.rs.status = Some(st);
        let key = {
            let (ns, name) = name_of(&self.rs);
            ObjectRef::new(&ns, &name)
        };
        // Status is the hub's: written over whatever spec revision is stored now.
        // Compare-and-set on the stored revision: an apply or a rollout command written
        // meanwhile wins, and the next reconciliation writes the status again.
        if let Ok(Some((stored, revision))) = self.bucket.get(&key.store_key()).await {
            let mut next = stored;
            next.status = self.rs.status.clone();
            if let Err(e) = self.bucket.write(&key.store_key(), &next, revision).await {
                tracing::debug!(error = %e, "replica set status not saved this time");
            }
        }
        self.views.upsert(&key.inventory_key(), self.rs.clone());
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

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(100)
}
