//! A session ends with its caller's token (issue 46 review #11): the real kubectl 1.32 through
//! a hub (TLS, the test tokens, the testkit's OIDC issuer, a grants file making the issuer's
//! group `ops` fleet admin) to an agent on a simulated cluster. An ID token's exec and
//! port-forward end at its `exp`, naming it; a ManagedServiceAccount token's port-forward ends
//! once the account is deleted (its token no longer current), at the next check of it.

use crate::cluster_proxy::{ProxyHub, STEADY_LEASE_SECONDS, kubectl, proxy_hub_with};
use crate::cluster_proxy_stream_ends::{ended, forwarded, open_exec, open_forward, until};
use crate::cluster_proxy_streams::{pod_on, sessions};
use crate::common;

use common::tokens::tokens;
use common::*;
use flotilla_testkit::NatsServer;
use flotilla_testkit::oidc::{CLIENT_ID, Claims, TestIssuer};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The issuer's group `ops` is fleet admin.
const GRANTS: &[u8] =
    b"apiVersion: flotilla.io/v1alpha1\nkind: Grants\nfleet:\n  admin: { groups: [ops] }\n";

/// How often the tests' hubs check a session's token again.
const RECHECK: Duration = Duration::from_millis(500);

/// A hub trusting `issuer` (with [`GRANTS`]) and checking tokens every [`RECHECK`], its agent
/// `edge-1` on a simulated cluster with the pod `web` running.
async fn hub_trusting(nats: &NatsServer, issuer: &TestIssuer) -> (ProxyHub, TestAgent) {
    let grants = flotilla_hub::grants::file::parse("grants.yaml", GRANTS).unwrap();
    let hub = proxy_hub_with(nats, |c| {
        c.api.tokens = Some(tokens().with_grants(Arc::new(grants)));
        let mut oidc = flotilla_oidc::Config::new(issuer.url(), &[CLIENT_ID]);
        oidc.groups_claim = Some("groups".into());
        c.api.oidc = Some(oidc);
        c.cluster.default_lease_duration_seconds = STEADY_LEASE_SECONDS;
        c.cluster_proxy.tunnel.credential_recheck = RECHECK;
    })
    .await;
    let (agent, _admin) = pod_on(&hub, nats).await;
    (hub, agent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_tokens_exec_and_port_forward_end_at_its_exp_naming_it() {
    let nats = NatsServer::start();
    let issuer = TestIssuer::start().await;
    let (hub, _agent) = hub_trusting(&nats, &issuer).await;
    // The hub fetches the issuer's keys in the background: an hour's token reads once they
    // are there.
    let lasting = kubectl(&hub, "edge-1", &issuer.token("ana", &["ops"])).pinned("1.32");
    let deadline = Instant::now() + SOON;
    while !lasting.run(&["get", "pod", "web"], None).await.success {
        assert!(Instant::now() < deadline, "the issuer's token never read");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A token with 8 s left, whole seconds: its exp.
    let left = 8;
    let exp = SystemTime::UNIX_EPOCH
        + Duration::from_secs(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                + left,
        );
    let short = issuer.mint(Claims::user("ana", &["ops"]).expires_in(left as i64));
    let ana = kubectl(&hub, "edge-1", &short).pinned("1.32");
    let exec = open_exec(&ana).await;
    let forward = open_forward(&ana).await;
    let _tcp = forwarded(&forward).await;
    assert_eq!(sessions(&hub), 3);
    let started = Instant::now();
    let (code, stderr, _) = ended(exec.child, started).await;
    let at = SystemTime::now();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("ana's token expired at "), "{stderr}");
    assert!(
        at >= exp,
        "ended {:?} before the exp",
        exp.duration_since(at)
    );
    assert!(
        at.duration_since(exp).unwrap() < Duration::from_secs(3),
        "ended {:?} after the exp",
        at.duration_since(exp)
    );
    let (code, stderr, _) = ended(forward.child, started).await;
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("ana's token expired at "), "{stderr}");
    until(|| sessions(&hub) == 0, "every session ended").await;
    // A new session with the expired token is refused, not opened to be cut (the token itself
    // is still within the verifier's clock skew).
    let refused = ana.fails(&["exec", "web", "--", "echo", "hi"], None).await;
    assert!(refused.contains("token expired at"), "{refused}");
}

/// The ManagedServiceAccount `ops` of `cluster`, its token valid for an hour.
fn account(cluster: &str) -> flotilla_api::v1::ManagedServiceAccount {
    let yaml = format!(
        "apiVersion: authentication.open-cluster-management.io/v1beta1\n\
         kind: ManagedServiceAccount\nmetadata:\n  name: ops\n  namespace: {cluster}\n\
         spec:\n  rotation:\n    enabled: true\n    validity: 1h\n"
    );
    match flotilla_api::ocm::parse_documents(&yaml).remove(0) {
        Ok(flotilla_api::ocm::Document::ManagedServiceAccount(a)) => a,
        other => panic!("not a ManagedServiceAccount: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_tokens_sessions_end_once_its_account_is_deleted() {
    let nats = NatsServer::start();
    let hub = proxy_hub_with(&nats, |c| {
        c.cluster.default_lease_duration_seconds = STEADY_LEASE_SECONDS;
        c.cluster_proxy.tunnel.credential_recheck = RECHECK;
    })
    .await;
    let (_agent, _admin) = pod_on(&hub, &nats).await;
    let accounts = hub.service_accounts();
    accounts.apply(account("edge-1")).await.unwrap();
    let token = flotilla_testkit::eventually(SOON, "the account's token", || {
        let accounts = accounts.clone();
        async move { accounts.token("edge-1", "ops", None).await.ok() }
    })
    .await
    .token;
    let sa = kubectl(&hub, "edge-1", &token).pinned("1.32");
    let deadline = Instant::now() + SOON;
    while !sa.run(&["get", "pod", "web"], None).await.success {
        assert!(Instant::now() < deadline, "the account's token never read");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let exec = open_exec(&sa).await;
    let forward = open_forward(&sa).await;
    let _tcp = forwarded(&forward).await;
    assert_eq!(sessions(&hub), 3);
    // Deleted: its token is no longer current, and the sessions made with it end at the next
    // check of it.
    accounts.delete("edge-1", "ops").await.unwrap();
    let started = Instant::now();
    let (code, stderr, took) = ended(exec.child, started).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr
            .contains("the token of ManagedServiceAccount edge-1/ops is no longer its current one"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    let (code, stderr, _) = ended(forward.child, started).await;
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("is no longer its current one"), "{stderr}");
    until(|| sessions(&hub) == 0, "every session ended").await;
}
