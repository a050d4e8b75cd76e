use super::*;
use flotilla_api::v1::{
    AddOnConfig, ClusterManagementAddOnSpec, ConfigMeta, ConfigReferent, ManagedClusterStatus,
    ManifestWorkStatus, ObjectMeta,
};
use std::collections::HashMap;

const T0: u64 = 1_800_000_000;

fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + s)
}

fn cma(name: &str) -> ClusterManagementAddOn {
    ClusterManagementAddOn {
        metadata: Some(ObjectMeta {
            name: name.into(),
            ..Default::default()
        }),
        spec: Some(ClusterManagementAddOnSpec {
            supported_configs: vec![ConfigMeta {
                group: addon::GROUP.into(),
                resource: addon::TEMPLATES.into(),
                default_config: Some(ConfigReferent {
                    namespace: String::new(),
                    name: "t1".into(),
                }),
            }],
            ..Default::default()
        }),
        status: None,
    }
}

fn mca(cluster: &str, name: &str) -> ManagedClusterAddOn {
    ManagedClusterAddOn {
        metadata: Some(ObjectMeta {
            name: name.into(),
            namespace: cluster.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn resolved(hash: &str) -> Vec<Resolved> {
    vec![Resolved {
        config: AddOnConfig {
            group: addon::GROUP.into(),
            resource: addon::TEMPLATES.into(),
            namespace: String::new(),
            name: "t1".into(),
        },
        hash: hash.into(),
        generation: 1,
    }]
}

fn work_with(hashes: &Hashes, conditions: &[(&str, &str)]) -> ManifestWork {
    let mut annotations = HashMap::new();
    annotations.insert(
        addon::CONFIG_SPEC_HASH_ANNOTATION.to_string(),
        annotation(hashes),
    );
    ManifestWork {
        metadata: Some(ObjectMeta {
            name: addon::work_name("a", 0),
            namespace: "c1".into(),
            annotations,
            generation: 1,
            ..Default::default()
        }),
        spec: None,
        status: Some(ManifestWorkStatus {
            conditions: conditions
                .iter()
                .map(|(t, s)| flotilla_api::v1::Condition {
                    r#type: t.to_string(),
                    status: s.to_string(),
                    observed_generation: 1,
                    last_transition_time: Some(prost_types::Timestamp {
                        seconds: (T0 + 5) as i64,
                        nanos: 0,
                    }),
                    ..Default::default()
                })
                .collect(),
            resource_status: None,
        }),
        hub: None,
    }
}

fn cluster_with(available: &str, reason: &str) -> ManagedCluster {
    ManagedCluster {
        metadata: Some(ObjectMeta {
            name: "c1".into(),
            ..Default::default()
        }),
        status: Some(ManagedClusterStatus {
            conditions: vec![flotilla_api::v1::Condition {
                r#type: meta::COND_AVAILABLE.into(),
                status: available.into(),
                reason: reason.into(),
                message: "cluster says so".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

struct Fixture {
    cma: ClusterManagementAddOn,
    mca: ManagedClusterAddOn,
    configs: Result<Vec<Resolved>, Vec<String>>,
    mode: Result<health::Mode, String>,
}

fn fixture(mode: health::Mode) -> Fixture {
    Fixture {
        cma: cma("a"),
        mca: mca("c1", "a"),
        configs: Ok(resolved("h1")),
        mode: Ok(mode),
    }
}

fn input<'a>(
    f: &'a Fixture,
    work: Option<&'a ManifestWork>,
    cluster: Option<&'a ManagedCluster>,
    lease: Option<SystemTime>,
    rollout: Status,
) -> StatusInput<'a> {
    StatusInput {
        cma: &f.cma,
        mca: &f.mca,
        works: work.into_iter().collect(),
        cluster,
        configs: &f.configs,
        mode: &f.mode,
        render_error: None,
        rollout,
        waiting: false,
        lease,
        grace: Duration::from_secs(300),
        install_namespace: addon::DEFAULT_INSTALL_NAMESPACE.into(),
        registrations: Vec::new(),
        now: at(100),
    }
}

fn condition<'a>(st: &'a ManagedClusterAddOnStatus, t: &str) -> &'a flotilla_api::v1::Condition {
    st.conditions
        .iter()
        .find(|c| c.r#type == t)
        .unwrap_or_else(|| panic!("no {t} condition in {:?}", st.conditions))
}

#[test]
fn the_annotation_round_trips_and_names_its_configs() {
    let h = hashes(&resolved("abc"));
    let w = work_with(&h, &[]);
    assert_eq!(released(Some(&w)), Some(h.clone()));
    let key = h.keys().next().unwrap();
    assert_eq!(
        parse_config_key(key),
        Some((
            addon::GROUP.to_string(),
            addon::TEMPLATES.to_string(),
            String::new(),
            "t1".to_string()
        ))
    );
    assert_eq!(released(None), None);
}

#[test]
fn a_cluster_is_to_apply_until_its_work_carries_the_target_hashes() {
    let target = hashes(&resolved("new"));
    let old = work_with(
        &hashes(&resolved("old")),
        &[("Applied", "True"), ("Available", "True")],
    );
    assert_eq!(rollout_status(&[&old], &target).0, Status::ToApply);
    assert_eq!(rollout_status(&[], &target).0, Status::ToApply);
    let progressing = work_with(&target, &[]);
    assert_eq!(
        rollout_status(&[&progressing], &target).0,
        Status::Progressing
    );
    let done = work_with(&target, &[("Applied", "True"), ("Available", "True")]);
    let (status, since) = rollout_status(&[&done], &target);
    assert_eq!(status, Status::Succeeded);
    assert_eq!(since, Some(at(5)));
    let failed = work_with(&target, &[("Applied", "False")]);
    assert_eq!(rollout_status(&[&failed], &target).0, Status::Failed);
}

#[test]
fn an_unknown_cluster_makes_its_add_ons_unknown_with_the_clusters_reason() {
    let f = fixture(health::Mode::Lease);
    let cluster = cluster_with(status::UNKNOWN, "ManagedClusterLeaseUpdateStopped");
    let st = status(&input(
        &f,
        None,
        Some(&cluster),
        Some(at(99)),
        Status::Succeeded,
    ));
    let c = condition(&st, cond::AVAILABLE);
    assert_eq!(c.status, status::UNKNOWN);
    assert_eq!(c.reason, "ManagedClusterLeaseUpdateStopped");
    assert_eq!(c.message, "cluster says so");
}

#[test]
fn lease_health_follows_the_grace() {
    let f = fixture(health::Mode::Lease);
    let cluster = cluster_with(status::TRUE, "ManagedClusterAvailable");
    let fresh = status(&input(
        &f,
        None,
        Some(&cluster),
        Some(at(0)),
        Status::Succeeded,
    ));
    assert_eq!(condition(&fresh, cond::AVAILABLE).status, status::TRUE);
    assert_eq!(fresh.health_check.as_ref().unwrap().mode, "Lease");
    let mut late = input(&f, None, Some(&cluster), Some(at(0)), Status::Succeeded);
    late.now = at(301);
    let stale = status(&late);
    assert_eq!(condition(&stale, cond::AVAILABLE).status, status::FALSE);
    assert_eq!(
        condition(&stale, cond::AVAILABLE).reason,
        "ManagedClusterAddOnLeaseUpdateStopped"
    );
    let none = status(&input(&f, None, Some(&cluster), None, Status::Succeeded));
    assert_eq!(condition(&none, cond::AVAILABLE).status, status::UNKNOWN);
    assert_eq!(
        lease_recheck(Some(at(0)), at(100), Duration::from_secs(300)),
        Some(Duration::from_millis(200_050))
    );
    assert_eq!(
        lease_recheck(Some(at(0)), at(400), Duration::from_secs(300)),
        None
    );
}

#[test]
fn config_references_show_what_was_released_and_what_was_applied() {
    let f = fixture(health::Mode::WorkStatus);
    let target = hashes(&resolved("h1"));
    let w = work_with(&target, &[]);
    let st = status(&input(&f, Some(&w), None, None, Status::Progressing));
    let r = &st.config_references[0];
    assert_eq!(r.desired_config.as_ref().unwrap().spec_hash, "h1");
    assert_eq!(r.last_applied_config, None);
    assert_eq!(condition(&st, cond::PROGRESSING).status, status::TRUE);
    let done = work_with(&target, &[("Applied", "True"), ("Available", "True")]);
    let st = status(&input(&f, Some(&done), None, None, Status::Succeeded));
    let r = &st.config_references[0];
    assert_eq!(r.last_applied_config.as_ref().unwrap().spec_hash, "h1");
    assert_eq!(condition(&st, cond::PROGRESSING).reason, "Completed");
    assert_eq!(condition(&st, cond::MANIFEST_APPLIED).status, status::TRUE);
}

#[test]
fn unresolvable_configs_say_why_and_touch_nothing_else() {
    let mut f = fixture(health::Mode::WorkStatus);
    f.configs = Err(vec!["spec.configs[0]: not supported".into()]);
    let st = status(&input(&f, None, None, None, Status::Skip));
    let c = condition(&st, cond::CONFIGURED);
    assert_eq!(c.status, status::FALSE);
    assert!(c.message.contains("spec.configs[0]"), "{}", c.message);
    assert_eq!(
        condition(&st, cond::PROGRESSING).reason,
        "ConfigurationUnsupported"
    );
}

#[test]
fn a_render_error_is_reported_on_manifest_applied() {
    let f = fixture(health::Mode::WorkStatus);
    let mut i = input(&f, None, None, None, Status::ToApply);
    i.render_error = Some("spec.agentSpec.workload.manifests[0]: unknown variable {{X}}");
    let st = status(&i);
    let c = condition(&st, cond::MANIFEST_APPLIED);
    assert_eq!(c.status, status::FALSE);
    assert!(c.message.contains("unknown variable"));
}

#[test]
fn hub_checks_name_the_field() {
    let mut x = cma("bad.name");
    x.spec.as_mut().unwrap().supported_configs.clear();
    let errors = hub_checks(&x);
    assert!(
        errors.iter().any(|e| e.starts_with("metadata.name")),
        "{errors:?}"
    );
    assert_eq!(
        errors.len(),
        1,
        "an add-on without a template is not an error: {errors:?}"
    );
    assert!(hub_checks(&cma("good")).is_empty());
}

#[test]
fn an_add_on_without_a_template_is_managed_by_someone_else() {
    let mut a = cma("helloworld");
    assert_eq!(kind_of(&a), AddOnKind::Template);
    a.spec.as_mut().unwrap().supported_configs = vec![ConfigMeta {
        group: addon::GROUP.into(),
        resource: addon::DEPLOYMENT_CONFIGS.into(),
        default_config: None,
    }];
    assert_eq!(kind_of(&a), AddOnKind::External);
    assert!(hub_checks(&a).is_empty());

    let mut installed = mca("c1", "helloworld");
    installed.spec = Some(flotilla_api::v1::ManagedClusterAddOnSpec {
        install_namespace: "hello-ns".into(),
        ..Default::default()
    });
    // Left over from when it was a template add-on: dropped.
    let mut old = ManagedClusterAddOnStatus::default();
    meta::set_condition(
        &mut old.conditions,
        cond::MANIFEST_APPLIED,
        status::TRUE,
        "x",
        "",
    );
    installed.status = Some(old);
    let input = |lease: Option<SystemTime>, cluster: Option<&ManagedCluster>| {
        external_status(&ExternalInput {
            cma: &a,
            mca: &installed,
            cluster,
            lease,
            spoke: None,
            grace: Duration::from_secs(300),
            now: at(100),
        })
    };
    let st = input(None, None);
    assert_eq!(st.namespace, "hello-ns");
    assert_eq!(st.health_check.as_ref().unwrap().mode, "Lease");
    assert_eq!(st.conditions.len(), 1, "{st:?}");
    let c = condition(&st, cond::AVAILABLE);
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        (status::UNKNOWN, "ManagedClusterAddOnLeaseNotFound")
    );
    let c = condition(&input(Some(at(50)), None), cond::AVAILABLE).clone();
    assert_eq!(c.status, status::TRUE);
    let c = condition(
        &input(Some(at(0) - Duration::from_secs(300)), None),
        cond::AVAILABLE,
    )
    .clone();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        (status::FALSE, "ManagedClusterAddOnLeaseUpdateStopped")
    );
    // The cluster's own Unknown wins over a fresh lease.
    let mut gone = ManagedCluster::default();
    meta::set_condition(
        &mut gone.status.get_or_insert_with(Default::default).conditions,
        meta::COND_AVAILABLE,
        status::UNKNOWN,
        "ManagedClusterLeaseUpdateStopped",
        "stopped",
    );
    let c = condition(&input(Some(at(50)), Some(&gone)), cond::AVAILABLE).clone();
    assert_eq!(c.status, status::UNKNOWN);
}

#[test]
fn a_fresh_lease_of_either_kind_makes_an_external_add_on_available() {
    let a = cma("helloworld");
    let installed = mca("c1", "helloworld");
    let spoke = |st: &str| flotilla_api::v1::AddOnHealth {
        addon: "helloworld".into(),
        install_namespace: "open-cluster-management-agent-addon".into(),
        status: st.into(),
        reason: String::new(),
        message: format!("spoke says {st}"),
    };
    let available = |lease: Option<SystemTime>,
                     reported: Option<&flotilla_api::v1::AddOnHealth>| {
        let st = external_status(&ExternalInput {
            cma: &a,
            mca: &installed,
            cluster: None,
            lease,
            spoke: reported,
            grace: Duration::from_secs(300),
            now: at(1000),
        });
        let c = condition(&st, cond::AVAILABLE);
        (c.status.clone(), c.reason.clone(), c.message.clone())
    };
    let fresh = Some(at(900));
    let stale = Some(at(0));
    let (t, f, u) = (
        spoke(status::TRUE),
        spoke(status::FALSE),
        spoke(status::UNKNOWN),
    );
    // Only the spoke Lease (an add-on agent that does not speak NATS): its verdict, its reason.
    assert_eq!(
        available(None, Some(&t)),
        (
            status::TRUE.into(),
            "ManagedClusterAddOnLeaseUpdated".into(),
            "spoke says True".into()
        )
    );
    assert_eq!(
        available(None, Some(&f)).1,
        "ManagedClusterAddOnLeaseUpdateStopped"
    );
    assert_eq!(
        available(None, Some(&u)).1,
        "ManagedClusterAddOnLeaseNotFound"
    );
    // A fresh lease of either kind wins.
    assert_eq!(available(stale, Some(&t)).0, status::TRUE);
    assert_eq!(available(fresh, Some(&f)).0, status::TRUE);
    assert_eq!(available(fresh, Some(&u)).0, status::TRUE);
    // An add-on agent that renewed a NATS lease once and stopped: stopped, whatever the spoke
    // says of a Lease it never had.
    assert_eq!(available(stale, Some(&u)).0, status::FALSE);
    assert_eq!(available(stale, None).0, status::FALSE);
    assert_eq!(available(None, None).1, "ManagedClusterAddOnLeaseNotFound");
}

#[test]
fn the_lifecycle_annotation_says_who_installs_the_add_on() {
    let mut a = cma("hello");
    assert_eq!(lifecycle_of(&a), Lifecycle::AddOnManager, "absent");
    let annotate = |a: &mut ClusterManagementAddOn, v: &str| {
        a.metadata
            .as_mut()
            .unwrap()
            .annotations
            .insert(addon::LIFECYCLE_ANNOTATION.into(), v.into());
    };
    annotate(&mut a, addon::LIFECYCLE_SELF);
    assert_eq!(lifecycle_of(&a), Lifecycle::SelfManaged);
    annotate(&mut a, addon::LIFECYCLE_ADDON_MANAGER);
    assert_eq!(lifecycle_of(&a), Lifecycle::AddOnManager);
}
