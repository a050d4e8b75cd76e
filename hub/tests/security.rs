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

fn secure_nats() -> Secure {
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
async fn another_key_under_an_accepted_name_gets_nothing_until_the_admin_accepts_it() {
    let s = secure_nats();
    let hub = start_hub(secure_hub_config(&s, Duration::from_secs(3600))).await;
    let mut api = clusters_client(&hub).await;
    let real_state = tempfile::tempdir().unwrap();
    let real = start_agent(secure_agent(&s, "edge-1", real_state.path()));
    wait_cluster(&mut api, "edge-1", "registered, pending", |c| !accepted(c)).await;
    accept(&mut api, "edge-1").await;
    wait_available(&mut api, "edge-1").await;

    // An impostor with the (shared) bootstrap credentials and its own key.
    let fake_state = tempfile::tempdir().unwrap();
    let fake = start_agent(secure_agent(&s, "edge-1", fake_state.path()));
    wait_cluster(&mut api, "edge-1", "a second key waiting", |c| {
        c.hub
            .as_ref()
            .is_some_and(|h| !h.requested_public_key.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !fake_state.path().join(CLUSTER_CREDS).exists(),
        "the impostor got credentials"
    );
    wait_available(&mut api, "edge-1").await;
    fake.stop().await;
    real.stop().await;
    hub.stop().await;
}
