//! Conversions between the API's protobuf objects and the scheduler's plain types
//! (`flotilla-placement`), in both directions.
//!
//! Enumerated fields whose unknown values OCM's CRD schema rejects (score type, toleration
//! effect, topology key type, `whenUnsatisfiable`) are [`ErrorKind::Invalid`] here, so the API
//! answers `INVALID_ARGUMENT` naming the field. Fields the CRD leaves open (prioritizer mode,
//! toleration operator, a negative `tolerationSeconds`) are carried through as written; the
//! scheduler's own validation decides what else is rejected and what is only reported as
//! `PlacementMisconfigured`.

use flotilla_api::meta::{self, status as cstatus};
use flotilla_api::v1;
use flotilla_placement::{self as sched, ErrorKind, FieldError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::SystemTime;

/// The label placement decisions carry: which placement they belong to.
pub use sched::PLACEMENT_LABEL;

fn invalid(path: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError::new(path, ErrorKind::Invalid, message)
}

/// A label selector in the scheduler's form. Unknown operators are kept so that validation can
/// name them.
pub fn selector(s: Option<&v1::LabelSelector>) -> sched::LabelSelector {
    let Some(s) = s else {
        return sched::LabelSelector::default();
    };
    sched::LabelSelector {
        match_labels: s
            .match_labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        match_expressions: s
            .match_expressions
            .iter()
            .map(|r| sched::Requirement::new(r.key.clone(), r.operator.clone(), r.values.clone()))
            .collect(),
    }
}

fn cluster_selector(s: Option<&v1::ClusterSelector>) -> sched::ClusterSelector {
    sched::ClusterSelector {
        label_selector: selector(s.and_then(|s| s.label_selector.as_ref())),
        claim_selector: selector(s.and_then(|s| s.claim_selector.as_ref())),
        cel_expressions: sched::cel::CelExpressions::default(),
    }
}

/// Parses a taint effect as OCM spells it.
pub fn taint_effect(s: &str) -> Option<sched::TaintEffect> {
    match s {
        "NoSelect" => Some(sched::TaintEffect::NoSelect),
        "PreferNoSelect" => Some(sched::TaintEffect::PreferNoSelect),
        "NoSelectIfNew" => Some(sched::TaintEffect::NoSelectIfNew),
        _ => None,
    }
}

/// The scheduler's Placement, or every enumerated field that OCM would reject.
///
/// Each part of the spec converts on its own (below); the errors come back in the order of the
/// spec's fields, which is the order the API reports them in.
pub fn placement(p: &v1::Placement) -> Result<sched::Placement, Vec<FieldError>> {
    let m = p.metadata.clone().unwrap_or_default();
    let spec = p.spec.clone().unwrap_or_default();
    let mut errors = Vec::new();
    let mut out = sched::Placement::new(m.namespace, m.name);
    out.cluster_sets = spec.cluster_sets.clone();
    out.number_of_clusters = spec.number_of_clusters;
    out.predicates = predicates(&spec, &mut errors);
    out.prioritizer_policy = prioritizer_policy(
        &spec.prioritizer_policy.clone().unwrap_or_default(),
        &mut errors,
    );
    out.tolerations = spec
        .tolerations
        .iter()
        .enumerate()
        .map(|(i, t)| toleration(i, t, &mut errors))
        .collect();
    out.decision_strategy.group_strategy = group_strategy(
        &spec
            .decision_strategy
            .clone()
            .and_then(|d| d.group_strategy)
            .unwrap_or_default(),
    );
    out.spread_policy.spread_constraints = spec
        .spread_policy
        .clone()
        .unwrap_or_default()
        .spread_constraints
        .iter()
        .enumerate()
        .map(|(i, c)| spread_constraint(i, c, &mut errors))
        .collect();
    match sched::SortBy::parse(&spec.sort_by) {
        Some(sort_by) => out.sort_by = sort_by,
        None => errors.push(invalid(
            "spec.sortBy",
            format!(
                "unknown value {:?} (want ClusterName or Score)",
                spec.sort_by
            ),
        )),
    }
    // The pattern is checked by the scheduler's validation (also an apply-time error).
    out.score_rate_limit =
        (!spec.score_rate_limit.is_empty()).then(|| spec.score_rate_limit.clone());
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// `spec.predicates`, each with the CEL expressions of the `celSelectors` entry at its index;
/// a `celSelectors` entry without a predicate is an error.
fn predicates(
    spec: &v1::PlacementSpec,
    errors: &mut Vec<FieldError>,
) -> Vec<sched::ClusterPredicate> {
    if spec.predicate_cel_selectors.len() > spec.predicates.len() {
        errors.push(invalid(
            "spec.predicates",
            format!(
                "{} celSelectors for {} predicates: every celSelector belongs to a predicate",
                spec.predicate_cel_selectors.len(),
                spec.predicates.len()
            ),
        ));
    }
    spec.predicates
        .iter()
        .enumerate()
        .map(|(i, pr)| {
            let mut required_cluster_selector =
                cluster_selector(pr.required_cluster_selector.as_ref());
            if let Some(cel) = spec.predicate_cel_selectors.get(i) {
                required_cluster_selector.cel_expressions =
                    sched::cel::CelExpressions::new(cel.cel_expressions.clone());
            }
            sched::ClusterPredicate {
                required_cluster_selector,
            }
        })
        .collect()
}

/// `spec.prioritizerPolicy`: the mode as written, each configuration's score coordinate with
/// an unknown type an error, and a weight of 1 when unset.
fn prioritizer_policy(
    policy: &v1::PrioritizerPolicy,
    errors: &mut Vec<FieldError>,
) -> sched::PrioritizerPolicy {
    // OCM's CRD has no enum for the mode: an unknown one is accepted and reported as
    // PlacementMisconfigured by the scheduler's validation.
    let mode = match policy.mode.as_str() {
        "" | "Additive" => sched::PrioritizerMode::Additive,
        "Exact" => sched::PrioritizerMode::Exact,
        other => sched::PrioritizerMode::Other(other.to_owned()),
    };
    let configurations = policy
        .configurations
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let sc = c.score_coordinate.clone().unwrap_or_default();
            let type_ = match sc.r#type.as_str() {
                "" | "BuiltIn" => sched::ScoreCoordinateType::BuiltIn,
                "AddOn" => sched::ScoreCoordinateType::AddOn,
                other => {
                    errors.push(invalid(
                        format!("spec.prioritizerPolicy.configurations[{i}].scoreCoordinate.type"),
                        format!("unknown type {other:?} (want BuiltIn or AddOn)"),
                    ));
                    sched::ScoreCoordinateType::BuiltIn
                }
            };
            sched::PrioritizerConfig {
                score_coordinate: sched::ScoreCoordinate {
                    type_,
                    built_in: sc.built_in.clone(),
                    add_on: sc.add_on.as_ref().map(|a| sched::AddOnScoreRef {
                        resource_name: a.resource_name.clone(),
                        score_name: a.score_name.clone(),
                    }),
                },
                weight: c.weight.unwrap_or(1),
            }
        })
        .collect();
    sched::PrioritizerPolicy {
        mode,
        configurations,
    }
}

