//! Pure parts of a cluster's ManifestWork handling: the spec resync diff, spec events, status
//! application and the end-to-end latency condition.

use flotilla_api::meta::{self, status};
use flotilla_api::v1::{ManifestWork, WorkStatusReport};
use flotilla_api::work::conditions::{APPLIED, AVAILABLE};
use flotilla_bus::envelope::{Action, Event};
use std::collections::{BTreeMap, HashMap};

/// What the hub knows of one work, for the resync diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubVersion {
    /// Spec generation.
    pub generation: i64,
    /// Being deleted.
    pub deleting: bool,
}

/// The answer to an agent's `{resourceid: version}`: ids whose spec must be re-sent (newer on the
/// hub, unknown to the agent, or deleting) and ids the agent must delete (unknown to the hub).
/// Both sorted.
pub fn resync_diff(
    hub: &BTreeMap<String, HubVersion>,
    agent: &HashMap<String, i64>,
) -> (Vec<String>, Vec<String>) {
    let resend = hub
        .iter()
        .filter(|(id, v)| v.deleting || agent.get(*id).is_none_or(|held| *held < v.generation))
        .map(|(id, _)| id.clone())
        .collect();
    let mut deletes: Vec<String> = agent
        .keys()
        .filter(|id| !hub.contains_key(*id))
        .cloned()
        .collect();
    deletes.sort();
    (resend, deletes)
}

/// The spec event of a work (metadata and spec only; status stays on the hub).
pub fn spec_event(cluster: &str, work: &ManifestWork, source: &str) -> Event {
    let meta = work.metadata.clone().unwrap_or_default();
    let deleting = meta.deletion_timestamp.is_some();
    let action = if deleting {
        Action::DeleteRequest
    } else if meta.generation <= 1 {
        Action::CreateRequest
    } else {
        Action::UpdateRequest
    };
    let payload = ManifestWork {
        metadata: work.metadata.clone(),
        spec: work.spec.clone(),
        status: None,
        hub: None,
    };
    let mut ev = Event::new(
        flotilla_bus::works::spec_type(action),
        source,
        cluster,
        &payload,
    )
    .with_resource_id(resource_id(work))
    .with_resource_version(meta.generation);
    ev.deletion_timestamp = meta.deletion_timestamp;
    ev
}

/// The stable resourceid of a work.
pub fn resource_id(work: &ManifestWork) -> String {
    let m = work.metadata.as_ref();
    let (cluster, name) = m.map_or(("", ""), |m| (m.namespace.as_str(), m.name.as_str()));
    flotilla_bus::works::resource_id(cluster, name)
}

/// Whether the work is Applied and Available at its current generation.
pub fn converged(work: &ManifestWork) -> bool {
    let generation = work.metadata.as_ref().map_or(0, |m| m.generation);
    let observed = work.hub.as_ref().map_or(0, |h| h.observed_generation);
    let conds = work
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    observed >= generation
        && meta::condition_status(conds, APPLIED) == Some(status::TRUE)
        && meta::condition_status(conds, AVAILABLE) == Some(status::TRUE)
}

/// Applies a status report to a work; returns the end-to-end latency to record when this
/// report is the first to show the current generation Applied and Available.
pub fn apply_status(
    work: &mut ManifestWork,
    report: &WorkStatusReport,
) -> Option<std::time::Duration> {
    work.status = report.status.clone();
    let hub = work.hub.get_or_insert_with(Default::default);
    hub.observed_generation = report.observed_generation;
    if !hub.latency_recorded && converged(work) {
        let hub = work.hub.get_or_insert_with(Default::default);
        hub.latency_recorded = true;
        return hub.accepted_at.as_ref().and_then(|t| {
            std::time::SystemTime::now()
                .duration_since(meta::system_time(t))
                .ok()
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(generation: i64, deleting: bool) -> HubVersion {
        HubVersion {
            generation,
            deleting,
        }
    }

    #[test]
    fn resync_resends_newer_unknown_and_deleting_and_deletes_strangers() {
        let hub: BTreeMap<String, HubVersion> = [
            ("a".to_string(), v(2, false)),
            ("b".to_string(), v(1, false)),
            ("c".to_string(), v(3, true)),
            ("d".to_string(), v(1, false)),
        ]
        .into();
        let agent: HashMap<String, i64> = [
            ("a".to_string(), 1),
            ("b".to_string(), 1),
            ("c".to_string(), 3),
            ("x".to_string(), 9),
        ]
        .into();
        let (resend, deletes) = resync_diff(&hub, &agent);
        assert_eq!(resend, vec!["a", "c", "d"]);
        assert_eq!(deletes, vec!["x"]);
    }

    proptest! {
        #[test]
        fn resync_diff_is_complete_and_minimal(
            hub in proptest::collection::btree_map("[a-f]", (1i64..5, any::<bool>()), 0..6),
            agent in proptest::collection::hash_map("[a-h]", 0i64..6, 0..8),
        ) {
            let hub: BTreeMap<String, HubVersion> = hub.into_iter().map(|(k, (g, d))| (k, v(g, d))).collect();
            let (resend, deletes) = resync_diff(&hub, &agent);
            for (id, hv) in &hub {
                let up_to_date = !hv.deleting && agent.get(id).is_some_and(|a| *a >= hv.generation);
                prop_assert_eq!(resend.contains(id), !up_to_date, "id {}", id);
            }
            for id in agent.keys() {
                prop_assert_eq!(deletes.contains(id), !hub.contains_key(id));
            }
            prop_assert!(resend.iter().all(|id| hub.contains_key(id)));
        }
    }
}
