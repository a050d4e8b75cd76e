//! Registration and health against a real nats-server: double opt-in, leases, taints, denial,
//! deletion, restarts of the hub and of NATS.

mod common;

use common::*;
use flotilla_api::meta::{
    CLAIM_ID, CLAIM_PLATFORM, CLUSTERSET_LABEL, COND_CLOCK_SYNCED, COND_HUB_ACCEPTED,
    COND_HUB_DENIED, COND_JOINED, TAINT_UNAVAILABLE, TAINT_UNREACHABLE,
};
use flotilla_api::v1::{
    ClusterNamesRequest, DeleteClusterRequest, LabelClusterRequest, ListClustersRequest,
    RegistrationRequest, RegistrationResponse, RegistrationState, SetLeaseDurationRequest, Taint,
    TaintClusterRequest, TaintKey,
};
use flotilla_bus::envelope::{Event, types};
use flotilla_bus::subjects;
use flotilla_testkit::NatsServer;
use std::time::Duration;

#[tokio::test]
async fn register_waits_pending_until_accepted_then_becomes_available() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let mut cfg = agent_config("edge-1", &nats.url());
    cfg.labels.insert("env".into(), "prod".into());
    let agent = start_agent(cfg);

    let pending = wait_cluster(&mut api, "edge-1", "registered", |_| true).await;
    assert!(!accepted(&pending), "new clusters wait for the admin");
    assert_eq!(condition(&pending, COND_HUB_ACCEPTED), None);
    assert_eq!(taints(&pending), vec![TAINT_UNREACHABLE]);
    let labels = &pending.metadata.as_ref().unwrap().labels;
    assert_eq!(labels["env"], "prod");
    assert_eq!(labels[CLUSTERSET_LABEL], "default");
    let claims = &pending.status.as_ref().unwrap().cluster_claims;
    assert!(claims.iter().any(|c| c.name == CLAIM_ID));
    assert!(
        claims
            .iter()
            .any(|c| c.name == CLAIM_PLATFORM && c.value == "AWS")
    );
    assert_eq!(pending.status.as_ref().unwrap().capacity["cpu"], "8");

    // Pending for a while: no lease, nothing joins.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let still = get(&mut api, "edge-1").await.unwrap();
    assert_eq!(condition(&still, COND_JOINED), None);

    accept(&mut api, "edge-1").await;
    // Available can come with the first status report (acceptance starts a lease grace) and
    // ClockSynced with the first renewal, in either order: wait for both.
    let c = wait_cluster(&mut api, "edge-1", "Available and ClockSynced", |c| {
        available(c).as_deref() == Some("True") && condition(c, COND_CLOCK_SYNCED).is_some()
    })
    .await;
    assert!(accepted(&c));
    assert_eq!(condition(&c, COND_HUB_ACCEPTED).as_deref(), Some("True"));
    assert_eq!(condition(&c, COND_JOINED).as_deref(), Some("True"));
    assert_eq!(condition(&c, COND_CLOCK_SYNCED).as_deref(), Some("True"));
    assert!(
        taints(&c).is_empty(),
        "no built-in taint on an available cluster: {:?}",
        taints(&c)
    );

    // It stays available while the agent renews (grace is 3 s; watch for 4 s).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let c = get(&mut api, "edge-1").await.unwrap();
    assert_eq!(available(&c).as_deref(), Some("True"));
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn auto_accept_with_a_selector_admits_only_matching_clusters() {
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.cluster.auto_accept = flotilla_hub::cluster::rules::AutoAccept {
        enabled: true,
        labels: Some(flotilla_api::selector::parse("env=lab").unwrap()),
        claims: None,
    };
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let mut lab = agent_config("lab-1", &nats.url());
    lab.labels.insert("env".into(), "lab".into());
    let mut prod = agent_config("prod-1", &nats.url());
    prod.labels.insert("env".into(), "prod".into());
    let a = start_agent(lab);
    let b = start_agent(prod);
    wait_cluster(&mut api, "lab-1", "auto-accepted and available", |c| {
        accepted(c) && available(c).as_deref() == Some("True")
    })
    .await;
    let p = wait_cluster(&mut api, "prod-1", "registered", |_| true).await;
    assert!(!accepted(&p));
    a.stop().await;
    b.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn stopped_agent_turns_unknown_and_unreachable_within_the_grace_and_recovers() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), "edge-2").await;
    // Between renewals the actor is idle: parked, no task (its lease deadline with the shard's
    // alarm task, which is what turns it Unknown below).
    let parked = || async {
        flotilla_testkit::eventually(SOON, "the idle actor parked", || async {
            metrics_text(&hub)
                .await
                .contains("flotilla_hub_cluster_actor_tasks 0\n")
                .then_some(())
        })
        .await
    };
    parked().await;

    agent.stop().await;
    let stopped = tokio::time::Instant::now();
    let c = wait_cluster(&mut api, "edge-2", "Unknown", |c| {
        available(c).as_deref() == Some("Unknown")
    })
    .await;
    // Grace = 3 × 1 s after the last renewal; allow for the renewal jitter and polling.
    assert!(
        stopped.elapsed() < Duration::from_secs(6),
        "took {:?}",
        stopped.elapsed()
    );
    assert_eq!(taints(&c), vec![TAINT_UNREACHABLE]);
    let reason = c
        .status
        .as_ref()
        .and_then(|s| {
            flotilla_api::meta::find_condition(&s.conditions, flotilla_api::meta::COND_AVAILABLE)
        })
        .map(|c| c.reason.clone());
    assert_eq!(reason.as_deref(), Some("ManagedClusterLeaseUpdateStopped"));
    assert!(
        metrics_text(&hub)
            .await
            .contains("flotilla_hub_lease_expired_total 1")
    );
    // Parked again, with no alarm left: nothing more is due until its agent comes back.
    parked().await;

    let agent = start_agent(agent_config("edge-2", &nats.url()));
    let c = wait_cluster(&mut api, "edge-2", "Available again", |c| {
        available(c).as_deref() == Some("True")
    })
    .await;
    assert!(taints(&c).is_empty());
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn unhealthy_spoke_is_unavailable_and_tainted() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), "edge-3").await;
    agent
        .backend
        .set_health(false, "kube-apiserver is not responding");
    let c = wait_cluster(&mut api, "edge-3", "unavailable", |c| {
        available(c).as_deref() == Some("False")
    })
    .await;
    assert_eq!(taints(&c), vec![TAINT_UNAVAILABLE]);
    agent.backend.set_health(true, "");
    let c = wait_cluster(&mut api, "edge-3", "available", |c| {
        available(c).as_deref() == Some("True")
    })
    .await;
    assert!(taints(&c).is_empty());
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn denied_cluster_cannot_rejoin_until_accepted_again() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), "edge-4").await;

    api.deny_clusters(ClusterNamesRequest {
        names: vec!["edge-4".into()],
        key: String::new(),
    })
    .await
    .unwrap();
    let denied = wait_cluster(&mut api, "edge-4", "denied", |c| {
        condition(c, COND_HUB_DENIED).as_deref() == Some("True")
    })
    .await;
    assert!(!accepted(&denied));
    assert_eq!(
        condition(&denied, COND_HUB_ACCEPTED).as_deref(),
        Some("False")
    );
    // The agent keeps asking (denied poll 0.5 s); each request is refused and counted, and the
    // stored cluster does not change.
    let rv = denied.metadata.as_ref().unwrap().resource_version;
    flotilla_testkit::eventually(SOON, "denied registrations counted", || {
        let text = hub.metrics.render(&hub.inventory);
        async move { text.contains("reason=\"denied\"").then_some(()) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let c = get(&mut api, "edge-4").await.unwrap();
    assert_eq!(
        c.metadata.as_ref().unwrap().resource_version,
        rv,
        "a denied cluster's requests change nothing"
    );
    assert!(!accepted(&c));

    accept(&mut api, "edge-4").await;
    wait_cluster(&mut api, "edge-4", "Available after re-acceptance", |c| {
        available(c).as_deref() == Some("True") && condition(c, COND_HUB_DENIED).is_none()
    })
    .await;
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn labels_taints_and_lease_are_edited_through_the_api() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), "edge-5").await;

    let c = api
        .label_cluster(LabelClusterRequest {
            name: "edge-5".into(),
            set: [("tier".to_string(), "gold".to_string())].into(),
            remove: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(c.metadata.as_ref().unwrap().labels["tier"], "gold");
    let err = api
        .label_cluster(LabelClusterRequest {
            name: "edge-5".into(),
            set: [("bad key!".to_string(), "x".to_string())].into(),
            remove: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("labels"), "{}", err.message());

    let c = api
        .taint_cluster(TaintClusterRequest {
            name: "edge-5".into(),
            add: vec![Taint {
                key: "gpu".into(),
                value: "true".into(),
                effect: "NoSelect".into(),
                time_added: None,
            }],
            remove: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    let gpu = c
        .spec
        .as_ref()
        .unwrap()
        .taints
        .iter()
        .find(|t| t.key == "gpu")
        .unwrap();
    assert!(gpu.time_added.is_some(), "the hub sets timeAdded");
    let c = api
        .taint_cluster(TaintClusterRequest {
            name: "edge-5".into(),
            add: vec![],
            remove: vec![TaintKey {
                key: "gpu".into(),
                effect: String::new(),
            }],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!taints(&c).contains(&"gpu".to_string()));

    let c = api
        .set_lease_duration(SetLeaseDurationRequest {
            name: "edge-5".into(),
            lease_duration_seconds: 2,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(c.spec.as_ref().unwrap().lease_duration_seconds, 2);
    let err = api
        .set_lease_duration(SetLeaseDurationRequest {
            name: "edge-5".into(),
            lease_duration_seconds: -1,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);

    let err = api
        .accept_clusters(ClusterNamesRequest {
            names: vec!["nope".into()],
            key: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);

    let list = api
        .list_clusters(ListClustersRequest {
            label_selector: "tier=gold".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.items.len(), 1);
    let list = api
        .list_clusters(ListClustersRequest {
            label_selector: "tier=silver".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(list.items.is_empty());
    agent.stop().await;
    hub.stop().await;
}

/// OCM's example of a cluster created ahead of its agent, as `kubectl get -o yaml` prints it:
/// both hub taints listed with the admin's own.
const DOC_WITH_HUB_TAINTS: &str = r#"apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: edge-9
spec:
  hubAcceptsClient: true
  taints:
  - key: cluster.open-cluster-management.io/unavailable
    effect: NoSelect
    timeAdded: "2024-01-01T00:00:00Z"
  - key: cluster.open-cluster-management.io/unreachable
    effect: NoSelect
  - key: gpu
    value: "true"
    effect: PreferNoSelect
"#;

fn cluster_document(yaml: &str) -> flotilla_api::v1::ManagedCluster {
    match flotilla_api::ocm::parse_documents(yaml).remove(0) {
        Ok(flotilla_api::ocm::Document::Cluster(c)) => c,
        other => panic!("not a ManagedCluster document: {other:?}"),
    }
}

#[tokio::test]
async fn a_document_listing_the_hubs_taints_is_applied_and_the_lease_decides_them() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let c = api
        .apply_cluster(cluster_document(DOC_WITH_HUB_TAINTS))
        .await
        .expect("a document listing the hub's taints is accepted")
        .into_inner();
    let mut keys = taints(&c);
    keys.sort();
    assert_eq!(
        keys,
        vec![TAINT_UNREACHABLE.to_string(), "gpu".to_string()],
        "no lease yet: only unreachable, whatever the document listed"
    );

    // The agent joins (the document accepted it): the hub clears its taints.
    let agent = start_agent(agent_config("edge-9", &nats.url()));
    wait_cluster(&mut api, "edge-9", "Available without hub taints", |c| {
        available(c).as_deref() == Some("True") && taints(c) == ["gpu"]
    })
    .await;
    // Applied again: the document's hub taints stay ignored on an Available cluster.
    let c = api
        .apply_cluster(cluster_document(DOC_WITH_HUB_TAINTS))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(taints(&c), vec!["gpu".to_string()]);

    // An explicit edit of a hub taint is still refused, naming the field.
    let err = api
        .taint_cluster(TaintClusterRequest {
            name: "edge-9".into(),
            add: vec![Taint {
                key: TAINT_UNREACHABLE.into(),
                value: String::new(),
                effect: "NoSelect".into(),
                time_added: None,
            }],
            remove: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("taints[0].key") && err.message().contains("maintained by the hub"),
        "{}",
        err.message()
    );
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn deleting_a_cluster_removes_hub_state_and_tells_the_agent() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), "edge-6").await;

    api.delete_cluster(DeleteClusterRequest {
        name: "edge-6".into(),
    })
    .await
    .unwrap();
    // Like OCM's klusterlet, the agent registers again — as a new, pending cluster.
    let again = wait_cluster(&mut api, "edge-6", "re-registered as pending", |c| {
        !accepted(c)
    })
    .await;
    assert_eq!(condition(&again, COND_JOINED), None);
    let pending_since = std::time::SystemTime::now();
    // Its old status subjects are gone from the stream; a renewal already in flight when the
    // cluster was deleted may land after the purge, but nothing is renewed once it is pending.
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut stream = js
        .get_stream(flotilla_bus::jetstream::STATUS_STREAM)
        .await
        .unwrap();
    let lease = flotilla_bus::subjects::status("edge-6", "lease", None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    if let Ok(m) = stream.get_last_raw_message_by_subject(&lease).await {
        let pending = pending_since
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let renewed = m.time.unix_timestamp_nanos() as f64 / 1e9;
        assert!(renewed < pending, "pending agents do not renew");
    }
    let _ = stream.info().await.unwrap();
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn hub_restart_keeps_state_and_does_not_flap_live_clusters() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), "edge-7").await;
    api.label_cluster(LabelClusterRequest {
        name: "edge-7".into(),
        set: [("site".to_string(), "north".to_string())].into(),
        remove: vec![],
    })
    .await
    .unwrap();
    wait_cluster(&mut api, "edge-7", "Available", |c| {
        available(c).as_deref() == Some("True")
    })
    .await;
    hub.stop().await;

    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let c = get(&mut api, "edge-7")
        .await
        .expect("cluster loaded from KV");
    assert!(accepted(&c));
    assert_eq!(c.metadata.as_ref().unwrap().labels["site"], "north");
    // For longer than the grace, it never leaves True.
    let mut watch = api
        .watch_clusters(flotilla_api::v1::WatchClustersRequest::default())
        .await
        .unwrap()
        .into_inner();
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Ok(Some(ev))) = tokio::time::timeout_at(until, watch.message()).await {
        let c = ev.cluster.unwrap();
        assert_eq!(
            available(&c).as_deref(),
            Some("True"),
            "flapped after restart: {c:#?}"
        );
    }
    agent.stop().await;
    hub.stop().await;
}

/// A joining cluster's first status report is held in memory and written with its first renewal.
/// A hub stopped between the two loses nothing: the next owner of the shard reads the latest
/// message of every subject of it again (a new epoch's consumer), the held report with them, and
/// what it said (here: unhealthy, and why) reaches the cluster.
#[tokio::test]
async fn a_first_report_held_for_the_first_renewal_survives_a_hub_restart() {
    use common::raw_agent::RawAgent;
    use flotilla_api::v1::ClusterStatusReport;
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    // Renewals come only from this test.
    config.cluster.default_lease_duration_seconds = 60;
    let hub = start_hub(config.clone()).await;
    let mut api = clusters_client(&hub).await;
    let mut agent = RawAgent::register(&nats, "raw-held").await;
    accept(&mut api, "raw-held").await;
    let report = ClusterStatusReport {
        cluster_name: "raw-held".into(),
        healthy: false,
        health_message: "disk pressure on every node".into(),
        ..Default::default()
    };
    let ev = Event::new(types::cluster_status(), "raw", "raw-held", &report);
    agent.publish("raw-held", subjects::KIND_CLUSTER, ev).await;
    // The hub took the report (the accepted cluster's lease runs from the acceptance) ...
    wait_cluster(&mut api, "raw-held", "the report taken", |c| {
        available(c).as_deref() == Some("False")
    })
    .await;
    // ... and stops before the first renewal, which would have written it.
    hub.stop().await;

    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    agent.renew("raw-held").await;
    let c = wait_cluster(&mut api, "raw-held", "joined, unhealthy as reported", |c| {
        condition(c, COND_JOINED).as_deref() == Some("True")
            && available(c).as_deref() == Some("False")
    })
    .await;
    let why = c
        .status
        .as_ref()
        .and_then(|s| {
            flotilla_api::meta::find_condition(&s.conditions, flotilla_api::meta::COND_AVAILABLE)
        })
        .map(|c| (c.reason.clone(), c.message.clone()));
    assert_eq!(
        why,
        Some((
            "ManagedClusterUnhealthy".to_string(),
            "disk pressure on every node".to_string()
        ))
    );
    hub.stop().await;
}

/// A hub that takes requests and never answers them (restarting, or not yet holding the
/// cluster's shard) delays only their answers: the agent's lease renewals keep their period.
#[tokio::test]
async fn lease_renewals_do_not_wait_for_a_hub_that_does_not_answer() {
    use futures::StreamExt;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), "edge-11").await;
    hub.stop().await;

    // A silent hub: subscribed to the agent's requests (resync every 2 s in tests, each waiting
    // out the 5 s request timeout), answering none.
    let client = async_nats::connect(nats.url()).await.unwrap();
    let _silent = client
        .subscribe(flotilla_bus::subjects::sync("edge-11"))
        .await
        .unwrap();
    let mut renewals = client
        .subscribe(flotilla_bus::subjects::status(
            "edge-11",
            flotilla_bus::subjects::KIND_LEASE,
            None,
        ))
        .await
        .unwrap();
    client.flush().await.unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(9);
    let mut last = tokio::time::Instant::now();
    let mut seen = 0;
    while let Ok(Some(_)) = tokio::time::timeout_at(until, renewals.next()).await {
        let gap = last.elapsed();
        // The lease is 1 s, renewed at 75-100 % of it; a renewal behind a 5 s request would
        // leave a gap of about 5 s.
        assert!(
            gap < Duration::from_millis(2500),
            "no lease renewal for {gap:?}"
        );
        last = tokio::time::Instant::now();
        seen += 1;
    }
    assert!(
        last.elapsed() < Duration::from_millis(2500),
        "no lease renewal for {:?} before the end",
        last.elapsed()
    );
    assert!(seen >= 7, "{seen} lease renewals in 9 s");
    agent.stop().await;
}

#[tokio::test]
async fn nats_restart_recovers_hub_and_agents() {
    let mut nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), "edge-8").await;

    nats.restart();

    // The hub writes again, the agent renews again, and a newcomer can register.
    flotilla_testkit::eventually(SOON, "label write after NATS restart", || {
        let mut api = api.clone();
        async move {
            api.label_cluster(LabelClusterRequest {
                name: "edge-8".into(),
                set: [("after".to_string(), "restart".to_string())].into(),
                remove: vec![],
            })
            .await
            .ok()
        }
    })
    .await;
    let newcomer = start_agent(agent_config("edge-9", &nats.url()));
    wait_cluster(&mut api, "edge-9", "registered after NATS restart", |_| {
        true
    })
    .await;
    accept(&mut api, "edge-9").await;
    wait_cluster(&mut api, "edge-9", "Available after NATS restart", |c| {
        available(c).as_deref() == Some("True")
    })
    .await;
    // edge-8 stays (or becomes again) Available: its renewals flow through the new connection.
    tokio::time::sleep(Duration::from_secs(4)).await;
    wait_cluster(&mut api, "edge-8", "Available after NATS restart", |c| {
        available(c).as_deref() == Some("True")
    })
    .await;
    agent.stop().await;
    newcomer.stop().await;
    hub.stop().await;
}

/// One registration request as a raw NATS request, answered or not within a few seconds.
async fn ask(client: &async_nats::Client, name: &str, id: String) -> Option<RegistrationResponse> {
    let req = RegistrationRequest {
        cluster_name: name.into(),
        request_id: id,
        agent_version: flotilla_api::version::VERSION.into(),
        ..Default::default()
    };
    let ev = Event::new(types::registration_request(), "burst", name, &req);
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        client.request(subjects::register(name), ev.encode(1 << 20).unwrap()),
    )
    .await
    .ok()?
    .ok()?;
    Event::decode(&reply.payload, 1 << 20)
        .ok()?
        .decode_data::<RegistrationResponse>("RegistrationResponse")
        .ok()
}

#[tokio::test]
async fn a_burst_past_the_admission_gate_is_told_when_to_ask_again_and_all_join() {
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.limits.registrations_in_flight = 1;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let client = async_nats::connect(nats.url()).await.unwrap();

    // 40 new names at once, one slot: the hub answers every one, most of them busy.
    let names: Vec<String> = (0..40).map(|i| format!("burst-{i:02}")).collect();
    let answers =
        futures::future::join_all(names.iter().map(|n| ask(&client, n, format!("first-{n}"))))
            .await;
    let mut busy = Vec::new();
    for (name, answer) in names.iter().zip(&answers) {
        let a = answer
            .as_ref()
            .unwrap_or_else(|| panic!("{name} not answered"));
        assert_eq!(a.in_reply_to, format!("first-{name}"), "{a:?}");
        match RegistrationState::try_from(a.state) {
            Ok(RegistrationState::Pending) => {}
            Ok(RegistrationState::Busy) => {
                assert!(a.retry_after_ms >= 1000, "{a:?}");
                assert!(a.message.contains("ask again"), "{a:?}");
                busy.push((name.clone(), a.retry_after_ms));
            }
            other => panic!("{name}: unexpected answer {other:?}: {a:?}"),
        }
    }
    assert!(busy.len() >= 20, "only {} of 40 answered busy", busy.len());
    // The busy ones are told to come back at spread-out times, and nothing was stored for them.
    let waits: std::collections::BTreeSet<u32> = busy.iter().map(|(_, w)| *w).collect();
    assert!(
        waits.len() > 1,
        "every busy agent told the same time: {waits:?}"
    );
    for (name, _) in &busy {
        assert!(
            get(&mut api, name).await.is_none(),
            "{name} stored though busy"
        );
    }
    let line = format!(
        "flotilla_hub_registration_busy_total{{reason=\"in_flight\"}} {}",
        busy.len()
    );
    let text = metrics_text(&hub).await;
    assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");

    // Asking again when told, each is registered.
    let mut left = busy;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !left.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still busy: {left:?}"
        );
        let wait = left.iter().map(|(_, w)| *w).min().unwrap();
        tokio::time::sleep(Duration::from_millis(u64::from(wait))).await;
        let mut next = Vec::new();
        for (name, _) in left {
            let a = ask(&client, &name, "again".into()).await.expect("answered");
            match RegistrationState::try_from(a.state) {
                Ok(RegistrationState::Pending) => {}
                Ok(RegistrationState::Busy) => next.push((name, a.retry_after_ms)),
                other => panic!("{name}: unexpected answer {other:?}"),
            }
        }
        left = next;
    }
    for name in &names {
        assert!(get(&mut api, name).await.is_some(), "{name} not registered");
    }

    // Real agents in a burst through a gate of one all join.
    let agents: Vec<_> = (0..10)
        .map(|i| start_agent(agent_config(&format!("agent-{i}"), &nats.url())))
        .collect();
    for i in 0..10 {
        wait_cluster(&mut api, &format!("agent-{i}"), "registered", |_| true).await;
    }
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