/// `spec.tolerations[i]`: the operator as written, an unknown effect an error (empty means
/// every effect).
fn toleration(i: usize, t: &v1::Toleration, errors: &mut Vec<FieldError>) -> sched::Toleration {
    // No enum in OCM's CRD either: an unknown operator is accepted and tolerates nothing.
    let operator = match t.operator.as_str() {
        "" | "Equal" => sched::TolerationOperator::Equal,
        "Exists" => sched::TolerationOperator::Exists,
        other => sched::TolerationOperator::Other(other.to_owned()),
    };
    let effect = if t.effect.is_empty() {
        None
    } else {
        let e = taint_effect(&t.effect);
        if e.is_none() {
            errors.push(invalid(
                format!("spec.tolerations[{i}].effect"),
                format!(
                    "unknown effect {:?} (want NoSelect, PreferNoSelect or NoSelectIfNew, or leave it empty for every effect)",
                    t.effect
                ),
            ));
        }
        e
    };
    sched::Toleration {
        key: t.key.clone(),
        operator,
        value: t.value.clone(),
        effect,
        toleration_seconds: t.toleration_seconds,
    }
}

/// `spec.decisionStrategy.groupStrategy`: the groups, and `clustersPerDecisionGroup` as an int
/// or a string as the wire says (100% when empty; the scheduler validates the string).
fn group_strategy(groups: &v1::GroupStrategy) -> sched::GroupStrategy {
    sched::GroupStrategy {
        decision_groups: groups
            .decision_groups
            .iter()
            .map(|g| sched::DecisionGroup {
                group_name: g.group_name.clone(),
                group_cluster_selector: cluster_selector(g.group_cluster_selector.as_ref()),
            })
            .collect(),
        clusters_per_decision_group: if groups.clusters_per_decision_group.is_empty() {
            sched::IntOrString::hundred_percent()
        } else {
            match groups.clusters_per_decision_group.parse::<i64>() {
                Ok(n) if !groups.clusters_per_decision_group_is_string => {
                    sched::IntOrString::Int(n)
                }
                _ => sched::IntOrString::String(groups.clusters_per_decision_group.clone()),
            }
        },
    }
}

