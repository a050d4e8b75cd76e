//! Pure parts of a cluster's ManifestWork handling: the spec resync diff, spec events, status
//! application and the end-to-end latency condition.

use super::StoredWork;
use flotilla_api::meta::{self, status};
use flotilla_api::v1::{Condition, ManifestWork, ObjectMeta, WorkStatusReport};
use flotilla_api::work::conditions::{APPLIED, AVAILABLE};
use flotilla_bus::envelope::{Action, Event};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What the hub knows of one work, for the resync diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubVersion {
    /// Spec generation.
    pub generation: i64,
    /// Being deleted.
    pub deleting: bool,
}

/// The answer to an agent's `{resourceid: version}`: ids whose spec must be re-sent (newer on the
/// hub, unknown to the agent, or deleting) and ids the agent must delete (unknown to the hub,
/// and not `held_back`: works whose stored record does not decode — unreadable is not absent,
/// and their resources stay). Both sorted.
pub fn resync_diff(
    hub: &BTreeMap<String, HubVersion>,
    agent: &HashMap<String, i64>,
    held_back: &BTreeSet<String>,
) -> (Vec<String>, Vec<String>) {
    let resend = hub
        .iter()
        .filter(|(id, v)| v.deleting || agent.get(*id).is_none_or(|held| *held < v.generation))
        .map(|(id, _)| id.clone())
        .collect();
    let mut deletes: Vec<String> = agent
        .keys()
        .filter(|id| !hub.contains_key(*id) && !held_back.contains(*id))
        .cloned()
        .collect();
    deletes.sort();
    (resend, deletes)
}

/// The spec event of a work (metadata and spec only; status stays on the hub).
pub fn spec_event(cluster: &str, work: &StoredWork, source: &str) -> Event {
    let meta = work.metadata.clone().unwrap_or_default();
    let deleting = meta.deletion_timestamp.is_some();
    let action = if deleting {
        Action::DeleteRequest
    } else if meta.generation <= 1 {
        Action::CreateRequest
    } else {
        Action::UpdateRequest
    };
    // A ManifestWork's bytes, the spec copied from its held encoding.
    let payload = work.metadata_and_spec();
    let mut ev = Event::new(
        flotilla_bus::works::spec_type(action),
        source,
        cluster,
        &payload,
    )
    .with_resource_id(resource_id_of(work.metadata.as_ref()))
    .with_resource_version(meta.generation);
    ev.deletion_timestamp = meta.deletion_timestamp;
    ev
}

/// The stable resourceid of a work.
pub fn resource_id(work: &ManifestWork) -> String {
    resource_id_of(work.metadata.as_ref())
}

/// The stable resourceid of the work with metadata `m`.
pub fn resource_id_of(m: Option<&ObjectMeta>) -> String {
    let (cluster, name) = m.map_or(("", ""), |m| (m.namespace.as_str(), m.name.as_str()));
    flotilla_bus::works::resource_id(cluster, name)
}

/// Whether a work (its metadata, its hub state and its status conditions) is Applied and
/// Available at its current generation.
fn converged(
    m: Option<&ObjectMeta>,
    hub: Option<&flotilla_api::v1::HubWorkState>,
    conds: &[Condition],
) -> bool {
    let generation = m.map_or(0, |m| m.generation);
    let observed = hub.map_or(0, |h| h.observed_generation);
    // Above the store's generation is a spec the store does not know (a spoke ahead of a
    // restored store): not the stored one applied.
    observed == generation
        && meta::condition_status(conds, APPLIED) == Some(status::TRUE)
        && meta::condition_status(conds, AVAILABLE) == Some(status::TRUE)
}

