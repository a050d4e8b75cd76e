//! Pure governance decisions on the hub: which bindings select a policy (directly or through a
//! PolicySet), which clusters a PlacementRule decides, the replicated policy each cluster gets,
//! the root status, a PolicySet's status, and the checks a spoke's report must pass.

use flotilla_api::policy::{self, Compliance, dependency, status};
use flotilla_api::v1::{
    ClusterCompliance, ManagedCluster, ManagedClusterSet, PlacementBinding, PlacementRule, Policy,
    PolicyPlacementStatus, PolicySet, PolicySetPlacement, PolicySetStatus, PolicyStatus,
    PolicyStatusReport,
};
use flotilla_bus::policies;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Condition a PlacementRule requires when it names none: the cluster is available.
pub const DEFAULT_RULE_CONDITION: &str = "ManagedClusterConditionAvailable";

/// Longest history a report may carry per template, and longest message.
const MAX_REPORT_MESSAGE: usize = 4096;

/// What a binding's placement reference names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PlacementKind {
    /// A Placement (`cluster.open-cluster-management.io`).
    Placement(String),
    /// A legacy PlacementRule (`apps.open-cluster-management.io`).
    Rule(String),
}

/// One binding that selects a policy.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bound {
    /// The PlacementBinding's name.
    pub binding: String,
    /// What it points at.
    pub placement: PlacementKind,
    /// The PolicySet through which the policy is bound, if any.
    pub policy_set: Option<String>,
    /// `bindingOverrides.remediationAction: enforce`.
    pub enforce: bool,
}

fn name(meta: Option<&flotilla_api::v1::ObjectMeta>) -> (&str, &str) {
    meta.map_or(("", ""), |m| (m.namespace.as_str(), m.name.as_str()))
}

/// The bindings of `namespace` that select policy `policy_name`, directly or through a
/// PolicySet of the same namespace that lists it.
pub fn bindings_of(
    namespace: &str,
    policy_name: &str,
    bindings: &[PlacementBinding],
    sets: &[PolicySet],
) -> Vec<Bound> {
    let sets_with_policy: BTreeSet<&str> = sets
        .iter()
        .filter(|s| name(s.metadata.as_ref()).0 == namespace)
        .filter(|s| {
            s.spec
                .as_ref()
                .is_some_and(|sp| sp.policies.iter().any(|p| p == policy_name))
        })
        .map(|s| name(s.metadata.as_ref()).1)
        .collect();
    let mut out = Vec::new();
    for b in bindings {
        let (ns, bname) = name(b.metadata.as_ref());
        if ns != namespace {
            continue;
        }
        let Some(r) = &b.placement_ref else { continue };
        let placement = match r.kind.as_str() {
            "Placement" => PlacementKind::Placement(r.name.clone()),
            "PlacementRule" => PlacementKind::Rule(r.name.clone()),
            _ => continue,
        };
        let enforce = b
            .binding_overrides
            .as_ref()
            .is_some_and(|o| o.remediation_action.eq_ignore_ascii_case("enforce"));
        for s in &b.subjects {
            let via = match s.kind.as_str() {
                "Policy" if s.name == policy_name => None,
                "PolicySet" if sets_with_policy.contains(s.name.as_str()) => Some(s.name.clone()),
                _ => continue,
            };
            let bound = Bound {
                binding: bname.to_string(),
                placement: placement.clone(),
                policy_set: via,
                enforce,
            };
            if !out.contains(&bound) {
                out.push(bound);
            }
        }
    }
    out.sort();
    out
}

