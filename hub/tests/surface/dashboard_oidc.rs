//! The dashboard's sign-in with the OIDC issuer (issue 48, design §7.1): the testkit's issuer
//! over real HTTP, the hub's dashboard, the authorization-code flow with PKCE.
//!
//! In Chromium: a person opening a page is sent to the sign-in form, follows "Sign in with
//! <issuer>", is approved by the issuer and lands on the page asked for, signed in as the
//! issuer's user with its groups — seeing only its set's clusters, refused another's naming the
//! grant — and signs out. Over raw HTTP: the login cookie's attributes, the session cookie made
//! at the callback, a callback replayed or from another browser refused, the issuer's error shown
//! escaped; an ID token issued to another client (its `aud` and `azp`) refused.

use crate::browser;
use crate::common;

use browser::{Browser, PAGE};
use common::tokens::{ADMIN, Bearer, tokens};
use common::*;
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::{ManagedCluster, ManagedClusterSet, ObjectMeta};
use flotilla_hub::dashboard::oidc::SignInConfig;
use flotilla_testkit::NatsServer;
use flotilla_testkit::oidc::{CLIENT_ID, TestIssuer};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// team-a-sre: admin on set team-a; team-b-sre: admin on set team-b.
const GRANTS: &[u8] = b"apiVersion: flotilla.io/v1alpha1
kind: Grants
clusterSets:
  team-a:
    admin: { groups: [team-a-sre] }
  team-b:
    admin: { groups: [team-b-sre] }
";

