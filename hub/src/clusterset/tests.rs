use super::*;
use flotilla_api::v1::{ManagedClusterSelector, ManagedClusterSetSpec};

fn set(name: &str, ty: &str, sel: Option<LabelSelector>) -> ManagedClusterSet {
    ManagedClusterSet {
        metadata: Some(ObjectMeta {
            name: name.into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSetSpec {
            cluster_selector: Some(ManagedClusterSelector {
                selector_type: ty.into(),
                label_selector: sel,
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// Cluster `c1` with these labels (also the managed-namespace tests' fixture).
pub(super) fn cluster(labels: &[(&str, &str)]) -> ManagedCluster {
    ManagedCluster {
        metadata: Some(ObjectMeta {
            name: "c1".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn exclusive_sets_follow_the_clusterset_label() {
    let s = set("prod", EXCLUSIVE, None);
    assert!(ClusterSets::is_member(
        &s,
        &cluster(&[(CLUSTERSET_LABEL, "prod")])
    ));
    assert!(!ClusterSets::is_member(
        &s,
        &cluster(&[(CLUSTERSET_LABEL, "default")])
    ));
    assert!(!ClusterSets::is_member(&s, &cluster(&[])));
}

#[test]
fn label_selector_sets_and_global_select_by_labels() {
    let global = ClusterSets::builtin(GLOBAL_CLUSTERSET);
    assert!(ClusterSets::is_member(&global, &cluster(&[])));
    let s = set(
        "eu",
        LABEL_SELECTOR,
        Some(selector::parse("region=eu").unwrap()),
    );
    assert!(ClusterSets::is_member(&s, &cluster(&[("region", "eu")])));
    assert!(!ClusterSets::is_member(&s, &cluster(&[("region", "us")])));
}

#[test]
fn invalid_sets_are_rejected_with_their_field() {
    let err = ClusterSets::validate_set(&set("x", "Bogus", None))
        .unwrap_err()
        .to_string();
    assert!(err.contains("spec.clusterSelector.selectorType"), "{err}");
    let err = ClusterSets::validate_set(&set("x", LABEL_SELECTOR, None))
        .unwrap_err()
        .to_string();
    assert!(err.contains("labelSelector"), "{err}");
    let err = ClusterSets::validate_set(&set("Bad.Name", EXCLUSIVE, None))
        .unwrap_err()
        .to_string();
    assert!(err.contains("metadata.name"), "{err}");
}