/// The clusters a PlacementRule decides among `clusters`: members of one of `bound` (the sets
/// bound into the rule's namespace, as a Placement: a rule never reaches a cluster its
/// namespace's bindings do not), matching its selector (none = every cluster), in its list of
/// names when it has one, having every condition it asks for (none asked = Available=True),
/// capped at `clusterReplicas` by name order.
pub fn rule_clusters(
    rule: &PlacementRule,
    clusters: &[std::sync::Arc<ManagedCluster>],
    bound: &[ManagedClusterSet],
) -> Vec<String> {
    let spec = rule.spec.clone().unwrap_or_default();
    let mut out: Vec<String> = clusters
        .iter()
        .filter(|c| {
            c.metadata
                .as_ref()
                .is_some_and(|m| m.deletion_timestamp.is_none())
        })
        .filter(|c| {
            bound
                .iter()
                .any(|s| flotilla_api::clusterset::is_member(s, c))
        })
        .filter(|c| c.spec.as_ref().is_some_and(|s| s.hub_accepts_client))
        .filter(|c| {
            let n = crate::inventory::name(c);
            spec.clusters.is_empty() || spec.clusters.iter().any(|x| x == n)
        })
        .filter(|c| {
            let labels: HashMap<String, String> = c
                .metadata
                .as_ref()
                .map(|m| m.labels.clone().into_iter().collect())
                .unwrap_or_default();
            spec.cluster_selector
                .as_ref()
                .is_none_or(|sel| flotilla_api::selector::matches_labels(sel, &labels))
        })
        .filter(|c| {
            let conditions = c
                .status
                .as_ref()
                .map(|s| s.conditions.as_slice())
                .unwrap_or_default();
            let has = |ty: &str, want: &str| {
                conditions
                    .iter()
                    .any(|k| k.r#type == ty && k.status == want)
            };
            if spec.cluster_conditions.is_empty() {
                has(DEFAULT_RULE_CONDITION, "True")
            } else {
                spec.cluster_conditions.iter().all(|f| {
                    has(
                        &f.r#type,
                        if f.status.is_empty() {
                            "True"
                        } else {
                            &f.status
                        },
                    )
                })
            }
        })
        .map(|c| crate::inventory::name(c).to_string())
        .collect();
    out.sort();
    if let Some(n) = spec.cluster_replicas {
        out.truncate(n.max(0) as usize);
    }
    out
}

/// Every decided cluster and whether a binding that decides it overrides to enforce, from the
/// clusters each binding decides (`decided[i]` for `bounds[i]`).
pub fn targets(bounds: &[Bound], decided: &[BTreeSet<String>]) -> BTreeMap<String, bool> {
    let mut out: BTreeMap<String, bool> = BTreeMap::new();
    for (b, clusters) in bounds.iter().zip(decided) {
        for c in clusters {
            *out.entry(c.clone()).or_default() |= b.enforce;
        }
    }
    out
}

/// The copy of `root` one cluster gets: named `<namespace>.<name>` in the cluster's namespace,
/// labelled with its root, its remediation the root's or — when a binding deciding this cluster
/// overrides it — enforce, its dependencies as OCM's propagator writes them (a Policy named
/// after its copies, a PolicySet of `sets` replaced by its policies). Status is not sent.
pub fn replicated(
    root: &Policy,
    cluster: &str,
    enforce: bool,
    generation: i64,
    sets: &[PolicySet],
) -> Policy {
    let (ns, name) = name(root.metadata.as_ref());
    let mut spec = root.spec.clone().unwrap_or_default();
    if enforce {
        spec.remediation_action = "enforce".into();
    }
    spec.disabled = false;
    let members = |set_ns: &str, set_name: &str| {
        sets.iter()
            .find(|s| self::name(s.metadata.as_ref()) == (set_ns, set_name))
            .map(|s| {
                s.spec
                    .as_ref()
                    .map(|sp| sp.policies.clone())
                    .unwrap_or_default()
            })
    };
    spec.dependencies = dependency::canonicalize(&spec.dependencies, ns, members);
    for t in &mut spec.policy_templates {
        t.extra_dependencies = dependency::canonicalize(&t.extra_dependencies, ns, members);
    }
    let root_name = policies::replicated_name(ns, name);
    let mut labels = std::collections::HashMap::new();
    labels.insert(policies::ROOT_POLICY_LABEL.to_string(), root_name.clone());
    Policy {
        metadata: Some(flotilla_api::v1::ObjectMeta {
            name: root_name,
            namespace: cluster.to_string(),
            labels,
            // `trigger-update` is the root's alone (OCM's propagator drops it from replicas).
            annotations: root
                .metadata
                .as_ref()
                .map(|m| {
                    let mut a = m.annotations.clone();
                    a.remove(flotilla_api::policy::template::protected::TRIGGER_UPDATE);
                    a
                })
                .unwrap_or_default(),
            generation,
            ..Default::default()
        }),
        spec: Some(spec),
        status: None,
    }
}

/// Hash of a replicated policy's spec (what decides whether its generation grows).
pub fn spec_hash(replicated: &Policy) -> String {
    let spec = replicated.spec.clone().unwrap_or_default();
    flotilla_bus::ids::status_hash(&prost::Message::encode_to_vec(&spec))
}

/// The compliance a cluster's record counts for: its report's, when the report is about the
/// generation delivered; otherwise not known yet (a stale report never reads as compliant).
pub fn reported(generation: i64, report: Option<&PolicyStatusReport>) -> Compliance {
    match report {
        Some(r) if r.observed_generation == generation && !r.deleted => {
            Compliance::parse(&r.compliant)
        }
        _ => Compliance::Unknown,
    }
}

/// The root status: bindings with the clusters each decides (`decided[i]` for `bounds[i]`),
/// each decided cluster's compliance, and the aggregate.
pub fn root_status(
    bounds: &[Bound],
    decided: &[BTreeSet<String>],
    per_cluster: &BTreeMap<String, Compliance>,
    disabled: bool,
) -> PolicyStatus {
    let placement = bounds
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let (placement, placement_rule) = match &b.placement {
                PlacementKind::Placement(p) => (p.clone(), String::new()),
                PlacementKind::Rule(r) => (String::new(), r.clone()),
            };
            PolicyPlacementStatus {
                placement_binding: b.binding.clone(),
                placement,
                placement_rule,
                policy_set: b.policy_set.clone().unwrap_or_default(),
                clusters: if disabled {
                    Vec::new()
                } else {
                    decided
                        .get(i)
                        .map(|d| d.iter().cloned().collect())
                        .unwrap_or_default()
                },
            }
        })
        .collect();
    if disabled {
        return PolicyStatus {
            compliant: String::new(),
            placement,
            status: Vec::new(),
        };
    }
    let decided: Vec<String> = per_cluster.keys().cloned().collect();
    let reports: HashMap<String, Compliance> =
        per_cluster.iter().map(|(c, s)| (c.clone(), *s)).collect();
    PolicyStatus {
        compliant: status::root(&decided, &reports).as_str().to_string(),
        placement,
        status: per_cluster
            .iter()
            .map(|(c, s)| ClusterCompliance {
                cluster_name: c.clone(),
                cluster_namespace: c.clone(),
                compliant: s.as_str().to_string(),
            })
            .collect(),
    }
}

