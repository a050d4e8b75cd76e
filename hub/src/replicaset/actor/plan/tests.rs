use super::*;
use flotilla_api::v1::{
    Condition, LocalPlacementReference, Manifest, ManifestWork, ManifestWorkReplicaSetSpec,
    ManifestWorkSpec, ManifestWorkStatus, ManifestsTemplate, ObjectMeta, ReplicaSetHubState,
    RolloutStrategy,
};
use flotilla_api::work::conditions::{APPLIED, AVAILABLE};

/// A replica set over the placements `refs`, each rolled out `All` at once unless its strategy
/// is given.
fn rs(refs: &[(&str, Option<RolloutStrategy>)]) -> ManifestWorkReplicaSet {
    ManifestWorkReplicaSet {
        metadata: Some(ObjectMeta {
            name: "web".into(),
            namespace: "default".into(),
            generation: 3,
            ..Default::default()
        }),
        spec: Some(ManifestWorkReplicaSetSpec {
            manifest_work_template: Some(ManifestWorkSpec {
                workload: Some(ManifestsTemplate {
                    manifests: vec![Manifest {
                        raw: br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}"#.to_vec(),
                    }],
                }),
                ..Default::default()
            }),
            placement_refs: refs
                .iter()
                .map(|(name, strategy)| LocalPlacementReference {
                    name: name.to_string(),
                    rollout_strategy: strategy.clone(),
                })
                .collect(),
            cascade_deletion_policy: String::new(),
        }),
        status: None,
        hub: None,
    }
}

fn decided(clusters: &[&str]) -> Option<Decided> {
    Some(Decided {
        scheduled: true,
        clusters: clusters
            .iter()
            .map(|c| (c.to_string(), GroupKey::default()))
            .collect(),
    })
}

/// The work of `r` on `cluster` from `placement`, applied and available when `done`.
fn work(r: &ManifestWorkReplicaSet, cluster: &str, placement: &str, done: bool) -> ManifestWork {
    let mut w = rules::work_for(
        r,
        cluster,
        placement,
        &rules::template_hash(r),
        rules::template_of(r),
    );
    if done {
        let ok = |t: &str| Condition {
            r#type: t.into(),
            status: status::TRUE.into(),
            ..Default::default()
        };
        w.status = Some(ManifestWorkStatus {
            conditions: vec![ok(APPLIED), ok(AVAILABLE)],
            resource_status: None,
        });
    }
    w
}

/// The works by cluster, as a reconcile reads them from the hub's store.
fn works(of: Vec<ManifestWork>) -> BTreeMap<String, WorkFacts> {
    of.into_iter()
        .map(|w| (w.metadata.as_ref().unwrap().namespace.clone(), w.into()))
        .collect()
}

