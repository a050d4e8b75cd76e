use super::*;
use crate::cluster::rules::precreated;
use flotilla_api::v1::{ClusterClaim, ManagedClusterSpec};
use std::collections::HashMap;

const NOW: i64 = 1_000_000;

fn req(name: &str, key: &str) -> RegistrationRequest {
    RegistrationRequest {
        cluster_name: name.into(),
        agent_public_key: key.into(),
        kubernetes_version: "v1.30.0".into(),
        ..Default::default()
    }
}

fn claimed(mut r: RegistrationRequest, name: &str, value: &str) -> RegistrationRequest {
    r.claims.push(ClusterClaim {
        name: name.into(),
        value: value.into(),
    });
    r
}

fn ctx(auto: &AutoAccept) -> Context<'_> {
    Context {
        policy: KeyPolicy::Pin,
        auto,
        default_lease_seconds: 60,
        now: NOW,
    }
}

fn stored(d: Decision) -> ManagedCluster {
    match d {
        Decision::Store { cluster, .. } => *cluster,
        other => panic!("expected Store, got {other:?}"),
    }
}

fn keys(c: &ManagedCluster) -> (&str, &str) {
    let h = c.hub.as_ref().unwrap();
    (&h.agent_public_key, &h.requested_public_key)
}

fn with_join(mut c: ManagedCluster, key: &str, accept: bool, expires: i64) -> ManagedCluster {
    let h = c.hub.get_or_insert_with(Default::default);
    h.join_key = key.into();
    h.join_accept = accept;
    h.join_expires = Some(prost_types::Timestamp {
        seconds: expires,
        nanos: 0,
    });
    c
}

fn ahead_of_agent(name: &str, accept: bool) -> ManagedCluster {
    precreated(
        name,
        HashMap::new(),
        &ManagedClusterSpec {
            hub_accepts_client: accept,
            ..Default::default()
        },
        60,
    )
    .unwrap()
}

#[test]
fn the_first_key_of_a_new_name_is_bound_and_a_second_key_is_refused_without_changing_anything() {
    let auto = AutoAccept::default();
    let c = stored(decide(
        None,
        &req("c1", "UA"),
        Credential::User("UBOOT"),
        &ctx(&auto),
    ));
    assert_eq!(keys(&c), ("UA", ""));
    assert!(!accepted(&c));
    let d = decide(
        Some(&c),
        &claimed(req("c1", "UEVIL"), "region", "evil"),
        Credential::User("UBOOT"),
        &ctx(&auto),
    );
    let Decision::Refuse { reason, message } = d else {
        panic!("{d:?}")
    };
    assert_eq!(reason, "key_mismatch");
    assert!(message.contains(&fingerprint::of("UEVIL")), "{message}");
    assert!(message.contains(&fingerprint::of("UA")), "{message}");
}

#[test]
fn another_key_cannot_rewrite_an_accepted_clusters_claims_capacity_or_version() {
    let auto = AutoAccept::default();
    let mut c = stored(decide(
        None,
        &claimed(req("c1", "UA"), "region", "eu"),
        Credential::Unknown,
        &ctx(&auto),
    ));
    accept(&mut c, "HubClusterAdminAccepted", "accepted");
    let mut evil = claimed(req("c1", "UEVIL"), "region", "us");
    evil.kubernetes_version = "v0.0.1".into();
    evil.agent_version = "0.0.1-evil".into();
    evil.capacity.insert("cpu".into(), "9999".into());
    assert!(matches!(
        decide(Some(&c), &evil, Credential::User("UBOOT"), &ctx(&auto)),
        Decision::Refuse { .. }
    ));
    // The bound agent's own report is taken.
    let mut own = claimed(req("c1", "UA"), "region", "eu-west");
    own.agent_version = "0.1.2".into();
    let c2 = stored(decide(Some(&c), &own, Credential::User("UA"), &ctx(&auto)));
    let st = c2.status.unwrap();
    assert_eq!(st.cluster_claims[0].value, "eu-west");
    assert_eq!(st.version.unwrap().agent, "0.1.2");
}

#[test]
fn the_agent_version_is_recorded_from_the_first_registration_and_bounded() {
    let auto = AutoAccept::default();
    let mut first = req("c1", "UA");
    first.agent_version = "0.1.0".into();
    let c = stored(decide(None, &first, Credential::Unknown, &ctx(&auto)));
    let version = c.status.as_ref().and_then(|s| s.version.clone()).unwrap();
    assert_eq!(version.agent, "0.1.0");
    let mut long = req("c1", "UA");
    long.agent_version = format!("0.1.0-{}", "é".repeat(100));
    let c = stored(decide(Some(&c), &long, Credential::User("UA"), &ctx(&auto)));
    let agent = c.status.unwrap().version.unwrap().agent;
    assert!(agent.len() <= 64 && agent.starts_with("0.1.0-é"), "{agent}");
}

