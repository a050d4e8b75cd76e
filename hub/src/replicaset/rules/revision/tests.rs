use super::*;
use crate::replicaset::rules::owner::GITREPO_LABEL;
use crate::replicaset::rules::template_of;
use flotilla_api::v1::{
    LocalPlacementReference, Manifest, ManifestWorkReplicaSetSpec, ManifestWorkSpec,
    ManifestsTemplate, ObjectMeta, TemplateVariant,
};

/// A GitRepo's set at `template` with one variant per name of `variants`.
fn set(template: &str, variants: &[&str]) -> ManifestWorkReplicaSet {
    ManifestWorkReplicaSet {
        metadata: Some(ObjectMeta {
            name: "shop-web".into(),
            namespace: "default".into(),
            labels: [(GITREPO_LABEL.to_string(), "shop".to_string())].into(),
            generation: 1,
            ..Default::default()
        }),
        spec: Some(ManifestWorkReplicaSetSpec {
            manifest_work_template: Some(spec(template)),
            placement_refs: vec![LocalPlacementReference {
                name: "edge".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
        hub: Some(ReplicaSetHubState {
            variants: variants.iter().map(|v| variant(v)).collect(),
            ..Default::default()
        }),
    }
}

/// A template told apart by `marker`.
fn spec(marker: &str) -> ManifestWorkSpec {
    ManifestWorkSpec {
        workload: Some(ManifestsTemplate {
            manifests: vec![Manifest {
                raw: marker.as_bytes().to_vec(),
            }],
        }),
        ..Default::default()
    }
}

fn variant(name: &str) -> TemplateVariant {
    TemplateVariant {
        name: name.into(),
        template: Some(spec(name)),
        content: format!("{name:0<64}"),
        ..Default::default()
    }
}

fn names(rs: &ManifestWorkReplicaSet) -> Vec<String> {
    let hub = rs.hub.as_ref().unwrap();
    hub.variants.iter().map(|v| v.name.clone()).collect()
}

fn generation(rs: &ManifestWorkReplicaSet) -> i64 {
    rs.metadata.as_ref().unwrap().generation
}

#[test]
fn a_change_of_the_variants_alone_is_a_new_generation_with_an_undo_copy() {
    let stored = set("base", &["big-v1"]);
    let mut new = set("base", &["big-v2"]);
    assert!(next(stored.clone(), &mut new, true));
    assert_eq!(generation(&new), 2, "the variants changed: a new rollout");
    assert_eq!(names(&new), ["big-v2"]);
    let hub = new.hub.as_ref().unwrap();
    assert_eq!(hub.previous_template.as_ref(), template_of(&stored));
    let before: Vec<&str> = hub
        .previous_variants
        .as_ref()
        .unwrap()
        .variants
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(before, ["big-v1"]);

    // The same content again: the same generation, the undo copy left alone.
    let mut again = set("base", &["big-v2"]);
    assert!(!next(new.clone(), &mut again, true));
    assert_eq!(generation(&again), 2);
    assert_eq!(again.hub, new.hub);
}

#[test]
fn a_users_write_keeps_the_variants_and_copies_them_with_the_template() {
    let stored = set("base-1", &["big"]);
    // A user's (forced) apply carries no variants: the GitRepo's stay.
    let mut new = set("base-2", &[]);
    new.hub = None;
    assert!(next(stored, &mut new, false));
    assert_eq!(generation(&new), 2);
    assert_eq!(names(&new), ["big"]);
    let hub = new.hub.as_ref().unwrap();
    assert_eq!(hub.previous_template, Some(spec("base-1")));
    assert_eq!(hub.previous_variants.as_ref().unwrap().variants.len(), 1);
}

#[test]
fn undo_swaps_the_template_and_the_variants_together() {
    let stored = set("base-1", &["big-v1"]);
    let mut rs = set("base-2", &["big-v2", "lab"]);
    next(stored, &mut rs, true);
    undo(&mut rs).unwrap();
    assert_eq!(template_of(&rs), Some(&spec("base-1")));
    assert_eq!(
        names(&rs),
        ["big-v1"],
        "the variants went back with the base"
    );
    assert_eq!(generation(&rs), 3);
    // Undo again: forward to the newer content, whole.
    undo(&mut rs).unwrap();
    assert_eq!(template_of(&rs), Some(&spec("base-2")));
    assert_eq!(names(&rs), ["big-v2", "lab"]);
    assert_eq!(generation(&rs), 4);
}

#[test]
fn undo_is_refused_without_a_record_of_the_variants_before() {
    let mut nothing = set("base", &[]);
    let err = undo(&mut nothing).unwrap_err();
    assert!(err.contains("no previous template"), "{err}");

    // Stored before the variants were kept: a previous template, no previous variants.
    let mut legacy = set("base-2", &["big"]);
    legacy.hub.as_mut().unwrap().previous_template = Some(spec("base-1"));
    let before = legacy.clone();
    let err = undo(&mut legacy).unwrap_err();
    assert!(
        err.contains("flotilla rollout undo gitrepo shop -n default"),
        "{err}"
    );
    assert_eq!(legacy, before, "a refused undo changes nothing");

    // A plain set stored so: nothing to record, the undo goes on.
    let mut plain = set("base-2", &[]);
    plain.hub.as_mut().unwrap().previous_template = Some(spec("base-1"));
    undo(&mut plain).unwrap();
    assert_eq!(template_of(&plain), Some(&spec("base-1")));
}
