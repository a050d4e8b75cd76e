//! Placement spec validation: every problem at once, each with its field path and a kind that
//! says how OCM treats it.
//!
//! OCM rejects some mistakes at the API (its CRD schema: weight range, `maxSkew` minimum, the
//! pattern of a string `clustersPerDecisionGroup`, the patterns and lengths of toleration keys,
//! topology keys and group names, toleration values over 1024 characters, more than 8 spread
//! constraints, the `scoreRateLimit` pattern) and accepts others,
//! reporting them later as the `PlacementMisconfigured` condition (an unknown prioritizer mode,
//! unknown built-in prioritizers, incomplete AddOn coordinates, a string count as
//! `clustersPerDecisionGroup`, selector and toleration mistakes). [`ErrorKind`] carries that
//! distinction so the hub rejects only what OCM's API rejects; the scheduler refuses to schedule
//! a spec with any error.
//!
//! One deviation: a negative `numberOfClusters` passes OCM's CRD (no minimum) and then makes
//! OCM's scheduler fail on every run; Flotilla reports it as misconfigured.

use crate::error::{ErrorKind, FieldError};
use crate::groups::GroupSize;
use crate::placement::{
    ClusterSelector, Placement, PrioritizerMode, SCORE_RATE_LIMIT_PATTERN, ScoreCoordinateType,
    TolerationOperator, parse_score_rate_limit,
};
use crate::score::BuiltIn;

