//! GitRepos over HTTPS with credentials, end to end: a repository served by the real
//! `git http-backend` behind TLS (a test CA given as `caBundle`) and basic authentication, a
//! hub Secret named by `clientSecretName`, the real `flotilla-git-fetch` workers and the real
//! `flotilla` CLI (`apply`, `gitrepo sync --wait`), simulated clusters receiving the works.
//! Missing and wrong credentials are refused saying which Secret and what to do; and the
//! password never appears in any NATS message, anywhere in JetStream's store, in the hub's log
//! (captured at debug, its own crates at trace), in the CLI's output or in a worker's command
//! line or environment (read from /proc while the server holds the worker's request).

use crate::common;

use common::*;
use flotilla_api::meta::{condition_status, find_condition};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::{GetGitRepoRequest, GitRepo, ManifestWork};
use flotilla_hub::Hub;
use flotilla_hub::replicaset::rules::REPLICASET_LABEL;
use flotilla_testkit::NatsServer;
use flotilla_testkit::git::Repo;
use flotilla_testkit::git_http::{GitHttp, Options};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PASSWORD: &str = "tok-3b9f1c7e5a";
const WRONG: &str = "tok-wrong-00000";

/// What the hub logs, captured (a `tracing` writer).
#[derive(Clone, Default)]
pub(crate) struct Captured(pub(crate) Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A subscriber writing every event of this thread (the test's runtime runs the hub's tasks)
/// into `captured`: debug, and trace for Flotilla's crates. Returned with a second, silent
/// dispatcher held as long: with a single dispatcher registered, tracing-core decides a new
/// callsite's interest by the registering thread's subscriber alone (`has_just_one` in
/// `callsite.rs`), so a test running beside this one on another thread, with none, would turn
/// off the hub's shared callsites here too.
pub(crate) fn capture_log(
    captured: &Captured,
) -> (tracing::subscriber::DefaultGuard, tracing::Dispatch) {
    let silent = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "debug,h2=info,hyper=info,hyper_util=info,tower=info,tonic=info,\
             flotilla_hub=trace,flotilla_hub_core=trace,flotilla_gitfetch=trace",
        ))
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    (tracing::subscriber::set_default(subscriber), silent)
}

/// Every form the password could take on the wire or at rest: itself, base64 at each
/// alignment (a Secret's data, a JSON of it), and the basic-auth header's base64.
fn needles() -> Vec<Vec<u8>> {
    secret_forms(PASSWORD.as_bytes(), &["", "a", "ab", "ann:"])
}

pub(crate) fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn assert_clean(what: &str, bytes: &[u8]) {
    assert_holds_none(what, bytes, &needles());
}

/// Fails naming `what` when `bytes` hold any of the secret's forms in `needles`.
pub(crate) fn assert_holds_none(what: &str, bytes: &[u8], needles: &[Vec<u8>]) {
    for n in needles {
        assert!(
            !holds(bytes, n),
            "{what} holds the secret ({})",
            String::from_utf8_lossy(n)
        );
    }
}

/// The secret's forms at rest and on the wire: itself, and the part of its base64 that depends
/// on its bytes alone, after each prefix (a Secret's data, a JSON of it, a header).
pub(crate) fn secret_forms(secret: &[u8], prefixes: &[&str]) -> Vec<Vec<u8>> {
    use data_encoding::BASE64;
    let mut out = vec![secret.to_vec()];
    for prefix in prefixes {
        let mut bytes = prefix.as_bytes().to_vec();
        bytes.extend_from_slice(secret);
        let enc = BASE64.encode(&bytes);
        let first = (prefix.len() * 8).div_ceil(6);
        out.push(enc.as_bytes()[first..enc.len() - 4].to_vec());
    }
    out
}

/// Every NATS message from now on (subject and payload), as a test with no credentials sees
/// the plain server.
pub(crate) async fn wiretap(nats: &NatsServer) -> Arc<Mutex<Vec<Vec<u8>>>> {
    use futures::StreamExt;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let mut all = client.subscribe(">").await.unwrap();
    client.flush().await.unwrap();
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    tokio::spawn(async move {
        let _client = client;
        while let Some(m) = all.next().await {
            let mut bytes = m.subject.as_bytes().to_vec();
            bytes.extend_from_slice(&m.payload);
            for (k, vs) in m.headers.iter().flat_map(|h| h.iter()) {
                bytes.extend_from_slice(k.to_string().as_bytes());
                for v in vs {
                    bytes.extend_from_slice(v.as_str().as_bytes());
                }
            }
            keep.lock().unwrap().push(bytes);
        }
    });
    seen
}

