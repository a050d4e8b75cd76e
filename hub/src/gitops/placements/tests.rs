use super::*;
use flotilla_api::v1::{
    GitRepoSpec, GitTarget, GitTargetPlacement, LabelSelector, LocalPlacementReference,
    ManifestWorkReplicaSetSpec, ObjectMeta, PlacementSpec,
};
use flotilla_gitops::source::GITREPO_LABEL;

fn tier(value: &str) -> GitTargetPlacement {
    GitTargetPlacement {
        cluster_selector: Some(LabelSelector {
            match_labels: [("tier".to_string(), value.to_string())].into(),
            match_expressions: vec![],
        }),
        ..Default::default()
    }
}

fn target(name: &str, inline: Option<GitTargetPlacement>) -> GitTarget {
    GitTarget {
        name: name.into(),
        placement_ref: if inline.is_some() { "" } else { "stores" }.into(),
        placement: inline,
        rollout_strategy: None,
    }
}

fn repo(targets: Vec<GitTarget>) -> GitRepo {
    GitRepo {
        metadata: Some(ObjectMeta {
            name: "shop".into(),
            namespace: "edge-apps".into(),
            ..Default::default()
        }),
        spec: Some(GitRepoSpec {
            targets,
            ..Default::default()
        }),
        status: None,
    }
}

/// A Placement named `name` in edge-apps, owned by `owner` (none: a user's).
fn existing(name: &str, owner: Option<&str>, spec: PlacementSpec) -> Placement {
    Placement {
        metadata: Some(ObjectMeta {
            name: name.into(),
            namespace: "edge-apps".into(),
            labels: owner
                .map(|o| (GITREPO_LABEL.to_string(), o.to_string()))
                .into_iter()
                .collect(),
            ..Default::default()
        }),
        spec: Some(spec),
        status: None,
    }
}

/// The spec GitRepo shop's inline target selecting `tier=<value>` writes.
fn written(value: &str) -> PlacementSpec {
    flotilla_gitops::targets::placement("edge-apps", "shop", "depots", &tier(value))
        .spec
        .unwrap()
}

fn names(plan: &Plan) -> Vec<&str> {
    plan.apply
        .iter()
        .map(|p| p.metadata.as_ref().unwrap().name.as_str())
        .collect()
}

#[test]
fn a_new_inline_target_writes_its_owned_placement_and_a_placement_ref_target_writes_nothing() {
    let r = repo(vec![
        target("stores", None),
        target("depots", Some(tier("depot"))),
    ]);
    let p = plan(&r, &[], &BTreeSet::new());
    assert_eq!(names(&p), ["shop-depots"]);
    assert_eq!(
        p.apply[0].metadata.as_ref().unwrap().labels[GITREPO_LABEL],
        "shop"
    );
    assert!(p.delete.is_empty() && p.problems.is_empty());
    assert_eq!(p.inline, 1);
}

#[test]
fn an_owned_placement_is_written_again_only_when_the_target_changed() {
    let r = repo(vec![target("depots", Some(tier("depot")))]);
    let same = existing("shop-depots", Some("shop"), written("depot"));
    assert_eq!(
        plan(&r, &[&same], &BTreeSet::new()),
        Plan {
            inline: 1,
            ..Plan::default()
        }
    );
    let edited = existing("shop-depots", Some("shop"), written("store"));
    let p = plan(&r, &[&edited], &BTreeSet::new());
    assert_eq!(names(&p), ["shop-depots"]);
    assert_eq!(p.apply[0].spec.as_ref(), Some(&written("depot")));
}

#[test]
fn a_placement_of_that_name_the_gitrepo_does_not_own_is_refused_never_overwritten() {
    let r = repo(vec![target("depots", Some(tier("depot")))]);
    for owner in [None, Some("shop-2")] {
        let theirs = existing("shop-depots", owner, PlacementSpec::default());
        let p = plan(&r, &[&theirs], &BTreeSet::new());
        assert!(
            p.apply.is_empty() && p.delete.is_empty(),
            "{owner:?}: {p:?}"
        );
        assert_eq!(p.problems.len(), 1, "{p:?}");
        assert!(
            p.problems[0].starts_with(
                "spec.targets[0] (depots): Placement edge-apps/shop-depots exists and does not \
                 belong to this GitRepo"
            ),
            "{p:?}"
        );
    }
}