/// Every problem in `placement`, in field order. Empty means the spec can be scheduled.
pub fn validate(placement: &Placement) -> Vec<FieldError> {
    use ErrorKind::{Invalid, Misconfigured};
    let mut errors = Vec::new();

    if let Some(n) = placement.number_of_clusters
        && n < 0
    {
        errors.push(FieldError::new(
            "spec.numberOfClusters",
            Misconfigured,
            format!("must be >= 0 (got {n})"),
        ));
    }

    for (i, p) in placement.predicates.iter().enumerate() {
        let at = format!("spec.predicates[{i}].requiredClusterSelector");
        cluster_selector(&p.required_cluster_selector, &at, &mut errors);
        if let Err(refused) = p.required_cluster_selector.cel_expressions.compiled() {
            errors.extend(refused.iter().map(|e| {
                FieldError::new(
                    format!("{at}.celSelector.celExpressions[{}]", e.index),
                    Misconfigured,
                    e.message.clone(),
                )
            }));
        }
    }

    if let Some(limit) = &placement.score_rate_limit
        && parse_score_rate_limit(limit).is_none()
    {
        errors.push(FieldError::new(
            "spec.scoreRateLimit",
            Invalid,
            format!(
                "must be digits and one unit of h, m or s, like 30s, 5m or 1h (OCM's pattern \
                 {SCORE_RATE_LIMIT_PATTERN}); got {limit:?}"
            ),
        ));
    }

    if let PrioritizerMode::Other(mode) = &placement.prioritizer_policy.mode {
        errors.push(FieldError::new(
            "spec.prioritizerPolicy.mode",
            Misconfigured,
            format!("unknown mode {mode:?} (want Additive or Exact)"),
        ));
    }

    for (i, c) in placement
        .prioritizer_policy
        .configurations
        .iter()
        .enumerate()
    {
        let at = format!("spec.prioritizerPolicy.configurations[{i}]");
        if !(-10..=10).contains(&c.weight) {
            errors.push(FieldError::new(
                format!("{at}.weight"),
                Invalid,
                format!("must be in [-10, 10] (got {})", c.weight),
            ));
        }
        let sc = &c.score_coordinate;
        match sc.type_ {
            ScoreCoordinateType::BuiltIn => {
                if BuiltIn::from_name(&sc.built_in).is_none() {
                    errors.push(FieldError::new(
                        format!("{at}.scoreCoordinate.builtIn"),
                        Misconfigured,
                        format!(
                            "unknown built-in prioritizer {:?} (want Balance, Steady, \
                             ResourceAllocatableCPU, ResourceAllocatableMemory)",
                            sc.built_in
                        ),
                    ));
                }
            }
            ScoreCoordinateType::AddOn => match &sc.add_on {
                None => errors.push(FieldError::new(
                    format!("{at}.scoreCoordinate.addOn"),
                    Misconfigured,
                    "required when type is AddOn (set resourceName and scoreName)",
                )),
                Some(a) => {
                    if a.resource_name.is_empty() {
                        errors.push(FieldError::new(
                            format!("{at}.scoreCoordinate.addOn.resourceName"),
                            Misconfigured,
                            "must not be empty: name the AddOnPlacementScore to read",
                        ));
                    }
                    if a.score_name.is_empty() {
                        errors.push(FieldError::new(
                            format!("{at}.scoreCoordinate.addOn.scoreName"),
                            Misconfigured,
                            "must not be empty: name the score inside the AddOnPlacementScore",
                        ));
                    }
                }
            },
        }
    }

    for (i, t) in placement.tolerations.iter().enumerate() {
        let at = format!("spec.tolerations[{i}]");
        if !t.key.is_empty()
            && let Err(why) = crd_key(&t.key)
        {
            errors.push(FieldError::new(format!("{at}.key"), Invalid, why));
        }
        if t.value.chars().count() > MAX_TOLERATION_VALUE_LEN {
            errors.push(FieldError::new(
                format!("{at}.value"),
                Invalid,
                format!("at most {MAX_TOLERATION_VALUE_LEN} characters"),
            ));
        }
        if t.operator == TolerationOperator::Exists && !t.value.is_empty() {
            errors.push(FieldError::new(
                format!("{at}.value"),
                Misconfigured,
                format!("must be empty when operator is Exists (got {:?})", t.value),
            ));
        }
        if t.key.is_empty() && t.operator != TolerationOperator::Exists {
            errors.push(FieldError::new(
                format!("{at}.operator"),
                Misconfigured,
                "must be Exists when key is empty (an empty key with Exists tolerates every taint)",
            ));
        }
    }

    let gs = &placement.decision_strategy.group_strategy;
    for (i, g) in gs.decision_groups.iter().enumerate() {
        if !group_name(&g.group_name) {
            errors.push(FieldError::new(
                format!("spec.decisionStrategy.groupStrategy.decisionGroups[{i}].groupName"),
                Invalid,
                format!(
                    "must be 2 to 63 letters, digits, '-', '_' or '.', starting and ending with a \
                     letter or digit (got {:?})",
                    g.group_name
                ),
            ));
        }
        let at =
            format!("spec.decisionStrategy.groupStrategy.decisionGroups[{i}].groupClusterSelector");
        cluster_selector(&g.group_cluster_selector, &at, &mut errors);
        if !g.group_cluster_selector.cel_expressions.is_empty() {
            errors.push(FieldError::new(
                format!("{at}.celSelector"),
                Invalid,
                "decision groups select by labelSelector and claimSelector only (OCM's \
                 groupClusterSelector has no celSelector)",
            ));
        }
    }
    if let Err((kind, message)) = GroupSize::parse(&gs.clusters_per_decision_group) {
        errors.push(FieldError::new(
            "spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup",
            kind,
            message,
        ));
    }

    for (i, c) in placement
        .spread_policy
        .spread_constraints
        .iter()
        .enumerate()
    {
        let at = format!("spec.spreadPolicy.spreadConstraints[{i}]");
        if c.topology_key.is_empty() {
            errors.push(FieldError::new(
                format!("{at}.topologyKey"),
                Invalid,
                "must not be empty: name the label or claim whose values are the domains",
            ));
        } else if let Err(why) = crd_key(&c.topology_key) {
            errors.push(FieldError::new(format!("{at}.topologyKey"), Invalid, why));
        }
        if c.max_skew < 1 {
            errors.push(FieldError::new(
                format!("{at}.maxSkew"),
                Invalid,
                format!("must be >= 1 (got {})", c.max_skew),
            ));
        }
    }
    let spread = placement.spread_policy.spread_constraints.len();
    if spread > MAX_SPREAD_CONSTRAINTS {
        errors.push(FieldError::new(
            "spec.spreadPolicy.spreadConstraints",
            Invalid,
            format!("at most {MAX_SPREAD_CONSTRAINTS} constraints (got {spread})"),
        ));
    }
    errors
}

