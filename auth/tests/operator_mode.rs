//! The secure directory against a real nats-server in operator mode: who may do what, revocation
//! and expiry.

use flotilla_auth::issuer::push_account;
use flotilla_auth::setup::unix_now;
use flotilla_auth::{Creds, InitOptions, Issuer, SecureDir};
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
        .issue_cluster(cluster, &key.public_key(), unix_now())
        .unwrap();
    (
        Creds {
            jwt: issued.jwt,
            seed: flotilla_auth::Secret::new(key.seed().unwrap()),
        },
        key.public_key(),
    )
}

/// Whether `reader` receives what `hub` publishes on `subject` after subscribing to `filter`
/// (a refused subscription receives nothing; the server only logs the violation).
async fn reads(
    reader: &async_nats::Client,
    hub: &async_nats::Client,
    filter: &str,
    subject: &str,
) -> bool {
    let Ok(mut sub) = reader.subscribe(filter.to_string()).await else {
        return false;
    };
    let _ = reader.flush().await;
    hub.publish(subject.to_string(), "x".into()).await.unwrap();
    hub.flush().await.unwrap();
    matches!(
        tokio::time::timeout(Duration::from_millis(700), sub.next()).await,
        Ok(Some(_))
    )
}

/// Whether what `publisher` sends on `subject` reaches `watcher`: a positive answer comes as
/// soon as the message does (up to 10 s on a loaded machine), a negative one after 700 ms.
async fn delivered(
    publisher: &async_nats::Client,
    watcher: &async_nats::Client,
    subject: &str,
) -> bool {
    delivered_within(publisher, watcher, subject, Duration::from_secs(10)).await
}

async fn not_delivered(
    publisher: &async_nats::Client,
    watcher: &async_nats::Client,
    subject: &str,
) -> bool {
    !delivered_within(publisher, watcher, subject, Duration::from_millis(700)).await
}

async fn delivered_within(
    publisher: &async_nats::Client,
    watcher: &async_nats::Client,
    subject: &str,
    within: Duration,
) -> bool {
    let mut sub = watcher.subscribe(subject.to_string()).await.unwrap();
    watcher.flush().await.unwrap();
    // Publish again every 200 ms: what is tested is whether the server lets the message
    // through at all, not how fast a new subscription is in place.
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        publisher
            .publish(subject.to_string(), "x".into())
            .await
            .unwrap();
        let _ = publisher.flush().await;
        if tokio::time::timeout(Duration::from_millis(200), sub.next())
            .await
            .is_ok()
        {
            return true;
        }
    }
    false
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
    assert!(
        delivered(&hub, &a, &subjects::spec("edge-a")).await,
        "{}",
        s.server.log()
    );
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
    assert!(not_delivered(&a, &hub, &subjects::status("edge-b", "lease", None)).await);
    assert!(not_delivered(&a, &hub, &subjects::spec("edge-b")).await);
    assert!(not_delivered(&a, &hub, &subjects::proxy("edge-b")).await);
    // Replies to requests it received are allowed (proxy answers go to the hub's inbox).
    let mut proxy = a.subscribe(subjects::proxy("edge-a")).await.unwrap();
    a.flush().await.unwrap();
    let answer = tokio::spawn(async move {
        let msg = proxy.next().await.unwrap();
        a.publish(msg.reply.unwrap(), "pong".into()).await.unwrap();
        a.flush().await.unwrap();
    });
    let reply = hub
        .request(subjects::proxy("edge-a"), "ping".into())
        .await
        .unwrap();
    assert_eq!(&reply.payload[..], b"pong");
    answer.await.unwrap();
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
    let mut registrations = hub.subscribe(subjects::REGISTER_ALL).await.unwrap();
    hub.flush().await.unwrap();
    let hub2 = hub.clone();
    let answer = tokio::spawn(async move {
        let msg = registrations.next().await.unwrap();
        hub2.publish(msg.reply.unwrap(), "pending".into())
            .await
            .unwrap();
        hub2.flush().await.unwrap();
    });
    let reply = boot
        .request(subjects::register("edge-1"), "hello".into())
        .await
        .unwrap();
    assert_eq!(&reply.payload[..], b"pending");
    answer.await.unwrap();
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
    assert!(not_delivered(&boot, &hub, &subjects::status("edge-1", "lease", None)).await);
    assert!(not_delivered(&boot, &hub, &subjects::sync("edge-1")).await);
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
    let jwt = issuer.revoke(&[&a_key], unix_now()).unwrap();
    push_account(&sys, issuer.account(), jwt).await.unwrap();
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
    let again = connect(&s.server.url(), &a_creds, None).await;
    assert!(again.is_err(), "a revoked key reconnected");
    assert!(issuer.is_revoked(&a_key));
    // A new issue for the same key (the admin accepted it again) is issued after the revocation.
    let issued = issuer.issue_cluster("edge-a", &a_key, unix_now()).unwrap();
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
        .issue_cluster("edge-a", &key.public_key(), unix_now() - 7200)
        .unwrap();
    assert!(issued.expires_at < unix_now());
    let creds = Creds {
        jwt: issued.jwt,
        seed: flotilla_auth::Secret::new(key.seed().unwrap()),
    };
    let err = connect(&s.server.url(), &creds, None).await.unwrap_err();
    assert!(err.to_lowercase().contains("authorization"), "{err}");
    assert!(matches!(
        issuer.issue_cluster("edge-a", "not-a-key", unix_now()),
        Err(flotilla_auth::issuer::IssueError::BadKey(_))
    ));
}
