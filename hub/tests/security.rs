//! Secure mode end to end in one process: a hub with a secure directory, agents with bootstrap
//! credentials, a real nats-server in operator mode.

mod common;

use common::work::{hello, wait_work, works_client};
use common::*;
use flotilla_agent::StateConfig;
use flotilla_agent::credentials::CLUSTER_CREDS;
use flotilla_api::v1::ClusterNamesRequest;
use flotilla_auth::{Creds, InitOptions, SecureDir};
use flotilla_hub::cluster::rules::KeyPolicy;
use flotilla_hub::security::SecurityConfig;
use flotilla_testkit::{NatsServer, free_port};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

struct Secure {
    _dir: tempfile::TempDir,
    secure: SecureDir,
    nats: NatsServer,
}

/// A secure directory for a server on a free port (not started), and the port.
fn secure_dir() -> (tempfile::TempDir, SecureDir, u16) {
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
    (dir, secure, port)
}

fn secure_nats() -> Secure {
    let (dir, secure, port) = secure_dir();
    let nats = NatsServer::start_from_config(secure.server_conf.clone(), port);
    Secure {
        _dir: dir,
        secure,
        nats,
    }
}

fn secure_hub_config(s: &Secure, ttl: Duration) -> flotilla_hub::Config {
    let mut c = hub_config(&s.nats.url());
    c.nats.credentials_file = Some(s.secure.hub_creds.clone());
    c.cluster.key_policy = KeyPolicy::Pin;
    c.security = Some(SecurityConfig {
        dir: s.secure.dir.clone(),
        credentials_ttl: ttl,
    });
    c
}