/// OCM's CRD `maxItems` for `spreadPolicy.spreadConstraints`.
const MAX_SPREAD_CONSTRAINTS: usize = 8;
/// OCM's CRD `maxLength` for a toleration's `value`.
const MAX_TOLERATION_VALUE_LEN: usize = 1024;
/// OCM's CRD `maxLength` for a toleration's `key` and a spread constraint's `topologyKey`.
const MAX_KEY_LEN: usize = 316;

/// OCM's CRD pattern for a toleration key and a topology key: an optional DNS-subdomain prefix
/// and `/`, then letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit;
/// at most [`MAX_KEY_LEN`] characters.
fn crd_key(key: &str) -> Result<(), String> {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let dns_label = |l: &str| {
        !l.is_empty()
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| p.split('.').all(dns_label));
    if key.len() > MAX_KEY_LEN {
        Err(format!(
            "at most {MAX_KEY_LEN} characters (got {})",
            key.len()
        ))
    } else if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(format!(
            "{key:?} is not a valid key: an optional DNS-subdomain prefix and '/', then letters, \
             digits, '-', '_' or '.', starting and ending with a letter or digit"
        ))
    }
}

/// OCM's CRD pattern for `groupName`: `^[a-zA-Z0-9][-A-Za-z0-9_.]{0,61}[a-zA-Z0-9]$`.
fn group_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    (2..=63).contains(&name.len())
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

