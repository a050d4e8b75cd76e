//! The web dashboard over plain HTTP: what it refuses (unknown tokens, sessions, plain HTTP or an
//! open dashboard off loopback), bounded live streams, TLS, and the works, add-ons,
//! registrations and controller changes it serves and accepts. What an operator sees in a real
//! Chromium is `dashboard_browser.rs`.

use crate::common;
use crate::dashboard_fixture as dashboard;

use common::tokens::{ADMIN, Bearer, TOKENS, VIEWER};
use common::*;
use dashboard::*;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::LabelClusterRequest;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_hub::dashboard::history::Availability;
use flotilla_testkit::NatsServer;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// Opens `/events` with `token` on a raw connection and reads the response head (the stream
/// stays open while the connection does).
async fn open_live_stream(
    addr: std::net::SocketAddr,
    token: &str,
) -> (tokio::net::TcpStream, String) {
    let mut stream = tokio::time::timeout(SOON, tokio::net::TcpStream::connect(addr))
        .await
        .unwrap()
        .unwrap();
    stream
        .write_all(
            format!(
                "GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
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
    (stream, String::from_utf8_lossy(&buf[..n]).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_has_its_own_share_of_live_streams() {
    let nats = NatsServer::start();
    let hub = hub(&nats, |c| {
        c.dashboard.live.max_clients = 8;
        c.dashboard.live.max_per_identity = 2;
    })
    .await;
    let addr = hub.dashboard_addr.unwrap();
    let mut held = Vec::new();
    for _ in 0..2 {
        let (stream, head) = open_live_stream(addr, VIEWER).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(stream);
    }
    let viewer = format!("Bearer {VIEWER}");
    let a = http(&hub, "GET", "/events", &[("Authorization", &viewer)], "").await;
    assert_eq!(a.status, 503, "a third stream of one identity is refused");
    assert!(
        a.body.contains("--dashboard-live-streams-per-identity"),
        "{}",
        a.body
    );
    // Another identity still gets one.
    let (admin, head) = open_live_stream(addr, ADMIN).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let metrics = metrics_text(&hub).await;
    assert!(
        metrics.lines().any(|l| l.starts_with(
            "flotilla_hub_limit_refusals_total{limit=\"dashboard_live_per_identity\"} 1"
        )),
        "{metrics}"
    );
    // A stream closed gives its place back.
    drop(held.pop());
    let deadline = Instant::now() + SOON;
    loop {
        let (stream, head) = open_live_stream(addr, VIEWER).await;
        if head.starts_with("HTTP/1.1 200") {
            held.push(stream);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the place never came back: {head}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop((held, admin));
    hub.stop().await;
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
    ctl.get::<flotilla_hub::clusterset::ClusterSets>()
        .apply_binding(set_binding("default", "default"))
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
