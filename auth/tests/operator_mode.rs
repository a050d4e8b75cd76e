//! The secure directory against a real nats-server in operator mode: who may do what, revocation
//! and expiry.

use flotilla_auth::issuer::{push_account, push_accounts};
use flotilla_auth::setup::unix_now;
use flotilla_auth::{Creds, InitOptions, Issuer, SecureDir, Subject};
use flotilla_bus::subjects;
use flotilla_testkit::{NatsServer, free_port};
use futures::StreamExt;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

struct Secure {
    dir: tempfile::TempDir,
    secure: SecureDir,
    server: NatsServer,
}

fn start() -> Secure {
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
    let server = NatsServer::start_from_config(secure.server_conf.clone(), port);
    Secure {
        dir,
        secure,
        server,
    }
}

async fn connect(
    url: &str,
    creds: &Creds,
    inbox: Option<String>,
) -> Result<async_nats::Client, String> {
    let mut opts = async_nats::ConnectOptions::with_credentials(creds.format().expose())
        .map_err(|e| e.to_string())?;
    if let Some(prefix) = inbox {
        opts = opts.custom_inbox_prefix(prefix);
    }
    opts.connect(url).await.map_err(|e| e.to_string())
}

fn read_creds(path: &std::path::Path) -> Creds {
    Creds::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn cluster_creds(issuer: &Issuer, cluster: &str) -> (Creds, String) {
    let key = nkeys::KeyPair::new_user();
    let issued = issuer
        .issue(Subject::Cluster(cluster), &key.public_key(), unix_now())
        .unwrap();
    (
        Creds {
            jwt: issued.jwt,
            seed: flotilla_auth::Secret::new(key.seed().unwrap()),
        },
        key.public_key(),
    )
}

/// How long a message that should not arrive is waited for.
const QUIET: Duration = Duration::from_millis(800);

/// Whether `watcher`, subscribed to `filter`, receives what `publisher` publishes on `subject`
/// within [`QUIET`]. `flush` only empties the client's buffer (no server round trip), so the
/// server may see the subscription after the first publish from the other connection: the
/// message is published again every 50 ms until it arrives or time is up. A refused
/// subscription or publish never delivers, however long.
async fn arrives(
    publisher: &async_nats::Client,
    watcher: &async_nats::Client,
    filter: &str,
    subject: &str,
) -> bool {
    let Ok(mut sub) = watcher.subscribe(filter.to_string()).await else {
        return false;
    };
    let _ = watcher.flush().await;
    let deadline = tokio::time::Instant::now() + QUIET;
    while tokio::time::Instant::now() < deadline {
        let _ = publisher.publish(subject.to_string(), "x".into()).await;
        let _ = publisher.flush().await;
        if let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(50), sub.next()).await {
            return true;
        }
    }
    false
}

/// Whether `reader` receives what `hub` publishes on `subject` after subscribing to `filter`
/// (a refused subscription receives nothing; the server reports the violation as an event).
async fn reads(
    reader: &async_nats::Client,
    hub: &async_nats::Client,
    filter: &str,
    subject: &str,
) -> bool {
    arrives(hub, reader, filter, subject).await
}

/// Whether what `publisher` publishes on `subject` reaches `watcher`.
async fn delivered(
    publisher: &async_nats::Client,
    watcher: &async_nats::Client,
    subject: &str,
) -> bool {
    arrives(publisher, watcher, subject, subject).await
}

/// A request, retried while the server has not yet seen the responder's
/// subscription or an answer went to an earlier attempt's reply subject.
async fn request(
    client: &async_nats::Client,
    subject: String,
    payload: &'static str,
) -> async_nats::Message {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let attempt = async_nats::Request::new()
            .payload(payload.into())
            .timeout(Some(Duration::from_secs(2)));
        match client.send_request(subject.clone(), attempt).await {
            Ok(m) => return m,
            Err(e)
                if matches!(
                    e.kind(),
                    async_nats::client::RequestErrorKind::NoResponders
                        | async_nats::client::RequestErrorKind::TimedOut
                ) && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("request on {subject}: {e}"),
        }
    }
}

