//! The recovery window in a cluster actor ([`crate::recovery`]): what a spec resync tells the
//! agent to delete or is sent again, the digest it compares, and the generation of a changed
//! spec when the spoke holds the work ahead of the store.

use super::Actor;
use crate::cluster::work_rules;
use crate::recovery::rules;
use flotilla_api::meta;
use flotilla_api::v1::ObjectMeta;
use std::collections::{BTreeMap, HashMap};

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
    /// names are not known yet).
    pub(super) async fn withhold(
        &mut self,
        strangers: Vec<String>,
        versions: &HashMap<String, i64>,
        hub: &BTreeMap<String, work_rules::HubVersion>,
    ) -> (Vec<String>, Vec<String>) {
        let recovery = self.shared.recovery.clone();
        let open = recovery.is_open();
        if !open && !recovery.has_orphans(&self.name) {
            return (strangers, Vec::new());
        }
        let store: BTreeMap<String, i64> = hub
            .iter()
            .filter(|(_, v)| !v.deleting)
            .map(|(id, v)| (id.clone(), v.generation))
            .collect();
        let known = recovery.known(&self.name);
        let answer = rules::answer(open, strangers, versions, &store, &known);
        let names = self.names_by_id();
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
            recovery.record(&self.name, &named).await;
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

    /// Sends the store's spec of work `name` again above generation `held` (an `Ahead` orphan
    /// decided `Revert`): stored at `held + 1`, then published; a failure is tried again at
    /// the next resync (the record stays until the spoke holds the store's generation).
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
                tracing::info!(work = %name, generation, "orphan reverted: the store's spec sent again above the spoke's generation");
            }
            Err(e) => {
                tracing::warn!(work = %name, error = %e, "reverting an orphan failed; the next resync tries again");
            }
        }
    }

    /// The generation of a changed spec whose stored work was `old` (`next` by the usual
    /// rule): above what the spoke holds when it holds the work ahead of the store.
    pub(super) fn next_generation(&self, old: &ObjectMeta, next: i64) -> i64 {
        let recovery = &self.shared.recovery;
        if !recovery.has_orphans(&self.name) {
            return next;
        }
        let id = flotilla_bus::works::resource_id(&self.name, &old.name);
        rules::next_generation(next, recovery.ahead_of(&self.name, &id))
    }
}