#[test]
fn a_refused_agent_version_is_recorded_only_from_the_clusters_own_agent() {
    use flotilla_api::meta::{COND_AGENT_VERSION_ACCEPTED, find_condition};
    let auto = AutoAccept::default();
    let mut first = req("c1", "UA");
    first.agent_version = "0.1.0".into();
    let mut c = stored(decide(None, &first, Credential::User("UA"), &ctx(&auto)));
    accept(&mut c, "HubClusterAdminAccepted", "accepted");
    let condition = |c: &ManagedCluster| {
        let conditions = &c.status.as_ref().unwrap().conditions;
        let found = find_condition(conditions, COND_AGENT_VERSION_ACCEPTED).cloned();
        found.map(|f| (f.status, f.reason, f.message))
    };
    assert_eq!(
        condition(&c),
        Some((
            "True".into(),
            "AgentVersionAccepted".into(),
            "this hub accepts agent version 0.1.0".into()
        ))
    );
    let mut upgraded = req("c1", "UA");
    upgraded.agent_version = "0.4.0".into();
    let why = format!(
        "agent version 0.4.0 is newer than this hub accepts{}",
        "!".repeat(600)
    );
    // Another key, or the bound key over the shared bootstrap credential: nothing changes.
    let evil = req("c1", "UEVIL");
    assert!(version_refused(&c, &evil, Credential::User("UEVIL"), &ctx(&auto), &why).is_none());
    assert!(version_refused(&c, &upgraded, Credential::User("UBOOT"), &ctx(&auto), &why).is_none());
    // The cluster's own agent: the version and the refusal (bounded) are recorded, once.
    let refused = version_refused(&c, &upgraded, Credential::User("UA"), &ctx(&auto), &why)
        .expect("recorded");
    let (status, reason, message) = condition(&refused).unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "AgentVersionRefused")
    );
    assert!(message.len() <= 512 && message.starts_with("agent version 0.4.0"));
    assert_eq!(
        refused
            .status
            .as_ref()
            .unwrap()
            .version
            .as_ref()
            .unwrap()
            .agent,
        "0.4.0"
    );
    assert!(
        version_refused(
            &refused,
            &upgraded,
            Credential::User("UA"),
            &ctx(&auto),
            &why
        )
        .is_none(),
        "said already: no write"
    );
    // Accepted again at its next registration.
    let back = stored(decide(
        Some(&refused),
        &first,
        Credential::User("UA"),
        &ctx(&auto),
    ));
    assert_eq!(condition(&back).map(|c| c.0), Some("True".into()));
}

#[test]
fn a_name_created_ahead_of_its_agent_is_never_bound_through_the_shared_bootstrap() {
    let auto = AutoAccept {
        enabled: true,
        ..Default::default()
    };
    let c = ahead_of_agent("edge-1", true);
    let c = stored(decide(
        Some(&c),
        &req("edge-1", "UATTACKER"),
        Credential::User("UBOOT"),
        &ctx(&auto),
    ));
    assert_eq!(keys(&c), ("", "UATTACKER"), "the key only waits");
    assert!(!accepted_for(&c, "UATTACKER", KeyPolicy::Pin));
    // A second key is refused; the first waiting one stays.
    assert!(matches!(
        decide(
            Some(&c),
            &req("edge-1", "UOTHER"),
            Credential::User("UBOOT"),
            &ctx(&auto)
        ),
        Decision::Refuse { .. }
    ));
}

#[test]
fn a_join_credential_binds_its_name_replaces_a_bootstrap_racer_and_pre_approves() {
    let auto = AutoAccept::default();
    // A racer registered the pending name first through the shared bootstrap credential.
    let c = stored(decide(
        None,
        &req("edge-1", "URACER"),
        Credential::User("UBOOT"),
        &ctx(&auto),
    ));
    let c = with_join(c, "UJOIN", true, NOW + 3600);
    let c = stored(decide(
        Some(&c),
        &req("edge-1", "UREAL"),
        Credential::User("UJOIN"),
        &ctx(&auto),
    ));
    assert_eq!(keys(&c), ("UREAL", ""));
    assert!(accepted_for(&c, "UREAL", KeyPolicy::Pin));
    // The racer is refused from then on.
    assert!(matches!(
        decide(
            Some(&c),
            &req("edge-1", "URACER"),
            Credential::User("UBOOT"),
            &ctx(&auto)
        ),
        Decision::Refuse { .. }
    ));
}

