//! In-process add-ons on a simulated cluster: a Deployment of the fleet-metrics image makes the
//! agent renew the add-on's lease and report its scores over NATS, until it is scaled to 0 or
//! deleted; in secure mode the add-on reports with credentials the hub issued for it alone.

use flotilla_agent::addons::fleet_metrics::{self, NODE_COUNT, SCORE_NAME, WORK_COUNT};
use flotilla_agent::addons::{FLEET_METRICS_IMAGE, Supervisor};
use flotilla_agent::backend::sim::{SimBackend, SimConfig};
use flotilla_agent::backend::{Backend, Strategy};
use flotilla_agent::store::LocalStore;
use flotilla_agent::{AgentConfig, StateConfig};
use flotilla_api::v1::{
    AddOnCredentialsRequest, AddOnCredentialsResponse, AddOnLeaseRenewal,
    AddOnPlacementScoreReport, AppliedManifestWork,
};
use flotilla_api::work::manifest_id;
use flotilla_auth::{Creds, InitOptions, Issuer, SecureDir};
use flotilla_bus::addons;
use flotilla_bus::envelope::{Event, headers};
use flotilla_testkit::{NatsServer, free_port};
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

const CLUSTER: &str = "edge-1";
const ADDON_NS: &str = "open-cluster-management-agent-addon";
const MAX: usize = 1 << 20;

fn namespace() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ADDON_NS}})
}

/// The Deployment the fleet-metrics AddOnTemplate renders (examples/addons).
fn deployment(replicas: i64, interval: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "fleet-metrics-agent", "namespace": ADDON_NS},
        "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"app": "fleet-metrics-agent"}},
            "template": {"metadata": {"labels": {"app": "fleet-metrics-agent"}},
                "spec": {"serviceAccountName": "fleet-metrics-agent", "containers": [{
                    "name": "fleet-metrics",
                    "image": format!("{FLEET_METRICS_IMAGE}:0.1.0"),
                    "args": [format!("--cluster-name={CLUSTER}"), "--nats-url=nats://hub:4222"],
                    "env": [{"name": "REPORT_INTERVAL", "value": interval},
                            {"name": "ADDON_NAME", "value": "fleet-metrics"}]}]}}}})
}

async fn apply(backend: &SimBackend, object: &Value) {
    backend
        .apply(&manifest_id(object).unwrap(), object, &Strategy::Update)
        .await
        .expect("apply");
}

fn sim() -> Arc<SimBackend> {
    Arc::new(SimBackend::new(8, 32, "v1.30.2").with_config(SimConfig {
        ready_delay: Duration::from_millis(200),
        ..SimConfig::default()
    }))
}

/// A store holding `works` work records.
fn store_with_works(works: usize) -> Arc<LocalStore> {
    let store = Arc::new(LocalStore::memory(CLUSTER));
    for i in 0..works {
        store
            .save_work(&AppliedManifestWork {
                resource_id: format!("work-{i}"),
                ..Default::default()
            })
            .unwrap();
    }
    store
}

/// The next message on `sub` within `within`.
async fn next(sub: &mut async_nats::Subscriber, within: Duration) -> Option<async_nats::Message> {
    tokio::time::timeout(within, sub.next())
        .await
        .ok()
        .flatten()
}

/// Messages on `sub` for `during`.
async fn collect(sub: &mut async_nats::Subscriber, during: Duration) -> Vec<async_nats::Message> {
    let deadline = tokio::time::Instant::now() + during;
    let mut out = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout_at(deadline, sub.next()).await {
        out.push(m);
    }
    out
}

/// Checks a lease renewal message and returns its renewal.
fn lease_of(m: &async_nats::Message) -> AddOnLeaseRenewal {
    assert_eq!(
        m.subject.as_str(),
        addons::subject("fleet-metrics", CLUSTER, addons::KIND_LEASE)
    );
    assert_eq!(
        m.headers
            .as_ref()
            .and_then(|h| h.get("Content-Type"))
            .map(|v| v.as_str()),
        Some(flotilla_bus::envelope::CONTENT_TYPE)
    );
    let ev = Event::decode(&m.payload, MAX).expect("a CloudEvent");
    assert_eq!(ev.event_type, addons::lease_type());
    assert_eq!(ev.cluster, CLUSTER);
    ev.decode_data("AddOnLeaseRenewal").unwrap()
}

