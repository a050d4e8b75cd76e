//! A round's rollout: the plan ([`plan::plan`]) says who waits and who starts now; the
//! installations whose turn it is get their works rendered and moved to ([`sync_works`]).

use super::{Actor, Entry, PARALLEL, Recheck};
use crate::addon::effects::sync_works;
use crate::addon::rules;
use crate::addon::rules::plan::{self, Installation};
use flotilla_api::v1::{InstallProgression, ManifestWork};
use flotilla_rollout::Status;
use futures::StreamExt;
use std::time::{Duration, SystemTime};

impl Actor {
    /// The rollout plan ([`plan::plan`]): marks who waits, returns who starts now and each
    /// placement's install progression.
    pub(super) fn plan(
        &self,
        placements: &[flotilla_api::v1::PlacementStrategy],
        entries: &mut [Entry],
        now: SystemTime,
        recheck: &mut Recheck,
    ) -> (Vec<usize>, Vec<InstallProgression>) {
        let installations: Vec<Installation> = entries
            .iter()
            .map(|e| Installation {
                cluster: e.cluster.to_string(),
                placement: e.placement,
                group: e.group.clone(),
                status: e.status,
                since: e.since,
            })
            .collect();
        let plan = plan::plan(placements, &installations, now);
        recheck.merge(plan.recheck);
        for (i, errors) in &plan.refused {
            tracing::warn!(placement = i, errors = ?errors, "rollout strategy refused");
        }
        for (e, waiting) in entries.iter_mut().zip(&plan.waiting) {
            e.waiting = *waiting;
        }
        let defaults = self.default_refs();
        let hash = |resource: &str, namespace: &str, name: &str| {
            self.config_hash(resource, namespace, name)
        };
        let progressions: Vec<InstallProgression> = plan
            .rounds
            .iter()
            .map(|r| {
                let p = &placements[r.placement];
                plan::progression(&plan::ProgressionInput {
                    placement: p,
                    installations: &installations,
                    round: r,
                    defaults: &defaults,
                    hash: &hash,
                    previous: self.cma.status.as_ref().and_then(|s| {
                        s.install_progressions
                            .iter()
                            .find(|x| x.namespace == p.namespace && x.name == p.name)
                    }),
                })
            })
            .collect();
        (plan.start, progressions)
    }

    /// Renders the works of the installations whose turn it is (or that are carried on with)
    /// and moves each cluster to them ([`sync_works`]).
    pub(super) async fn start(
        &mut self,
        entries: &mut [Entry],
        starts: &[usize],
        now: SystemTime,
        recheck: &mut Recheck,
    ) {
        let mut jobs = Vec::new();
        for &i in starts {
            let e = &entries[i];
            // Its render failure, its works, its rollout status change: gathered again next
            // round.
            self.dirty.cluster(&e.cluster);
            let Ok(resolved) = &e.resolved else { continue };
            match self.render(e, resolved) {
                Ok(works) => {
                    self.render_failed.remove(&*e.cluster);
                    jobs.push((i, works));
                }
                Err(failure) => {
                    tracing::warn!(cluster = %e.cluster, error = %failure, "the add-on's works cannot be rendered");
                    // Kept as the installation's status message.
                    let msg = failure.to_string();
                    self.render_failed
                        .insert(e.cluster.to_string(), (e.target.clone(), now, msg.clone()));
                    let e = &mut entries[i];
                    e.render_error = Some(msg);
                    e.status = Status::Failed;
                    e.since = Some(now);
                    // The progression counts it at the next round.
                    recheck.at(Duration::from_millis(200));
                }
            }
        }
        let (deps, name) = (&self.deps, self.name.as_str());
        let results: Vec<_> = futures::stream::iter(jobs.into_iter().map(|(i, desired)| {
            let cluster = entries[i].cluster.clone();
            let current = entries[i].works.clone();
            async move { (i, sync_works(deps, &cluster, name, desired, current).await) }
        }))
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
        for (i, r) in results {
            let e = &mut entries[i];
            let moved = match r {
                Ok(moved) => moved,
                Err(err) => {
                    tracing::warn!(cluster = %e.cluster, error = %err, "applying the add-on's works failed; retrying");
                    recheck.at(Duration::from_secs(2));
                    continue;
                }
            };
            if moved.held {
                // A hand-over waits for the agent: its status change pokes the actor too.
                recheck.at(Duration::from_secs(1));
            }
            let refs: Vec<&ManifestWork> = moved.works.iter().map(|w| &**w).collect();
            (e.status, e.since) = rules::rollout_status(&refs, &e.target);
            e.works = moved.works;
        }
    }
}
