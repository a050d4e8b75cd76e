//! The web dashboard end to end: plain HTTP for what it refuses, and a real Chromium (Debian's
//! `chromium` over WebDriver) for what an operator sees — a simulated fleet listed, a cluster
//! whose agent stops turning Unknown on an open page without a reload, a placement's
//! decisions and reasons, a read-only token that sees a rollout but cannot pause it.

#[path = "common/browser.rs"]
mod browser;
mod common;

use browser::{Browser, PAGE};
use common::tokens::{ADMIN, Bearer, TOKENS, VIEWER, tokens};
use common::*;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient;
use flotilla_api::v1::{
    ClusterNamesRequest, LabelClusterRequest, LocalPlacementReference, ManagedClusterSetBinding,
    ManagedClusterSetBindingSpec, Manifest, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec,
    ManifestWorkSpec, ManifestsTemplate, ObjectMeta, RolloutConfig, RolloutStrategy,
};
use flotilla_hub::Hub;
use flotilla_hub::dashboard::history::Availability;
use flotilla_testkit::NatsServer;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A hub with the test token file and the dashboard on a free loopback port.
async fn hub(nats: &NatsServer, edit: impl FnOnce(&mut flotilla_hub::Config)) -> Hub {
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(tokens());
    config.dashboard.listen = Some("127.0.0.1:0".parse().unwrap());
    edit(&mut config);
    start_hub(config).await
}

