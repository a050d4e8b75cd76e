//! `policy_governance_info` as OCM's propagator exports it: one series per root policy
//! (`type="root"`) and per policy and cluster (`type="propagated"`), value 0 when compliant, 1
//! when non-compliant, -1 when pending or unknown. Plus Flotilla's own counters.

use crate::metrics::Metrics;
use flotilla_api::policy::Compliance;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Labels of `policy_governance_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GovernanceLabels {
    /// `root` or `propagated`.
    pub r#type: String,
    /// Policy name.
    pub policy: String,
    /// Policy namespace.
    pub policy_namespace: String,
    /// The cluster's namespace (its name) for `propagated`, empty for `root`.
    pub cluster_namespace: String,
}

/// The series set per policy (`(namespace, name)`).
type SeriesByPolicy = HashMap<(String, String), Vec<GovernanceLabels>>;

/// Governance metrics.
#[derive(Clone)]
pub struct GovernanceMetrics {
    info: Family<GovernanceLabels, Gauge>,
    /// Series currently set per policy, so a cluster that leaves is removed.
    series: Arc<Mutex<SeriesByPolicy>>,
    /// Policy specs published to clusters (first deliveries, re-sends and deletes).
    pub specs_sent: Counter,
    /// Policy reports refused (bad, or for another cluster).
    pub reports_rejected: Counter,
    /// Hub template resolutions that failed for a cluster (the copy went out with OCM's
    /// `hub-templates-error` annotation).
    pub template_errors: Counter,
    /// Hub template resolutions run for a cluster (a cached one is not counted).
    pub template_resolutions: Counter,
}

fn value(c: Compliance) -> i64 {
    match c {
        Compliance::Compliant => 0,
        Compliance::NonCompliant => 1,
        Compliance::Pending | Compliance::Unknown => -1,
    }
}

impl GovernanceMetrics {
    /// Creates the metrics and registers them.
    pub fn new(hub: &Metrics) -> Self {
        hub.component("policy", Self::create)
    }

    fn create(hub: &Metrics) -> Self {
        let m = Self {
            info: Family::default(),
            series: Arc::default(),
            specs_sent: Counter::default(),
            reports_rejected: Counter::default(),
            template_errors: Counter::default(),
            template_resolutions: Counter::default(),
        };
        hub.register_unprefixed(|r| {
            r.register(
                "policy_governance_info",
                "The governance compliance of policies: 0 compliant, 1 non-compliant, -1 pending or unknown",
                m.info.clone(),
            );
        });
        hub.register_component("policy", |r| {
            r.register(
                "specs_sent",
                "Policy specs published to clusters",
                m.specs_sent.clone(),
            );
            r.register(
                "reports_rejected",
                "Policy status reports refused",
                m.reports_rejected.clone(),
            );
            r.register(
                "template_errors",
                "Hub template resolutions that failed for a cluster",
                m.template_errors.clone(),
            );
            r.register(
                "template_resolutions",
                "Hub template resolutions run for a cluster (cached ones are not counted)",
                m.template_resolutions.clone(),
            );
        });
        m
    }

    /// Sets a policy's series: the root's and one per decided cluster (clusters no longer
    /// decided are removed; an empty `per_cluster` and root removes them all).
    pub fn set(
        &self,
        namespace: &str,
        name: &str,
        root: &str,
        per_cluster: &BTreeMap<String, Compliance>,
    ) {
        let label = |ty: &str, cluster: &str| GovernanceLabels {
            r#type: ty.to_string(),
            policy: name.to_string(),
            policy_namespace: namespace.to_string(),
            cluster_namespace: cluster.to_string(),
        };
        let mut now = Vec::with_capacity(per_cluster.len() + 1);
        let root_label = label("root", "");
        self.info
            .get_or_create(&root_label)
            .set(value(Compliance::parse(root)));
        now.push(root_label);
        for (cluster, c) in per_cluster {
            let l = label("propagated", cluster);
            self.info.get_or_create(&l).set(value(*c));
            now.push(l);
        }
        let mut series = self.series.lock().expect("series lock");
        let key = (namespace.to_string(), name.to_string());
        if let Some(before) = series.get(&key) {
            let current: HashSet<&GovernanceLabels> = now.iter().collect();
            for l in before {
                if !current.contains(l) {
                    self.info.remove(l);
                }
            }
        }
        if root.is_empty() && per_cluster.is_empty() {
            self.info.remove(&label("root", ""));
            series.remove(&key);
        } else {
            series.insert(key, now);
        }
    }
}