#[test]
fn an_expired_or_foreign_join_credential_binds_nothing() {
    let auto = AutoAccept::default();
    let c = with_join(ahead_of_agent("edge-1", false), "UJOIN", true, NOW - 1);
    let c2 = stored(decide(
        Some(&c),
        &req("edge-1", "UA"),
        Credential::User("UJOIN"),
        &ctx(&auto),
    ));
    assert_eq!(keys(&c2), ("", "UA"), "expired: the key only waits");
    let c = with_join(ahead_of_agent("edge-1", false), "UJOIN", true, NOW + 60);
    let c3 = stored(decide(
        Some(&c),
        &req("edge-1", "UA"),
        Credential::User("UBOOT"),
        &ctx(&auto),
    ));
    assert_eq!(keys(&c3), ("", "UA"));
    assert!(!accepted(&c3));
}

#[test]
fn a_rebuilt_spoke_with_a_join_credential_waits_for_accept_by_fingerprint() {
    let auto = AutoAccept::default();
    let mut c = stored(decide(
        None,
        &req("edge-1", "UOLD"),
        Credential::Unknown,
        &ctx(&auto),
    ));
    accept(&mut c, "HubClusterAdminAccepted", "accepted");
    let c = with_join(c, "UJOIN", true, NOW + 60);
    let mut c = stored(decide(
        Some(&c),
        &req("edge-1", "UNEW"),
        Credential::User("UJOIN"),
        &ctx(&auto),
    ));
    assert_eq!(
        keys(&c),
        ("UOLD", "UNEW"),
        "a bound key is never rebound by a credential"
    );
    assert!(matches!(
        accept_key(&mut c.clone(), None),
        Err(AcceptError::NameTheKey { .. })
    ));
    assert!(matches!(
        accept_key(&mut c.clone(), Some("0000:0000:0000:0000")),
        Err(AcceptError::NoSuchKey { .. })
    ));
    let old = accept_key(&mut c, Some(&fingerprint::of("UNEW"))).unwrap();
    assert_eq!(old.as_deref(), Some("UOLD"));
    assert_eq!(keys(&c), ("UNEW", ""));
}

#[test]
fn auto_accept_takes_only_a_new_names_first_key() {
    let auto = AutoAccept {
        enabled: true,
        ..Default::default()
    };
    let c = stored(decide(
        None,
        &req("c1", "UA"),
        Credential::User("UBOOT"),
        &ctx(&auto),
    ));
    assert!(accepted_for(&c, "UA", KeyPolicy::Pin));
    let pre = ahead_of_agent("c2", false);
    let pre = stored(decide(
        Some(&pre),
        &req("c2", "UA"),
        Credential::User("UBOOT"),
        &ctx(&auto),
    ));
    assert!(
        !accepted(&pre),
        "auto-accept never binds a name created ahead of its agent"
    );
}

#[test]
fn plain_mode_records_the_latest_key() {
    let auto = AutoAccept::default();
    let mut c = stored(decide(
        None,
        &req("c1", "UA"),
        Credential::Unknown,
        &ctx(&auto),
    ));
    accept(&mut c, "HubClusterAdminAccepted", "accepted");
    let plain = Context {
        policy: KeyPolicy::Record,
        ..ctx(&auto)
    };
    let c = stored(decide(
        Some(&c),
        &req("c1", "UB"),
        Credential::Unknown,
        &plain,
    ));
    assert_eq!(keys(&c), ("UB", ""));
    assert!(accepted_for(&c, "anything", KeyPolicy::Record));
}

#[test]
fn denied_clusters_stay_denied() {
    let auto = AutoAccept::default();
    let mut c = stored(decide(
        None,
        &req("c1", "UA"),
        Credential::Unknown,
        &ctx(&auto),
    ));
    crate::cluster::rules::deny(&mut c);
    assert_eq!(
        decide(Some(&c), &req("c1", "UA"), Credential::Unknown, &ctx(&auto)),
        Decision::Denied
    );
}