/// A hub trusting `issuer`, its dashboard on a free loopback port offering the sign-in with
/// it; the sets team-a {a1} and team-b {b1}. Returns the hub and the dashboard's base URL.
async fn hub_signing_in_with(
    nats: &NatsServer,
    issuer: &TestIssuer,
) -> (flotilla_hub::Hub, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let grants = flotilla_hub::grants::file::parse("grants.yaml", GRANTS).unwrap();
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(tokens().with_grants(Arc::new(grants)));
    let mut oidc = flotilla_oidc::Config::new(issuer.url(), &[CLIENT_ID]);
    oidc.groups_claim = Some("groups".into());
    config.api.oidc = Some(oidc);
    config.dashboard.listen = Some(format!("127.0.0.1:{port}").parse().unwrap());
    config.dashboard.sign_in = Some(SignInConfig {
        client_id: CLIENT_ID.into(),
        external_url: base.clone(),
        ..SignInConfig::default()
    });
    let hub = start_hub(config).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut sets = ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let mut clusters = ClusterServiceClient::with_interceptor(channel, Bearer(ADMIN));
    for (cluster, set) in [("a1", "team-a"), ("b1", "team-b")] {
        let deadline = tokio::time::Instant::now() + SOON;
        let meta = |name: &str| {
            Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            })
        };
        while let Err(e) = sets
            .apply_cluster_set(ManagedClusterSet {
                metadata: meta(set),
                spec: Some(Default::default()),
                status: None,
            })
            .await
        {
            assert!(tokio::time::Instant::now() < deadline, "{e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut m = meta(cluster).unwrap();
        m.labels = [(CLUSTERSET_LABEL.to_string(), set.to_string())].into();
        clusters
            .apply_cluster(ManagedCluster {
                metadata: Some(m),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    (hub, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chromium_signs_in_with_the_issuer_sees_its_teams_part_and_signs_out() {
    let b = Browser::start().await;
    let nats = NatsServer::start();
    let issuer = TestIssuer::start().await;
    let (hub, base) = hub_signing_in_with(&nats, &issuer).await;
    issuer.set_login("ana", &["team-a-sre"]);

    // A page asked for without a session: the sign-in form, with the issuer's link.
    b.goto(&format!("{base}/clusters")).await;
    b.wait_until(
        "return !!document.getElementById('sign-in-oidc')",
        "the issuer's sign-in link",
        PAGE,
    )
    .await;
    assert!(
        b.text("#sign-in-oidc")
            .await
            .contains("Sign in with 127.0.0.1")
    );
    // The issuer's keys may not be fetched yet when the hub has just started: the link is
    // followed until the sign-in lands on the page asked for.
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        b.click("#sign-in-oidc").await;
        b.wait_until(
            "return !!document.getElementById('who') || \
             !!document.getElementById('sign-in-error')",
            "the sign-in's end",
            PAGE,
        )
        .await;
        if b.js("return !!document.getElementById('who')").await == serde_json::Value::Bool(true) {
            break;
        }
        let error = b.text("#sign-in-error").await;
        assert!(
            tokio::time::Instant::now() < deadline && error.contains("keys are not available"),
            "{error}"
        );
        b.goto(&format!("{base}/login?next=/clusters")).await;
    }
    let url = b.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/clusters", "back on the page asked for");
    let who = b.text("#who").await;
    assert!(who.contains(&format!("{}#ana", issuer.url())), "{who}");
    b.wait_until(
        "return !!document.querySelector('#clusters tr[data-cluster=\"a1\"]')",
        "team-a's cluster listed",
        PAGE,
    )
    .await;
    assert!(!b.text("#clusters").await.contains("b1"));
    // The session cookie is not a script's to read.
    assert_eq!(b.js("return document.cookie").await, serde_json::json!(""));

    // Across the fence: refused naming the grant.
    b.goto(&format!("{base}/clusters/b1")).await;
    b.wait_until(
        "return document.title.startsWith('Forbidden')",
        "the refusal",
        PAGE,
    )
    .await;
    let refusal = b.text("body").await;
    assert!(
        refusal.contains("b1") && refusal.contains("ana"),
        "{refusal}"
    );

    // Signing out ends the session: the next page asks to sign in again.
    b.goto(&format!("{base}/clusters")).await;
    b.click("header form button").await;
    b.wait_until(
        "return !!document.getElementById('sign-in-oidc')",
        "signed out",
        PAGE,
    )
    .await;
    b.goto(&format!("{base}/clusters")).await;
    b.wait_until(
        "return location.pathname === '/login'",
        "sent to sign in",
        PAGE,
    )
    .await;
    b.stop().await;
    hub.stop().await;
}

/// An HTTP/1.1 GET of `url` (`http://host:port/path?query`), read to the end: status,
/// headers (lower-case names, every value), body.
async fn get(url: &str, cookie: Option<&str>) -> (u16, Vec<(String, String)>, String) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut tcp = tokio::time::timeout(SOON, tokio::net::TcpStream::connect(authority))
        .await
        .unwrap()
        .unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    if let Some(c) = cookie {
        req.push_str(&format!("Cookie: {c}\r\n"));
    }
    req.push_str("\r\n");
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
    (status, headers, body.to_string())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// `/oidc/start` until the hub has the issuer's discovery document: the issuer's URL and the
/// login cookie.
async fn started(base: &str, next: &str) -> (String, String) {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let (status, headers, body) = get(&format!("{base}/oidc/start?next={next}"), None).await;
        if status == 303 {
            let location = header(&headers, "location")[0].to_string();
            let cookie = header(&headers, "set-cookie")[0].to_string();
            return (location, cookie);
        }
        assert!(
            status == 503 && tokio::time::Instant::now() < deadline,
            "{status}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_code_flow_sets_its_cookies_right_and_refuses_replays_strangers_and_markup() {
    let nats = NatsServer::start();
    let issuer = TestIssuer::start().await;
    let (hub, base) = hub_signing_in_with(&nats, &issuer).await;
    issuer.set_login("ben", &["team-b-sre"]);

    let (authorize, login_cookie) = started(&base, "/clusters").await;
    // The login cookie: the state, for the sign-in routes only, not a script's, sent back on
    // the issuer's cross-site redirect (Lax), not Secure over plain loopback HTTP.
    let state = login_cookie
        .strip_prefix("flotilla_login=")
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    assert_eq!(state.len(), 22, "16 random bytes: {login_cookie}");
    assert!(
        login_cookie.ends_with("; Path=/oidc; HttpOnly; SameSite=Lax; Max-Age=600"),
        "{login_cookie}"
    );
    // To the issuer: a code with S256 PKCE, our client, the registered redirect URI, state
    // and nonce.
    assert!(
        authorize.starts_with(&format!("{}/authorize?", issuer.url())),
        "{authorize}"
    );
    for want in [
        "response_type=code".to_string(),
        format!("client_id={CLIENT_ID}"),
        format!("state={state}"),
        "code_challenge_method=S256".to_string(),
        "nonce=".to_string(),
        format!(
            "redirect_uri={}",
            form_urlencoded::byte_serialize(format!("{base}/oidc/callback").as_bytes())
                .collect::<String>()
        ),
        "scope=openid+profile+email".to_string(),
    ] {
        assert!(authorize.contains(&want), "want {want} in {authorize}");
    }

    // The issuer approves ben and sends the browser back with a code.
    let (status, headers, _) = get(&authorize, None).await;
    assert_eq!(status, 302);
    let callback = header(&headers, "location")[0].to_string();
    assert!(
        callback.starts_with(&format!("{base}/oidc/callback?code=")),
        "{callback}"
    );

    // Another browser (no login cookie, or another sign-in's) cannot use the callback ...
    let (other, _) = started(&base, "/").await;
    let other_state = other
        .split("state=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap();
    for cookie in [None, Some(format!("flotilla_login={other_state}"))] {
        let (status, _, body) = get(&callback, cookie.as_deref()).await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body.contains("this sign-in was not started here or has expired"),
            "{body}"
        );
    }
    // ... and a refused callback does not spend the sign-in: its own browser completes it.
    let own = format!("flotilla_login={state}");
    let (status, headers, body) = get(&callback, Some(&own)).await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(header(&headers, "location"), ["/clusters"]);
    let cookies = header(&headers, "set-cookie");
    let session = cookies
        .iter()
        .find(|c| c.starts_with("flotilla_dashboard="))
        .expect("a session cookie");
    assert!(
        session.contains("; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200"),
        "{session}"
    );
    assert!(
        cookies
            .iter()
            .any(|c| c.starts_with("flotilla_login=;") && c.contains("Max-Age=0")),
        "the login cookie cleared: {cookies:?}"
    );
    // The session is ben's, with his groups' grants.
    let id = session.split(';').next().unwrap();
    // (The clusters were just applied: the page is read again until the hub lists b1.)
    let deadline = tokio::time::Instant::now() + SOON;
    let page = loop {
        let (status, _, page) = get(&format!("{base}/clusters"), Some(id)).await;
        assert_eq!(status, 200);
        if page.contains("data-cluster=\"b1\"") || tokio::time::Instant::now() >= deadline {
            break page;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(page.contains("#ben"), "signed in as the issuer's ben");
    assert!(page.contains("data-cluster=\"b1\"") && !page.contains("data-cluster=\"a1\""));

    // The same callback again: the sign-in is spent.
    let (status, _, body) = get(&callback, Some(&own)).await;
    assert_eq!(status, 400, "{body}");

    // The issuer's refusal is shown, escaped: whoever crafted the link wrote it.
    let (_, cookie) = started(&base, "/").await;
    let state = cookie
        .strip_prefix("flotilla_login=")
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    let (status, _, body) = get(
        &format!(
            "{base}/oidc/callback?state={state}&error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E"
        ),
        Some(&format!("flotilla_login={state}")),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body.contains("access_denied: &lt;script&gt;alert(1)&lt;/script&gt;"),
        "{body}"
    );
    assert!(!body.contains("<script>alert"), "{body}");
    hub.stop().await;
}

/// Signs in through the issuer over raw HTTP: the callback's status and page.
async fn sign_in(base: &str) -> (u16, String) {
    let (authorize, cookie) = started(base, "/").await;
    let (status, headers, _) = get(&authorize, None).await;
    assert_eq!(status, 302);
    let callback = header(&headers, "location")[0].to_string();
    let own = cookie.split(';').next().unwrap().to_string();
    let (status, _, body) = get(&callback, Some(&own)).await;
    (status, body)
}

#[tokio::test]
async fn an_id_token_issued_to_another_client_does_not_sign_in() {
    // OIDC Core §3.1.3.7: the sign-in's ID token lists this client and only audiences the hub
    // trusts, and names this client as its party (azp) — required with several audiences.
    use serde_json::json;
    let nats = NatsServer::start();
    let issuer = TestIssuer::start().await;
    let (hub, base) = hub_signing_in_with(&nats, &issuer).await;
    for (claims, want) in [
        // Issued to grafana, listing the hub too: the bearer rule refuses it already.
        (
            vec![
                ("aud", json!([CLIENT_ID, "grafana"])),
                ("azp", json!("grafana")),
            ],
            "issued to &quot;grafana&quot; (azp)",
        ),
        (
            vec![("aud", json!([CLIENT_ID, "grafana"]))],
            "azp&quot; claim is missing from a token of several audiences",
        ),
        // Ours, but also for an audience the hub does not trust.
        (
            vec![
                ("aud", json!([CLIENT_ID, "grafana"])),
                ("azp", json!(CLIENT_ID)),
            ],
            "also for &quot;grafana&quot;, which is not a client id of this hub",
        ),
        // The hub's audience alone, on another client's behalf: fine for a bearer, not for
        // this client's own sign-in.
        (
            vec![("azp", json!("flotilla-cli"))],
            "issued to another client (azp)",
        ),
    ] {
        issuer.set_id_token_claims(&claims);
        let (status, body) = sign_in(&base).await;
        assert_eq!(status, 401, "{claims:?}: {body}");
        assert!(body.contains(want), "{claims:?}: want {want} in {body}");
    }
    // The issuer's own token for this client signs in.
    issuer.set_id_token_claims(&[("azp", json!(CLIENT_ID))]);
    let (status, body) = sign_in(&base).await;
    assert_eq!(status, 303, "{body}");
    hub.stop().await;
}