/// A PolicySet's status from its members (`policies`, by name; absent = missing), as OCM's
/// policyset controller builds it: no members → an empty status; `placement` gathers, from
/// every member that exists (disabled ones too), the entries of its `status.placement` bound
/// through this set, one per binding (sorted by binding). A binding naming the set whose
/// members do not exist lists nothing.
pub fn policy_set_status(set: &PolicySet, policies: &BTreeMap<String, Policy>) -> PolicySetStatus {
    let (_, set_name) = name(set.metadata.as_ref());
    let listed = set
        .spec
        .as_ref()
        .map(|s| s.policies.clone())
        .unwrap_or_default();
    if listed.is_empty() {
        return PolicySetStatus::default();
    }
    let members: Vec<(String, status::Member)> = listed
        .into_iter()
        .map(|p| {
            let member = match policies.get(&p) {
                None => status::Member::Missing,
                Some(pol) if pol.spec.as_ref().is_some_and(|s| s.disabled) => {
                    status::Member::Disabled
                }
                Some(pol) => status::Member::Reported(Compliance::parse(
                    &pol.status
                        .as_ref()
                        .map(|s| s.compliant.clone())
                        .unwrap_or_default(),
                )),
            };
            (p, member)
        })
        .collect();
    let (compliance, message) = status::policy_set(&members);
    PolicySetStatus {
        compliant: compliance.as_str().to_string(),
        status_message: message,
        placement: set_placement(set_name, &members, policies),
    }
}

/// The placements a set's existing members were bound through by this set, one per binding.
fn set_placement(
    set_name: &str,
    members: &[(String, status::Member)],
    policies: &BTreeMap<String, Policy>,
) -> Vec<PolicySetPlacement> {
    let mut by_binding: BTreeMap<&str, PolicySetPlacement> = BTreeMap::new();
    let existing = members
        .iter()
        .filter_map(|(p, _)| policies.get(p))
        .filter_map(|p| p.status.as_ref());
    for st in existing {
        for entry in st.placement.iter().filter(|e| e.policy_set == set_name) {
            by_binding.insert(
                &entry.placement_binding,
                PolicySetPlacement {
                    placement_binding: entry.placement_binding.clone(),
                    placement: entry.placement.clone(),
                    placement_rule: entry.placement_rule.clone(),
                },
            );
        }
    }
    by_binding.into_values().collect()
}

/// Checks a spoke's report before anything of it is kept: its cluster and resource id match the
/// event, its name is `<namespace>.<name>`, its compliance is one OCM knows, and it is bounded
/// (templates, history, message lengths). Returns the root's `(namespace, name)`.
pub fn check_report(
    report: &PolicyStatusReport,
    cluster: &str,
    resource_id: &str,
) -> Result<(String, String), String> {
    if report.cluster_name != cluster {
        return Err(format!(
            "clusterName {:?} does not match the subject's cluster {cluster:?}",
            report.cluster_name
        ));
    }
    if policies::resource_id(cluster, &report.policy_name) != resource_id
        || report.resource_id != resource_id
    {
        return Err(format!(
            "policy {:?} does not match the resource id {resource_id:?}",
            report.policy_name
        ));
    }
    let Some((ns, name)) = report.policy_name.split_once('.') else {
        return Err(format!(
            "policy name {:?} is not <namespace>.<name>",
            report.policy_name
        ));
    };
    if !report.compliant.is_empty() && Compliance::parse(&report.compliant) == Compliance::Unknown {
        return Err(format!(
            "compliant {:?} is not a compliance state",
            report.compliant
        ));
    }
    if report.details.len() > 64 {
        return Err(format!("{} templates (at most 64)", report.details.len()));
    }
    for d in &report.details {
        if d.history.len() > policy::HISTORY_LIMIT {
            return Err(format!(
                "template {:?}: {} history events (at most {})",
                d.template_name,
                d.history.len(),
                policy::HISTORY_LIMIT
            ));
        }
        if d.template_name.len() > 253
            || d.history
                .iter()
                .any(|e| e.message.len() > MAX_REPORT_MESSAGE)
        {
            return Err(format!(
                "template {:?}: a field is too long",
                d.template_name
            ));
        }
    }
    Ok((ns.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests;