#[test]
fn the_bound_key_through_the_shared_bootstrap_changes_no_claims() {
    let auto = AutoAccept {
        enabled: true,
        claims: Some(flotilla_api::v1::LabelSelector {
            match_labels: [("region".to_string(), "trusted".to_string())].into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    // Pending: its claims did not match the auto-accept policy at creation.
    let c = stored(decide(
        None,
        &claimed(req("c1", "UA"), "region", "eu"),
        Credential::User("UBOOT"),
        &ctx(&auto),
    ));
    assert!(!accepted(&c));
    // Someone who learnt the public key UA sends claims the policy would accept.
    let d = decide(
        Some(&c),
        &claimed(req("c1", "UA"), "region", "trusted"),
        Credential::User("UBOOT"),
        &ctx(&auto),
    );
    let Decision::Store { cluster, changed } = d else {
        panic!("{d:?}")
    };
    assert!(!changed, "nothing changes");
    assert!(!accepted(&cluster));
    assert_eq!(cluster.status.unwrap().cluster_claims[0].value, "eu");
}

#[test]
fn the_key_that_came_with_a_join_credential_is_remembered() {
    let auto = AutoAccept::default();
    let c = with_join(ahead_of_agent("edge-1", false), "UJOIN", false, NOW + 60);
    let c = stored(decide(
        Some(&c),
        &req("edge-1", "UA"),
        Credential::User("UJOIN"),
        &ctx(&auto),
    ));
    assert_eq!(c.hub.as_ref().unwrap().join_bound_key, "UA");
}

#[test]
fn a_busy_answer_names_the_request_and_the_wait() {
    let request = RegistrationRequest {
        cluster_name: "edge-1".into(),
        request_id: "r1".into(),
        ..Default::default()
    };
    let answer = busy(&request, Duration::from_millis(1500));
    assert_eq!(answer.state, RegistrationState::Busy as i32);
    assert_eq!(answer.cluster_name, "edge-1");
    assert_eq!(answer.retry_after_ms, 1500);
    assert_eq!(answer.in_reply_to, "r1");
    assert!(
        answer.message.contains("ask again in 1.5 s"),
        "{}",
        answer.message
    );
    let without_id = RegistrationRequest {
        cluster_name: "edge-1".into(),
        ..Default::default()
    };
    assert_eq!(in_reply_to(&without_id), "-");
    let long = RegistrationRequest {
        request_id: "x".repeat(100),
        ..Default::default()
    };
    assert_eq!(in_reply_to(&long).len(), 64);
}

fn labelled(mut r: RegistrationRequest, labels: &[(&str, &str)]) -> RegistrationRequest {
    r.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    r
}

fn labels(c: &ManagedCluster) -> &HashMap<String, String> {
    &c.metadata.as_ref().unwrap().labels
}

#[test]
fn registrant_labels_drop_the_set_and_every_reserved_key_and_keep_the_rest() {
    let asked: HashMap<String, String> = [
        (CLUSTERSET_LABEL, "prod"),
        ("feature.open-cluster-management.io/addon-x", "available"),
        ("cluster.flotilla.io/tier", "gold"),
        ("name", "prod-1"),
        ("env", "lab"),
        ("example.com/team", "a"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let split = registrant_labels(&asked);
    assert_eq!(
        split.kept,
        [("env", "lab"), ("example.com/team", "a")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<HashMap<_, _>>()
    );
    assert_eq!(
        split.dropped.keys().map(String::as_str).collect::<Vec<_>>(),
        vec![
            "cluster.flotilla.io/tier",
            CLUSTERSET_LABEL,
            "feature.open-cluster-management.io/addon-x",
            "name"
        ]
    );
    assert!(dropped_note(&split).contains("cluster.open-cluster-management.io/clusterset=prod"));
    assert_eq!(dropped_note(&registrant_labels(&HashMap::new())), "");
}

#[test]
fn a_new_cluster_naming_a_set_stays_in_default_and_remembers_what_it_asked_for() {
    let auto = AutoAccept::default();
    let r = labelled(
        req("c1", "UA"),
        &[(CLUSTERSET_LABEL, "prod"), ("env", "lab")],
    );
    let c = stored(decide(None, &r, Credential::User("UBOOT"), &ctx(&auto)));
    assert_eq!(labels(&c).get(CLUSTERSET_LABEL).unwrap(), "default");
    assert_eq!(labels(&c).get("env").unwrap(), "lab");
    let hub = c.hub.as_ref().unwrap();
    assert_eq!(hub.dropped_labels.get(CLUSTERSET_LABEL).unwrap(), "prod");
    assert!(!hub.dropped_labels.contains_key("env"));
}

#[test]
fn auto_accept_on_a_set_the_registrant_names_admits_nothing() {
    // An auto-accept selector on the set label: a registrant naming the set in its labels
    // is not admitted by it, and never lands in that set either.
    let auto = AutoAccept {
        enabled: true,
        labels: Some(flotilla_api::selector::parse(&format!("{CLUSTERSET_LABEL}=prod")).unwrap()),
        claims: None,
    };
    let r = labelled(req("c1", "UA"), &[(CLUSTERSET_LABEL, "prod")]);
    let c = stored(decide(None, &r, Credential::User("UBOOT"), &ctx(&auto)));
    assert!(!accepted(&c));
    assert_eq!(labels(&c).get(CLUSTERSET_LABEL).unwrap(), "default");
    // Plain auto-accept admits it, in `default`.
    let any = AutoAccept {
        enabled: true,
        ..Default::default()
    };
    let c = stored(decide(None, &r, Credential::User("UBOOT"), &ctx(&any)));
    assert!(accepted(&c));
    assert_eq!(labels(&c).get(CLUSTERSET_LABEL).unwrap(), "default");
}

#[test]
fn a_join_credential_naming_a_set_puts_its_cluster_there_when_it_registers() {
    let auto = AutoAccept::default();
    let mut c = with_join(ahead_of_agent("edge-1", false), "UJOIN", true, NOW + 60);
    c.hub.as_mut().unwrap().join_cluster_set = "edge".into();
    assert_eq!(labels(&c).get(CLUSTERSET_LABEL).unwrap(), "default");
    // Not through the shared bootstrap credential, whatever the request's labels say.
    let r = labelled(req("edge-1", "UA"), &[(CLUSTERSET_LABEL, "prod")]);
    let through_bootstrap = stored(decide(Some(&c), &r, Credential::User("UBOOT"), &ctx(&auto)));
    assert_eq!(
        labels(&through_bootstrap).get(CLUSTERSET_LABEL).unwrap(),
        "default"
    );
    // Through the join credential: the set it names, not the one the request names.
    let joined = stored(decide(Some(&c), &r, Credential::User("UJOIN"), &ctx(&auto)));
    assert_eq!(labels(&joined).get(CLUSTERSET_LABEL).unwrap(), "edge");
    assert!(accepted(&joined));
    // A credential naming no set leaves the set alone.
    let plain = with_join(ahead_of_agent("edge-2", false), "UJOIN", false, NOW + 60);
    let joined = stored(decide(
        Some(&plain),
        &req("edge-2", "UA"),
        Credential::User("UJOIN"),
        &ctx(&auto),
    ));
    assert_eq!(labels(&joined).get(CLUSTERSET_LABEL).unwrap(), "default");
}

fn listens_under_prefix(c: &ManagedCluster) -> bool {
    c.hub.as_ref().is_some_and(|h| h.agent_listens_under_prefix)
}

#[test]
fn the_wire_is_recorded_from_registrations_whose_report_counts_only() {
    let auto = AutoAccept::default();
    let prefixed = |mut r: RegistrationRequest| {
        r.listens_under_prefix = true;
        r
    };
    // A new name records what its first registration says.
    let c = stored(decide(
        None,
        &prefixed(req("c1", "UA")),
        Credential::User("UBOOT"),
        &ctx(&auto),
    ));
    assert!(listens_under_prefix(&c));
    // The agent over its own credentials (its user is its key) changes it, and that is a
    // change to store.
    let d = decide(
        Some(&c),
        &req("c1", "UA"),
        Credential::User("UA"),
        &ctx(&auto),
    );
    let Decision::Store { cluster, changed } = d else {
        panic!("{d:?}")
    };
    assert!(changed && !listens_under_prefix(&cluster));
    // Someone with the shared bootstrap credential naming the bound key changes nothing: the
    // cluster's specs keep going where its agent listens.
    let d = decide(
        Some(&cluster),
        &prefixed(req("c1", "UA")),
        Credential::User("UBOOT"),
        &ctx(&auto),
    );
    let Decision::Store { cluster, changed } = d else {
        panic!("{d:?}")
    };
    assert!(!changed && !listens_under_prefix(&cluster));
    // Plain mode (the key recorded, no credentials): every registration counts.
    let record = Context {
        policy: KeyPolicy::Record,
        ..ctx(&auto)
    };
    let c = stored(decide(
        Some(&cluster),
        &prefixed(req("c1", "UA")),
        Credential::Unknown,
        &record,
    ));
    assert!(listens_under_prefix(&c));
}