pub(crate) fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The `flotilla-git-fetch` processes this test process started (through the hub).
fn workers() -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces, so read after its last ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) && head.contains("flotilla-git-fe") {
            out.push(pid);
        }
    }
    out
}

/// Runs the `flotilla` CLI against the hub; returns (success, stdout + stderr).
pub(crate) async fn cli(hub: &Hub, args: &[&str]) -> (bool, String) {
    let out = tokio::time::timeout(
        SOON,
        tokio::process::Command::new(flotilla_testkit::binary("flotilla"))
            .arg("--hub")
            .arg(format!("http://{}", hub.grpc_addr))
            .args(args)
            .output(),
    )
    .await
    .expect("the CLI ends in time")
    .expect("the CLI runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn secret_yaml(password: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: shop-git, namespace: default}}\n\
         type: kubernetes.io/basic-auth\nstringData: {{username: ann, password: {password}}}\n"
    )
}

fn gitrepo_yaml(url: &str, ca_pem: &str, secret: bool) -> String {
    let ca = data_encoding::BASE64.encode(ca_pem.as_bytes());
    let secret = if secret {
        "  clientSecretName: shop-git\n"
    } else {
        ""
    };
    format!(
        "apiVersion: apps.flotilla.io/v1alpha1\nkind: GitRepo\n\
         metadata: {{name: shop, namespace: default}}\n\
         spec:\n  repo: {url}\n  branch: main\n  paths: [apps/*]\n  caBundle: {ca}\n{secret}\
         \x20 targets:\n  - name: stores\n    placementRef: {{name: stores}}\n"
    )
}

pub(crate) async fn apply(hub: &Hub, dir: &std::path::Path, name: &str, text: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let (ok, out) = cli(hub, &["apply", "-f", file.to_str().unwrap()]).await;
    assert!(ok, "apply {name}: {out}");
    out
}

pub(crate) async fn get(api: &mut GitRepoServiceClient<tonic::transport::Channel>) -> GitRepo {
    api.get_git_repo(GetGitRepoRequest {
        namespace: "default".into(),
        name: "shop".into(),
    })
    .await
    .unwrap()
    .into_inner()
}