/// Answers every request `requests` receives with `answer` until aborted:
/// an attempt the requester gave up on must not use up the one answer.
fn answer_each(
    client: async_nats::Client,
    mut requests: async_nats::Subscriber,
    answer: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(msg) = requests.next().await {
            if let Some(reply) = msg.reply {
                client.publish(reply, answer.into()).await.unwrap();
                client.flush().await.unwrap();
            }
        }
    })
}

#[tokio::test]
async fn init_writes_private_files_and_the_hub_uses_jetstream() {
    let s = start();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for f in ["hub.creds", "sys.creds", "bootstrap.creds"] {
        assert_eq!(mode(&s.secure.dir.join(f)), 0o600, "{f}");
    }
    for f in std::fs::read_dir(s.secure.dir.join("keys")).unwrap() {
        assert_eq!(mode(&f.unwrap().path()), 0o600);
    }
    assert_eq!(mode(&s.secure.dir.join("keys")), 0o700);
    // The sealing key of ManagedServiceAccount tokens is one of them.
    let sealing = s.secure.dir.join(flotilla_auth::sealing::SEALING_KEY_FILE);
    assert_eq!(mode(&sealing), 0o600);
    assert!(flotilla_auth::sealing::load(&sealing).is_ok());
    let again = SecureDir::init(&s.secure.dir, &InitOptions::default()).unwrap_err();
    assert!(
        again.to_string().contains("refusing to overwrite"),
        "{again}"
    );

    let hub = connect(&s.server.url(), &read_creds(&s.secure.hub_creds), None)
        .await
        .unwrap();
    let js = async_nats::jetstream::new(hub.clone());
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "STATUS".into(),
        subjects: vec![subjects::STATUS_ALL.into()],
        ..Default::default()
    })
    .await
    .expect("JetStream is enabled for the Flotilla account");
    js.publish(subjects::status("edge-1", "lease", None), "x".into())
        .await
        .unwrap()
        .await
        .unwrap();
    drop(s.dir);
}

#[tokio::test]
async fn a_cluster_reaches_only_its_own_subjects() {
    let s = start();
    let issuer = Issuer::new(&s.secure, Duration::from_secs(3600)).unwrap();
    let hub = connect(&s.server.url(), &read_creds(&s.secure.hub_creds), None)
        .await
        .unwrap();
    let (a_creds, _) = cluster_creds(&issuer, "edge-a");
    let a = connect(
        &s.server.url(),
        &a_creds,
        Some(subjects::inbox_prefix("edge-a")),
    )
    .await
    .unwrap();
    // Its own subjects work both ways.
    assert!(delivered(&a, &hub, &subjects::status("edge-a", "lease", None)).await);
    assert!(delivered(&hub, &a, &subjects::spec("edge-a")).await);
    // Another cluster's, or the hub's, do not.
    assert!(
        !reads(
            &a,
            &hub,
            &subjects::spec("edge-b"),
            &subjects::spec("edge-b")
        )
        .await
    );
    assert!(!reads(&a, &hub, "flotilla.spec.>", &subjects::spec("edge-c")).await);
    let b_inbox = format!("{}.x", subjects::inbox_prefix("edge-b"));
    assert!(
        !reads(
            &a,
            &hub,
            &format!("{}.>", subjects::inbox_prefix("edge-b")),
            &b_inbox
        )
        .await
    );
    assert!(!delivered(&a, &hub, &subjects::status("edge-b", "lease", None)).await);
    assert!(!delivered(&a, &hub, &subjects::spec("edge-b")).await);
    assert!(!delivered(&a, &hub, &subjects::proxy("edge-b")).await);
    // Replies to requests it received are allowed (proxy answers go to the hub's inbox).
    let proxy = a.subscribe(subjects::proxy("edge-a")).await.unwrap();
    a.flush().await.unwrap();
    let answer = answer_each(a, proxy, "pong");
    let reply = request(&hub, subjects::proxy("edge-a"), "ping").await;
    assert_eq!(&reply.payload[..], b"pong");
    answer.abort();
}