fn cluster_selector(sel: &ClusterSelector, path: &str, errors: &mut Vec<FieldError>) {
    errors.extend(
        sel.label_selector
            .validate(&format!("{path}.labelSelector"), ErrorKind::Misconfigured),
    );
    errors.extend(
        sel.claim_selector
            .validate(&format!("{path}.claimSelector"), ErrorKind::Misconfigured),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{
        IntOrString, ScoreCoordinate, SpreadConstraint, Toleration, WhenUnsatisfiable,
    };
    use crate::selector::{LabelSelector, Requirement};

    fn paths(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn valid_spec_has_no_errors() {
        let p = Placement::new("ns", "p")
            .number_of_clusters(3)
            .predicate(
                LabelSelector::default().label("a", "b"),
                LabelSelector::default(),
            )
            .prioritizer(ScoreCoordinate::built_in("ResourceAllocatableCPU"), 10)
            .prioritizer(ScoreCoordinate::add_on("default", "cpuratio"), -10)
            .toleration(Toleration::exists(""))
            .clusters_per_decision_group(IntOrString::String("25%".into()))
            .spread(SpreadConstraint::label(
                "zone",
                1,
                WhenUnsatisfiable::DoNotSchedule,
            ));
        assert_eq!(validate(&p), vec![]);
    }

    #[test]
    fn all_errors_are_reported_at_once_with_paths_and_kinds() {
        let p = Placement::new("ns", "p")
            .number_of_clusters(-1)
            .predicate(
                LabelSelector::default()
                    .exists("a")
                    .expression(Requirement::new("b", "Foo", ["x"])),
                LabelSelector::default(),
            )
            .prioritizer(ScoreCoordinate::built_in("Balance"), 11)
            .prioritizer(ScoreCoordinate::built_in("Cheapest"), 1)
            .prioritizer(ScoreCoordinate::add_on("", ""), 1)
            .prioritizer(
                ScoreCoordinate {
                    type_: ScoreCoordinateType::AddOn,
                    ..ScoreCoordinate::default()
                },
                1,
            )
            .toleration(Toleration {
                value: "x".into(),
                ..Toleration::exists("k")
            })
            .toleration(Toleration::equal("", "v"))
            .clusters_per_decision_group(IntOrString::String("0%".into()))
            .spread(SpreadConstraint::label(
                "",
                0,
                WhenUnsatisfiable::ScheduleAnyway,
            ));
        let errors = validate(&p);
        assert_eq!(
            paths(&errors),
            [
                "spec.numberOfClusters",
                "spec.predicates[0].requiredClusterSelector.labelSelector.matchExpressions[1].operator",
                "spec.prioritizerPolicy.configurations[0].weight",
                "spec.prioritizerPolicy.configurations[1].scoreCoordinate.builtIn",
                "spec.prioritizerPolicy.configurations[2].scoreCoordinate.addOn.resourceName",
                "spec.prioritizerPolicy.configurations[2].scoreCoordinate.addOn.scoreName",
                "spec.prioritizerPolicy.configurations[3].scoreCoordinate.addOn",
                "spec.tolerations[0].value",
                "spec.tolerations[1].operator",
                "spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup",
                "spec.spreadPolicy.spreadConstraints[0].topologyKey",
                "spec.spreadPolicy.spreadConstraints[0].maxSkew",
            ]
        );
        let kinds: Vec<ErrorKind> = errors.iter().map(|e| e.kind).collect();
        use ErrorKind::*;
        assert_eq!(
            kinds,
            [
                Misconfigured,
                Misconfigured,
                Invalid,
                Misconfigured,
                Misconfigured,
                Misconfigured,
                Misconfigured,
                Misconfigured,
                Misconfigured,
                Invalid,
                Invalid,
                Invalid
            ]
        );
        assert_eq!(
            errors[1].to_string(),
            "spec.predicates[0].requiredClusterSelector.labelSelector.matchExpressions[1].operator: \
             unknown operator \"Foo\" (want In, NotIn, Exists, DoesNotExist)"
        );
        assert_eq!(
            errors[3].to_string(),
            "spec.prioritizerPolicy.configurations[1].scoreCoordinate.builtIn: unknown built-in \
             prioritizer \"Cheapest\" (want Balance, Steady, ResourceAllocatableCPU, \
             ResourceAllocatableMemory)"
        );
    }

    #[test]
    fn keys_names_and_sizes_follow_ocm_crd_patterns() {
        use crate::placement::DecisionGroup;
        for good in [
            "gpu",
            "cluster.open-cluster-management.io/unreachable",
            "a",
            "A_b.c-9",
        ] {
            assert_eq!(crd_key(good), Ok(()), "{good}");
        }
        for bad in ["-gpu", "gpu-", "Example.com/x", "a/b/c", "/x", "x/", "a b"] {
            assert!(crd_key(bad).is_err(), "{bad}");
        }
        assert!(crd_key(&"k".repeat(317)).is_err());
        assert!(group_name("canary") && group_name("g1") && !group_name("c") && !group_name("-a"));
        let mut p = Placement::new("ns", "p")
            .toleration(Toleration {
                value: "v".repeat(1025),
                ..Toleration::equal("Bad Key", "")
            })
            .toleration(Toleration::exists(""));
        p.decision_strategy
            .group_strategy
            .decision_groups
            .push(DecisionGroup {
                group_name: "x".into(),
                group_cluster_selector: ClusterSelector::default(),
            });
        for _ in 0..9 {
            p = p.spread(SpreadConstraint::label(
                "zone",
                1,
                WhenUnsatisfiable::ScheduleAnyway,
            ));
        }
        p.spread_policy.spread_constraints[0].topology_key = "zone/".into();
        let errors = validate(&p);
        assert_eq!(
            paths(&errors),
            [
                "spec.tolerations[0].key",
                "spec.tolerations[0].value",
                "spec.decisionStrategy.groupStrategy.decisionGroups[0].groupName",
                "spec.spreadPolicy.spreadConstraints[0].topologyKey",
                "spec.spreadPolicy.spreadConstraints",
            ]
        );
        assert!(errors.iter().all(|e| e.kind == ErrorKind::Invalid));
    }

    #[test]
    fn weight_bounds_are_inclusive() {
        for w in [-10, 0, 10] {
            let p = Placement::new("ns", "p").prioritizer(ScoreCoordinate::built_in("Steady"), w);
            assert!(validate(&p).is_empty(), "weight {w}");
        }
        let p = Placement::new("ns", "p").prioritizer(ScoreCoordinate::built_in("Steady"), -11);
        assert_eq!(
            paths(&validate(&p)),
            ["spec.prioritizerPolicy.configurations[0].weight"]
        );
    }

    #[test]
    fn unknown_mode_and_string_group_count_are_misconfigured_not_rejected() {
        let p = Placement::new("ns", "p")
            .mode(PrioritizerMode::Other("Fancy".into()))
            .clusters_per_decision_group(IntOrString::String("3".into()));
        let errors = validate(&p);
        assert_eq!(
            paths(&errors),
            [
                "spec.prioritizerPolicy.mode",
                "spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup"
            ]
        );
        assert!(errors.iter().all(|e| e.kind == ErrorKind::Misconfigured));
        assert_eq!(
            errors[0].to_string(),
            "spec.prioritizerPolicy.mode: unknown mode \"Fancy\" (want Additive or Exact)"
        );
    }

    #[test]
    fn score_rate_limits_follow_ocms_pattern() {
        use crate::placement::parse_score_rate_limit as parse;
        use std::time::Duration;
        assert_eq!(parse("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse("0s"), Some(Duration::ZERO));
        for bad in [
            "", "m", "1", "1d", "1.5m", "-1m", "1m30s", " 1m", "1M", "１m",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
            let p = Placement::new("ns", "p").score_rate_limit(bad);
            let errors = validate(&p);
            assert_eq!(paths(&errors), ["spec.scoreRateLimit"], "{bad:?}");
            assert_eq!(errors[0].kind, ErrorKind::Invalid);
        }
        assert_eq!(
            Placement::new("ns", "p").score_rate_limit_duration(),
            Some(Duration::from_secs(60)),
            "OCM's default"
        );
    }

    #[test]
    fn numbers_of_clusters_per_group_need_no_minimum() {
        for n in [0, -3, 1, 500] {
            let p = Placement::new("ns", "p").clusters_per_decision_group(IntOrString::Int(n));
            assert!(validate(&p).is_empty(), "{n}");
        }
    }

    #[test]
    fn bad_clusters_per_decision_group_values_are_invalid() {
        for bad in [
            IntOrString::String("0%".into()),
            IntOrString::String("101%".into()),
            IntOrString::String("-5%".into()),
            IntOrString::String("abc".into()),
            IntOrString::String("x%".into()),
        ] {
            let p = Placement::new("ns", "p").clusters_per_decision_group(bad.clone());
            let errors = validate(&p);
            assert_eq!(errors.len(), 1, "{bad:?}");
            assert_eq!(errors[0].kind, ErrorKind::Invalid);
        }
    }

    #[test]
    fn group_and_claim_selectors_are_validated() {
        let p = Placement::new("ns", "p")
            .predicate(
                LabelSelector::default(),
                LabelSelector::default().in_values("k", Vec::<String>::new()),
            )
            .decision_group(
                "canary",
                ClusterSelector::labels(LabelSelector::default().expression(Requirement::new(
                    "canary",
                    crate::selector::Operator::Exists,
                    ["x"],
                ))),
            );
        assert_eq!(
            paths(&validate(&p)),
            [
                "spec.predicates[0].requiredClusterSelector.claimSelector.matchExpressions[0].values",
                "spec.decisionStrategy.groupStrategy.decisionGroups[0].groupClusterSelector.labelSelector.matchExpressions[0].values",
            ]
        );
    }
}
