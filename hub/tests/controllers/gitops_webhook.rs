//! Push webhooks (issue 50: "a webhook triggers a fetch within a second"): a repository made
//! with `git init` and served by a real `git daemon`, a GitRepo polling once an hour with a
//! `webhookSecret` hub Secret, two hubs on one NATS sharing a sealing key. A commit pushed and
//! a signed GitHub payload POSTed to the controllers' hub is fetched within a second; a GitLab
//! payload POSTed to the other hub is forwarded over NATS (sealed) and fetched within a second
//! too; a bad signature is refused (401) and fetches nothing; each is counted by result.

use crate::common;

use common::*;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::policy_service_client::PolicyServiceClient;
use flotilla_api::v1::{GetGitRepoRequest, GitRepo, HubSecret, ObjectMeta};
use flotilla_hub::Hub;
use flotilla_hub::gitops::webhook::verify::sign;
use flotilla_hub::serviceaccount::key::SealingKey;
use flotilla_testkit::NatsServer;
use flotilla_testkit::git::{Daemon, Repo};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const GITHUB_SECRET: &str = "gh-7d1e-secret";
const GITLAB_TOKEN: &str = "gl-90ab-token";
/// The bound: from the webhook's answer to the new commit fetched.
const WITHIN: Duration = Duration::from_secs(1);

const PLACEMENT: &str = "apiVersion: cluster.open-cluster-management.io/v1beta1\n\
    kind: Placement\nmetadata: {name: stores, namespace: default}\nspec: {clusterSets: [default]}\n";

fn gitrepo(url: &str) -> GitRepo {
    let text = format!(
        "apiVersion: apps.flotilla.io/v1alpha1\nkind: GitRepo\n\
         metadata: {{name: shop, namespace: default}}\n\
         spec:\n  repo: {url}\n  insecureTransport: true\n  branch: main\n  paths: [apps/*]\n\
         \x20 pollingInterval: 1h\n  webhookSecret: shop-hook\n\
         \x20 targets:\n  - name: stores\n    placementRef: {{name: stores}}\n"
    );
    match parse_documents(&text).remove(0) {
        Ok(Document::GitRepo(r)) => r,
        other => panic!("GitRepo fixture: {other:?}"),
    }
}

fn configmap(value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: default}}\n\
         data: {{v: \"{value}\"}}\n"
    )
}

/// GitHub's push payload for `commit` on main of the repository at `url`.
fn github_push(url: &str, commit: &str) -> Vec<u8> {
    serde_json::json!({
        "ref": "refs/heads/main",
        "before": "0".repeat(40),
        "after": commit,
        "repository": {"full_name": "ops/shop", "clone_url": url, "html_url": url},
        "pusher": {"name": "ann"},
    })
    .to_string()
    .into_bytes()
}

/// GitLab's push payload.
fn gitlab_push(url: &str, commit: &str) -> Vec<u8> {
    serde_json::json!({
        "object_kind": "push",
        "ref": "refs/heads/main",
        "checkout_sha": commit,
        "after": commit,
        "project": {"path_with_namespace": "ops/shop", "git_http_url": url, "web_url": url},
    })
    .to_string()
    .into_bytes()
}