#[tokio::test]
async fn a_cluster_uses_only_its_own_cluster_proxy_subjects() {
    let s = start();
    let issuer = Issuer::new(&s.secure, Duration::from_secs(3600)).unwrap();
    let hub = connect(&s.server.url(), &read_creds(&s.secure.hub_creds), None)
        .await
        .unwrap();
    let (a_creds, _) = cluster_creds(&issuer, "edge-a");
    let a = connect(
        &s.server.url(),
        &a_creds,
        Some(subjects::inbox_prefix("edge-a")),
    )
    .await
    .unwrap();
    // Its own calls reach it, and its frames reach the hub that made them.
    assert!(delivered(&hub, &a, &subjects::kubeapi("edge-a")).await);
    assert!(delivered(&a, &hub, &subjects::kubeapi_back("edge-a", "hub1")).await);
    // Another cluster's calls never reach it, and it cannot answer them.
    assert!(
        !reads(
            &a,
            &hub,
            &subjects::kubeapi("edge-b"),
            &subjects::kubeapi("edge-b")
        )
        .await
    );
    assert!(!reads(&a, &hub, "flotilla.kubeapi.*", &subjects::kubeapi("edge-c")).await);
    assert!(!delivered(&a, &hub, &subjects::kubeapi_back("edge-b", "hub1")).await);
    assert!(!delivered(&a, &hub, &subjects::kubeapi("edge-a")).await);
}

#[tokio::test]
async fn a_cluster_gets_and_reports_only_its_own_managed_service_accounts() {
    use flotilla_bus::serviceaccounts as msa;
    let s = start();
    let issuer = Issuer::new(&s.secure, Duration::from_secs(3600)).unwrap();
    let hub = connect(&s.server.url(), &read_creds(&s.secure.hub_creds), None)
        .await
        .unwrap();
    let (a_creds, _) = cluster_creds(&issuer, "edge-a");
    let a = connect(
        &s.server.url(),
        &a_creds,
        Some(subjects::inbox_prefix("edge-a")),
    )
    .await
    .unwrap();
    let own = msa::status_subject("edge-a", &msa::resource_id("edge-a", "ops"));
    let other = msa::status_subject("edge-b", &msa::resource_id("edge-b", "ops"));
    // Its accounts come on its own spec subject; its reports reach the hub on its own subjects.
    assert!(delivered(&hub, &a, &subjects::spec("edge-a")).await);
    assert!(delivered(&a, &hub, &own).await);
    // Another cluster's accounts never reach it, and it cannot report for another cluster.
    assert!(
        !reads(
            &a,
            &hub,
            &subjects::spec("edge-b"),
            &subjects::spec("edge-b")
        )
        .await
    );
    assert!(!delivered(&a, &hub, &other).await);
}

#[tokio::test]
async fn bootstrap_credentials_can_only_ask_to_register() {
    let s = start();
    let hub = connect(&s.server.url(), &read_creds(&s.secure.hub_creds), None)
        .await
        .unwrap();
    let boot = connect(
        &s.server.url(),
        &read_creds(&s.secure.bootstrap_creds),
        Some(subjects::bootstrap_inbox_prefix("edge-1")),
    )
    .await
    .unwrap();
    let registrations = hub.subscribe(subjects::REGISTER_ALL).await.unwrap();
    hub.flush().await.unwrap();
    let answer = answer_each(hub.clone(), registrations, "pending");
    let reply = request(&boot, subjects::register("edge-1"), "hello").await;
    assert_eq!(&reply.payload[..], b"pending");
    answer.abort();
    assert!(!reads(&boot, &hub, "flotilla.spec.>", &subjects::spec("edge-1")).await);
    assert!(
        !reads(
            &boot,
            &hub,
            &subjects::spec("edge-1"),
            &subjects::spec("edge-1")
        )
        .await
    );
    let inbox = format!("{}.x", subjects::inbox_prefix("edge-1"));
    assert!(!reads(&boot, &hub, "_INBOX.>", &inbox).await);
    assert!(!delivered(&boot, &hub, &subjects::status("edge-1", "lease", None)).await);
    assert!(!delivered(&boot, &hub, &subjects::sync("edge-1")).await);
}

