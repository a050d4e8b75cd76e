//! Whether a cluster can take proxied calls, from the hub's inventory (pure): an unknown,
//! unaccepted or unavailable cluster is answered at once with a 503 saying since when, instead
//! of a call that would wait for an agent that is not there.

use crate::cluster::rules;
use flotilla_api::meta;
use flotilla_api::v1::ManagedCluster;
use std::time::Duration;

/// How the hub judges leases (for the "last seen" estimate).
#[derive(Debug, Clone, Copy)]
pub struct LeaseRule {
    /// Lease of clusters that set none.
    pub default_lease_seconds: i32,
    /// Lease durations without renewal after which a cluster is unavailable.
    pub grace_multiplier: u32,
}

impl LeaseRule {
    fn grace(&self, c: &ManagedCluster) -> Duration {
        let secs = c.spec.as_ref().map_or(0, |s| s.lease_duration_seconds);
        let secs = if secs > 0 {
            secs
        } else {
            self.default_lease_seconds.max(1)
        };
        Duration::from_secs(secs as u64 * u64::from(self.grace_multiplier.max(1)))
    }
}

/// Why `name` cannot take calls (`None`: it can).
pub fn refusal(name: &str, cluster: Option<&ManagedCluster>, lease: LeaseRule) -> Option<String> {
    let Some(c) = cluster else {
        return Some(format!(
            "cluster {name:?} is not known to this hub (flotilla get clusters lists them)"
        ));
    };
    if !rules::accepted(c) {
        return Some(format!(
            "cluster {name:?} is not accepted (flotilla accept {name})"
        ));
    }
    if rules::available(c) == Some(meta::status::TRUE) {
        return None;
    }
    let condition = c
        .status
        .as_ref()
        .and_then(|s| meta::find_condition(&s.conditions, meta::COND_AVAILABLE));
    Some(match condition {
        Some(cond) => {
            let since = cond.last_transition_time.as_ref();
            let since_text = since.map_or_else(|| "an unknown time".to_string(), meta::rfc3339);
            let last_seen = match (cond.status.as_str(), since) {
                // Unknown: the lease ran out a grace after the agent was last heard from.
                (meta::status::UNKNOWN, Some(t)) => {
                    let seen = meta::system_time(t).checked_sub(lease.grace(c));
                    match seen {
                        Some(seen) => format!(
                            "; its agent was last heard from at about {}",
                            meta::rfc3339(&meta::timestamp(seen))
                        ),
                        None => String::new(),
                    }
                }
                _ => String::new(),
            };
            format!(
                "cluster {name:?} is offline: {} is {} since {since_text} ({}: {}){last_seen}",
                meta::COND_AVAILABLE,
                cond.status,
                cond.reason,
                cond.message
            )
        }
        None => format!("cluster {name:?} is offline: its agent has not reported yet"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{Condition, ManagedClusterSpec, ManagedClusterStatus};

    const LEASE: LeaseRule = LeaseRule {
        default_lease_seconds: 60,
        grace_multiplier: 5,
    };

    fn cluster(accepted: bool, available: Option<(&str, i64)>) -> ManagedCluster {
        ManagedCluster {
            spec: Some(ManagedClusterSpec {
                hub_accepts_client: accepted,
                lease_duration_seconds: 10,
                ..Default::default()
            }),
            status: available.map(|(status, secs)| ManagedClusterStatus {
                conditions: vec![Condition {
                    r#type: meta::COND_AVAILABLE.into(),
                    status: status.into(),
                    reason: "ManagedClusterLeaseUpdateStopped".into(),
                    message: "no lease".into(),
                    last_transition_time: Some(prost_types::Timestamp {
                        seconds: secs,
                        nanos: 0,
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_accepted_available_clusters_take_calls() {
        assert!(refusal("c", None, LEASE).unwrap().contains("not known"));
        assert!(
            refusal("c", Some(&cluster(false, None)), LEASE)
                .unwrap()
                .contains("not accepted")
        );
        assert!(
            refusal("c", Some(&cluster(true, None)), LEASE)
                .unwrap()
                .contains("has not reported")
        );
        assert_eq!(
            refusal(
                "c",
                Some(&cluster(true, Some((meta::status::TRUE, 1000)))),
                LEASE
            ),
            None
        );
    }

    #[test]
    fn an_unavailable_cluster_says_since_when_and_when_it_was_last_seen() {
        // Unknown since 1000 s after the epoch with a 10 s lease × 5: last seen at 950 s.
        let msg = refusal(
            "c",
            Some(&cluster(true, Some((meta::status::UNKNOWN, 1000)))),
            LEASE,
        )
        .unwrap();
        assert!(msg.contains("since 1970-01-01T00:16:40Z"), "{msg}");
        assert!(
            msg.contains("last heard from at about 1970-01-01T00:15:50Z"),
            "{msg}"
        );
    }
}