fn condition(st: &ManifestWorkReplicaSetStatus, t: &str) -> (String, String) {
    let c = st.conditions.iter().find(|c| c.r#type == t).unwrap();
    assert_eq!(c.observed_generation, 3);
    (c.status.clone(), c.reason.clone())
}

fn decide(
    r: &ManifestWorkReplicaSet,
    w: &BTreeMap<String, WorkFacts>,
    p: &[Option<Decided>],
) -> Plan {
    plan(
        r,
        &rules::template_hash(r),
        &BTreeMap::new(),
        w,
        p,
        SystemTime::UNIX_EPOCH,
    )
}

#[test]
fn decided_clusters_get_the_template_and_an_earlier_placement_covers_a_cluster() {
    let r = rs(&[("a", None), ("b", None)]);
    let p = decide(
        &r,
        &BTreeMap::new(),
        &[decided(&["c1", "c2"]), decided(&["c2", "c3"])],
    );
    let start: Vec<(&str, &str)> = p
        .start
        .iter()
        .map(|(c, p)| (c.as_str(), p.as_str()))
        .collect();
    assert_eq!(start, vec![("c1", "a"), ("c2", "a"), ("c3", "b")]);
    assert!(!p.rolled_out && !p.empty);
    assert_eq!(p.summaries.len(), 2);
    assert!(p.remove.is_empty() && p.missing.is_empty());
}

#[test]
fn works_everywhere_decided_at_the_template_are_rolled_out() {
    let r = rs(&[("a", None)]);
    let w = works(vec![work(&r, "c1", "a", true)]);
    let mut p = decide(&r, &w, &[decided(&["c1"])]);
    assert!(p.rolled_out, "{p:?}");
    assert!(p.start.is_empty());
    let st = status(&r, &mut p, &w);
    assert_eq!(condition(&st, COND_PLACEMENT_VERIFIED).1, "AsExpected");
    assert_eq!(
        condition(&st, COND_PLACEMENT_ROLLED_OUT),
        ("True".into(), "Complete".into())
    );
    assert_eq!(
        condition(&st, COND_MANIFESTWORK_APPLIED),
        ("True".into(), "AsExpected".into())
    );
    assert_eq!(st.placement_summaries.len(), 1);
    assert!(p.summaries.is_empty());
}

#[test]
fn a_missing_placement_is_named_and_nothing_is_rolled_out() {
    let r = rs(&[("gone", None)]);
    let mut p = decide(&r, &BTreeMap::new(), &[None]);
    assert_eq!(p.missing, vec!["gone".to_string()]);
    assert!(!p.rolled_out && p.empty);
    let st = status(&r, &mut p, &BTreeMap::new());
    assert_eq!(
        condition(&st, COND_PLACEMENT_VERIFIED),
        ("False".into(), "PlacementDecisionNotFound".into())
    );
    assert_eq!(condition(&st, COND_PLACEMENT_ROLLED_OUT).1, "Progressing");
}

#[test]
fn a_placement_not_scheduled_yet_keeps_its_works_and_is_looked_at_again_soon() {
    let r = rs(&[("a", None)]);
    let w = works(vec![
        work(&r, "c1", "a", true),
        work(&r, "c2", "other", true),
    ]);
    let unscheduled = Some(Decided::default());
    let p = decide(&r, &w, &[unscheduled]);
    assert_eq!(p.remove, vec!["c2".to_string()]);
    assert_eq!(p.recheck, Some(UNSCHEDULED_RECHECK));
    assert!(!p.rolled_out && p.start.is_empty());
}

#[test]
fn clusters_that_left_the_decisions_lose_their_work_unless_it_is_being_deleted() {
    let r = rs(&[("a", None)]);
    let mut deleting = work(&r, "c3", "a", false);
    deleting.metadata.as_mut().unwrap().deletion_timestamp = Some(flotilla_api::meta::now());
    let w = works(vec![
        work(&r, "c1", "a", true),
        work(&r, "c2", "a", true),
        deleting,
    ]);
    let p = decide(&r, &w, &[decided(&["c1"])]);
    assert_eq!(p.remove, vec!["c2".to_string()]);
}

#[test]
fn no_decided_cluster_is_not_a_complete_rollout() {
    let r = rs(&[("a", None)]);
    let mut p = decide(&r, &BTreeMap::new(), &[decided(&[])]);
    assert!(p.empty && !p.rolled_out);
    let st = status(&r, &mut p, &BTreeMap::new());
    assert_eq!(
        condition(&st, COND_PLACEMENT_ROLLED_OUT),
        ("False".into(), "NoDecisions".into())
    );
    assert_eq!(
        condition(&st, COND_MANIFESTWORK_APPLIED),
        ("False".into(), "NotAsExpected".into())
    );
}

#[test]
fn a_bad_strategy_stops_its_placement() {
    let bad = RolloutStrategy {
        r#type: "Sideways".into(),
        ..Default::default()
    };
    let r = rs(&[("a", None), ("b", Some(bad.clone()))]);
    let mut p = decide(&r, &BTreeMap::new(), &[decided(&["c1"]), decided(&["c2"])]);
    let start: Vec<&str> = p.start.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(start, vec!["c1"]);
    assert!(!p.rolled_out);
    assert_eq!(p.stopped.len(), 1);
    assert!(
        p.stopped[0].contains("spec.placementRefs[1].rolloutStrategy.type"),
        "{:?}",
        p.stopped
    );
    let st = status(&r, &mut p, &BTreeMap::new());
    assert_eq!(condition(&st, COND_PLACEMENT_ROLLED_OUT).1, "Stopped");
    // Alone, it decides no cluster at all: that is what the status says first.
    let alone = rs(&[("b", Some(bad))]);
    let mut p = decide(&alone, &BTreeMap::new(), &[decided(&["c2"])]);
    assert!(p.start.is_empty() && p.empty);
    let st = status(&alone, &mut p, &BTreeMap::new());
    assert_eq!(condition(&st, COND_PLACEMENT_ROLLED_OUT).1, "NoDecisions");
}

#[test]
fn a_paused_replica_set_starts_nothing_and_says_so() {
    let mut r = rs(&[("a", None)]);
    r.hub = Some(ReplicaSetHubState {
        paused: true,
        ..Default::default()
    });
    let mut p = decide(&r, &BTreeMap::new(), &[decided(&["c1"])]);
    assert!(p.start.is_empty() && !p.rolled_out);
    assert_eq!(
        p.stopped.last().map(String::as_str),
        Some("paused (flotilla rollout resume)")
    );
    let st = status(&r, &mut p, &BTreeMap::new());
    assert_eq!(condition(&st, COND_PLACEMENT_ROLLED_OUT).1, "Paused");
}

#[test]
fn the_status_counts_each_decided_cluster_s_fleet_state_per_placement_and_in_all() {
    let r = rs(&[("a", None), ("b", None)]);
    let mut old = rs(&[("a", None)]);
    let template = old.spec.as_mut().unwrap().manifest_work_template.as_mut();
    template.unwrap().workload.as_mut().unwrap().manifests[0].raw =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"old","namespace":"default"}}"#
            .to_vec();
    let w = works(vec![
        work(&r, "c1", "a", true),
        work(&r, "c2", "a", false),
        work(&old, "c3", "b", true),
    ]);
    let mut p = decide(&r, &w, &[decided(&["c1", "c2"]), decided(&["c3", "c4"])]);
    let st = status(&r, &mut p, &w);
    let a = st.placement_summaries[0].states.unwrap();
    assert_eq!((a.ready, a.wait_applied), (1, 1), "{a:?}");
    let b = st.placement_summaries[1].states.unwrap();
    // c3's work is of another template; c4 has none (both are being started this round).
    assert_eq!((b.out_of_sync, b.pending), (1, 1), "{b:?}");
    let all = st.states.unwrap();
    assert_eq!(rules::state::total(&all), 4);
    assert_eq!(
        rules::state::worst(&all),
        Some(rules::state::State::WaitApplied)
    );
}
