//! Root compliance, as OCM's propagator aggregates it.
//!
//! - A policy: NonCompliant if any decided cluster is; else Pending if any is; else unknown if
//!   any decided cluster has not reported (a missing report never reads as compliant); else
//!   Compliant. A policy bound to no cluster is unknown, not Compliant.
//! - A PolicySet: over its policies' compliance in the set's clusters; NonCompliant over
//!   Pending over Compliant, and no compliance at all while some policy has not reported; its
//!   `statusMessage` names pending, disabled, silent and missing policies.

use super::Compliance;
use std::collections::HashMap;

/// Root compliance of a policy over its `decided` clusters, from per-cluster `reports`.
pub fn root(decided: &[String], reports: &HashMap<String, Compliance>) -> Compliance {
    if decided.is_empty() {
        return Compliance::Unknown;
    }
    let states: Vec<Compliance> = decided
        .iter()
        .map(|c| reports.get(c).copied().unwrap_or_default())
        .collect();
    if states.contains(&Compliance::NonCompliant) {
        Compliance::NonCompliant
    } else if states.contains(&Compliance::Pending) {
        Compliance::Pending
    } else if states.contains(&Compliance::Unknown) {
        Compliance::Unknown
    } else {
        Compliance::Compliant
    }
}

/// One member of a PolicySet, as the set sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    /// No such policy in the set's namespace.
    Missing,
    /// The policy is disabled.
    Disabled,
    /// The policy's compliance over the set's clusters.
    Reported(Compliance),
}

/// A PolicySet's compliance and `statusMessage` over its `(policy name, member)` list.
pub fn policy_set(members: &[(String, Member)]) -> (Compliance, String) {
    let names = |pred: &dyn Fn(&Member) -> bool| -> Vec<&str> {
        members
            .iter()
            .filter(|(_, m)| pred(m))
            .map(|(n, _)| n.as_str())
            .collect()
    };
    let pending = names(&|m| *m == Member::Reported(Compliance::Pending));
    let disabled = names(&|m| *m == Member::Disabled);
    let unknown = names(&|m| *m == Member::Reported(Compliance::Unknown));
    let missing = names(&|m| *m == Member::Missing);
    let found = names(&|m| {
        matches!(
            m,
            Member::Reported(Compliance::Compliant | Compliance::NonCompliant)
        )
    });
    let mut parts = Vec::new();
    if !pending.is_empty() {
        parts.push(format!(
            "Policies awaiting pending dependencies: {}",
            pending.join(", ")
        ));
    }
    if !disabled.is_empty() {
        parts.push(format!("Disabled policies: {}", disabled.join(", ")));
    }
    if !unknown.is_empty() {
        parts.push(format!(
            "No status provided while awaiting policy status: {}",
            unknown.join(", ")
        ));
    }
    if !missing.is_empty() {
        parts.push(format!("Deleted policies: {}", missing.join(", ")));
    }
    let message = if parts.is_empty() {
        "All policies are reporting status".to_string()
    } else {
        parts.join("; ")
    };
    let show = unknown.is_empty() && found.len() + pending.len() > 0;
    let compliance = if !show {
        Compliance::Unknown
    } else if members
        .iter()
        .any(|(_, m)| *m == Member::Reported(Compliance::NonCompliant))
    {
        Compliance::NonCompliant
    } else if !pending.is_empty() {
        Compliance::Pending
    } else {
        Compliance::Compliant
    };
    (compliance, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Compliance::*;

    fn reports(r: &[(&str, Compliance)]) -> HashMap<String, Compliance> {
        r.iter().map(|(c, s)| (c.to_string(), *s)).collect()
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn root_is_noncompliant_over_pending_over_unknown_over_compliant() {
        let decided = names(&["a", "b", "c"]);
        assert_eq!(
            root(
                &decided,
                &reports(&[("a", Compliant), ("b", Pending), ("c", NonCompliant)])
            ),
            NonCompliant
        );
        assert_eq!(
            root(&decided, &reports(&[("a", Compliant), ("b", Pending)])),
            Pending
        );
        assert_eq!(
            root(&decided, &reports(&[("a", Compliant), ("b", Compliant)])),
            Unknown,
            "a decided cluster without a report is never compliant"
        );
        assert_eq!(
            root(
                &decided,
                &reports(&[("a", Compliant), ("b", Compliant), ("c", Compliant)])
            ),
            Compliant
        );
    }

    #[test]
    fn a_policy_bound_to_no_cluster_is_not_compliant() {
        assert_eq!(root(&[], &reports(&[("a", Compliant)])), Unknown);
    }

    #[test]
    fn reports_of_clusters_no_longer_decided_do_not_count() {
        let decided = names(&["a"]);
        assert_eq!(
            root(
                &decided,
                &reports(&[("a", Compliant), ("gone", NonCompliant)])
            ),
            Compliant
        );
    }

    #[test]
    fn policy_sets_aggregate_and_name_what_is_missing() {
        let m = |n: &str, s: Member| (n.to_string(), s);
        assert_eq!(
            policy_set(&[
                m("a", Member::Reported(Compliant)),
                m("b", Member::Reported(Compliant))
            ]),
            (Compliant, "All policies are reporting status".into())
        );
        let (c, msg) = policy_set(&[
            m("a", Member::Reported(Compliant)),
            m("b", Member::Reported(NonCompliant)),
            m("c", Member::Disabled),
            m("d", Member::Missing),
        ]);
        assert_eq!(c, NonCompliant);
        assert_eq!(msg, "Disabled policies: c; Deleted policies: d");
        let (c, msg) = policy_set(&[
            m("a", Member::Reported(NonCompliant)),
            m("b", Member::Reported(Unknown)),
        ]);
        assert_eq!(c, Unknown, "no compliance while a policy is silent");
        assert_eq!(msg, "No status provided while awaiting policy status: b");
        assert_eq!(policy_set(&[m("x", Member::Missing)]).0, Unknown);
    }
}
