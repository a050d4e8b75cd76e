use super::*;

fn req(name: &str) -> RegistrationRequest {
    RegistrationRequest {
        cluster_name: name.into(),
        labels: [("env".to_string(), "prod".to_string())].into(),
        claims: vec![ClusterClaim {
            name: meta::CLAIM_PLATFORM.into(),
            value: "AWS".into(),
        }],
        capacity: [("cpu".to_string(), "8".to_string())].into(),
        kubernetes_version: "v1.30.0".into(),
        ..Default::default()
    }
}

fn taint_keys(c: &ManagedCluster) -> Vec<&str> {
    c.spec
        .as_ref()
        .unwrap()
        .taints
        .iter()
        .map(|t| t.key.as_str())
        .collect()
}

#[test]
fn new_clusters_wait_for_acceptance_in_the_default_set_and_are_unreachable() {
    let c = new_cluster(&req("c1"), &AutoAccept::default(), 60);
    assert!(!accepted(&c));
    assert_eq!(
        c.metadata.as_ref().unwrap().labels[CLUSTERSET_LABEL],
        "default"
    );
    assert_eq!(c.metadata.as_ref().unwrap().labels["env"], "prod");
    assert_eq!(taint_keys(&c), vec![TAINT_UNREACHABLE]);
    assert_eq!(c.status.as_ref().unwrap().capacity["cpu"], "8");
}

#[test]
fn auto_accept_honours_label_and_claim_selectors() {
    let mut auto = AutoAccept {
        enabled: true,
        labels: Some(selector::parse("env=prod").unwrap()),
        claims: None,
    };
    assert!(accepted(&new_cluster(&req("c1"), &auto, 60)));
    auto.claims = Some(selector::parse("platform.open-cluster-management.io=GCP").unwrap());
    assert!(!accepted(&new_cluster(&req("c1"), &auto, 60)));
    auto.enabled = false;
    auto.claims = None;
    assert!(!accepted(&new_cluster(&req("c1"), &auto, 60)));
}

#[test]
fn availability_drives_the_builtin_taints() {
    let mut c = new_cluster(&req("c1"), &AutoAccept::default(), 60);
    accept(&mut c, "HubClusterAdminAccepted", "");
    assert!(set_available(
        &mut c,
        status::TRUE,
        "ManagedClusterAvailable",
        ""
    ));
    assert!(taint_keys(&c).is_empty());
    assert!(set_available(&mut c, status::FALSE, "Unhealthy", ""));
    assert_eq!(taint_keys(&c), vec![TAINT_UNAVAILABLE]);
    assert!(set_available(
        &mut c,
        status::UNKNOWN,
        "ManagedClusterLeaseUpdateStopped",
        ""
    ));
    assert_eq!(taint_keys(&c), vec![TAINT_UNREACHABLE]);
    assert!(!set_available(
        &mut c,
        status::UNKNOWN,
        "ManagedClusterLeaseUpdateStopped",
        ""
    ));
}

#[test]
fn deny_flips_acceptance_and_marks_denied() {
    let mut c = new_cluster(&req("c1"), &AutoAccept::default(), 60);
    accept(&mut c, "HubClusterAdminAccepted", "");
    join(&mut c);
    set_available(&mut c, status::TRUE, "ManagedClusterAvailable", "");
    let gen_before = c.metadata.as_ref().unwrap().generation;
    assert!(deny(&mut c));
    assert!(!accepted(&c) && denied(&c));
    assert_eq!(available(&c), Some(status::UNKNOWN));
    assert!(c.metadata.as_ref().unwrap().generation > gen_before);
    assert!(accept(&mut c, "HubClusterAdminAccepted", ""));
    assert!(!denied(&c));
}

#[test]
fn taints_get_hub_time_and_builtin_taints_are_protected() {
    let mut c = new_cluster(&req("c1"), &AutoAccept::default(), 60);
    let gpu = Taint {
        key: "gpu".into(),
        value: "true".into(),
        effect: "NoSelect".into(),
        time_added: None,
    };
    assert!(apply_taints(&mut c, std::slice::from_ref(&gpu), &[]).unwrap());
    let t = c
        .spec
        .as_ref()
        .unwrap()
        .taints
        .iter()
        .find(|t| t.key == "gpu")
        .unwrap();
    assert!(t.time_added.is_some());
    assert!(
        !apply_taints(&mut c, &[gpu], &[]).unwrap(),
        "same taint twice is no change"
    );
    let bad = Taint {
        key: "x".into(),
        effect: "NoExecute".into(),
        ..Default::default()
    };
    assert!(
        apply_taints(&mut c, &[bad], &[])
            .unwrap_err()
            .to_string()
            .contains("taints[0].effect")
    );
    let builtin = TaintKey {
        key: TAINT_UNREACHABLE.into(),
        effect: String::new(),
    };
    assert!(apply_taints(&mut c, &[], &[builtin]).is_err());
    let rm = TaintKey {
        key: "gpu".into(),
        effect: String::new(),
    };
    assert!(apply_taints(&mut c, &[], &[rm]).unwrap());
}