/// POSTs `body` with `headers` to `addr`'s `/hooks/gitrepos`; the status and the body.
async fn post(addr: SocketAddr, headers: &[(&str, String)], body: &[u8]) -> (u16, String) {
    let mut head = format!(
        "POST /hooks/gitrepos HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(body).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    };
    let out = tokio::time::timeout(SOON, exchange)
        .await
        .expect("the webhook is answered");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

async fn get(api: &mut GitRepoServiceClient<tonic::transport::Channel>) -> GitRepo {
    api.get_git_repo(GetGitRepoRequest {
        namespace: "default".into(),
        name: "shop".into(),
    })
    .await
    .unwrap()
    .into_inner()
}

fn head(r: &GitRepo) -> &str {
    r.status
        .as_ref()
        .and_then(|s| s.head.as_ref())
        .map_or("", |h| h.sha.as_str())
}

/// How long after `since` the GitRepo's head became `commit` (fails past `bound`).
async fn fetched(
    api: &mut GitRepoServiceClient<tonic::transport::Channel>,
    commit: &str,
    since: Instant,
    bound: Duration,
) -> Duration {
    loop {
        let r = get(api).await;
        if head(&r) == commit {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < bound,
            "commit {commit} not fetched within {bound:?}: {:#?}",
            r.status
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn counted(hub: &Hub, provider: &str, result: &str) -> u64 {
    let text = hub.metrics.render(&hub.inventory);
    let line = format!(
        "flotilla_hub_gitops_webhooks_total{{provider=\"{provider}\",result=\"{result}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

async fn start(
    nats: &NatsServer,
    base: &std::path::Path,
    key: &std::path::Path,
) -> (Hub, SocketAddr) {
    let mut config = hub_config(&nats.url());
    let g = &mut config.families.gitops;
    g.worker = Some(flotilla_testkit::binary("flotilla-git-fetch"));
    g.cache_dir = base.join(format!("cache-{}", flotilla_testkit::free_port()));
    g.allow_loopback = true;
    let hooks: SocketAddr = format!("127.0.0.1:{}", flotilla_testkit::free_port())
        .parse()
        .unwrap();
    g.webhook.listen = Some(hooks);
    config.families.service_accounts.key = SealingKey::from_file(key).unwrap();
    (start_hub(config).await, hooks)
}

#[tokio::test]
async fn a_signed_push_webhook_fetches_within_a_second_on_either_hub_and_a_bad_one_nothing() {
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("1"));
    let first = git.commit("web at 1");
    let daemon = Daemon::serve(base.path());
    let url = daemon.url("shop");

    let nats = NatsServer::start();
    let key = base.path().join("sealing.xk");
    let (hub, hooks) = start(&nats, base.path(), &key).await;
    let deadline = Instant::now() + SOON;
    while hub.units.controllers().is_none() {
        assert!(
            Instant::now() < deadline,
            "the first hub holds the controllers"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (other, other_hooks) = start(&nats, base.path(), &key).await;
    assert!(other.units.controllers().is_none(), "one holder");

    let Ok(Document::Placement(p)) = parse_documents(PLACEMENT).remove(0) else {
        panic!("placement fixture");
    };
    let grpc = format!("http://{}", hub.grpc_addr);
    PlacementServiceClient::connect(grpc.clone())
        .await
        .unwrap()
        .apply_placement(p)
        .await
        .unwrap();
    PolicyServiceClient::connect(grpc.clone())
        .await
        .unwrap()
        .apply_hub_secret(HubSecret {
            metadata: Some(ObjectMeta {
                name: "shop-hook".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            r#type: "Opaque".into(),
            data: [
                ("github".to_owned(), GITHUB_SECRET.as_bytes().to_vec()),
                ("gitlab".to_owned(), GITLAB_TOKEN.as_bytes().to_vec()),
            ]
            .into(),
            immutable: false,
        })
        .await
        .unwrap();
    let mut api = GitRepoServiceClient::connect(grpc).await.unwrap();
    api.apply_git_repo(gitrepo(&url)).await.unwrap();
    fetched(&mut api, &first, Instant::now(), SOON).await;

    // GitHub, to the controllers' hub: 202, and the commit fetched within a second (the
    // GitRepo polls once an hour).
    git.write("apps/web/cm.yaml", configmap("2"));
    let second = git.commit("web at 2");
    let body = github_push(&url, &second);
    let signature = format!("sha256={}", sign(GITHUB_SECRET.as_bytes(), &body));
    let github = |sig: String| {
        vec![
            ("X-GitHub-Event", "push".to_owned()),
            (
                "X-GitHub-Delivery",
                "72d3162e-cc78-11e3-81ab-4c9367dc0958".to_owned(),
            ),
            ("X-Hub-Signature-256", sig),
        ]
    };
    let (status, answer) = post(hooks, &github(signature.clone()), &body).await;
    let sent = Instant::now();
    assert_eq!(status, 202, "{answer}");
    assert!(answer.contains("fetching default/shop"), "{answer}");
    let took = fetched(&mut api, &second, sent, WITHIN).await;
    eprintln!("GitHub webhook to commit fetched: {took:?}");
    let st = get(&mut api).await.status.unwrap();
    assert_eq!(st.webhook_commit, second);
    assert!(st.last_webhook_time.is_some());

    // The same signed delivery again: known, nothing fetched or written.
    let before = get(&mut api).await.status.unwrap();
    let (status, answer) = post(hooks, &github(signature.clone()), &body).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("\"replayed\""), "{answer}");
    let after = get(&mut api).await.status.unwrap();
    assert_eq!(
        after.last_webhook_time, before.last_webhook_time,
        "no status write"
    );
    let replay = (body.clone(), signature);

    // A bad signature for a newer commit: 401, nothing fetched.
    git.write("apps/web/cm.yaml", configmap("3"));
    let third = git.commit("web at 3");
    let body = github_push(&url, &third);
    let forged = format!("sha256={}", sign(b"not the secret", &body));
    let (status, answer) = post(hooks, &github(forged), &body).await;
    assert_eq!(status, 401, "{answer}");
    assert!(!answer.contains(GITHUB_SECRET), "{answer}");
    let (status, _) = post(other_hooks, &github(String::new()), &body).await;
    assert_eq!(status, 401, "unsigned, through the other hub");
    tokio::time::sleep(WITHIN + Duration::from_millis(500)).await;
    let r = get(&mut api).await;
    assert_eq!(head(&r), second, "a refused webhook fetched");
    assert_eq!(r.status.unwrap().webhook_commit, second);

    // GitLab, to the hub that does not hold the controllers: forwarded (sealed: the token is
    // the secret itself) and fetched within a second.
    let body = gitlab_push(&url, &third);
    let gitlab = vec![
        ("X-Gitlab-Event", "Push Hook".to_owned()),
        ("X-Gitlab-Token", GITLAB_TOKEN.to_owned()),
    ];
    let (status, answer) = post(other_hooks, &gitlab, &body).await;
    let sent = Instant::now();
    assert_eq!(status, 202, "{answer}");
    let took = fetched(&mut api, &third, sent, WITHIN).await;
    eprintln!("GitLab webhook through the other hub to commit fetched: {took:?}");

    // The first GitHub delivery replayed now that a newer commit is fetched: not taken for a
    // push of `second` (it would fetch it again and rewrite the status).
    let before = get(&mut api).await.status.unwrap();
    let (status, answer) = post(hooks, &github(replay.1), &replay.0).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("handled already"), "{answer}");
    tokio::time::sleep(WITHIN).await;
    let after = get(&mut api).await.status.unwrap();
    assert_eq!(
        after.last_fetch_time, before.last_fetch_time,
        "a replay fetched"
    );
    assert_eq!(
        (after.webhook_commit.as_str(), after.last_webhook_time),
        (third.as_str(), before.last_webhook_time),
        "a replay wrote the status"
    );

    // Not a push; a repository nobody follows.
    let (status, answer) = post(hooks, &[("X-GitHub-Event", "issues".to_owned())], b"{}").await;
    assert_eq!(status, 400, "{answer}");
    let body = github_push("https://github.com/ops/bank.git", &third);
    let signature = format!("sha256={}", sign(GITHUB_SECRET.as_bytes(), &body));
    let (status, answer) = post(hooks, &github(signature), &body).await;
    assert_eq!(
        status, 401,
        "unverified: the sender is not told what the fleet follows"
    );
    assert!(answer.contains("does not verify"), "{answer}");

    assert_eq!(counted(&hub, "github", "triggered"), 1);
    assert_eq!(counted(&hub, "github", "replayed"), 2);
    assert_eq!(counted(&hub, "github", "unauthorized"), 1);
    assert_eq!(counted(&hub, "github", "wrong_event"), 1);
    assert_eq!(counted(&hub, "github", "unknown_repo"), 1);
    assert_eq!(counted(&other, "github", "unauthorized"), 1);
    assert_eq!(counted(&other, "gitlab", "triggered"), 1);
    other.stop().await;
    hub.stop().await;
}

/// Opens a connection to `addr` from the loopback address `from` (127.0.0.x: each its own
/// source to the hub).
async fn connect_from(from: [u8; 4], addr: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((from, 0)))
        .expect("bind a loopback address");
    tokio::time::timeout(SOON, socket.connect(addr))
        .await
        .expect("connected in time")
        .expect("connected")
}

/// The head of a delivery of a 1 MiB body (`MAX_BODY`: never whole in these tests).
fn big_head(addr: SocketAddr) -> String {
    format!(
        "POST /hooks/gitrepos HTTP/1.1\r\nHost: {addr}\r\nX-GitHub-Event: push\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        flotilla_hub::gitops::webhook::MAX_BODY
    )
}

/// A delivery that sends its headers and half its body, then holds the connection: one
/// delivery in flight until `BODY_TIME` (half of 1 MiB keeps it over the body's floor that
/// long).
async fn hold(from: [u8; 4], addr: SocketAddr) -> tokio::net::TcpStream {
    let mut s = connect_from(from, addr).await;
    s.write_all(big_head(addr).as_bytes()).await.unwrap();
    let half = vec![b' '; flotilla_hub::gitops::webhook::MAX_BODY / 2];
    s.write_all(&half).await.unwrap();
    s
}

/// Reads an answer off `r` until its body is whole or the connection ends (the hub may close
/// it, unread body and all, right after answering): the status (0: none) and the text.
async fn answer_of(r: &mut (impl tokio::io::AsyncRead + Unpin)) -> (u16, String) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&out);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// A delivery from `from` whose body comes `chunk` bytes every `every` (a trickle), until the
/// hub answers: its answer.
async fn trickle(
    from: [u8; 4],
    addr: SocketAddr,
    first: usize,
    chunk: usize,
    every: Duration,
) -> (u16, String) {
    let (mut r, mut w) = connect_from(from, addr).await.into_split();
    let send = async {
        let mut bytes = big_head(addr).into_bytes();
        bytes.resize(bytes.len() + first, b' ');
        if w.write_all(&bytes).await.is_err() {
            return;
        }
        loop {
            tokio::time::sleep(every).await;
            if w.write_all(&vec![b' '; chunk]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        answer = answer_of(&mut r) => answer,
        () = send => answer_of(&mut r).await,
    }
}

/// A whole (unsigned, no push) delivery from `from`: its status (0: the connection was closed
/// without an answer).
async fn deliver_from(from: [u8; 4], addr: SocketAddr) -> (u16, String) {
    let mut s = connect_from(from, addr).await;
    let req = format!(
        "POST /hooks/gitrepos HTTP/1.1\r\nHost: {addr}\r\nX-GitHub-Event: push\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    let _ = s.write_all(req.as_bytes()).await;
    let mut out = String::new();
    let read = tokio::time::timeout(SOON, s.read_to_string(&mut out)).await;
    assert!(read.is_ok(), "answered or closed in time");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, out)
}

#[tokio::test]
async fn one_address_holding_many_connections_starves_no_other_and_deliveries_in_flight_are_bounded()
 {
    use flotilla_hub::gitops::webhook::listener::{IN_FLIGHT, PER_ADDRESS, PER_SOURCE};
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    let hooks: SocketAddr = format!("127.0.0.1:{}", flotilla_testkit::free_port())
        .parse()
        .unwrap();
    config.families.gitops.webhook.listen = Some(hooks);
    let hub = start_hub(config).await;
    let deadline = Instant::now() + SOON;
    while hub.units.controllers().is_none() {
        assert!(Instant::now() < deadline, "the hub holds the controllers");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // 127.0.0.1 opens five times its share of connections: PER_ADDRESS are held (idle: a
    // delivery could hold only PER_SOURCE places), every further one closed.
    let mut idle = Vec::new();
    for _ in 0..PER_ADDRESS {
        idle.push(connect_from([127, 0, 0, 1], hooks).await);
    }
    for _ in 0..(4 * PER_ADDRESS) {
        let (status, out) = deliver_from([127, 0, 0, 1], hooks).await;
        assert_eq!(status, 0, "past its connections, closed unanswered: {out}");
    }
    // Another address is served at once.
    let (status, out) = deliver_from([127, 0, 0, 2], hooks).await;
    assert_eq!(status, 400, "served: {out}");
    assert!(out.contains("bad_request"), "{out}");

    // Deliveries in flight are bounded across addresses: past IN_FLIGHT, 503 at once
    // (PER_SOURCE from each address, the most one may hold).
    let mut held = Vec::new();
    let mut from = 2;
    while held.len() < IN_FLIGHT {
        if held.len() % PER_SOURCE == 0 {
            from += 1;
        }
        held.push(hold([127, 0, 0, from], hooks).await);
    }
    // Every held delivery is in flight once the hub has read its headers.
    // Each try from an address of its own (none is held back by its rate).
    let mut other = 100u8;
    let deadline = Instant::now() + SOON;
    loop {
        other += 1;
        let (status, out) = deliver_from([127, 0, 0, other], hooks).await;
        if status == 503 {
            assert!(
                out.contains("\"busy\"") && out.contains("this hub is taking"),
                "{out}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "never busy: {status} {out}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop((held, idle));
    // Their places are given back.
    let deadline = Instant::now() + SOON;
    loop {
        other += 1;
        let (status, _) = deliver_from([127, 0, 0, other], hooks).await;
        if status == 400 {
            break;
        }
        assert!(Instant::now() < deadline, "places not given back: {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(counted(&hub, "unknown", "busy") >= 1);
    hub.stop().await;
}

/// Review A2: two sources holding every connection they may, each with a body trickled over
/// the floor (so each is kept until BODY_TIME), took all 16 places and every real delivery was
/// answered 503. Now each holds its share only and a third source is served; a body trickled
/// under the floor is ended with 408 at the grace, and a source answered 408 is refused for
/// the penalty (session-17 review M2).
#[tokio::test]
async fn two_sources_trickling_bodies_cannot_hold_every_place_and_a_trickle_under_the_floor_is_ended()
 {
    use flotilla_hub::gitops::webhook::listener::{PER_ADDRESS, PER_SOURCE};
    use flotilla_hub::gitops::webhook::pace::{BODY_TIME, FLOOR, GRACE};
    use flotilla_hub::gitops::webhook::pool::PENALTY;
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    let hooks: SocketAddr = format!("127.0.0.1:{}", flotilla_testkit::free_port())
        .parse()
        .unwrap();
    config.families.gitops.webhook.listen = Some(hooks);
    let hub = start_hub(config).await;
    let deadline = Instant::now() + SOON;
    while hub.units.controllers().is_none() {
        assert!(Instant::now() < deadline, "the hub holds the controllers");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Two sources open every connection they may, each trickling a body at three times the
    // floor after a head start: the hub keeps PER_SOURCE of each and answers the rest 503.
    let started = Instant::now();
    let chunk = (3 * FLOOR / 10) as usize;
    let mut trickles = Vec::new();
    for from in [[127, 0, 0, 21], [127, 0, 0, 22]] {
        for _ in 0..PER_ADDRESS {
            trickles.push(tokio::spawn(trickle(
                from,
                hooks,
                2 * FLOOR as usize,
                chunk,
                Duration::from_millis(100),
            )));
        }
    }
    let refused = 2 * (PER_ADDRESS - PER_SOURCE);
    let deadline = Instant::now() + SOON;
    while trickles.iter().filter(|t| t.is_finished()).count() < refused {
        assert!(
            Instant::now() < deadline,
            "the sources past their share are answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (done, kept): (Vec<_>, Vec<_>) = trickles.into_iter().partition(|t| t.is_finished());
    assert_eq!(kept.len(), 2 * PER_SOURCE, "each source keeps its share");
    for t in done {
        let (status, out) = t.await.unwrap();
        assert_eq!(status, 503, "{out}");
        assert!(
            out.contains("\"busy\"") && out.contains("its share"),
            "{out}"
        );
    }

    // A third source's delivery is served while they hold their shares.
    for _ in 0..3 {
        let (status, out) = deliver_from([127, 0, 0, 23], hooks).await;
        assert_eq!(status, 400, "served: {out}");
        assert!(out.contains("bad_request"), "{out}");
    }
    assert!(
        started.elapsed() < BODY_TIME && kept.iter().all(|t| !t.is_finished()),
        "the trickles over the floor were still held when the third source was served"
    );

    // A body trickled under the floor (a byte every 50 ms) is ended at the grace with 408.
    let sent = Instant::now();
    let (status, out) = tokio::time::timeout(
        SOON,
        trickle([127, 0, 0, 24], hooks, 0, 1, Duration::from_millis(50)),
    )
    .await
    .expect("the slow body is ended");
    assert_eq!(status, 408, "{out}");
    assert!(
        out.contains("too_slow") && out.contains("slower than"),
        "{out}"
    );
    assert!(sent.elapsed() >= GRACE, "ended before its grace");
    assert!(counted(&hub, "unknown", "too_slow") >= 1);
    assert_eq!(counted(&hub, "unknown", "busy"), refused as u64);
    // Review M2: a source answered 408 is refused every place for PENALTY at once, told why
    // and for how long, and another source is still served.
    let (status, out) = deliver_from([127, 0, 0, 24], hooks).await;
    assert_eq!(status, 429, "{out}");
    assert!(
        out.contains("rate_limited")
            && out.contains("a body too slowly")
            && out.contains(&format!("refused for {} s", PENALTY.as_secs())),
        "{out}"
    );
    let (status, out) = deliver_from([127, 0, 0, 25], hooks).await;
    assert_eq!(status, 400, "served: {out}");

    // The trickles over the floor are ended at BODY_TIME with 408 and their places given back;
    // their sources are refused for PENALTY, everyone else is served.
    for t in kept {
        let (status, out) = tokio::time::timeout(SOON, t)
            .await
            .expect("ended at BODY_TIME")
            .unwrap();
        assert_eq!(status, 408, "{out}");
        assert!(out.contains("took longer than"), "{out}");
    }
    for from in [[127, 0, 0, 21], [127, 0, 0, 22]] {
        let (status, out) = deliver_from(from, hooks).await;
        assert_eq!(status, 429, "penalised: {out}");
    }
    let (status, out) = deliver_from([127, 0, 0, 26], hooks).await;
    assert_eq!(status, 400, "places given back: {out}");
    hub.stop().await;
}