#[test]
fn a_removed_target_s_placement_goes_once_no_replica_set_names_it_and_others_stay() {
    let r = repo(vec![target("stores", None)]);
    let gone = existing("shop-depots", Some("shop"), written("depot"));
    let users = existing("depots", None, PlacementSpec::default());
    let other_repo = existing("shop-2-x", Some("shop-2"), PlacementSpec::default());
    let all = [&gone, &users, &other_repo];
    let still_named = BTreeSet::from(["stores", "shop-depots"]);
    assert_eq!(
        plan(&r, &all, &still_named),
        Plan::default(),
        "its bundles still go there"
    );
    let p = plan(&r, &all, &BTreeSet::from(["stores"]));
    assert_eq!(p.delete, ["shop-depots"]);
    assert!(p.apply.is_empty() && p.problems.is_empty());
}

#[test]
fn the_replica_sets_placements_are_what_they_name() {
    let rs = |names: &[&str]| ManifestWorkReplicaSet {
        spec: Some(ManifestWorkReplicaSetSpec {
            placement_refs: names
                .iter()
                .map(|n| LocalPlacementReference {
                    name: n.to_string(),
                    rollout_strategy: None,
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (a, b) = (rs(&["stores", "shop-depots"]), rs(&["stores"]));
    assert_eq!(
        referenced(&[&a, &b]),
        BTreeSet::from(["stores", "shop-depots"])
    );
}

#[test]
fn an_inline_placement_is_validated_as_a_users_and_its_errors_name_the_target_s_fields() {
    let mut effect = tier("depot");
    effect.tolerations = vec![flotilla_api::v1::Toleration {
        effect: "Sometimes".into(),
        ..Default::default()
    }];
    let mut groups = tier("depot");
    groups.decision_strategy = Some(flotilla_api::v1::DecisionStrategy {
        group_strategy: Some(flotilla_api::v1::GroupStrategy {
            clusters_per_decision_group: "101%".into(),
            clusters_per_decision_group_is_string: true,
            ..Default::default()
        }),
    });
    let r = repo(vec![
        target("stores", None),
        target("depots", Some(effect)),
        target("big", Some(groups)),
    ]);
    let problems = validate(&r);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    for (p, want) in problems.iter().zip([
        "spec.targets[1].placement.tolerations[0].effect: unknown effect \"Sometimes\"",
        "spec.targets[2].placement.decisionStrategy.groupStrategy.clustersPerDecisionGroup: ",
    ]) {
        assert!(p.starts_with(want), "{want:?}: {p}");
    }
    assert!(validate(&repo(vec![target("depots", Some(tier("depot")))])).is_empty());
}

#[test]
fn the_condition_says_which_target_was_refused_and_is_absent_without_inline_targets() {
    let mut s = GitRepoStatus::default();
    assert!(!condition(&mut s, 0, &[]));
    assert!(condition(&mut s, 2, &[]));
    let c = meta::find_condition(&s.conditions, PLACED).unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "Placed"));
    assert!(!condition(&mut s, 2, &[]), "unchanged: no status write");
    assert!(condition(
        &mut s,
        2,
        &["spec.targets[0] (depots): taken".into()]
    ));
    let c = meta::find_condition(&s.conditions, PLACED).unwrap();
    assert_eq!(c.status, "False");
    assert!(c.message.contains("depots"));
    assert!(condition(&mut s, 0, &[]));
    assert!(meta::find_condition(&s.conditions, PLACED).is_none());
}

#[test]
fn a_refusal_cleared_is_seen_once_and_only_after_a_refusal() {
    let mut s = GitRepoStatus::default();
    assert!(!cleared(&s, &[]), "never refused");
    condition(&mut s, 1, &["spec.targets[0] (depots): taken".into()]);
    assert!(!cleared(&s, &["spec.targets[0] (depots): taken".into()]));
    assert!(cleared(&s, &[]));
    condition(&mut s, 1, &[]);
    assert!(!cleared(&s, &[]), "placed since");
}

#[test]
fn each_field_of_the_owned_placement_is_named_as_the_target_field_it_came_from() {
    assert_eq!(
        target_path(
            1,
            "depots",
            "spec.predicates[0].requiredClusterSelector.labelSelector.matchExpressions[0].operator"
        ),
        "spec.targets[1].placement.clusterSelector.matchExpressions[0].operator"
    );
    assert_eq!(
        target_path(
            0,
            "lab",
            "spec.predicates[0].requiredClusterSelector.celSelector.celExpressions[0]"
        ),
        "spec.targets[0].placement.clusterName"
    );
    assert_eq!(
        target_path(2, "a-very-long-one", "metadata.name"),
        "spec.targets[2].name (a-very-long-one: the Placement's name is <gitrepo>-<target>)"
    );
    assert_eq!(
        target_path(0, "x", "spec.numberOfClusters"),
        "spec.targets[0].placement.numberOfClusters"
    );
    assert_eq!(
        target_path(0, "x", "spectacle"),
        "spectacle",
        "a prefix only at a field boundary"
    );
}