#[tokio::test]
async fn a_revoked_cluster_is_cut_off_and_cannot_reconnect() {
    let s = start();
    let issuer = Issuer::new(&s.secure, Duration::from_secs(3600)).unwrap();
    let sys = connect(&s.server.url(), &read_creds(&s.secure.sys_creds), None)
        .await
        .unwrap();
    let (a_creds, a_key) = cluster_creds(&issuer, "edge-a");
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let a = async_nats::ConnectOptions::with_credentials(a_creds.format().expose())
        .unwrap()
        .custom_inbox_prefix(subjects::inbox_prefix("edge-a"))
        .event_callback(move |e| {
            let tx = events_tx.clone();
            async move {
                let _ = tx.send(e.to_string());
            }
        })
        .connect(s.server.url())
        .await
        .unwrap();
    a.flush().await.unwrap();
    let hub = connect(&s.server.url(), &read_creds(&s.secure.hub_creds), None)
        .await
        .unwrap();
    let (b_creds, _) = cluster_creds(&issuer, "edge-b");
    let b = connect(
        &s.server.url(),
        &b_creds,
        Some(subjects::inbox_prefix("edge-b")),
    )
    .await
    .unwrap();
    let now = unix_now();
    issuer
        .revoke(&[issuer.agent_revoke(&a_key, now)], now)
        .unwrap();
    let jwts = issuer.account_jwts(now).unwrap();
    push_accounts(&sys, &jwts).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|e: &String| e.to_lowercase().contains("revoked"))
    {
        let e = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("not cut off; events: {seen:?}"));
        seen.extend(e);
    }
    // Another cluster is not touched by the account update.
    assert!(delivered(&b, &hub, &subjects::status("edge-b", "lease", None)).await);
    let again = connect(&s.server.url(), &a_creds, None).await;
    assert!(again.is_err(), "a revoked key reconnected");
    assert!(issuer.is_revoked(&a_key));
    // A new issue for the same key (the admin accepted it again) is issued after the revocation.
    let issued = issuer
        .issue(Subject::Cluster("edge-a"), &a_key, unix_now())
        .unwrap();
    let renewed = Creds {
        jwt: issued.jwt,
        seed: a_creds.seed.clone(),
    };
    tokio::time::sleep(Duration::from_millis(1100)).await;
    connect(&s.server.url(), &renewed, None)
        .await
        .expect("credentials issued after the revocation work");
    // The revocation survives an issuer restart.
    assert!(
        Issuer::new(&s.secure, Duration::from_secs(3600))
            .unwrap()
            .is_revoked(&a_key)
    );
}

#[tokio::test]
async fn expired_credentials_are_refused() {
    let s = start();
    let issuer = Issuer::new(&s.secure, Duration::from_secs(3600)).unwrap();
    let key = nkeys::KeyPair::new_user();
    let issued = issuer
        .issue(
            Subject::Cluster("edge-a"),
            &key.public_key(),
            unix_now() - 7200,
        )
        .unwrap();
    assert!(issued.expires_at < unix_now());
    let creds = Creds {
        jwt: issued.jwt,
        seed: flotilla_auth::Secret::new(key.seed().unwrap()),
    };
    let err = connect(&s.server.url(), &creds, None).await.unwrap_err();
    assert!(err.to_lowercase().contains("authorization"), "{err}");
    assert!(matches!(
        issuer.issue(Subject::Cluster("edge-a"), "not-a-key", unix_now()),
        Err(flotilla_auth::issuer::IssueError::BadKey(_))
    ));
}

/// Connects with `creds`, collecting the client's events (server errors such as permission
/// violations arrive there).
async fn connect_watching(
    url: &str,
    creds: &Creds,
    inbox: String,
) -> (
    async_nats::Client,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let client = async_nats::ConnectOptions::with_credentials(creds.format().expose())
        .unwrap()
        .custom_inbox_prefix(inbox)
        .event_callback(move |e| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(e.to_string());
            }
        })
        .connect(url)
        .await
        .unwrap();
    (client, rx)
}

