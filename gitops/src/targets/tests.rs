use super::*;
use flotilla_api::v1::{GitRepoSpec, LabelSelector};

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

fn by_ref(name: &str, placement: &str) -> GitTarget {
    GitTarget {
        name: name.into(),
        placement_ref: placement.into(),
        ..Default::default()
    }
}

fn inline(name: &str, p: GitTargetPlacement) -> GitTarget {
    GitTarget {
        name: name.into(),
        placement: Some(p),
        ..Default::default()
    }
}

fn depots() -> GitTargetPlacement {
    GitTargetPlacement {
        cluster_sets: vec!["depots".into()],
        cluster_selector: Some(LabelSelector {
            match_labels: [("tier".to_string(), "depot".to_string())].into(),
            match_expressions: vec![],
        }),
        number_of_clusters: Some(2),
        ..Default::default()
    }
}

#[test]
fn a_placement_ref_target_delivers_over_its_placement_and_an_inline_one_over_the_owned_one() {
    assert_eq!(
        placement_name("shop", &by_ref("stores", "stores")),
        "stores"
    );
    assert_eq!(
        placement_name("shop", &inline("depots", depots())),
        "shop-depots"
    );
}

#[test]
fn an_inline_target_becomes_a_labelled_placement_with_its_selector_as_the_one_predicate() {
    let r = repo(vec![by_ref("stores", "stores"), inline("depots", depots())]);
    let owned = owned_placements(&r);
    assert_eq!(owned.len(), 1, "only the inline target: {owned:?}");
    let (i, t, p) = &owned[0];
    assert_eq!((*i, t.name.as_str()), (1, "depots"));
    let m = p.metadata.as_ref().unwrap();
    assert_eq!(
        (m.namespace.as_str(), m.name.as_str()),
        ("edge-apps", "shop-depots")
    );
    assert_eq!(m.labels[GITREPO_LABEL], "shop");
    assert!(owned_by(p, "shop") && !owned_by(p, "shop-2"));
    let s = p.spec.as_ref().unwrap();
    assert_eq!(s.cluster_sets, ["depots"]);
    assert_eq!(s.number_of_clusters, Some(2));
    assert_eq!(s.predicates.len(), 1);
    let selector = s.predicates[0].required_cluster_selector.as_ref().unwrap();
    assert_eq!(
        selector.label_selector.as_ref().unwrap().match_labels["tier"],
        "depot"
    );
    assert!(s.predicate_cel_selectors.is_empty());
}

#[test]
fn cluster_name_becomes_a_cel_expression_and_no_selector_means_no_predicate() {
    let lab = placement(
        "edge-apps",
        "shop",
        "lab",
        &GitTargetPlacement {
            cluster_name: "lab-1".into(),
            ..Default::default()
        },
    );
    let s = lab.spec.unwrap();
    assert_eq!(s.predicates.len(), 1);
    assert_eq!(
        s.predicate_cel_selectors[0].cel_expressions,
        ["managedCluster.metadata.name == \"lab-1\""]
    );
    let every = placement("edge-apps", "shop", "all", &GitTargetPlacement::default());
    let s = every.spec.unwrap();
    assert!(s.predicates.is_empty() && s.predicate_cel_selectors.is_empty());
}

fn user_placement(name: &str, gitrepo_label: Option<&str>) -> Placement {
    Placement {
        metadata: Some(ObjectMeta {
            name: name.into(),
            namespace: "edge-apps".into(),
            labels: gitrepo_label
                .map(|g| (GITREPO_LABEL.to_string(), g.to_string()))
                .into_iter()
                .collect(),
            ..Default::default()
        }),
        spec: None,
        status: None,
    }
}

#[test]
fn a_user_may_not_write_or_delete_an_inline_targets_placement() {
    let owned = placement("edge-apps", "shop", "depots", &depots());
    let edited = owned.clone();
    let refused = user_may_write(Some(&owned), Some(&edited), false).unwrap_err();
    assert!(matches!(
        &refused,
        Refusal::Owned { gitrepo, verb: "writes", .. } if gitrepo == "shop"
    ));
    let message = refused.to_string();
    assert!(
        message.contains("Placement edge-apps/shop-depots belongs to GitRepo edge-apps/shop")
            && message.contains("--force"),
        "{message}"
    );
    let stripped = user_placement("shop-depots", None);
    assert!(
        matches!(
            user_may_write(Some(&owned), Some(&stripped), false),
            Err(Refusal::Owned { .. })
        ),
        "taking the label off does not make it the user's"
    );
    assert_eq!(
        user_may_write(Some(&owned), Some(&edited), true),
        Ok(()),
        "forced: an edit keeping its owner's label"
    );
    assert_eq!(user_may_write(Some(&owned), None, true), Ok(()));
    let other = user_placement("shop-depots", Some("bank"));
    assert!(
        matches!(
            user_may_write(Some(&owned), Some(&other), true),
            Err(Refusal::Marked { .. })
        ),
        "never handed to another GitRepo, forced or not"
    );
    assert!(matches!(
        user_may_write(Some(&owned), None, false),
        Err(Refusal::Owned {
            verb: "deletes",
            ..
        })
    ));
}

#[test]
fn a_users_placement_may_not_carry_the_gitrepo_label() {
    let copied = user_placement("my-depots", Some("shop"));
    let refused = user_may_write(None, Some(&copied), true).unwrap_err();
    assert!(
        refused.to_string().contains(&format!(
            "metadata.labels.{GITREPO_LABEL} (shop) marks the Placements a GitRepo writes"
        )),
        "{refused}"
    );
    let mine = user_placement("my-depots", None);
    assert_eq!(user_may_write(None, Some(&mine), false), Ok(()));
    assert_eq!(user_may_write(Some(&mine), Some(&mine), false), Ok(()));
    assert_eq!(user_may_write(Some(&mine), None, false), Ok(()));
    assert!(
        matches!(
            user_may_write(Some(&mine), Some(&copied), true),
            Err(Refusal::Marked { .. })
        ),
        "nor gain it by an update"
    );
    let empty = user_placement("my-depots", Some(""));
    assert_eq!(
        user_may_write(None, Some(&empty), false),
        Ok(()),
        "an empty label names none"
    );
}
