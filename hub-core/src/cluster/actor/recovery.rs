//! The recovery window in a cluster actor ([`crate::recovery`]): what a spec resync tells the
//! agent to delete or is sent again, the digest it compares, and the generation of a new or
//! changed spec when the spoke holds the work ahead of the store or the store lacked it.
//!
//! The window covers each cluster until its agent's first full resync after the window opened
//! has been recorded (`HubClusterState.resynced_since_recovery`), open or finished: a cluster
//! offline through the window, registered after the backup, or with more strangers than the
//! records' room is never told to delete what nobody has seen.

use super::Actor;
use crate::cluster::work_rules;
use crate::recovery::rules;
use flotilla_api::meta;
use std::collections::{BTreeMap, BTreeSet, HashMap};

impl Actor {
    /// Whether the agent's digest is the store's works' — with the orphans kept on it at the
    /// generation it holds (never resent nor deleted); never while an orphan is undecided or
    /// decided otherwise, whose fate only the agent's full map tells.
    pub(super) fn digest_matches(
        &self,
        hub: &BTreeMap<String, work_rules::HubVersion>,
        digest: &str,
    ) -> bool {
        let recovery = &self.shared.recovery;
        let kept = if recovery.has_orphans(&self.name) {
            match rules::digest(&recovery.of_cluster(&self.name)) {
                rules::Digest::Full => return false,
                rules::Digest::With(kept) => kept,
            }
        } else {
            Vec::new()
        };
        let versions =
            rules::digest_versions(hub.iter().map(|(id, v)| (id.as_str(), v.generation)), &kept);
        flotilla_bus::works::versions_digest(versions) == digest
    }

    /// What the agent is told to delete of `strangers` (works it holds that the store lacks):
    /// all of them, unless a recovery window is open or the operator decided about them
    /// ([`rules::answer`]). Works the window withholds, and works the agent holds at a newer
    /// generation than the store's (`hub`), are recorded as orphans; those decided `Revert`
    /// are sent again above the agent's generation; records the agent no longer needs are
    /// settled. Also the orphans whose status the agent is asked to publish again (their
    /// names are not known yet), and takes out of `resend` the works whose store spec the
    /// window holds back (the spoke holds them older, or under another uid: maybe a newer
    /// incarnation). A work the agent holds under another uid than the store's (`uids`) is
    /// another incarnation whatever the generations: an orphan in the window, else replaced
    /// by the store's above the agent's generation.
    pub(super) async fn withhold(
        &mut self,
        strangers: Vec<String>,
        resend: &mut Vec<String>,
        versions: &HashMap<String, i64>,
        uids: &HashMap<String, String>,
        hub: &BTreeMap<String, work_rules::HubVersion>,
    ) -> (Vec<String>, Vec<String>) {
        let recovery = self.shared.recovery.clone();
        let unseen = self.unseen_recovery();
        let open = recovery.is_open() || unseen.is_some();
        let store_uids: Vec<(String, &str)> = self
            .works
            .values()
            .filter_map(|e| {
                let m = e.work.metadata.as_ref()?;
                Some((work_rules::resource_id_of(Some(m)), m.uid.as_str()))
            })
            .collect();
        let other =
            rules::other_incarnations(uids, store_uids.iter().map(|(id, uid)| (id.as_str(), *uid)));
        if !open && other.is_empty() && !recovery.has_orphans(&self.name) {
            return (strangers, Vec::new());
        }
        let store: BTreeMap<String, i64> = hub
            .iter()
            .map(|(id, v)| (id.clone(), v.generation))
            .collect();
        let deleting: BTreeSet<String> = hub
            .iter()
            .filter(|(_, v)| v.deleting)
            .map(|(id, _)| id.clone())
            .collect();
        // A `Behind` record whose work the store changed since: the operator's newer spec goes.
        let changed = rules::changed_since(&recovery.of_cluster(&self.name), &store);
        recovery.settle(&self.name, &changed).await;
        let known = recovery.known(&self.name);
        let mut answer =
            rules::answer(open, strangers, versions, &store, &deleting, &other, &known);
        if !answer.record.is_empty() {
            rules::within_fleet(&mut answer, recovery.total());
        }
        if !answer.hold.is_empty() {
            let hold: BTreeSet<&String> = answer.hold.iter().collect();
            resend.retain(|id| !hold.contains(id));
        }
        let names = self.names_by_id();
        let mut recorded = !answer.overflow;
        if !answer.record.is_empty() {
            tracing::warn!(
                orphans = answer.record.len(),
                "the spoke holds works the store lacks or holds older; the recovery window \
                 keeps them until an operator decides"
            );
            let named: Vec<(rules::Stranger, String)> = answer
                .record
                .into_iter()
                .map(|s| {
                    let name = names.get(&s.id).cloned().unwrap_or_default();
                    (s, name)
                })
                .collect();
            recorded &= recovery.record(&self.name, &named).await;
        }
        if recorded && let Some(id) = unseen {
            self.resynced_since(id).await;
        }
        recovery.settle(&self.name, &answer.settle).await;
        for (id, held) in &answer.revert {
            if let Some(name) = names.get(id) {
                self.revert(name, *held).await;
            }
        }
        let republish = recovery.unnamed(&self.name, rules::REPUBLISH_PER_ANSWER);
        (answer.delete, republish)
    }