/// Applies a status report to a work; returns the end-to-end latency to record when this
/// report is the first to show the current generation Applied and Available.
pub fn apply_status(
    work: &mut StoredWork,
    report: &WorkStatusReport,
) -> Option<std::time::Duration> {
    work.set_status(report.status.as_ref());
    let hub = work.hub.get_or_insert_with(Default::default);
    hub.observed_generation = report.observed_generation;
    let conds = report
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    if !hub.latency_recorded && converged(work.metadata.as_ref(), Some(hub), conds) {
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

/// When a finished work is to be deleted (OCM's `deleteOption.ttlSecondsAfterFinished`): the
/// work's `Complete` condition (aggregated from its manifests' condition rules) turned True at
/// some instant; the work goes `ttl` seconds later. `None`: no TTL, not Complete, already being
/// deleted, or owned by a ManifestWorkReplicaSet (whose works the replica set manages, as OCM's
/// garbage collector skips them).
pub fn ttl_deadline(work: &StoredWork) -> Option<std::time::SystemTime> {
    // Most works have no TTL: that is checked first (the cluster actor asks on every message).
    let ttl = work.ttl_seconds_after_finished()?;
    let m = work.metadata.as_ref()?;
    if m.deletion_timestamp.is_some() || m.labels.contains_key(flotilla_api::meta::REPLICASET_LABEL)
    {
        return None;
    }
    // Decoded only for a work with a TTL.
    let status = work.status()?;
    let complete = status
        .conditions
        .iter()
        .find(|c| c.r#type == "Complete" && c.status == flotilla_api::meta::status::TRUE)?;
    let since = complete
        .last_transition_time
        .as_ref()
        .map_or_else(std::time::SystemTime::now, meta::system_time);
    Some(since + std::time::Duration::from_secs(u64::try_from(ttl).unwrap_or(0)))
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
        let (resend, deletes) = resync_diff(&hub, &agent, &BTreeSet::new());
        assert_eq!(resend, vec!["a", "c", "d"]);
        assert_eq!(deletes, vec!["x"]);
        // A work whose record does not decode is held back: its resources stay.
        let held_back: BTreeSet<String> = ["x".to_string()].into();
        let (_, deletes) = resync_diff(&hub, &agent, &held_back);
        assert!(deletes.is_empty(), "{deletes:?}");
    }

    proptest! {
        #[test]
        fn resync_diff_is_complete_and_minimal(
            hub in proptest::collection::btree_map("[a-f]", (1i64..5, any::<bool>()), 0..6),
            agent in proptest::collection::hash_map("[a-h]", 0i64..6, 0..8),
        ) {
            let hub: BTreeMap<String, HubVersion> = hub.into_iter().map(|(k, (g, d))| (k, v(g, d))).collect();
            let (resend, deletes) = resync_diff(&hub, &agent, &BTreeSet::new());
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

    #[test]
    fn a_report_above_the_stored_generation_is_not_the_stored_spec_applied() {
        let m = flotilla_api::v1::ObjectMeta {
            generation: 3,
            ..Default::default()
        };
        let ok = |observed| {
            let hub = flotilla_api::v1::HubWorkState {
                observed_generation: observed,
                ..Default::default()
            };
            let conds = [APPLIED, AVAILABLE].map(|t| Condition {
                r#type: t.into(),
                status: status::TRUE.into(),
                ..Default::default()
            });
            converged(Some(&m), Some(&hub), &conds)
        };
        assert!(ok(3));
        assert!(!ok(2));
        assert!(
            !ok(5),
            "a spoke ahead of a restored store holds a spec the store does not know"
        );
    }

    fn finished(ttl: Option<i64>, completed_secs_ago: u64) -> StoredWork {
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(completed_secs_ago);
        StoredWork::from(ManifestWork {
            metadata: Some(flotilla_api::v1::ObjectMeta {
                name: "job".into(),
                namespace: "c1".into(),
                ..Default::default()
            }),
            spec: Some(flotilla_api::v1::ManifestWorkSpec {
                delete_option: Some(flotilla_api::v1::DeleteOption {
                    ttl_seconds_after_finished: ttl,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(flotilla_api::v1::ManifestWorkStatus {
                conditions: vec![flotilla_api::v1::Condition {
                    r#type: "Complete".into(),
                    status: "True".into(),
                    last_transition_time: Some(prost_types::Timestamp::from(at)),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn a_finished_work_expires_ttl_seconds_after_it_completed() {
        let w = finished(Some(10), 4);
        let left = ttl_deadline(&w)
            .unwrap()
            .duration_since(std::time::SystemTime::now())
            .unwrap();
        assert!((5..=6).contains(&left.as_secs()), "{left:?}");
        assert_eq!(
            ttl_deadline(&finished(None, 4)),
            None,
            "no TTL, kept forever"
        );
        let mut owned = finished(Some(0), 4);
        if let Some(m) = owned.metadata.as_mut() {
            m.labels.insert(
                flotilla_api::meta::REPLICASET_LABEL.into(),
                "default.rs".into(),
            );
        }
        assert_eq!(
            ttl_deadline(&owned),
            None,
            "replica sets manage their own works"
        );
        let mut running = finished(Some(0), 4);
        let mut status = running.status().unwrap();
        status.conditions[0].status = "False".into();
        running.set_status(Some(&status));
        assert_eq!(ttl_deadline(&running), None);
    }
}
