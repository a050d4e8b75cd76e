use super::*;
use crate::addon::rules::annotation;
use flotilla_api::v1::{
    Condition, Manifest, ManifestWorkSpec, ManifestWorkStatus, ManifestsTemplate, ObjectMeta,
};
use std::collections::HashMap;

fn hashes(h: &str) -> Hashes {
    Hashes::from([(
        "addontemplates.addon.open-cluster-management.io//t".to_string(),
        h.to_string(),
    )])
}

fn config_map(name: &str) -> Manifest {
    Manifest {
        raw: format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"ns"}}}}"#)
            .into_bytes(),
    }
}

/// Work `index` of add-on `a` holding ConfigMaps `maps`, rendered from `hash`.
fn work(index: usize, maps: &[&str], hash: &str) -> ManifestWork {
    ManifestWork {
        metadata: Some(ObjectMeta {
            name: addon::work_name("a", index),
            namespace: "c1".into(),
            annotations: HashMap::from([(
                addon::CONFIG_SPEC_HASH_ANNOTATION.to_string(),
                annotation(&hashes(hash)),
            )]),
            generation: 1,
            ..Default::default()
        }),
        spec: Some(ManifestWorkSpec {
            workload: Some(ManifestsTemplate {
                manifests: maps.iter().map(|m| config_map(m)).collect(),
            }),
            ..Default::default()
        }),
        status: None,
        hub: None,
    }
}

/// `w` as the agent reports it: these work conditions at its generation.
fn reported(mut w: ManifestWork, conditions: &[(&str, &str)]) -> ManifestWork {
    w.status = Some(ManifestWorkStatus {
        conditions: conditions
            .iter()
            .map(|(t, s)| Condition {
                r#type: t.to_string(),
                status: s.to_string(),
                observed_generation: 1,
                last_transition_time: Some(prost_types::Timestamp {
                    seconds: 1_800_000_000,
                    nanos: 0,
                }),
                ..Default::default()
            })
            .collect(),
        resource_status: None,
    });
    w
}

fn done(w: ManifestWork) -> ManifestWork {
    reported(w, &[("Applied", "True"), ("Available", "True")])
}

fn plan(apply: &[usize], delete: &[usize], held: bool) -> Sync {
    Sync {
        apply: apply.to_vec(),
        delete: delete.iter().map(|i| addon::work_name("a", *i)).collect(),
        held,
    }
}

#[test]
fn an_installation_is_done_only_when_every_work_is_at_the_target_and_succeeded() {
    let target = hashes("new");
    let status = |works: &[&ManifestWork]| rollout_status(works, &target).0;
    assert_eq!(status(&[]), Status::ToApply);
    let old = done(work(0, &["x"], "old"));
    assert_eq!(status(&[&old]), Status::ToApply);
    let (first, second) = (done(work(0, &["x"], "new")), done(work(1, &["y"], "new")));
    assert_eq!(status(&[&first, &second]), Status::Succeeded);
    assert!(!unfinished(&[&first, &second], &target));
    // A trailing work of the old render keeps it in progress, and the hub carries on with it.
    let trailing = done(work(1, &["y"], "old"));
    assert_eq!(status(&[&first, &trailing]), Status::Progressing);
    assert!(unfinished(&[&first, &trailing], &target));
    // One work still applying, or failed.
    let applying = work(1, &["y"], "new");
    assert_eq!(status(&[&first, &applying]), Status::Progressing);
    let failed = reported(work(1, &["y"], "new"), &[("Applied", "False")]);
    assert_eq!(status(&[&first, &failed]), Status::Failed);
}

#[test]
fn new_works_are_applied_highest_index_first_and_unchanged_ones_left_alone() {
    let desired = [work(0, &["x"], "h"), work(1, &["y"], "h")];
    assert_eq!(sync(&desired, &[]), plan(&[1, 0], &[], false));
    let on_cluster = [done(work(0, &["x"], "h")), work(1, &["y"], "h")];
    assert_eq!(
        sync(&desired, &[&on_cluster[0], &on_cluster[1]]),
        plan(&[], &[], false)
    );
    // A work of manifests the new render dropped altogether goes at once.
    let extra = done(work(2, &["gone"], "old"));
    assert_eq!(
        sync(&desired, &[&on_cluster[0], &on_cluster[1], &extra]),
        plan(&[], &[2], false)
    );
}

#[test]
fn a_shrinking_render_deletes_the_trailing_work_once_the_first_took_its_manifests_over() {
    let before = [done(work(0, &["x"], "v1")), done(work(1, &["y"], "v1"))];
    let desired = [work(0, &["x", "y"], "v2")];
    // The first work takes "y" over; the trailing one waits until it is applied.
    assert_eq!(
        sync(&desired, &[&before[0], &before[1]]),
        plan(&[0], &[], true)
    );
    let taken = work(0, &["x", "y"], "v2");
    assert_eq!(sync(&desired, &[&taken, &before[1]]), plan(&[], &[], true));
    let taken = reported(taken, &[("Applied", "True")]);
    assert_eq!(
        sync(&desired, &[&taken, &before[1]]),
        plan(&[], &[1], false)
    );
}

#[test]
fn a_growing_render_hands_the_tail_over_before_the_first_work_lets_it_go() {
    let before = done(work(0, &["x", "y"], "v1"));
    let desired = [work(0, &["x"], "v2"), work(1, &["y"], "v2")];
    // The new work takes "y" first; the first work keeps it meanwhile.
    assert_eq!(sync(&desired, &[&before]), plan(&[1], &[], true));
    let taking = work(1, &["y"], "v2");
    assert_eq!(sync(&desired, &[&before, &taking]), plan(&[], &[], true));
    let taken = reported(taking, &[("Applied", "True")]);
    assert_eq!(sync(&desired, &[&before, &taken]), plan(&[0], &[], false));
}

#[test]
fn works_swapping_manifests_go_ahead_rather_than_wait_forever() {
    let before = [done(work(0, &["x"], "v1")), done(work(1, &["y"], "v1"))];
    let desired = [work(0, &["y"], "v2"), work(1, &["x"], "v2")];
    assert_eq!(
        sync(&desired, &[&before[0], &before[1]]),
        plan(&[1, 0], &[], false)
    );
}

#[test]
fn a_work_being_deleted_is_waited_for() {
    let mut going = done(work(1, &["y"], "v1"));
    going.metadata.as_mut().unwrap().deletion_timestamp = Some(prost_types::Timestamp::default());
    let desired = [work(0, &["x"], "v2"), work(1, &["y"], "v2")];
    assert_eq!(sync(&desired, &[&going]), plan(&[0], &[], true));
    // A trailing work already on its way is left to go.
    let desired = [work(0, &["x"], "v2")];
    assert_eq!(sync(&desired, &[&going]), plan(&[0], &[], false));
}

#[test]
fn an_add_ons_deploy_works_are_found_by_name_and_ordered_by_index() {
    let named = |name: &str| {
        Arc::new(ManifestWork {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    };
    let found = deploy_works(
        "a",
        [
            named("addon-a-deploy-10"),
            named("addon-a-pre-delete"),
            named("addon-a-deploy-2"),
            named("addon-b-deploy-0"),
            named("web"),
            named("addon-a-deploy-0"),
        ],
    );
    let names: Vec<&str> = found
        .iter()
        .map(|w| w.metadata.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(
        names,
        ["addon-a-deploy-0", "addon-a-deploy-2", "addon-a-deploy-10"]
    );
}