#[test]
fn labels_are_validated_and_edited() {
    let mut c = new_cluster(&req("c1"), &AutoAccept::default(), 60);
    let set = [("tier".to_string(), "edge".to_string())].into();
    assert!(apply_labels(&mut c, &set, &["env".into()]).unwrap());
    let labels = &c.metadata.as_ref().unwrap().labels;
    assert_eq!(labels["tier"], "edge");
    assert!(!labels.contains_key("env"));
    let bad = [("bad key".to_string(), "x".to_string())].into();
    assert!(
        apply_labels(&mut c, &bad, &[])
            .unwrap_err()
            .to_string()
            .contains("labels")
    );
}

#[test]
fn registration_validation_names_the_field() {
    let mut r = req("Bad_Name");
    assert!(
        validate_registration(&r)
            .unwrap_err()
            .to_string()
            .starts_with("clusterName")
    );
    r = req("c1");
    r.claims.push(ClusterClaim {
        name: "x".into(),
        value: String::new(),
    });
    assert!(
        validate_registration(&r)
            .unwrap_err()
            .to_string()
            .contains("claims[1].value")
    );
    r = req("c1");
    for i in 0..=MAX_CUSTOM_CLAIMS {
        r.claims.push(ClusterClaim {
            name: format!("c{i}"),
            value: "v".into(),
        });
    }
    assert!(
        validate_registration(&r)
            .unwrap_err()
            .to_string()
            .contains("custom claims")
    );
}

fn with_key(name: &str, key: &str) -> RegistrationRequest {
    RegistrationRequest {
        agent_public_key: key.into(),
        ..req(name)
    }
}

#[test]
fn denied_clusters_get_no_credentials() {
    let mut c = new_cluster(&with_key("c1", "UA"), &AutoAccept::default(), 60);
    accept(&mut c, "HubClusterAdminAccepted", "accepted");
    deny(&mut c);
    assert!(!may_issue(&c, "UA"));
    assert!(!may_issue(&c, ""));
}

fn doc_spec(accept: bool, lease: i32, taints: &[(&str, &str)]) -> ManagedClusterSpec {
    ManagedClusterSpec {
        hub_accepts_client: accept,
        lease_duration_seconds: lease,
        taints: taints
            .iter()
            .map(|(k, e)| Taint {
                key: (*k).into(),
                value: String::new(),
                effect: (*e).into(),
                time_added: None,
            })
            .collect(),
    }
}

#[test]
fn a_precreated_cluster_is_accepted_as_documented_and_waits_for_its_agent_key() {
    let labels: HashMap<String, String> = [("region".to_string(), "eu".to_string())].into();
    let c = precreated(
        "edge-1",
        labels,
        &doc_spec(true, 0, &[("gpu", "NoSelect")]),
        60,
    )
    .unwrap();
    assert!(accepted(&c));
    let m = c.metadata.as_ref().unwrap();
    assert_eq!(m.labels["region"], "eu");
    assert_eq!(m.labels[CLUSTERSET_LABEL], DEFAULT_CLUSTERSET);
    let spec = c.spec.as_ref().unwrap();
    assert_eq!(spec.lease_duration_seconds, 60, "0 is the hub's default");
    let gpu = spec.taints.iter().find(|t| t.key == "gpu").unwrap();
    assert!(gpu.time_added.is_some(), "the hub stamps timeAdded");
    assert!(c.hub.as_ref().unwrap().agent_public_key.is_empty());
    // The first registration in plain mode records its key on the accepted cluster.
    let mut r = req("edge-1");
    r.agent_public_key = "UAGENT".into();
    let plain = registration::Context {
        policy: KeyPolicy::Record,
        auto: &AutoAccept::default(),
        default_lease_seconds: 60,
        now: 0,
    };
    let registration::Decision::Store { cluster: c, .. } =
        registration::decide(Some(&c), &r, registration::Credential::Unknown, &plain)
    else {
        panic!("not stored")
    };
    assert_eq!(c.hub.as_ref().unwrap().agent_public_key, "UAGENT");
    assert_eq!(
        c.metadata.as_ref().unwrap().labels.get("env"),
        None,
        "the document's labels are the hub's, the agent's are not taken"
    );
    let unaccepted = precreated("edge-2", HashMap::new(), &doc_spec(false, 30, &[]), 60).unwrap();
    assert!(!accepted(&unaccepted));
    assert_eq!(unaccepted.spec.as_ref().unwrap().lease_duration_seconds, 30);
}