/// An HTTP/1.1 answer: status, headers (lower-case names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request on its own connection (`Connection: close`), read to the end.
async fn http(hub: &Hub, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let addr = hub.dashboard_addr.expect("serving the dashboard");
    let mut tcp = tokio::time::timeout(SOON, tokio::net::TcpStream::connect(addr))
        .await
        .unwrap()
        .unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(SOON, tcp.read_to_end(&mut raw))
        .await
        .expect("answered in time")
        .unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_known_token_or_session_are_refused() {
    let nats = NatsServer::start();
    let hub = hub(&nats, |_| {}).await;

    // A browser is sent to sign in and brought back; a stream or a script gets 401.
    let a = http(&hub, "GET", "/clusters?q=edge", &[], "").await;
    assert_eq!(a.status, 303);
    assert_eq!(
        a.header("location"),
        Some("/login?next=%2Fclusters%3Fq%3Dedge")
    );
    let a = http(&hub, "GET", "/events", &[], "").await;
    assert_eq!(a.status, 401);
    let a = http(
        &hub,
        "GET",
        "/clusters",
        &[("Authorization", "Bearer not-a-known-token-123")],
        "",
    )
    .await;
    assert_eq!(a.status, 401);
    assert!(a.body.contains("not known"), "{}", a.body);
    let a = http(
        &hub,
        "GET",
        "/clusters",
        &[("Cookie", "flotilla_dashboard=forged")],
        "",
    )
    .await;
    assert_eq!(a.status, 303, "an unknown session signs in again");

    // A read-only token sees; pages carry a policy that runs no inline script.
    let viewer = format!("Bearer {VIEWER}");
    let a = http(&hub, "GET", "/clusters", &[("Authorization", &viewer)], "").await;
    assert_eq!(a.status, 200);
    assert!(a.body.contains("<h1>Clusters</h1>"));
    assert!(
        a.header("content-security-policy")
            .unwrap()
            .contains("script-src 'self'")
    );
    assert_eq!(a.header("x-frame-options"), Some("DENY"));

    // …but may not act.
    let a = http(
        &hub,
        "POST",
        "/rollouts/default/settings",
        &[
            ("Authorization", &viewer),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "action=pause",
    )
    .await;
    assert_eq!(a.status, 403);
    assert!(
        a.body
            .contains("bob (read-only) may not call /flotilla.v1.ReplicaSetService/Rollout"),
        "{}",
        a.body
    );

    // Sign-in: a wrong token is refused, a right one gets an HttpOnly, SameSite=Strict cookie
    // holding a session id (not the token).
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let a = http(
        &hub,
        "POST",
        "/login",
        &form,
        "token=wrong-token-000000000&next=%2F",
    )
    .await;
    assert_eq!(a.status, 401);
    assert!(a.header("set-cookie").is_none());
    let body = format!("token={ADMIN}&next=%2Fclusters");
    let a = http(&hub, "POST", "/login", &form, &body).await;
    assert_eq!(a.status, 303);
    assert_eq!(a.header("location"), Some("/clusters"));
    let cookie = a.header("set-cookie").unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains(ADMIN));
    let session = cookie.split(';').next().unwrap().to_string();
    let a = http(&hub, "GET", "/", &[("Cookie", &session)], "").await;
    assert_eq!(a.status, 200);
    assert!(a.body.contains("alice (admin)"));

    // Another site cannot make a signed-in browser act: no CSRF token, or a cross-site form.
    let with_cookie = [
        ("Cookie", session.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    let a = http(
        &hub,
        "POST",
        "/rollouts/default/settings",
        &with_cookie,
        "action=pause",
    )
    .await;
    assert_eq!(a.status, 403);
    assert!(a.body.contains("CSRF"), "{}", a.body);
    let a = http(
        &hub,
        "POST",
        "/login",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        &body,
    )
    .await;
    assert_eq!(a.status, 403);
    // A redirect after sign-in never leaves the server.
    let a = http(
        &hub,
        "POST",
        "/login",
        &form,
        &format!("token={ADMIN}&next=%2F%2Fevil.example"),
    )
    .await;
    assert_eq!(a.header("location"), Some("/"));
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_streams_are_bounded_and_end_with_the_hub() {
    let nats = NatsServer::start();
    let hub = hub(&nats, |c| c.dashboard.live.max_clients = 1).await;
    let addr = hub.dashboard_addr.unwrap();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!(
                "GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {VIEWER}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(SOON, stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"));
    // The first event says where the fleet stands (counts), with no need to reload.
    let mut seen = head;
    while !seen.contains("event: summary") {
        let n = tokio::time::timeout(SOON, stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "stream ended early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let viewer = format!("Bearer {VIEWER}");
    let a = http(&hub, "GET", "/events", &[("Authorization", &viewer)], "").await;
    assert_eq!(a.status, 503, "a second stream over the bound is refused");

    // Stopping the hub ends the open stream.
    let stop = tokio::spawn(hub.stop());
    let ended = tokio::time::timeout(SOON, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream outlived the hub");
    tokio::time::timeout(SOON, stop).await.unwrap().unwrap();
}

#[test]
fn plain_http_or_an_open_dashboard_off_loopback_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla-hub"))
        .args(["--dashboard-listen", "0.0.0.0:0", "--api-token-file"])
        .arg(&tokens)
        .env_remove("FLOTILLA_GRPC_TLS_CERT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--dashboard-listen 0.0.0.0:0: plain HTTP is served on loopback only"),
        "{err}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla-hub"))
        .args(["--dashboard-listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--dashboard-listen 0.0.0.0:0: without --api-token-file"),
        "{err}"
    );
}

const PLACEMENT: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: edge, namespace: default}
spec:
  clusterSets: [default]
  predicates:
    - requiredClusterSelector:
        labelSelector:
          matchLabels: {rollout: "yes"}
"#;

fn replica_set() -> ManifestWorkReplicaSet {
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"default"},"data":{"v":"1"}}"#;
    ManifestWorkReplicaSet {
        metadata: Some(ObjectMeta {
            name: "settings".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
        spec: Some(ManifestWorkReplicaSetSpec {
            manifest_work_template: Some(ManifestWorkSpec {
                workload: Some(ManifestsTemplate {
                    manifests: vec![Manifest {
                        raw: cm.as_bytes().to_vec(),
                    }],
                }),
                ..Default::default()
            }),
            placement_refs: vec![LocalPlacementReference {
                name: "edge".into(),
                rollout_strategy: Some(RolloutStrategy {
                    r#type: "Progressive".into(),
                    progressive: Some(RolloutConfig {
                        max_concurrency: "1".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }],
            cascade_deletion_policy: String::new(),
        }),
        status: None,
        hub: None,
    }
}

/// Waits until the hub's inventory shows `name` in state `want`; when it did.
async fn wait_state(hub: &Hub, name: &str, want: Availability) -> Instant {
    let deadline = Instant::now() + SOON;
    loop {
        if hub
            .inventory
            .get(name)
            .is_some_and(|c| Availability::of(&c) == want)
        {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "{name} never became {want:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Signs in at the form the browser was sent to.
async fn sign_in(b: &Browser, token: &str) {
    b.wait_until(
        "return !!document.getElementById('token')",
        "the sign-in form",
        PAGE,
    )
    .await;
    b.type_into("#token", token).await;
    b.click("#sign-in").await;
    b.wait_until(
        "return !document.getElementById('token')",
        "signed in",
        PAGE,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chromium_sees_the_fleet_live_a_placements_reasons_and_a_read_only_token_cannot_pause() {
    // The browser first: without one the test fails at once with the install hint.
    let b = Browser::start().await;
    let nats = NatsServer::start();
    let hub = hub(&nats, |c| {
        c.dashboard.live.sample_every = Duration::from_millis(500)
    })
    .await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut clusters = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let names = ["edge-1", "edge-2", "edge-3"];
    let mut agents: Vec<_> = names
        .iter()
        .chain(&["edge-pending"])
        .map(|n| start_agent(agent_config(n, &nats.url())))
        .collect();
    for n in names.iter().chain(&["edge-pending"]) {
        wait_state(&hub, n, Availability::Pending).await;
    }
    clusters
        .accept_clusters(ClusterNamesRequest {
            names: names.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    for n in names {
        wait_state(&hub, n, Availability::Available).await;
    }
    for n in ["edge-1", "edge-2"] {
        clusters
            .label_cluster(LabelClusterRequest {
                name: n.into(),
                set: [("rollout".to_string(), "yes".to_string())].into(),
                remove: vec![],
            })
            .await
            .unwrap();
    }
    ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_binding(ManagedClusterSetBinding {
            metadata: Some(ObjectMeta {
                name: "default".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            spec: Some(ManagedClusterSetBindingSpec {
                cluster_set: "default".into(),
            }),
            status: None,
        })
        .await
        .unwrap();
    let Ok(Document::Placement(p)) = parse_documents(PLACEMENT).remove(0) else {
        panic!("placement fixture");
    };
    PlacementServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_placement(p)
        .await
        .unwrap();
    ReplicaSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_replica_set(replica_set())
        .await
        .unwrap();
    let base = format!("http://{}", hub.dashboard_addr.unwrap());

    // The clusters view lists the simulated fleet, after signing in with a read-only token.
    b.goto(&format!("{base}/clusters")).await;
    sign_in(&b, VIEWER).await;
    b.wait_until(
        "return ['edge-1','edge-2','edge-3','edge-pending'].every(n => \
         document.querySelector('#clusters tr[data-cluster=\"' + n + '\"]'))",
        "every cluster listed",
        PAGE,
    )
    .await;
    assert!(b.text("#who").await.contains("bob (read-only)"));
    assert_eq!(
        b.text("tr[data-cluster=\"edge-1\"] [data-field=availability]")
            .await,
        "Available"
    );
    assert_eq!(
        b.text("tr[data-cluster=\"edge-pending\"] [data-field=availability]")
            .await,
        "Pending"
    );
    b.screenshot("clusters").await;

    // A filter is a URL: the label selector of the API, and the back button comes back.
    b.goto(&format!("{base}/clusters?selector=rollout%3Dyes"))
        .await;
    assert_eq!(b.text("#count").await.split(' ').next(), Some("2"));
    b.goto(&format!("{base}/clusters/edge-1")).await;
    assert!(b.text("h1").await.contains("edge-1"));
    b.screenshot("cluster").await;
    tokio::time::timeout(PAGE, b.client.back())
        .await
        .unwrap()
        .unwrap();
    b.wait_until(
        "return location.search === '?selector=rollout%3Dyes'",
        "back on the filtered list",
        PAGE,
    )
    .await;

    // A placement's decisions and, per cluster, the filters and scores that made them.
    b.goto(&format!("{base}/placements/default/edge")).await;
    b.wait_until(
        "const d = document.getElementById('decisions').innerText; \
         return d.includes('edge-1') && d.includes('edge-2') && !d.includes('edge-3')",
        "the decisions",
        PAGE,
    )
    .await;
    let reasons = b.text("#reasons").await;
    assert!(
        reasons.contains("edge-3") && reasons.contains("failed"),
        "{reasons}"
    );
    assert!(reasons.contains("selected"), "{reasons}");
    b.screenshot("placement").await;

    // A read-only token sees the rollout but cannot pause it: the button is disabled, and a
    // form sent anyway is refused.
    b.goto(&format!("{base}/rollouts/default/settings")).await;
    b.wait_until(
        "return document.getElementById('action-pause').disabled",
        "a disabled pause",
        PAGE,
    )
    .await;
    assert!(b.text("#may-not").await.contains("bob (read-only) may not"));
    b.js("const p = document.getElementById('action-pause'); p.disabled = false; p.click(); return true").await;
    b.wait_until(
        "return document.title.startsWith('Forbidden')",
        "the refusal",
        PAGE,
    )
    .await;
    let rs = hub.replicasets().get("default", "settings").unwrap();
    assert!(
        !rs.hub.as_ref().is_some_and(|h| h.paused),
        "a read-only token paused a rollout"
    );

    // Live: a cluster whose agent stops turns Unknown on the open page, without a reload,
    // within two seconds of the hub seeing it.
    b.goto(&format!("{base}/clusters")).await;
    b.wait_until(
        "return document.body.dataset.live === 'on'",
        "the live feed",
        PAGE,
    )
    .await;
    b.js("window.__notReloaded = true; return true").await;
    agents.remove(2).stop().await;
    let hub_saw = wait_state(&hub, "edge-3", Availability::Unknown).await;
    b.wait_until(
        "return document.querySelector('tr[data-cluster=\"edge-3\"] [data-field=availability]').innerText === 'Unknown'",
        "edge-3 Unknown on the page",
        PAGE,
    )
    .await;
    let lag = hub_saw.elapsed();
    assert!(
        lag < Duration::from_secs(2),
        "the page showed Unknown {lag:?} after the hub"
    );
    assert_eq!(
        b.js("return window.__notReloaded === true").await,
        true,
        "the page reloaded"
    );

    // A cluster's works, and a work's conditions and feedback per manifest.
    b.goto(&format!("{base}/clusters/edge-1")).await;
    b.wait_until(
        "return !!document.querySelector('#works a')",
        "edge-1's work",
        PAGE,
    )
    .await;
    b.click("#works a").await;
    b.wait_until(
        "return document.body.innerText.includes('Manifests (1)') && \
         document.body.innerText.includes('ConfigMap default/settings')",
        "the work's manifest",
        PAGE,
    )
    .await;
    b.screenshot("work").await;

    // The overview counts it, and lists the transition.
    b.goto(&format!("{base}/")).await;
    assert_eq!(b.text("[data-count=\"Unknown\"]").await, "1");
    assert_eq!(b.text("[data-count=\"Pending\"]").await, "1");
    assert!(b.text("#transitions").await.contains("edge-3"));
    b.screenshot("overview").await;

    // An admin may pause. Signed out first — the sign-out's redirect to the sign-in page is
    // waited for, or it could land after the next page load and take the browser away from it.
    b.click("header form button").await;
    b.wait_until(
        "return !!document.getElementById('token')",
        "signed out",
        PAGE,
    )
    .await;
    b.goto(&format!("{base}/rollouts/default/settings")).await;
    sign_in(&b, ADMIN).await;
    b.click("#action-pause").await;
    b.wait_until(
        "return !!document.getElementById('notice')",
        "the pause done",
        PAGE,
    )
    .await;
    let rs = hub.replicasets().get("default", "settings").unwrap();
    assert!(
        rs.hub.as_ref().is_some_and(|h| h.paused),
        "the admin's pause did not land"
    );
    assert!(b.text("#state").await.contains("Paused"));
    b.screenshot("rollout").await;

    b.stop().await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_dashboard_serves_the_apis_certificate_and_its_cookie_is_secure() {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("hub.pem"), dir.path().join("hub-key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let hub = hub(&nats, |c| {
        c.api.tls = Some(flotilla_hub::TlsFiles {
            cert: cert_file,
            key: key_file,
        })
    })
    .await;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(cert.cert.pem().as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let addr = hub.dashboard_addr.unwrap();
    let body = format!("token={VIEWER}&next=%2F");
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio::time::timeout(
        SOON,
        connector.connect(ServerName::try_from("localhost").unwrap(), tcp),
    )
    .await
    .unwrap()
    .expect("a TLS handshake with the API's certificate");
    tls.write_all(
        format!(
            "POST /login HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(SOON, tls.read_to_end(&mut raw))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 303"), "{text}");
    let cookie = text
        .lines()
        .find(|l| l.to_lowercase().starts_with("set-cookie:"))
        .expect("a session cookie");
    assert!(cookie.contains("; Secure"), "{cookie}");
    // Plain HTTP on the TLS port gets no page.
    let a = tokio::time::timeout(SOON, async {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut raw = Vec::new();
        let _ = tcp.read_to_end(&mut raw).await;
        raw
    })
    .await
    .unwrap();
    assert!(!String::from_utf8_lossy(&a).contains("<html"));
    hub.stop().await;
}

/// An add-on installed by placement `edge`, progressively, from a template of one ConfigMap.
const ADDON: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata: {name: probe-v1}
spec:
  addonName: probe
  agentSpec:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: probe-settings, namespace: open-cluster-management-agent-addon}
          data: {cluster: "{{CLUSTER_NAME}}"}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: probe}
spec:
  addOnMeta: {displayName: Probe, description: a test add-on}
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: probe-v1}
  installStrategy:
    type: Placements
    placements:
      - namespace: default
        name: edge
        rolloutStrategy:
          type: Progressive
          progressive: {maxConcurrency: "1"}
"#;

/// Applies the add-on fixture through the controllers of `hub`.
async fn apply_addon(hub: &Hub) {
    let ctl = hub.controllers().expect("the controllers");
    for doc in parse_documents(ADDON) {
        match doc.unwrap() {
            Document::AddOnTemplate(t) => {
                ctl.addons.apply_template(t).await.unwrap();
            }
            Document::ClusterManagementAddOn(a) => {
                ctl.addons.apply_addon(a).await.unwrap();
            }
            other => panic!("unexpected fixture {other:?}"),
        }
    }
}

/// Reads an SSE stream until `needle` shows (or the time is up); what it read.
async fn read_until(stream: &mut tokio::net::TcpStream, seen: &mut String, needle: &str) {
    let mut buf = vec![0u8; 8192];
    let found = tokio::time::timeout(SOON, async {
        while !seen.contains(needle) {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "stream ended early: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
    .await;
    assert!(found.is_ok(), "no {needle:?} in {seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_addons_registrations_and_controller_changes_over_http() {
    let nats = NatsServer::start();
    let hub = hub(&nats, |_| {}).await;
    let mut clusters = ClusterServiceClient::with_interceptor(
        tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap(),
        Bearer(ADMIN),
    );
    let mut agents: Vec<_> = ["edge-1", "edge-2", "wait-1"]
        .iter()
        .map(|n| start_agent(agent_config(n, &nats.url())))
        .collect();
    for n in ["edge-1", "edge-2", "wait-1"] {
        wait_state(&hub, n, Availability::Pending).await;
    }
    let viewer = format!("Bearer {VIEWER}");
    let admin = format!("Bearer {ADMIN}");
    let form_as = |auth: &str| {
        [
            ("Authorization", auth.to_string()),
            ("Content-Type", "application/x-www-form-urlencoded".into()),
        ]
    };
    let (viewer_form, admin_form) = (form_as(&viewer), form_as(&admin));
    let as_viewer: Vec<(&str, &str)> = viewer_form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let as_admin: Vec<(&str, &str)> = admin_form.iter().map(|(k, v)| (*k, v.as_str())).collect();

    // A read-only token sees the pending registrations, with no button, and may not accept.
    let a = http(&hub, "GET", "/", &[("Authorization", &viewer)], "").await;
    assert_eq!(a.status, 200);
    assert!(a.body.contains("data-pending=\"wait-1\""), "{}", a.body);
    assert!(!a.body.contains("/registration"), "{}", a.body);
    assert!(
        a.body
            .contains("bob (read-only) may not call /flotilla.v1.ClusterService/AcceptClusters")
    );
    let a = http(
        &hub,
        "POST",
        "/clusters/wait-1/registration",
        &as_viewer,
        "action=accept",
    )
    .await;
    assert_eq!(a.status, 403);
    assert!(
        a.body
            .contains("may not call /flotilla.v1.ClusterService/AcceptClusters")
    );
    let still = hub.inventory.get("wait-1").unwrap();
    assert_eq!(Availability::of(&still), Availability::Pending);

    // An admin's page has the buttons; a signed-in browser's form needs its CSRF token.
    let a = http(&hub, "GET", "/", &[("Authorization", &admin)], "").await;
    assert!(
        a.body.contains("action=\"/clusters/wait-1/registration\""),
        "{}",
        a.body
    );
    let body = format!("token={ADMIN}&next=%2F");
    let login = http(
        &hub,
        "POST",
        "/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &body,
    )
    .await;
    let session = login
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let a = http(
        &hub,
        "POST",
        "/clusters/wait-1/registration",
        &[
            ("Cookie", &session),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "action=deny",
    )
    .await;
    assert_eq!(a.status, 403);
    assert!(a.body.contains("CSRF"));
    let f = &as_admin;
    for n in ["edge-1", "edge-2"] {
        let a = http(
            &hub,
            "POST",
            &format!("/clusters/{n}/registration"),
            f,
            "action=accept&key=",
        )
        .await;
        assert_eq!(a.status, 303, "{}", a.body);
        assert_eq!(
            a.header("location"),
            Some(format!("/?done=accepted&cluster={n}").as_str())
        );
        wait_state(&hub, n, Availability::Available).await;
    }
    let a = http(
        &hub,
        "POST",
        "/clusters/wait-1/registration",
        f,
        "action=deny",
    )
    .await;
    assert_eq!(a.status, 303);
    wait_state(&hub, "wait-1", Availability::Denied).await;
    let a = http(
        &hub,
        "POST",
        "/clusters/nobody/registration",
        f,
        "action=deny",
    )
    .await;
    assert_eq!(a.status, 404);
    let a = http(
        &hub,
        "POST",
        "/clusters/edge-1/registration",
        f,
        "action=maybe",
    )
    .await;
    assert_eq!(a.status, 400);

    // A stream following the placements and the add-on is told when they change.
    let addr = hub.dashboard_addr.unwrap();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!(
                "GET /events?follow=placement%3Adefault%2Fedge%20addon%3A%2A HTTP/1.1\r\nHost: {addr}\r\n\
                 Authorization: Bearer {VIEWER}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut seen = String::new();
    read_until(&mut stream, &mut seen, "event: summary").await;
    for n in ["edge-1", "edge-2"] {
        clusters
            .label_cluster(LabelClusterRequest {
                name: n.into(),
                set: [("rollout".to_string(), "yes".to_string())].into(),
                remove: vec![],
            })
            .await
            .unwrap();
    }
    let ctl = hub.controllers().unwrap();
    ctl.sets
        .apply_binding(ManagedClusterSetBinding {
            metadata: Some(ObjectMeta {
                name: "default".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            spec: Some(ManagedClusterSetBindingSpec {
                cluster_set: "default".into(),
            }),
            status: None,
        })
        .await
        .unwrap();
    let Ok(Document::Placement(p)) = parse_documents(PLACEMENT).remove(0) else {
        panic!("placement fixture");
    };
    hub.placements().apply(p).await.unwrap();
    read_until(&mut stream, &mut seen, "\"kind\":\"placement\"").await;
    assert!(seen.contains("event: changed\ndata: {"), "{seen}");
    assert!(seen.contains("\"key\":\"default/edge\""), "{seen}");
    apply_addon(&hub).await;
    read_until(&mut stream, &mut seen, "\"kind\":\"addon\"").await;
    assert!(
        !seen.contains("\"kind\":\"rollout\""),
        "a change it does not follow: {seen}"
    );

    // The add-on's rollout: read-only, per placement, as it progresses.
    let deadline = Instant::now() + SOON;
    let page = loop {
        let a = http(
            &hub,
            "GET",
            "/addons/probe",
            &[("Authorization", &viewer)],
            "",
        )
        .await;
        assert_eq!(a.status, 200);
        if a.body.contains("2/2") {
            break a.body;
        }
        assert!(Instant::now() < deadline, "never rolled out: {}", a.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        page.contains("Install strategy <b>Placements</b>"),
        "{page}"
    );
    assert!(page.contains("Progressive, maxConcurrency 1"));
    assert!(page.contains("id=\"read-only\""));
    assert!(page.contains("id=\"progress-over-time\""));
    assert!(!page.contains("<button type=\"submit\" name=\"action\""));
    let a = http(&hub, "GET", "/rollouts", &[("Authorization", &viewer)], "").await;
    assert!(a.body.contains("href=\"/addons/probe\""), "{}", a.body);
    let a = http(
        &hub,
        "GET",
        "/addons/nope",
        &[("Authorization", &viewer)],
        "",
    )
    .await;
    assert_eq!(a.status, 404);

    // Every work of the fleet (the add-on's), filtered, linking to each work's page.
    let a = http(&hub, "GET", "/works", &[("Authorization", &viewer)], "").await;
    assert_eq!(a.status, 200);
    assert!(a.body.contains("2 of 2 works"), "{}", a.body);
    let a = http(
        &hub,
        "GET",
        "/works?cluster=edge-2",
        &[("Authorization", &viewer)],
        "",
    )
    .await;
    assert!(a.body.contains("1 of 2 works"), "{}", a.body);
    assert!(
        a.body.contains("href=\"/clusters/edge-2/works/"),
        "{}",
        a.body
    );
    let a = http(
        &hub,
        "GET",
        "/works?state=Sideways",
        &[("Authorization", &viewer)],
        "",
    )
    .await;
    assert_eq!(a.status, 400);
    assert!(
        a.body.contains("state &quot;Sideways&quot; is not one of"),
        "{}",
        a.body
    );

    for a in agents.drain(..) {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chromium_follows_a_placement_and_a_rollout_live_lists_works_and_accepts_a_registration() {
    let b = Browser::start().await;
    let nats = NatsServer::start();
    let hub = hub(&nats, |_| {}).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut clusters = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let names = ["edge-1", "edge-2", "edge-3"];
    let agents: Vec<_> = names
        .iter()
        .chain(&["edge-pending"])
        .map(|n| start_agent(agent_config(n, &nats.url())))
        .collect();
    for n in names.iter().chain(&["edge-pending"]) {
        wait_state(&hub, n, Availability::Pending).await;
    }
    clusters
        .accept_clusters(ClusterNamesRequest {
            names: names.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    for n in names {
        wait_state(&hub, n, Availability::Available).await;
    }
    let label = |n: &'static str| LabelClusterRequest {
        name: n.into(),
        set: [("rollout".to_string(), "yes".to_string())].into(),
        remove: vec![],
    };
    clusters.label_cluster(label("edge-1")).await.unwrap();
    ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_binding(ManagedClusterSetBinding {
            metadata: Some(ObjectMeta {
                name: "default".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            spec: Some(ManagedClusterSetBindingSpec {
                cluster_set: "default".into(),
            }),
            status: None,
        })
        .await
        .unwrap();
    let Ok(Document::Placement(p)) = parse_documents(PLACEMENT).remove(0) else {
        panic!("placement fixture");
    };
    PlacementServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_placement(p)
        .await
        .unwrap();
    ReplicaSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_replica_set(replica_set())
        .await
        .unwrap();
    apply_addon(&hub).await;
    let base = format!("http://{}", hub.dashboard_addr.unwrap());

    // An admin accepts the pending registration from the overview.
    b.goto(&format!("{base}/")).await;
    sign_in(&b, ADMIN).await;
    b.wait_until(
        "return !!document.querySelector('tr[data-pending=\"edge-pending\"] button.accept')",
        "the Accept button",
        PAGE,
    )
    .await;
    b.screenshot("pending").await;
    b.click("tr[data-pending=\"edge-pending\"] button.accept")
        .await;
    b.wait_until(
        "return (document.getElementById('notice') || {}).innerText === 'Cluster edge-pending accepted.'",
        "the accept done",
        PAGE,
    )
    .await;
    wait_state(&hub, "edge-pending", Availability::Available).await;

    // A placement's page follows its decisions live: a cluster labelled joins them, the page
    // not reloaded; its scores' distributions per prioritizer are drawn.
    b.goto(&format!("{base}/placements/default/edge")).await;
    b.wait_until(
        "const d = document.getElementById('decisions').innerText; \
         return d.includes('edge-1') && !d.includes('edge-2') && document.body.dataset.live === 'on'",
        "edge-1 decided, and the live feed",
        PAGE,
    )
    .await;
    b.js("window.__notReloaded = true; return true").await;
    clusters.label_cluster(label("edge-2")).await.unwrap();
    b.wait_until(
        "return document.getElementById('decisions').innerText.includes('edge-2')",
        "edge-2 decided on the open page",
        PAGE,
    )
    .await;
    assert_eq!(
        b.js("return window.__notReloaded === true").await,
        true,
        "the page reloaded"
    );
    assert!(
        b.js("return document.querySelectorAll('#distributions figure').length")
            .await
            .as_u64()
            .unwrap()
            >= 2
    );
    b.screenshot("placement").await;

    // A rollout's page follows it live: paused through the API, it shows Paused without a
    // reload; its groups and its progress over time are drawn.
    b.goto(&format!("{base}/rollouts/default/settings")).await;
    b.wait_until(
        "return !!document.getElementById('progress-over-time') && \
         !!document.querySelector('.group-bar') && document.body.dataset.live === 'on'",
        "the rollout's plots",
        PAGE,
    )
    .await;
    b.js("window.__notReloaded = true; return true").await;
    hub.replicasets()
        .rollout("default", "settings", "pause")
        .await
        .unwrap();
    b.wait_until(
        "return document.getElementById('state').innerText.includes('Paused')",
        "Paused on the open page",
        PAGE,
    )
    .await;
    assert_eq!(b.js("return window.__notReloaded === true").await, true);
    b.screenshot("rollout").await;

    // The add-on's rollout, read-only.
    b.goto(&format!("{base}/addons/probe")).await;
    b.wait_until(
        "return !!document.getElementById('read-only') && \
         !!document.querySelector('section.progression')",
        "the add-on's rollout",
        PAGE,
    )
    .await;
    b.screenshot("addon").await;

    // Every work of the fleet; a filter is a URL, a work's page is a click, back comes back.
    b.goto(&format!("{base}/works")).await;
    b.wait_until(
        "return document.querySelectorAll('#works tbody tr').length >= 3",
        "the fleet's works",
        PAGE,
    )
    .await;
    b.type_into("input[name=cluster]", "edge-2").await;
    b.click("form.filters button").await;
    b.wait_until(
        "return location.search.includes('cluster=edge-2') && \
         [...document.querySelectorAll('#works tbody tr')].every(r => r.dataset.work.startsWith('edge-2/'))",
        "the works of edge-2",
        PAGE,
    )
    .await;
    b.screenshot("works").await;
    b.click("#works tbody tr td:nth-child(2) a").await;
    b.wait_until(
        "return location.pathname.startsWith('/clusters/edge-2/works/')",
        "a work's page",
        PAGE,
    )
    .await;
    tokio::time::timeout(PAGE, b.client.back())
        .await
        .unwrap()
        .unwrap();
    b.wait_until(
        "return location.pathname === '/works' && location.search.includes('cluster=edge-2')",
        "back on the filtered works",
        PAGE,
    )
    .await;

    b.stop().await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