    /// Work names by resource id.
    pub(super) fn names_by_id(&self) -> HashMap<String, String> {
        self.works
            .iter()
            .map(|(n, e)| {
                (
                    work_rules::resource_id_of(e.work.metadata.as_ref()),
                    n.clone(),
                )
            })
            .collect()
    }

    /// Sends the store's spec of work `name` again above generation `held` (an `Ahead` or
    /// `Incarnation` orphan decided `Revert`, or another incarnation with no window): stored at
    /// `held + 1`, then published (a store spec already above `held` goes with the resync's
    /// re-sends); a failure is tried again at the next resync.
    async fn revert(&mut self, name: &str, held: i64) {
        let Some(e) = self.works.get(name) else {
            return;
        };
        let mut next = (*e.work).clone();
        let expected = e.revision;
        let Some(m) = next.metadata.as_mut() else {
            return;
        };
        if m.deletion_timestamp.is_some() || m.generation > held {
            return;
        }
        m.generation = held + 1;
        let generation = m.generation;
        let state = next.hub.get_or_insert_with(Default::default);
        state.accepted_at = Some(meta::now());
        state.latency_recorded = false;
        match self.persist_work(name, next, expected).await {
            Ok(_) => {
                if let Some(e) = self.works.get_mut(name) {
                    e.delivery.restart(self.shared.config.work_resend_after);
                }
                self.publish_work(name).await;
                tracing::info!(work = %name, generation, "the store's spec sent again above the spoke's generation (an orphan reverted, or another incarnation replaced)");
            }
            Err(e) => {
                tracing::warn!(work = %name, error = %e, "reverting an orphan failed; the next resync tries again");
            }
        }
    }

    /// The generation of work `name`'s new or changed spec (`next` by the usual rule): above
    /// what the spoke holds when it holds the work ahead of the store, or held it while the
    /// store lacked it (an orphan adopted by applying it again).
    pub(super) fn next_generation(&self, name: &str, next: i64) -> i64 {
        let recovery = &self.shared.recovery;
        if !recovery.has_orphans(&self.name) {
            return next;
        }
        let id = flotilla_bus::works::resource_id(&self.name, name);
        rules::next_generation(next, recovery.ahead_of(&self.name, &id))
    }

    /// The id of the last recovery window when this cluster's agent has not sent a full
    /// resync since it opened (the window still covers the cluster, open or finished).
    pub(super) fn unseen_recovery(&self) -> Option<String> {
        let id = self.shared.recovery.restore_id()?;
        let seen = self
            .cluster
            .as_deref()
            .and_then(|c| c.hub.as_ref())
            .is_some_and(|h| h.resynced_since_recovery == id);
        (!seen).then_some(id)
    }

    /// Whether the hub may delete store-known works of this cluster on its own (a TTL): not
    /// while a window covers it, since the spoke may hold a newer incarnation the restored
    /// store does not know.
    pub(super) fn recovery_covers(&self) -> bool {
        self.shared.recovery.is_open() || self.unseen_recovery().is_some()
    }

    /// Records that the agent's full resync after window `id` was taken whole: from now on the
    /// cluster's strangers are judged as without a window (its orphan records stay).
    pub(super) async fn resynced_since(&mut self, id: String) {
        let written = self
            .edit(|c| {
                let hub = c.hub.get_or_insert_with(Default::default);
                if hub.resynced_since_recovery == id {
                    return Ok(false);
                }
                hub.resynced_since_recovery = id.clone();
                Ok(true)
            })
            .await;
        match written {
            Ok(_) => tracing::info!(
                window = %id,
                "the agent's first full resync since the recovery window opened is recorded"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "recording the agent's resync since the recovery failed; the next resync tries again")
            }
        }
    }
}