#[test]
fn applying_a_document_removes_only_the_admin_taints_it_no_longer_lists() {
    let mut c = precreated(
        "edge-1",
        HashMap::new(),
        &doc_spec(true, 0, &[("gpu", "NoSelect"), ("maint", "PreferNoSelect")]),
        60,
    )
    .unwrap();
    reconcile_taints(&mut c);
    let wanted = doc_spec(true, 0, &[("gpu", "NoSelect")]).taints;
    let stale = admin_taints_not_in(&c, &wanted);
    assert_eq!(stale.len(), 1);
    assert_eq!(stale[0].key, "maint");
    assert!(
        stale.iter().all(|t| t.key != TAINT_UNREACHABLE),
        "the hub's own taints are never removed by a document"
    );
    let e = precreated(
        "x",
        HashMap::new(),
        &doc_spec(true, 0, &[("gpu", "NoSchedule")]),
        60,
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("spec.taints[0].effect"), "{e}");
}

fn managed(set: &str, name: &str) -> ClusterSetManagedNamespaceConfig {
    ClusterSetManagedNamespaceConfig {
        name: name.into(),
        cluster_set: set.into(),
        conditions: Vec::new(),
    }
}

fn applied(set: &str, name: &str) -> ClusterSetManagedNamespaceConfig {
    let mut n = managed(set, name);
    meta::set_condition(
        &mut n.conditions,
        meta::COND_NAMESPACE_AVAILABLE,
        status::TRUE,
        meta::REASON_NAMESPACE_APPLIED,
        "Namespace successfully applied and managed",
    );
    n
}

#[test]
fn managed_namespaces_keep_agent_conditions_of_entries_that_stay() {
    let mut c = new_cluster(&req("c1"), &AutoAccept::default(), 60);
    assert!(set_managed_namespaces(
        &mut c,
        vec![managed("b", "x"), managed("a", "y"), managed("a", "y")]
    ));
    let st = c.status.as_ref().unwrap();
    let keys: Vec<_> = st
        .managed_namespaces
        .iter()
        .map(|n| (n.cluster_set.as_str(), n.name.as_str()))
        .collect();
    assert_eq!(
        keys,
        [("a", "y"), ("b", "x")],
        "sorted by set, duplicates dropped"
    );
    assert!(
        agent_namespaces_behind(&c),
        "the agent has not reported yet"
    );

    let behind = apply_namespace_report(&mut c, &[applied("a", "y"), applied("b", "x")]);
    assert!(!behind);
    assert!(!agent_namespaces_behind(&c));

    // The set `b` drops x and adds z: y keeps its condition, z has none yet.
    assert!(set_managed_namespaces(
        &mut c,
        vec![managed("a", "y"), managed("b", "z")]
    ));
    let st = c.status.as_ref().unwrap();
    assert_eq!(st.managed_namespaces[0].conditions.len(), 1);
    assert!(st.managed_namespaces[1].conditions.is_empty());
    assert!(agent_namespaces_behind(&c));
    assert!(!set_managed_namespaces(
        &mut c,
        vec![managed("b", "z"), managed("a", "y")]
    ));

    // A stale report (still x) does not bring x back, and says the agent is behind.
    assert!(apply_namespace_report(
        &mut c,
        &[applied("a", "y"), applied("b", "x")]
    ));
    let names: Vec<_> = c
        .status
        .as_ref()
        .unwrap()
        .managed_namespaces
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["y", "z"]);
    assert_eq!(
        namespaces_for_agent(&c)
            .iter()
            .map(|n| n.conditions.len())
            .sum::<usize>(),
        0,
        "the agent is told names and sets only"
    );
}