/// `spec.spreadPolicy.spreadConstraints[i]`: an unknown topology key type or
/// `whenUnsatisfiable` is an error; `maxSkew` defaults to 1.
fn spread_constraint(
    i: usize,
    c: &v1::SpreadConstraint,
    errors: &mut Vec<FieldError>,
) -> sched::SpreadConstraint {
    let at = format!("spec.spreadPolicy.spreadConstraints[{i}]");
    let topology_key_type = match c.topology_key_type.as_str() {
        "" | "Label" => sched::TopologyKeyType::Label,
        "Claim" => sched::TopologyKeyType::Claim,
        other => {
            errors.push(invalid(
                format!("{at}.topologyKeyType"),
                format!("unknown type {other:?} (want Label or Claim)"),
            ));
            sched::TopologyKeyType::Label
        }
    };
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "" | "DoNotSchedule" => sched::WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => sched::WhenUnsatisfiable::ScheduleAnyway,
        other => {
            errors.push(invalid(
                format!("{at}.whenUnsatisfiable"),
                format!("unknown value {other:?} (want DoNotSchedule or ScheduleAnyway)"),
            ));
            sched::WhenUnsatisfiable::DoNotSchedule
        }
    };
    sched::SpreadConstraint {
        topology_key: c.topology_key.clone(),
        topology_key_type,
        max_skew: c.max_skew.unwrap_or(1),
        when_unsatisfiable,
    }
}