/// Waits for an event containing `what` (case-insensitive).
async fn event_containing(events: &mut tokio::sync::mpsc::UnboundedReceiver<String>, what: &str) {
    let what = what.to_lowercase();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(e)) if e.to_lowercase().contains(&what) => return,
            Ok(Some(e)) => seen.push(e),
            _ => panic!("no event containing {what:?}; events: {seen:?}"),
        }
    }
}

#[tokio::test]
async fn the_server_reports_a_clusters_permission_violations() {
    let s = start();
    let issuer = Issuer::new(&s.secure, Duration::from_secs(3600)).unwrap();
    let (a_creds, _) = cluster_creds(&issuer, "edge-a");
    let (a, mut events) =
        connect_watching(&s.server.url(), &a_creds, subjects::inbox_prefix("edge-a")).await;
    let _sub = a.subscribe(subjects::spec("edge-b")).await.unwrap();
    a.flush().await.unwrap();
    event_containing(
        &mut events,
        &format!(
            "permissions violation for subscription to \"{}\"",
            subjects::spec("edge-b")
        ),
    )
    .await;
    a.publish(subjects::status("edge-b", "lease", None), "x".into())
        .await
        .unwrap();
    a.flush().await.unwrap();
    event_containing(&mut events, "permissions violation for publish to").await;
    a.publish(subjects::spec("edge-a"), "x".into())
        .await
        .unwrap();
    a.flush().await.unwrap();
    event_containing(
        &mut events,
        &format!(
            "permissions violation for publish to \"{}\"",
            subjects::spec("edge-a")
        ),
    )
    .await;
    // The connection survives its violations and still works.
    let hub = connect(&s.server.url(), &read_creds(&s.secure.hub_creds), None)
        .await
        .unwrap();
    assert!(delivered(&a, &hub, &subjects::sync("edge-a")).await);
}

#[tokio::test]
async fn a_cluster_publishes_its_status_through_jetstream_with_acks() {
    let s = start();
    let issuer = Issuer::new(&s.secure, Duration::from_secs(3600)).unwrap();
    let hub = connect(&s.server.url(), &read_creds(&s.secure.hub_creds), None)
        .await
        .unwrap();
    let hub_js = async_nats::jetstream::new(hub.clone());
    let mut stream = hub_js
        .create_stream(async_nats::jetstream::stream::Config {
            name: "STATUS".into(),
            subjects: vec![subjects::STATUS_ALL.into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let (a_creds, _) = cluster_creds(&issuer, "edge-a");
    let a = connect(
        &s.server.url(),
        &a_creds,
        Some(subjects::inbox_prefix("edge-a")),
    )
    .await
    .unwrap();
    // A JetStream publish is a core publish with a reply inbox under `_INBOX.edge-a`; the ack
    // comes back there. No `$JS.API` access is needed.
    let js = async_nats::jetstream::new(a.clone());
    let ack = js
        .publish(subjects::status("edge-a", "lease", None), "up".into())
        .await
        .unwrap()
        .await
        .expect("the stream's ack reaches the cluster's inbox");
    assert_eq!(ack.stream, "STATUS");
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
    // Another cluster's status subject is refused: no ack ever comes back.
    let refused = js
        .publish(subjects::status("edge-b", "lease", None), "forged".into())
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(3), refused)
            .await
            .map(|r| r.is_err())
            .unwrap_or(true),
        "a forged status was stored"
    );
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
    // And the cluster cannot reach the JetStream API (no stream or KV administration).
    assert!(
        js.get_stream("STATUS").await.is_err(),
        "the JetStream API is open to clusters"
    );
}

#[tokio::test]
async fn tls_servers_take_verified_clients_only() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let secure = SecureDir::init(
        &dir.path().join("secure"),
        &InitOptions {
            nats_listen: format!("127.0.0.1:{port}"),
            tls: true,
            tls_hosts: vec!["hub.example".into()],
            ..InitOptions::default()
        },
    )
    .unwrap();
    let tls = secure.tls.clone().expect("TLS files");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&tls.server_key), 0o600);
    assert_eq!(mode(&tls.client_key), 0o600);
    let conf = std::fs::read_to_string(&secure.server_conf).unwrap();
    assert!(conf.contains("tls: {"), "{conf}");
    let server = NatsServer::start_from_config(secure.server_conf.clone(), port);
    let hub = read_creds(&secure.hub_creds);
    let client = async_nats::ConnectOptions::with_credentials(hub.format().expose())
        .unwrap()
        .add_root_certificates(tls.ca.clone())
        .add_client_certificate(tls.client_cert.clone(), tls.client_key.clone())
        .require_tls(true)
        .connect(format!("tls://localhost:{port}"))
        .await
        .unwrap_or_else(|e| panic!("TLS connect: {e}; log: {}", server.log()));
    let mut sub = client.subscribe("flotilla.broadcast").await.unwrap();
    client
        .publish("flotilla.broadcast", "hello".into())
        .await
        .unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(2), sub.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&msg.payload[..], b"hello");
    // A client that does not trust the CA does not connect.
    let untrusted = tokio::time::timeout(
        Duration::from_secs(10),
        async_nats::ConnectOptions::with_credentials(hub.format().expose())
            .unwrap()
            .require_tls(true)
            .connect(format!("tls://localhost:{port}")),
    )
    .await;
    assert!(
        !matches!(untrusted, Ok(Ok(_))),
        "a client without the CA connected"
    );
}