#[test]
fn a_document_listing_the_hubs_taints_is_accepted_and_the_hub_owns_them() {
    // OCM's example of a pre-created cluster, saved from a live one: both hub taints listed.
    let doc = doc_spec(
        true,
        0,
        &[
            (TAINT_UNAVAILABLE, "NoSelect"),
            ("gpu", "NoSelect"),
            (TAINT_UNREACHABLE, "NoSelect"),
        ],
    );
    let (admin, warnings) = split_hub_taints(&doc.taints);
    assert_eq!(admin.len(), 1);
    assert_eq!(warnings.len(), 2);
    assert!(
        warnings[0].starts_with(&format!(
            "spec.taints[0]: {TAINT_UNAVAILABLE} is maintained"
        )),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].starts_with(&format!(
            "spec.taints[2]: {TAINT_UNREACHABLE} is maintained"
        )),
        "{}",
        warnings[1]
    );

    // Created ahead of its agent: the lease (none yet) decides, so only `unreachable`.
    let mut c = precreated("edge-1", HashMap::new(), &doc, 60).unwrap();
    let mut keys = taint_keys(&c);
    keys.sort_unstable();
    assert_eq!(keys, vec![TAINT_UNREACHABLE, "gpu"]);

    // Applied again to an Available cluster: the hub's clearing of its taints stands, the
    // admin's taint stays, and nothing the document says about hub taints is an error.
    assert!(set_available(&mut c, status::TRUE, "Leased", ""));
    assert_eq!(taint_keys(&c), vec!["gpu"]);
    assert!(
        !apply_document_taints(&mut c, &doc.taints).unwrap(),
        "no change"
    );
    assert_eq!(taint_keys(&c), vec!["gpu"]);

    // Applied to an unreachable cluster without the hub taints: the hub's taint stays.
    assert!(set_available(
        &mut c,
        status::UNKNOWN,
        "LeaseUpdateStopped",
        ""
    ));
    let without = doc_spec(true, 0, &[("gpu", "NoSelect")]);
    assert!(!apply_document_taints(&mut c, &without.taints).unwrap());
    let mut keys = taint_keys(&c);
    keys.sort_unstable();
    assert_eq!(keys, vec![TAINT_UNREACHABLE, "gpu"]);

    // A bad entry is named by its index in the document, hub taints counted.
    let bad = doc_spec(
        true,
        0,
        &[(TAINT_UNREACHABLE, "NoSelect"), ("gpu", "NoSchedule")],
    );
    let e = apply_document_taints(&mut c, &bad.taints)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("taints[1].effect"), "{e}");
}

#[test]
fn an_explicit_edit_of_a_hub_taint_is_still_refused() {
    let mut c = new_cluster(&req("c1"), &AutoAccept::default(), 60);
    let hub = Taint {
        key: TAINT_UNAVAILABLE.into(),
        effect: "NoSelect".into(),
        ..Default::default()
    };
    let e = apply_taints(&mut c, &[hub], &[]).unwrap_err().to_string();
    assert!(e.contains("is maintained by the hub"), "{e}");
}

#[test]
fn a_report_that_changes_only_the_hubs_notes_is_told_apart_from_one_that_changes_the_cluster() {
    let mut before = new_cluster(&req("edge-1"), &AutoAccept::default(), 60);
    let mut noted = before.clone();
    let hub = noted.hub.get_or_insert_with(Default::default);
    hub.last_sequence.insert("cluster".into(), 7);
    hub.last_status_hash = "abc".into();
    assert!(only_report_notes_changed(&before, &noted));
    let mut capacity = noted.clone();
    apply_report(
        &mut capacity,
        &HashMap::from([("cpu".to_string(), "64".to_string())]),
        &HashMap::new(),
        "v1.31.0",
        &[],
    );
    assert!(!only_report_notes_changed(&before, &capacity));
    let mut unhealthy = noted.clone();
    unhealthy
        .hub
        .get_or_insert_with(Default::default)
        .agent_healthy = false;
    before
        .hub
        .get_or_insert_with(Default::default)
        .agent_healthy = true;
    assert!(!only_report_notes_changed(&before, &unhealthy));
}

#[test]
fn a_cluster_has_joined_once_its_first_renewal_is_taken() {
    let mut c = new_cluster(&req("edge-1"), &AutoAccept::default(), 60);
    assert!(!joined(&c));
    assert!(join(&mut c));
    assert!(joined(&c));
    assert!(!join(&mut c), "joining again changes nothing");
}