/// The scheduler's view of a ManagedCluster: labels, claims, taints, allocatable cpu/memory
/// and whether it is being deleted. Quantities that do not parse count as not reported.
pub fn cluster(c: &v1::ManagedCluster) -> sched::Cluster {
    // Borrowed, not cloned: every change of a cluster comes here (a lease renewal too), and
    // the scheduler reads only a few of its fields (the profile of a 10,000 fanout had this
    // function at 3.9 % of the hub, most of it copying the metadata and status it drops).
    let m = c.metadata.as_ref();
    let status = c.status.as_ref();
    let quantity = |k: &str| {
        status
            .and_then(|s| s.allocatable.get(k))
            .and_then(|q| sched::parse_quantity(q).ok())
    };
    sched::Cluster {
        name: m.map(|m| m.name.clone()).unwrap_or_default(),
        labels: m
            .map(|m| {
                m.labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        claims: status
            .map(|s| {
                s.cluster_claims
                    .iter()
                    .map(|c| (c.name.clone(), c.value.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        taints: c
            .spec
            .as_ref()
            .map(|s| {
                s.taints
                    .iter()
                    .filter_map(|t| {
                        Some(sched::Taint::new(
                            t.key.clone(),
                            t.value.clone(),
                            taint_effect(&t.effect)?,
                            t.time_added
                                .as_ref()
                                .map_or(SystemTime::UNIX_EPOCH, meta::system_time),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        allocatable: sched::Allocatable {
            cpu: quantity("cpu"),
            memory: quantity("memory"),
        },
        deleting: m.is_some_and(|m| m.deletion_timestamp.is_some()),
        kubernetes_version: status
            .and_then(|s| s.version.as_ref())
            .map(|v| v.kubernetes.clone())
            .filter(|v| !v.is_empty()),
    }
}

/// Whether `c` converts to `held` ([`cluster`]), checked on the borrowed fields without
/// building the scheduler's copy: every change of a cluster comes to placement, lease renewals
/// too, and those change none of the fields it reads. Conservative: `false` when unsure (claims
/// named twice, very many of them), which only costs the conversion.
pub fn unchanged(c: &v1::ManagedCluster, held: &sched::Cluster) -> bool {
    let m = c.metadata.as_ref();
    let status = c.status.as_ref();
    if m.map_or("", |m| m.name.as_str()) != held.name
        || m.is_some_and(|m| m.deletion_timestamp.is_some()) != held.deleting
    {
        return false;
    }
    let labels_same = match m {
        Some(m) => {
            m.labels.len() == held.labels.len()
                && m.labels
                    .iter()
                    .all(|(k, v)| held.labels.get(k) == Some(v.as_str()))
        }
        None => held.labels.is_empty(),
    };
    let claims = status.map_or(&[][..], |s| s.cluster_claims.as_slice());
    // Named once each (checked pairwise, so only for a short list): then equal lengths and
    // every claim held mean the same claims.
    let claims_same = claims.len() == held.claims.len()
        && claims.len() <= 32
        && claims
            .iter()
            .enumerate()
            .all(|(i, c)| claims[..i].iter().all(|o| o.name != c.name))
        && claims
            .iter()
            .all(|c| held.claims.get(&c.name) == Some(c.value.as_str()));
    if !labels_same || !claims_same {
        return false;
    }
    let mut taints = c
        .spec
        .as_ref()
        .map_or(&[][..], |s| s.taints.as_slice())
        .iter()
        .filter_map(|t| Some((t, taint_effect(&t.effect)?)));
    let mut held_taints = held.taints.iter();
    loop {
        match (taints.next(), held_taints.next()) {
            (None, None) => break,
            (Some((t, effect)), Some(h))
                if t.key == h.key
                    && t.value == h.value
                    && effect == h.effect
                    && t.time_added
                        .as_ref()
                        .map_or(SystemTime::UNIX_EPOCH, meta::system_time)
                        == h.time_added => {}
            _ => return false,
        }
    }
    let quantity = |k: &str| {
        status
            .and_then(|s| s.allocatable.get(k))
            .and_then(|q| sched::parse_quantity(q).ok())
    };
    let version = status
        .and_then(|s| s.version.as_ref())
        .map(|v| v.kubernetes.as_str())
        .filter(|v| !v.is_empty());
    quantity("cpu") == held.allocatable.cpu
        && quantity("memory") == held.allocatable.memory
        && version == held.kubernetes_version.as_deref()
}

/// The scheduler's view of a ManagedClusterSet.
pub fn cluster_set(s: &v1::ManagedClusterSet) -> sched::ManagedClusterSet {
    let name = s
        .metadata
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let sel = s.spec.as_ref().and_then(|s| s.cluster_selector.as_ref());
    match sel {
        Some(sel) if sel.selector_type == crate::clusterset::LABEL_SELECTOR => {
            sched::ManagedClusterSet::with_selector(name, selector(sel.label_selector.as_ref()))
        }
        _ => sched::ManagedClusterSet::exclusive(name),
    }
}

/// The scheduler's view of a ManagedClusterSetBinding.
pub fn binding(b: &v1::ManagedClusterSetBinding) -> sched::ManagedClusterSetBinding {
    sched::ManagedClusterSetBinding::new(
        b.metadata
            .as_ref()
            .map(|m| m.namespace.clone())
            .unwrap_or_default(),
        b.spec
            .as_ref()
            .map(|s| s.cluster_set.clone())
            .unwrap_or_default(),
    )
}

/// The scheduler's view of an AddOnPlacementScore.
pub fn score(s: &v1::AddOnPlacementScore) -> sched::AddOnPlacementScore {
    let m = s.metadata.clone().unwrap_or_default();
    let st = s.status.clone().unwrap_or_default();
    sched::AddOnPlacementScore {
        cluster: m.namespace,
        resource_name: m.name,
        scores: st
            .scores
            .iter()
            .map(|i| (i.name.clone(), i.value))
            .collect(),
        valid_until: st.valid_until.as_ref().map(meta::system_time),
    }
}

fn condition_type(t: sched::ConditionType) -> &'static str {
    match t {
        sched::ConditionType::PlacementSatisfied => "PlacementSatisfied",
        sched::ConditionType::PlacementMisconfigured => "PlacementMisconfigured",
    }
}

/// Writes the scheduler's conditions onto `conditions`, keeping `lastTransitionTime` of those
/// whose status did not change. Returns whether anything changed.
pub fn set_conditions(
    conditions: &mut Vec<v1::Condition>,
    new: &[sched::Condition],
    generation: i64,
) -> bool {
    let mut changed = false;
    for c in new {
        let status = match c.status {
            sched::ConditionStatus::True => cstatus::TRUE,
            sched::ConditionStatus::False => cstatus::FALSE,
        };
        let ty = condition_type(c.type_);
        changed |= meta::set_condition(conditions, ty, status, c.reason.as_str(), &c.message);
        if let Some(stored) = conditions.iter_mut().find(|x| x.r#type == ty)
            && stored.observed_generation != generation
        {
            stored.observed_generation = generation;
            changed = true;
        }
    }
    changed
}

/// The placement status for a schedule (groups and count), conditions merged onto `old`'s.
pub fn status(
    new: &sched::PlacementStatus,
    old: Option<&v1::PlacementStatus>,
    generation: i64,
) -> v1::PlacementStatus {
    let mut conditions = old.map(|o| o.conditions.clone()).unwrap_or_default();
    set_conditions(&mut conditions, &new.conditions, generation);
    v1::PlacementStatus {
        number_of_selected_clusters: i32::try_from(new.number_of_selected_clusters)
            .unwrap_or(i32::MAX),
        decision_groups: new
            .decision_groups
            .iter()
            .map(|g| v1::DecisionGroupStatus {
                decision_group_index: i32::try_from(g.decision_group_index).unwrap_or(i32::MAX),
                decision_group_name: g.decision_group_name.clone(),
                decisions: g.decisions.clone(),
                cluster_count: i32::try_from(g.cluster_count).unwrap_or(i32::MAX),
            })
            .collect(),
        conditions,
        last_score_update_time: new.last_score_update.map(meta::timestamp),
    }
}

/// A PlacementDecision object for one page (metadata other than name, namespace and labels is
/// filled in by the store).
pub fn decision(page: &sched::PlacementDecision) -> v1::PlacementDecision {
    v1::PlacementDecision {
        metadata: Some(v1::ObjectMeta {
            name: page.name.clone(),
            namespace: page.namespace.clone(),
            labels: page
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            ..Default::default()
        }),
        status: Some(v1::PlacementDecisionStatus {
            decisions: page
                .decisions
                .iter()
                .map(|d| v1::ClusterDecision {
                    cluster_name: d.cluster_name.clone(),
                    reason: String::new(),
                    score: d.score,
                })
                .collect(),
        }),
    }
}

/// The cluster names of a PlacementDecision.
pub fn decided_clusters(d: &v1::PlacementDecision) -> impl Iterator<Item = &str> {
    d.status
        .iter()
        .flat_map(|s| s.decisions.iter().map(|c| c.cluster_name.as_str()))
}

/// The decided clusters of a placement's pages and the score each decision records.
pub fn decided_with_scores(
    pages: &[v1::PlacementDecision],
) -> (BTreeSet<String>, HashMap<String, i64>) {
    let decisions = pages
        .iter()
        .flat_map(|p| p.status.iter().flat_map(|s| &s.decisions));
    let scores: HashMap<String, i64> = decisions
        .map(|d| (d.cluster_name.clone(), d.score))
        .collect();
    (scores.keys().cloned().collect(), scores)
}

/// The debug view in protobuf form.
pub fn debug(
    placement: v1::Placement,
    d: Option<&sched::ScheduleDebug>,
    error: Option<String>,
) -> v1::PlacementDebug {
    let Some(d) = d else {
        return v1::PlacementDebug {
            placement: Some(placement),
            error: error.unwrap_or_default(),
            ..Default::default()
        };
    };
    v1::PlacementDebug {
        placement: Some(placement),
        eligible_sets: d.eligible_sets.clone(),
        prioritizers: d
            .prioritizers
            .iter()
            .map(|w| v1::PrioritizerWeight {
                prioritizer: w.prioritizer.to_string(),
                weight: w.weight,
            })
            .collect(),
        clusters: d
            .clusters
            .iter()
            .map(|c| v1::ClusterDebug {
                name: c.name.clone(),
                filters: c
                    .filters
                    .iter()
                    .map(|f| v1::FilterResult {
                        filter: format!("{:?}", f.filter),
                        passed: f.passed,
                        reason: f.reason.clone().unwrap_or_default(),
                    })
                    .collect(),
                scores: c
                    .scores
                    .iter()
                    .map(|s| v1::ScoreDetail {
                        prioritizer: s.prioritizer.clone(),
                        weight: s.weight,
                        score: s.score,
                    })
                    .collect(),
                total: c.total,
                prefer_no_select_penalty: c.prefer_no_select_penalty,
                rank: c.rank,
                selected: c.selected,
                not_selected_reason: c.not_selected_reason.clone().unwrap_or_default(),
            })
            .collect(),
        error: error.unwrap_or_default(),
    }
}

/// Labels as a sorted map (for comparisons).
pub fn sorted(labels: &std::collections::HashMap<String, String>) -> BTreeMap<&str, &str> {
    labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[cfg(test)]
mod tests;