/// Checks a score report message and returns its report.
fn report_of(m: &async_nats::Message) -> AddOnPlacementScoreReport {
    assert_eq!(
        m.subject.as_str(),
        addons::subject("fleet-metrics", CLUSTER, addons::KIND_SCORE)
    );
    let ev = Event::decode(&m.payload, MAX).expect("a CloudEvent");
    assert_eq!(ev.event_type, flotilla_bus::scores::report_type());
    assert_eq!(ev.cluster, CLUSTER);
    ev.decode_data("AddOnPlacementScoreReport").unwrap()
}

fn secs_from_now(ts: &prost_types::Timestamp) -> f64 {
    let t = flotilla_api::meta::system_time(ts);
    match t.duration_since(SystemTime::now()) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

#[tokio::test]
async fn a_simulated_fleet_metrics_addon_renews_its_lease_and_reports_scores_until_scaled_to_zero()
{
    let nats = NatsServer::start();
    let backend = sim();
    backend.set_nodes(3);
    let store = store_with_works(2);
    let mut config = AgentConfig::new(CLUSTER, &nats.url());
    config.state = StateConfig::Shared(store);
    config.simulate_addons = true;
    config.pending_poll = Duration::from_secs(1);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(flotilla_agent::run(config, backend.clone(), async move {
        let _ = stopped.await;
    }));

    let observer = async_nats::connect(nats.url()).await.unwrap();
    let mut sub = observer
        .subscribe(addons::all_of("fleet-metrics", CLUSTER))
        .await
        .unwrap();
    observer.flush().await.unwrap();
    // Nothing runs before the add-on's Deployment exists.
    assert!(next(&mut sub, Duration::from_millis(500)).await.is_none());

    apply(&backend, &namespace()).await;
    apply(&backend, &deployment(1, "1")).await;
    let messages = collect(&mut sub, Duration::from_millis(3500)).await;
    let leases: Vec<_> = messages
        .iter()
        .filter(|m| m.subject.ends_with(".lease"))
        .map(lease_of)
        .collect();
    let reports: Vec<_> = messages
        .iter()
        .filter(|m| m.subject.ends_with(".score"))
        .map(report_of)
        .collect();
    assert!(
        leases.len() >= 3 && reports.len() >= 3,
        "one lease and one report a second: {} leases, {} reports",
        leases.len(),
        reports.len()
    );
    for l in &leases {
        assert_eq!(
            (l.cluster_name.as_str(), l.addon_name.as_str()),
            (CLUSTER, "fleet-metrics")
        );
        let age = -secs_from_now(l.renew_time.as_ref().unwrap());
        assert!((-1.0..5.0).contains(&age), "renew_time {age}s ago");
    }
    let last = reports.last().unwrap();
    assert_eq!(last.cluster_name, CLUSTER);
    assert_eq!(last.resource_name, SCORE_NAME);
    assert_eq!(last.scores, fleet_metrics::scores(Some(3), Some(2)));
    assert_eq!(
        last.scores
            .iter()
            .map(|s| (s.name.as_str(), s.value))
            .collect::<Vec<_>>(),
        [(NODE_COUNT, -94), (WORK_COUNT, -99)]
    );
    let valid_for = secs_from_now(last.valid_until.as_ref().unwrap());
    assert!(
        (1.0..=3.1).contains(&valid_for),
        "valid for three intervals (3 s), not {valid_for}s"
    );

    // The simulated cluster shows the add-on's Deployment ready, as the health probe expects.
    let id = manifest_id(&deployment(1, "1")).unwrap();
    let live = backend.get(&id).await.unwrap().unwrap();
    assert_eq!(live["status"]["readyReplicas"], 1);
    assert_eq!(live["status"]["replicas"], 1);
    assert_eq!(live["status"]["availableReplicas"], 1);

    // The cluster grows: the next report says so.
    backend.set_nodes(50);
    let grown = loop {
        let m = next(&mut sub, Duration::from_secs(3))
            .await
            .expect("reports keep coming");
        if m.subject.ends_with(".score") {
            let r = report_of(&m);
            if r.scores[0].value == 0 {
                break r;
            }
        }
    };
    assert_eq!(grown.scores[0].name, NODE_COUNT);

    // Scaled to 0: renewals stop (and the Deployment is ready at 0/0).
    apply(&backend, &deployment(0, "1")).await;
    let _in_flight = collect(&mut sub, Duration::from_millis(1200)).await;
    assert!(
        collect(&mut sub, Duration::from_millis(2500))
            .await
            .is_empty(),
        "nothing is reported once the Deployment is scaled to 0"
    );
    let live = backend.get(&id).await.unwrap().unwrap();
    assert_eq!(live["status"]["readyReplicas"], 0);
    assert_eq!(live["status"]["replicas"], 0);

    // Scaled up again it comes back; deleted, it stops for good.
    apply(&backend, &deployment(1, "1")).await;
    let m = next(&mut sub, Duration::from_secs(3))
        .await
        .expect("reporting again after scaling up");
    assert!(
        m.subject
            .starts_with("flotilla.addon.fleet-metrics.edge-1.")
    );
    backend.delete(&id).await.unwrap();
    let _in_flight = collect(&mut sub, Duration::from_millis(1200)).await;
    assert!(
        collect(&mut sub, Duration::from_millis(2000))
            .await
            .is_empty(),
        "nothing is reported once the Deployment is deleted"
    );

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), agent)
        .await
        .expect("the agent stops")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn changed_settings_restart_the_addon_and_no_addons_run_unless_enabled() {
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let backend = sim();
    let store = store_with_works(0);
    let mut supervisor = Supervisor::new(CLUSTER, backend.clone(), store, client.clone())
        .with_poll_interval(Duration::from_millis(100));
    apply(&backend, &namespace()).await;
    apply(&backend, &deployment(1, "30")).await;
    supervisor.reconcile().await;
    let running = supervisor.running();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].0, format!("{ADDON_NS}/fleet-metrics-agent"));
    assert_eq!(running[0].1.interval, Duration::from_secs(30));
    apply(&backend, &deployment(1, "1")).await;
    supervisor.reconcile().await;
    assert_eq!(supervisor.running()[0].1.interval, Duration::from_secs(1));
    apply(&backend, &deployment(0, "1")).await;
    supervisor.reconcile().await;
    assert!(supervisor.running().is_empty());

    // An agent without simulate_addons runs none.
    let mut sub = client
        .subscribe(addons::all_of("fleet-metrics", CLUSTER))
        .await
        .unwrap();
    client.flush().await.unwrap();
    apply(&backend, &deployment(1, "1")).await;
    let config = AgentConfig::new(CLUSTER, &nats.url());
    assert!(!config.simulate_addons, "off by default");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(flotilla_agent::run(config, backend.clone(), async move {
        let _ = stopped.await;
    }));
    assert!(next(&mut sub, Duration::from_secs(2)).await.is_none());
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), agent)
        .await
        .expect("the agent stops")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn in_secure_mode_the_addon_reports_with_credentials_the_hub_issued_for_it() {
    // An operator-mode server, the cluster's own credentials, and a stand-in for the hub that
    // refuses the first credentials request and answers the next.
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let secure = SecureDir::init(
        &dir.path().join("secure"),
        &InitOptions {
            nats_listen: format!("127.0.0.1:{port}"),
            ..InitOptions::default()
        },
    )
    .unwrap();
    let nats = NatsServer::start_from_config(secure.server_conf.clone(), port);
    let issuer = Arc::new(Issuer::new(&secure, Duration::from_secs(3600)).unwrap());
    let now = flotilla_auth::setup::unix_now();

    let cluster_key = nkeys::KeyPair::new_user();
    let cluster_creds = dir.path().join("cluster.creds");
    let issued = issuer
        .issue(
            flotilla_auth::Subject::Cluster(CLUSTER),
            &cluster_key.public_key(),
            now,
        )
        .unwrap();
    std::fs::write(
        &cluster_creds,
        Creds {
            jwt: issued.jwt,
            seed: flotilla_auth::Secret::new(cluster_key.seed().unwrap()),
        }
        .format()
        .expose(),
    )
    .unwrap();
    let mut agent_nats = flotilla_bus::connect::NatsConfig::new(nats.url(), "test-agent");
    agent_nats.credentials_file = Some(cluster_creds);
    agent_nats.inbox_prefix = Some(flotilla_bus::subjects::inbox_prefix(CLUSTER));
    let agent_client = flotilla_bus::connect::connect(&agent_nats, None)
        .await
        .unwrap();

    let hub = async_nats::ConnectOptions::with_credentials_file(secure.hub_creds.clone())
        .await
        .unwrap()
        .connect(nats.url())
        .await
        .unwrap();
    // The cluster's own credentials may not publish add-on subjects: what arrives there came
    // over the add-on's connection.
    let mut sub = hub
        .subscribe(addons::all_of("fleet-metrics", CLUSTER))
        .await
        .unwrap();
    let mut requests_sub = hub.subscribe(addons::CREDENTIALS_ALL).await.unwrap();
    hub.flush().await.unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let answered = requests.clone();
    let hub_client = hub.clone();
    let responder = tokio::spawn(async move {
        while let Some(msg) = requests_sub.next().await {
            let ev = Event::decode(&msg.payload, MAX).unwrap();
            assert_eq!(ev.event_type, addons::credentials_request_type());
            let req: AddOnCredentialsRequest = ev.decode_data("AddOnCredentialsRequest").unwrap();
            assert_eq!(msg.subject.as_str(), addons::credentials(CLUSTER));
            assert_eq!(
                (req.cluster_name.as_str(), req.addon_name.as_str()),
                (CLUSTER, "fleet-metrics")
            );
            let resp = if answered.fetch_add(1, Ordering::SeqCst) == 0 {
                AddOnCredentialsResponse {
                    message: "add-on fleet-metrics is not installed on edge-1 yet".into(),
                    ..Default::default()
                }
            } else {
                let issued = issuer
                    .issue(
                        flotilla_auth::Subject::AddOn {
                            addon: &req.addon_name,
                            cluster: &req.cluster_name,
                        },
                        &req.public_key,
                        flotilla_auth::setup::unix_now(),
                    )
                    .unwrap();
                AddOnCredentialsResponse {
                    user_jwt: issued.jwt,
                    expires: Some(prost_types::Timestamp {
                        seconds: issued.expires_at,
                        nanos: 0,
                    }),
                    publish: vec![addons::all_of(&req.addon_name, &req.cluster_name)],
                    ..Default::default()
                }
            };
            let answer = Event::new(
                addons::credentials_response_type(),
                "flotilla-hub",
                CLUSTER,
                &resp,
            );
            hub_client
                .publish_with_headers(
                    msg.reply.unwrap(),
                    headers(&answer),
                    answer.encode(MAX).unwrap(),
                )
                .await
                .unwrap();
        }
    });

    let backend = sim();
    let supervisor = Supervisor::new(CLUSTER, backend.clone(), store_with_works(1), agent_client)
        .with_requested_credentials(agent_nats.clone());
    let running = tokio::spawn(supervisor.run());
    apply(&backend, &namespace()).await;
    apply(&backend, &deployment(1, "1")).await;

    let lease = loop {
        let m = next(&mut sub, Duration::from_secs(10))
            .await
            .expect("a lease renewal over the add-on's own connection");
        if m.subject.ends_with(".lease") {
            break lease_of(&m);
        }
    };
    assert_eq!(lease.addon_name, "fleet-metrics");
    assert_eq!(
        requests.load(Ordering::SeqCst),
        2,
        "refused once, then issued"
    );
    let report = loop {
        let m = next(&mut sub, Duration::from_secs(3))
            .await
            .expect("a score report");
        if m.subject.ends_with(".score") {
            break report_of(&m);
        }
    };
    assert_eq!(report.scores, fleet_metrics::scores(Some(3), Some(1)));

    running.abort();
    let _ = running.await;
    let _in_flight = collect(&mut sub, Duration::from_millis(500)).await;
    assert!(
        collect(&mut sub, Duration::from_millis(1500))
            .await
            .is_empty(),
        "the add-on stops with its supervisor"
    );
    responder.abort();
}