/// Waits until the GitRepo's `Fetched` condition is False with a message containing `part`.
pub(crate) async fn wait_fetch_failed(
    api: &mut GitRepoServiceClient<tonic::transport::Channel>,
    part: &str,
) -> String {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let r = get(api).await;
        let status = r.status.unwrap_or_default();
        if let Some(c) = find_condition(&status.conditions, "Fetched")
            && c.status == "False"
            && c.message.contains(part)
        {
            return c.message.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Fetched=False with {part:?}: {:#?}",
            status.conditions
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The ConfigMap value `data.v` of each converged work of replica set `default/shop-apps-web`.
pub(crate) fn web_values(hub: &Hub) -> Vec<String> {
    hub.works
        .snapshot()
        .into_iter()
        .filter(|w| {
            w.metadata.as_ref().is_some_and(|m| {
                m.labels.get(REPLICASET_LABEL).map(String::as_str) == Some("default.shop-apps-web")
            })
        })
        .map(|w| w.to_work())
        .filter(|w: &ManifestWork| {
            common::work::converged_at(w, w.metadata.as_ref().map_or(0, |m| m.generation))
        })
        .map(|w| {
            let raw = &w.spec.unwrap().workload.unwrap().manifests[0].raw;
            let cm: serde_json::Value = serde_json::from_slice(raw).unwrap();
            cm["data"]["v"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

pub(crate) async fn wait_values(hub: &Hub, value: &str) {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let values = web_values(hub);
        if values.len() == 2 && values.iter().all(|v| v == value) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "2 converged works with v={value}: {values:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Placement `default/stores` over the default set.
pub(crate) async fn stores_placement(hub: &Hub) {
    let Ok(Document::Placement(p)) = parse_documents(
        "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\n\
         metadata: {name: stores, namespace: default}\nspec: {clusterSets: [default]}\n",
    )
    .remove(0) else {
        panic!("placement fixture");
    };
    PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap()
        .apply_placement(p)
        .await
        .unwrap();
}

pub(crate) fn configmap(value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web, namespace: default}}\n\
         data: {{v: \"{value}\"}}\n"
    )
}

#[tokio::test]
async fn an_https_repository_is_followed_with_a_hub_secret_that_never_leaks() {
    let captured = Captured::default();
    let _log = capture_log(&captured);
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("1"));
    git.commit("web at 1");
    let server = GitHttp::serve(
        base.path(),
        Options {
            tls: true,
            basic_auth: Some(("ann".into(), PASSWORD.into())),
        },
    );
    let ca = server.ca_pem.clone().unwrap();

    let nats = NatsServer::start();
    let wire = wiretap(&nats).await;
    let mut config = hub_config(&nats.url());
    let g = &mut config.families.gitops;
    g.worker = Some(flotilla_testkit::binary("flotilla-git-fetch"));
    g.cache_dir = base.path().join("cache");
    g.allow_loopback = true;
    g.retry_min = Duration::from_secs(1);
    let hub = start_hub(config).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["store-1", "store-2"]).await;
    bind_set(&hub, "default", "default").await;
    stores_placement(&hub).await;
    let mut api = GitRepoServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let dir = base.path();
    let url = server.url("shop");

    // No Secret named: the server's 401 says what to do.
    apply(&hub, dir, "gitrepo.yaml", &gitrepo_yaml(&url, &ca, false)).await;
    wait_fetch_failed(&mut api, "the server asks for credentials (HTTP 401)").await;

    // A Secret with the wrong password: refused naming the Secret, never the value.
    apply(&hub, dir, "secret.yaml", &secret_yaml(WRONG)).await;
    apply(&hub, dir, "gitrepo.yaml", &gitrepo_yaml(&url, &ca, true)).await;
    let message = wait_fetch_failed(
        &mut api,
        "authentication failed: the server refused the credentials of Secret default/shop-git",
    )
    .await;
    assert!(!message.contains(WRONG), "{message}");

    // The right password, then a sync through the CLI that waits for the fetch.
    apply(&hub, dir, "secret.yaml", &secret_yaml(PASSWORD)).await;
    let (ok, out) = cli(
        &hub,
        &["gitrepo", "sync", "shop", "--wait", "--timeout", "20s"],
    )
    .await;
    assert!(ok, "{out}");
    assert!(out.contains("gitrepo default/shop: fetched"), "{out}");
    wait_values(&hub, "1").await;

    // A push, fetched while the server holds its answers: the worker's command line and
    // environment are read from /proc meanwhile.
    git.write("apps/web/cm.yaml", configmap("2"));
    let second = git.commit("web at 2");
    server.hold();
    let (ok, out) = cli(&hub, &["gitrepo", "sync", "shop"]).await;
    assert!(ok, "{out}");
    let deadline = tokio::time::Instant::now() + SOON;
    let pids = loop {
        let pids = workers();
        if !pids.is_empty() {
            break pids;
        }
        assert!(tokio::time::Instant::now() < deadline, "no worker started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for pid in &pids {
        for part in ["cmdline", "environ"] {
            let bytes = std::fs::read(format!("/proc/{pid}/{part}")).unwrap();
            assert!(!bytes.is_empty(), "{part} of {pid} read");
            assert_clean(&format!("worker {pid}'s {part}"), &bytes);
        }
    }
    server.release();
    wait_values(&hub, "2").await;
    let r = get(&mut api).await;
    let status = r.status.clone().unwrap();
    assert_eq!(status.commit, second);
    assert_eq!(
        condition_status(&status.conditions, "Fetched"),
        Some("True")
    );

    // Nowhere in the clear: the GitRepo, every NATS message, JetStream's store on disk, the
    // hub's log, the CLI's outputs.
    assert_clean("the GitRepo", &prost::Message::encode_to_vec(&r));
    let messages = wire.lock().unwrap().clone();
    assert!(messages.len() > 10, "the wiretap saw the traffic");
    for m in &messages {
        assert_clean(
            &format!(
                "a NATS message ({})",
                String::from_utf8_lossy(&m[..m.len().min(80)])
            ),
            m,
        );
    }
    let mut stored = Vec::new();
    files(&nats.store_dir(), &mut stored);
    assert!(!stored.is_empty(), "JetStream's store holds files");
    for f in stored {
        if let Ok(bytes) = std::fs::read(&f) {
            assert_clean(&f.display().to_string(), &bytes);
        }
    }
    let log = captured.0.lock().unwrap().clone();
    assert!(
        String::from_utf8_lossy(&log).contains("GitRepo applied"),
        "the hub's log was captured"
    );
    assert_clean("the hub's log", &log);
    assert_clean("the CLI's output", out.as_bytes());
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