fn secure_agent(s: &Secure, name: &str, state: &Path) -> flotilla_agent::AgentConfig {
    let mut c = agent_config(name, &s.nats.url());
    c.state = StateConfig::Dir(state.to_path_buf());
    c.bootstrap_creds = Some(s.secure.bootstrap_creds.clone());
    c
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + SOON;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn connects(url: &str, creds_file: &Path) -> bool {
    let Ok(opts) = async_nats::ConnectOptions::with_credentials_file(creds_file).await else {
        return false;
    };
    tokio::time::timeout(Duration::from_secs(3), opts.connect(url))
        .await
        .is_ok_and(|r| r.is_ok())
}

#[tokio::test]
async fn an_accepted_agent_gets_its_own_credentials_works_flow_and_deny_revokes_them() {
    let s = secure_nats();
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    let mut api = clusters_client(&hub).await;
    let state = tempfile::tempdir().unwrap();
    let agent = start_agent(secure_agent(&s, "edge-1", state.path()));
    let creds_file = state.path().join(CLUSTER_CREDS);

    // Pending: registered over the bootstrap connection, no credentials of its own.
    wait_cluster(&mut api, "edge-1", "registered, pending", |c| !accepted(c)).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!creds_file.exists(), "a pending cluster got credentials");

    accept(&mut api, "edge-1").await;
    let c = wait_available(&mut api, "edge-1").await;
    assert!(creds_file.exists());
    assert_eq!(
        std::fs::metadata(&creds_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let creds = Creds::parse(&std::fs::read_to_string(&creds_file).unwrap()).unwrap();
    assert_eq!(creds.public_key(), c.hub.unwrap().agent_public_key);
    assert!(
        connects(&s.nats.url(), &creds_file).await,
        "any NATS client can use cluster.creds"
    );

    // Works flow over the cluster's own credentials.
    let mut works = works_client(&hub).await;
    works.apply_work(hello("edge-1", 1)).await.unwrap();
    wait_work(&mut works, "edge-1", "hello-work-demo", "applied", |w| {
        common::work::converged_at(w, 1)
    })
    .await;

    // Deny revokes the key: the agent's connection is refused from then on.
    api.deny_clusters(ClusterNamesRequest {
        names: vec!["edge-1".into()],
        key: String::new(),
    })
    .await
    .unwrap();
    wait_for("the revoked key is refused", async || {
        !connects(&s.nats.url(), &creds_file).await
    })
    .await;
    wait_metric(&hub, "flotilla_hub_credentials_issued_total 1").await;
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn credentials_are_renewed_before_they_expire_and_survive_a_restart() {
    let s = secure_nats();
    // Short-lived credentials: renewed after 4 s, expiring after 6 s.
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(6))).await;
    let mut api = clusters_client(&hub).await;
    let state = tempfile::tempdir().unwrap();
    let agent = start_agent(secure_agent(&s, "edge-1", state.path()));
    wait_cluster(&mut api, "edge-1", "registered, pending", |c| !accepted(c)).await;
    accept(&mut api, "edge-1").await;
    wait_available(&mut api, "edge-1").await;
    let first = std::fs::read_to_string(state.path().join(CLUSTER_CREDS)).unwrap();
    wait_metric(&hub, "flotilla_hub_credentials_issued_total 3").await;
    let later = std::fs::read_to_string(state.path().join(CLUSTER_CREDS)).unwrap();
    assert_ne!(first, later, "the stored credentials were not renewed");
    // Past the first credentials' expiry the cluster is still Available (never lost its lease).
    let c = wait_available(&mut api, "edge-1").await;
    assert!(accepted(&c));
    agent.stop().await;

    // A restarted agent uses its stored credentials; after they expired offline it comes back
    // through the bootstrap credentials without the admin (the cluster is still accepted).
    tokio::time::sleep(Duration::from_secs(7)).await;
    let agent = start_agent(secure_agent(&s, "edge-1", state.path()));
    wait_metric(&hub, "flotilla_hub_credentials_issued_total 4").await;
    wait_available(&mut api, "edge-1").await;
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn an_impostor_key_changes_nothing_and_a_rebuilt_spoke_rejoins_by_join_credential_and_fingerprint()
 {
    let s = secure_nats();
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    let mut api = clusters_client(&hub).await;
    let real_state = tempfile::tempdir().unwrap();
    let real = start_agent(secure_agent(&s, "edge-1", real_state.path()));
    wait_cluster(&mut api, "edge-1", "registered, pending", |c| !accepted(c)).await;
    accept(&mut api, "edge-1").await;
    let before = wait_available(&mut api, "edge-1").await;
    let old_key = before.hub.as_ref().unwrap().agent_public_key.clone();

    // An impostor with the (shared) bootstrap credentials and its own key: refused, recorded
    // for describe, nothing else changes — no waiting key for an admin to accept by mistake.
    let fake_state = tempfile::tempdir().unwrap();
    let fake = start_agent(secure_agent(&s, "edge-1", fake_state.path()));
    let c = wait_cluster(&mut api, "edge-1", "the impostor refused", |c| {
        c.hub.as_ref().is_some_and(|h| !h.last_refusal.is_empty())
    })
    .await;
    let h = c.hub.as_ref().unwrap();
    assert!(h.requested_public_key.is_empty(), "{h:?}");
    assert_eq!(h.agent_public_key, old_key);
    assert!(
        h.last_refusal.contains("changes nothing"),
        "{}",
        h.last_refusal
    );
    assert!(
        !fake_state.path().join(CLUSTER_CREDS).exists(),
        "the impostor got credentials"
    );
    fake.stop().await;
    wait_available(&mut api, "edge-1").await;

    // The spoke is rebuilt: new state, new key. The admin gives it a join credential; its key
    // waits until accepted by fingerprint.
    real.stop().await;
    let token = api
        .create_join_token(flotilla_api::v1::CreateJoinTokenRequest {
            cluster_name: "edge-1".into(),
            ttl_seconds: 600,
            accept: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let rebuilt_state = tempfile::tempdir().unwrap();
    let join_file = rebuilt_state.path().join("join.creds");
    std::fs::write(&join_file, &token.creds).unwrap();
    let mut cfg = secure_agent(&s, "edge-1", rebuilt_state.path());
    cfg.bootstrap_creds = Some(join_file.clone());
    let rebuilt = start_agent(cfg);
    let c = wait_cluster(&mut api, "edge-1", "the rebuilt key waiting", |c| {
        c.hub
            .as_ref()
            .is_some_and(|h| !h.requested_public_key.is_empty())
    })
    .await;
    let new_key = c.hub.as_ref().unwrap().requested_public_key.clone();
    assert_ne!(new_key, old_key);
    // Accepting another fingerprint is refused; the waiting one replaces the old key.
    let wrong = api
        .accept_clusters(ClusterNamesRequest {
            names: vec!["edge-1".into()],
            key: "0000:0000:0000:0000".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(wrong.code(), tonic::Code::FailedPrecondition, "{wrong:?}");
    api.accept_clusters(ClusterNamesRequest {
        names: vec!["edge-1".into()],
        key: flotilla_api::fingerprint::of(&new_key),
    })
    .await
    .unwrap();
    wait_cluster(
        &mut api,
        "edge-1",
        "the new key bound, its join spent",
        |c| {
            c.hub
                .as_ref()
                .is_some_and(|h| h.agent_public_key == new_key && h.join_key.is_empty())
        },
    )
    .await;
    wait_available(&mut api, "edge-1").await;
    assert!(rebuilt_state.path().join(CLUSTER_CREDS).exists());
    // The old key is revoked; the join credential is spent (forgotten: the name is bound, so
    // nothing it could ask changes anything, and it expires).
    wait_for("the old key refused", async || {
        !connects(&s.nats.url(), &real_state.path().join(CLUSTER_CREDS)).await
    })
    .await;
    let c = wait_cluster(&mut api, "edge-1", "the join credential spent", |c| {
        c.hub.as_ref().is_some_and(|h| h.join_key.is_empty())
    })
    .await;
    assert_eq!(c.hub.unwrap().agent_public_key, new_key);
    rebuilt.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn a_name_created_ahead_of_its_agent_is_taken_only_with_its_join_credential() {
    let s = secure_nats();
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    let mut api = clusters_client(&hub).await;
    api.apply_cluster(flotilla_api::v1::ManagedCluster {
        metadata: Some(flotilla_api::v1::ObjectMeta {
            name: "edge-9".into(),
            ..Default::default()
        }),
        spec: Some(flotilla_api::v1::ManagedClusterSpec {
            hub_accepts_client: true,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    // Someone with the shared bootstrap credentials races for the name: its key only waits.
    let racer_state = tempfile::tempdir().unwrap();
    let racer = start_agent(secure_agent(&s, "edge-9", racer_state.path()));
    wait_cluster(&mut api, "edge-9", "the racer's key waiting", |c| {
        c.hub
            .as_ref()
            .is_some_and(|h| !h.requested_public_key.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!racer_state.path().join(CLUSTER_CREDS).exists());
    racer.stop().await;
    // The real spoke comes with its join credential and is bound and running at once.
    let token = api
        .create_join_token(flotilla_api::v1::CreateJoinTokenRequest {
            cluster_name: "edge-9".into(),
            ttl_seconds: 0,
            accept: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let state = tempfile::tempdir().unwrap();
    let join_file = state.path().join("join.creds");
    std::fs::write(&join_file, &token.creds).unwrap();
    let mut cfg = secure_agent(&s, "edge-9", state.path());
    cfg.bootstrap_creds = Some(join_file.clone());
    let agent = start_agent(cfg);
    let c = wait_available(&mut api, "edge-9").await;
    let h = c.hub.unwrap();
    assert!(h.requested_public_key.is_empty(), "the racer's key is gone");
    assert_eq!(
        h.agent_public_key,
        Creds::parse(&std::fs::read_to_string(state.path().join(CLUSTER_CREDS)).unwrap())
            .unwrap()
            .public_key()
    );
    wait_cluster(&mut api, "edge-9", "the join credential spent", |c| {
        c.hub.as_ref().is_some_and(|h| h.join_key.is_empty())
    })
    .await;
    // Another key arriving with the spent credential changes nothing.
    let impostor = tempfile::tempdir().unwrap();
    let mut cfg = secure_agent(&s, "edge-9", impostor.path());
    cfg.bootstrap_creds = Some(join_file.clone());
    let late = start_agent(cfg);
    wait_cluster(&mut api, "edge-9", "the late key refused", |c| {
        c.hub.as_ref().is_some_and(|h| !h.last_refusal.is_empty())
    })
    .await;
    assert!(!impostor.path().join(CLUSTER_CREDS).exists());
    late.stop().await;
    agent.stop().await;
    hub.stop().await;
}

const ADDON: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata:
  name: reporter
  annotations: {addon.flotilla.io/health-check: Lease}
spec:
  addonName: reporter
  registration: [{type: KubeClient}]
  agentSpec:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: reporter, namespace: default}
          data: {cluster: "{{CLUSTER_NAME}}"}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: reporter}
spec:
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: reporter}
"#;

/// Asks the hub, as `cluster`'s agent (its own credentials), for add-on `addon`'s credentials
/// for `key`.
async fn addon_credentials(
    url: &str,
    cluster_creds: &Path,
    cluster: &str,
    addon: &str,
    key: &nkeys::KeyPair,
) -> flotilla_api::v1::AddOnCredentialsResponse {
    let client = async_nats::ConnectOptions::with_credentials_file(cluster_creds)
        .await
        .unwrap()
        .custom_inbox_prefix(flotilla_bus::subjects::inbox_prefix(cluster))
        .connect(url)
        .await
        .unwrap();
    let request = flotilla_api::v1::AddOnCredentialsRequest {
        cluster_name: cluster.into(),
        addon_name: addon.into(),
        public_key: key.public_key(),
    };
    let ev = flotilla_bus::Event::new(
        flotilla_bus::addons::credentials_request_type(),
        "test-agent",
        cluster,
        &request,
    );
    let reply = client
        .send_request(
            flotilla_bus::addons::credentials(cluster),
            async_nats::Request::new()
                .payload(ev.encode(1 << 20).unwrap())
                .headers(flotilla_bus::envelope::headers(&ev)),
        )
        .await
        .unwrap();
    flotilla_bus::Event::decode(&reply.payload, 1 << 20)
        .unwrap()
        .decode_data("AddOnCredentialsResponse")
        .unwrap()
}

#[tokio::test]
async fn an_addon_agent_gets_credentials_for_its_own_subjects_only_and_loses_them_with_the_addon() {
    use flotilla_api::v1::add_on_service_client::AddOnServiceClient;
    let s = secure_nats();
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    let mut api = clusters_client(&hub).await;
    let state = tempfile::tempdir().unwrap();
    // This test plays the add-on agent with a key of its own: the agent must not deliver
    // credentials for another (the hub would revoke this one).
    let mut config = secure_agent(&s, "edge-1", state.path());
    config.addon_credentials_secrets = false;
    let agent = start_agent(config);
    wait_cluster(&mut api, "edge-1", "registered", |_| true).await;
    accept(&mut api, "edge-1").await;
    wait_available(&mut api, "edge-1").await;
    let cluster_creds = state.path().join(CLUSTER_CREDS);

    let mut addons = AddOnServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    common::addon::apply(&hub, ADDON).await.unwrap();

    // Not installed on the cluster yet: refused.
    let key = nkeys::KeyPair::new_user();
    let refused =
        addon_credentials(&s.nats.url(), &cluster_creds, "edge-1", "reporter", &key).await;
    assert!(refused.user_jwt.is_empty());
    assert!(
        refused.message.contains("not installed"),
        "{}",
        refused.message
    );

    addons
        .enable_add_on(flotilla_api::v1::EnableAddOnRequest {
            name: "reporter".into(),
            clusters: vec!["edge-1".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    wait_for("the add-on's work", async || {
        hub.works
            .get(&format!(
                "edge-1/{}",
                flotilla_api::addon::work_name("reporter", 0)
            ))
            .is_some()
    })
    .await;
    let issued = addon_credentials(&s.nats.url(), &cluster_creds, "edge-1", "reporter", &key).await;
    assert!(!issued.user_jwt.is_empty(), "{}", issued.message);
    assert_eq!(
        issued.publish,
        vec!["flotilla.addon.reporter.edge-1.>".to_string()]
    );
    let creds = state.path().join("reporter.creds");
    std::fs::write(
        &creds,
        Creds {
            jwt: issued.user_jwt.clone(),
            seed: flotilla_auth::Secret::new(key.seed().unwrap()),
        }
        .format()
        .expose(),
    )
    .unwrap();

    // With them the add-on agent renews its lease: the add-on becomes Available.
    let client = async_nats::ConnectOptions::with_credentials_file(&creds)
        .await
        .unwrap()
        .custom_inbox_prefix(format!(
            "{}.addon.reporter",
            flotilla_bus::subjects::inbox_prefix("edge-1")
        ))
        .connect(s.nats.url())
        .await
        .unwrap();
    let renew = common::addon::renew_lease(client.clone(), "reporter", "edge-1");
    wait_for(
        "the add-on Available through its own credentials",
        async || {
            hub.addons()
                .get_cluster_addon("edge-1", "reporter")
                .and_then(|m| {
                    m.status.as_ref().map(|st| {
                        flotilla_api::meta::condition_status(&st.conditions, "Available")
                            == Some("True")
                            && flotilla_api::meta::condition_status(
                                &st.conditions,
                                "RegistrationApplied",
                            ) == Some("True")
                    })
                })
                .unwrap_or(false)
        },
    )
    .await;
    assert_eq!(
        hub.addons()
            .get_cluster_addon("edge-1", "reporter")
            .unwrap()
            .hub
            .as_ref()
            .unwrap()
            .agent_public_key,
        key.public_key(),
        "the key is recorded for its revocation"
    );
    // Nothing else: the cluster's specs and another cluster's add-on subjects are refused.
    let mut errors = async_nats::ConnectOptions::with_credentials_file(&creds)
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    errors = errors.event_callback(move |e| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(e.to_string());
        }
    });
    let probe = errors.connect(s.nats.url()).await.unwrap();
    let _ = probe
        .subscribe(flotilla_bus::subjects::spec("edge-1"))
        .await;
    let _ = probe
        .publish(
            flotilla_bus::addons::subject("reporter", "edge-2", "lease"),
            "x".into(),
        )
        .await;
    let _ = probe.flush().await;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + SOON;
    while seen
        .iter()
        .filter(|e: &&String| e.contains("ermissions"))
        .count()
        < 2
    {
        let e = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("permission violations reported")
            .unwrap();
        seen.push(e);
    }

    // Disabling the add-on revokes the key: the add-on agent's connection is refused.
    renew.abort();
    addons
        .disable_add_on(flotilla_api::v1::DisableAddOnRequest {
            name: "reporter".into(),
            clusters: vec!["edge-1".into()],
            all: false,
        })
        .await
        .unwrap();
    wait_for("the add-on's revoked key is refused", async || {
        !connects(&s.nats.url(), &creds).await
    })
    .await;
    drop(client);
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn an_addon_asking_for_hub_access_gets_its_credentials_as_a_secret_on_the_spoke() {
    use flotilla_agent::addons::credentials::secret_creds;
    use flotilla_agent::backend::Backend;
    use flotilla_api::v1::add_on_service_client::AddOnServiceClient;
    use flotilla_api::work::ManifestId;
    let s = secure_nats();
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    let mut api = clusters_client(&hub).await;
    let state = tempfile::tempdir().unwrap();
    let agent = start_agent(secure_agent(&s, "edge-1", state.path()));
    wait_cluster(&mut api, "edge-1", "registered", |_| true).await;
    accept(&mut api, "edge-1").await;
    wait_available(&mut api, "edge-1").await;

    let mut addons = AddOnServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    common::addon::apply(&hub, ADDON).await.unwrap();
    addons
        .enable_add_on(flotilla_api::v1::EnableAddOnRequest {
            name: "reporter".into(),
            clusters: vec!["edge-1".into()],
            ..Default::default()
        })
        .await
        .unwrap();

    // The work names the Secret; the agent puts the add-on's credentials in it.
    let id = ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        namespace: flotilla_api::addon::DEFAULT_INSTALL_NAMESPACE.into(),
        name: "reporter-hub-credentials".into(),
    };
    let work = loop {
        if let Some(w) = hub.works.get(&format!(
            "edge-1/{}",
            flotilla_api::addon::work_name("reporter", 0)
        )) {
            break w;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let annotations = &work.metadata.as_ref().unwrap().annotations;
    assert_eq!(
        annotations[flotilla_api::addon::HUB_CREDENTIALS_SECRET_ANNOTATION],
        id.name
    );
    assert_eq!(
        annotations[flotilla_api::addon::INSTALL_NAMESPACE_ANNOTATION],
        id.namespace
    );
    wait_for("the add-on's credentials Secret", async || {
        agent.backend.get(&id).await.unwrap().is_some()
    })
    .await;
    let secret = agent.backend.get(&id).await.unwrap().unwrap();
    assert_eq!(
        secret["metadata"]["labels"][flotilla_api::addon::ADDON_NAME_LABEL],
        "reporter"
    );
    let text = secret_creds(&secret).expect("nats.creds in the Secret");
    let creds = state.path().join("reporter.creds");
    std::fs::write(&creds, &text).unwrap();
    let key = Creds::parse(&text).unwrap().public_key();
    assert!(
        state.path().join("addons/reporter.nk").exists(),
        "the add-on's key is kept with the agent's state"
    );

    // The add-on agent connects with them and renews its lease: Available.
    let client = async_nats::ConnectOptions::with_credentials_file(&creds)
        .await
        .unwrap()
        .custom_inbox_prefix(format!(
            "{}.addon.reporter",
            flotilla_bus::subjects::inbox_prefix("edge-1")
        ))
        .connect(s.nats.url())
        .await
        .unwrap();
    let renew = common::addon::renew_lease(client.clone(), "reporter", "edge-1");
    wait_for(
        "the add-on Available through the Secret's credentials",
        async || {
            hub.addons()
                .get_cluster_addon("edge-1", "reporter")
                .and_then(|m| {
                    m.status.as_ref().map(|st| {
                        flotilla_api::meta::condition_status(&st.conditions, "Available")
                            == Some("True")
                    })
                })
                .unwrap_or(false)
        },
    )
    .await;
    assert_eq!(
        hub.addons()
            .get_cluster_addon("edge-1", "reporter")
            .unwrap()
            .hub
            .as_ref()
            .unwrap()
            .agent_public_key,
        key,
        "the hub recorded the Secret's key"
    );

    // Disabling the add-on: the Secret goes and the key is revoked.
    renew.abort();
    addons
        .disable_add_on(flotilla_api::v1::DisableAddOnRequest {
            name: "reporter".into(),
            clusters: vec!["edge-1".into()],
            all: false,
        })
        .await
        .unwrap();
    wait_for("the Secret deleted", async || {
        agent.backend.get(&id).await.unwrap().is_none()
    })
    .await;
    assert!(!state.path().join("addons/reporter.nk").exists());
    wait_for("the add-on's revoked key is refused", async || {
        !connects(&s.nats.url(), &creds).await
    })
    .await;
    drop(client);
    agent.stop().await;
    hub.stop().await;
}

/// Governance in secure mode: policy specs reach the spoke on its own credentials and its
/// policy status comes back through the permissions those credentials give.
#[tokio::test]
async fn an_enforce_policy_reaches_a_secure_spoke_and_its_compliance_comes_back() {
    use common::policy::{api, apply, bind_default_set, clusters_in, compliant, wait_policy};
    let s = secure_nats();
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    let mut clusters = clusters_client(&hub).await;
    let state = tempfile::tempdir().unwrap();
    let agent = start_agent(secure_agent(&s, "edge-1", state.path()));
    wait_cluster(&mut clusters, "edge-1", "registered, pending", |c| {
        !accepted(c)
    })
    .await;
    accept(&mut clusters, "edge-1").await;
    wait_available(&mut clusters, "edge-1").await;
    assert!(
        state.path().join(CLUSTER_CREDS).exists(),
        "the agent runs on its own credentials"
    );
    bind_default_set(&hub).await;
    apply(
        &hub,
        r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: all, namespace: default}
spec:
  clusterSets: [default]
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: binding-policy-namespace, namespace: default}
placementRef: {name: all, kind: Placement, apiGroup: cluster.open-cluster-management.io}
subjects:
  - {name: policy-namespace, kind: Policy, apiGroup: policy.open-cluster-management.io}
"#,
    )
    .await;
    apply(
        &hub,
        &include_str!("../../api/src/ocm/policy/testdata/policy-namespace.yaml").replace(
            "spec:\n  remediationAction: inform",
            "spec:\n  remediationAction: enforce",
        ),
    )
    .await;
    let mut policies = api(&hub).await;
    let p = wait_policy(&mut policies, "policy-namespace", "Compliant", |p| {
        compliant(p) == "Compliant"
    })
    .await;
    assert_eq!(
        clusters_in(&p),
        [("edge-1".to_string(), "Compliant".to_string())]
    );
    use flotilla_agent::backend::Backend;
    let prod = agent
        .backend
        .get(&flotilla_api::work::ManifestId {
            group: String::new(),
            version: "v1".into(),
            kind: "Namespace".into(),
            namespace: String::new(),
            name: "prod".into(),
        })
        .await
        .unwrap();
    assert!(prod.is_some(), "enforced on the spoke");
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn kubectl_reaches_a_secure_spoke_through_the_hub_over_the_clusters_own_credentials() {
    let s = secure_nats();
    let mut config = secure_hub_config(&s, Duration::from_secs(3600));
    // An open hub on loopback: kubectl over plain http, no token.
    config.cluster_proxy.listen = Some("127.0.0.1:0".parse().unwrap());
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let state = tempfile::tempdir().unwrap();
    let agent = start_agent(secure_agent(&s, "edge-1", state.path()));
    wait_cluster(&mut api, "edge-1", "registered", |_| true).await;
    accept(&mut api, "edge-1").await;
    wait_available(&mut api, "edge-1").await;
    let addr = hub.cluster_proxy_addr.unwrap();
    let kubectl = common::kubectl::Kubectl::new(&format!("http://{addr}"), None, "edge-1", None);
    // The frames cross the two accounts both ways: calls to the agent, answers to the hub.
    kubectl
        .ok(
            &["create", "configmap", "through", "--from-literal=k=v"],
            None,
        )
        .await;
    let k = kubectl
        .ok(
            &["get", "configmap", "through", "-o", "jsonpath={.data.k}"],
            None,
        )
        .await;
    assert_eq!(k, "v");
    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn an_import_policy_never_readmits_a_revoked_agent_key() {
    use flotilla_api::v1::import_policy_service_client::ImportPolicyServiceClient;
    let s = secure_nats();
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    let mut api = clusters_client(&hub).await;
    let mut policies = ImportPolicyServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let yaml = "apiVersion: cluster.flotilla.io/v1alpha1\nkind: ClusterImportPolicy\n\
                metadata: {name: edge}\nspec:\n  source: {group: registration.flotilla.io, \
                resource: registrations}\n  template: '{\"labels\": {\"tier\": \"edge\"}}'\n";
    let Ok(flotilla_api::ocm::Document::ImportPolicy(p)) =
        flotilla_api::ocm::parse_documents(yaml).remove(0)
    else {
        panic!("not a policy");
    };
    policies.apply_import_policy(p).await.expect("apply");
    let state = tempfile::tempdir().unwrap();
    let agent = start_agent(secure_agent(&s, "edge-1", state.path()));
    // Accepted by the policy alone (its key was bound at registration).
    wait_available(&mut api, "edge-1").await;
    // Deleted by the admin: its keys are revoked. The agent comes back through the shared
    // bootstrap credential with the same key; the policy matches the new pending cluster but
    // the import write is refused, and the status says why.
    api.delete_cluster(flotilla_api::v1::DeleteClusterRequest {
        name: "edge-1".into(),
    })
    .await
    .expect("delete");
    wait_for("the refusal in the policy's status", async || {
        let Ok(p) = policies
            .get_import_policy(flotilla_api::v1::GetImportPolicyRequest {
                name: "edge".into(),
            })
            .await
        else {
            return false;
        };
        p.into_inner()
            .status
            .is_some_and(|s| s.errors.iter().any(|e| e.contains("was revoked")))
    })
    .await;
    let c = get(&mut api, "edge-1").await.expect("registered again");
    assert!(
        !accepted(&c),
        "a revoked key is never readmitted by a policy"
    );
    agent.stop().await;
    hub.stop().await;
}

/// The compatibility window in secure mode: an agent of the previous wire and one of the prefix
/// wire (`flotilla.to.<c>.>`), each over the credentials the hub issued it, get their works and
/// answer proxied reads (the proxy crosses as a service of the agents' account on both wires).
#[tokio::test]
async fn agents_of_both_wires_work_over_their_own_credentials() {
    let s = secure_nats();
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    both_wires_get_works_and_answer_proxied_reads(&s, &hub, ["old-s", "new-s"]).await;
    hub.stop().await;
}

/// Starts an agent of the previous wire named `names[0]` and one of the prefix wire named
/// `names[1]` on `s`, accepts them, and checks that each applies a work and answers a proxied
/// read.
async fn both_wires_get_works_and_answer_proxied_reads(
    s: &Secure,
    hub: &flotilla_hub::Hub,
    names: [&str; 2],
) {
    let mut api = clusters_client(hub).await;
    let states = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut previous = secure_agent(s, names[0], states[0].path());
    previous.legacy_wire = true;
    let agents = [
        start_agent(previous),
        start_agent(secure_agent(s, names[1], states[1].path())),
    ];
    for name in names {
        wait_cluster(&mut api, name, "registered", |_| true).await;
        accept(&mut api, name).await;
    }
    let mut works = works_client(hub).await;
    for (name, prefix) in names.into_iter().zip([false, true]) {
        let c = wait_available(&mut api, name).await;
        assert_eq!(c.hub.unwrap().agent_listens_under_prefix, prefix, "{name}");
        works
            .apply_work(common::work::config_map_work(name, "cm"))
            .await
            .unwrap();
    }
    for name in names {
        wait_work(&mut works, name, "cm", "applied", |w| {
            common::work::converged_at(w, 1)
        })
        .await;
        let read = common::work::proxy(&mut works, name, "configmaps", "cm")
            .await
            .unwrap();
        assert_eq!(read.len(), 1, "{name}: {read:?}");
    }
    for agent in agents {
        agent.stop().await;
    }
}

/// A secure directory written before the prefix wire has account JWTs without its crossings
/// (`flotilla.to.*.spec`, `…kubeapi` from the hub's account, `…proxy` from the agents'). The
/// new hub pushes its accounts with them at start, so a new agent on that directory gets its
/// works and answers proxied reads, and an old one still does too.
#[tokio::test]
async fn a_secure_directory_written_before_the_prefix_gets_its_crossings_from_the_new_hub() {
    use flotilla_auth::jwt::{Account, Claims};
    let (dir, written, port) = secure_dir();
    // As an older `flotilla-hub init` wrote them: the same accounts, without the crossings.
    let older = |claims: &Claims<Account>| {
        let mut c = claims.clone();
        c.iat -= 60;
        c.nats
            .exports
            .retain(|e| !e.subject.starts_with("flotilla.to."));
        c.nats
            .imports
            .retain(|i| !i.subject.starts_with("flotilla.to."));
        c.encode(&written.operator_signing).unwrap()
    };
    let mut conf = std::fs::read_to_string(&written.server_conf).unwrap();
    for (file, claims) in [
        ("account.jwt", &written.account_jwt),
        ("agents.jwt", &written.agents_jwt),
    ] {
        let path = written.dir.join(file);
        let current = std::fs::read_to_string(&path).unwrap().trim().to_string();
        assert!(
            current.len() > 100 && conf.contains(&current),
            "{file} preloaded"
        );
        let old = older(claims);
        conf = conf.replace(&current, &old);
        std::fs::write(&path, old).unwrap();
    }
    std::fs::write(&written.server_conf, conf).unwrap();
    let s = Secure {
        secure: SecureDir::load(&written.dir).unwrap(),
        nats: NatsServer::start_from_config(written.server_conf.clone(), port),
        _dir: dir,
    };
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    both_wires_get_works_and_answer_proxied_reads(&s, &hub, ["old-d", "new-d"]).await;
    hub.stop().await;
}