#[tokio::test]
async fn account_pushes_are_checked_here_and_by_the_server() {
    let s = start();
    let issuer = Issuer::new(&s.secure, Duration::from_secs(3600)).unwrap();
    let sys = connect(&s.server.url(), &read_creds(&s.secure.sys_creds), None)
        .await
        .unwrap();
    // The hub's and the agents' account JWTs are taken.
    push_accounts(&sys, &issuer.account_jwts(unix_now()).unwrap())
        .await
        .unwrap();
    // Not an account JWT, or another account's: refused before sending.
    let err = push_account(&sys, issuer.account(), "garbage".into())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a JWT"), "{err}");
    let other = nkeys::KeyPair::new_account();
    let elsewhere = flotilla_auth::setup::hub_account_claims(
        &other.public_key(),
        &s.secure.account_signing.public_key(),
        &s.secure.agents,
        &InitOptions::default(),
        unix_now(),
    )
    .encode(&s.secure.operator_signing)
    .unwrap();
    let err = push_account(&sys, issuer.account(), elsewhere)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not "), "{err}");
    // Properly signed but invalid (a user key as the account's signing key): the server says no,
    // and the account keeps working.
    let invalid = flotilla_auth::setup::hub_account_claims(
        issuer.account(),
        &nkeys::KeyPair::new_user().public_key(),
        &s.secure.agents,
        &InitOptions::default(),
        unix_now() + 5,
    )
    .encode(&s.secure.operator_signing)
    .unwrap();
    let err = push_account(&sys, issuer.account(), invalid)
        .await
        .unwrap_err();
    assert!(
        matches!(err, flotilla_auth::issuer::IssueError::Push(_)),
        "{err}"
    );
    connect(&s.server.url(), &read_creds(&s.secure.hub_creds), None)
        .await
        .expect("the hub still connects");
    let (a_creds, _) = cluster_creds(&issuer, "edge-a");
    connect(&s.server.url(), &a_creds, None)
        .await
        .expect("cluster credentials still work");
}

#[tokio::test]
async fn a_connection_is_closed_when_its_credentials_expire() {
    let s = start();
    let issuer = Issuer::new(&s.secure, Duration::from_secs(2)).unwrap();
    let (creds, _) = cluster_creds(&issuer, "edge-a");
    let (a, mut events) =
        connect_watching(&s.server.url(), &creds, subjects::inbox_prefix("edge-a")).await;
    a.flush().await.unwrap();
    // The server closes the connection at `exp` ("user authentication expired"); reconnecting
    // with the same credentials is refused, so the agent must renew before then.
    event_containing(&mut events, "expired").await;
    // The server closes connections at the start of the `exp` second but refuses new ones only
    // once `exp` is in the past.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let err = connect(&s.server.url(), &creds, None)
        .await
        .unwrap_err()
        .to_lowercase();
    assert!(
        err.contains("expired") || err.contains("authorization"),
        "{err}"
    );
}
