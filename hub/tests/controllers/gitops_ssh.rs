//! GitRepos over SSH, end to end: a repository served by a real OpenSSH server (the testkit's
//! `sshd`, running `git-upload-pack`), a `kubernetes.io/ssh-auth` hub Secret with the deploy
//! key and `known_hosts`, the real `flotilla-git-fetch` workers and the real `flotilla` CLI,
//! simulated clusters receiving the works. A Secret without `known_hosts` and one whose line
//! holds another host key are refused saying which; and the private key never appears in any
//! NATS message, anywhere in JetStream's store, in the hub's log or in the CLI's output.

use crate::common;
use crate::gitops_https::{
    Captured, apply, assert_holds_none, capture_log, cli, configmap, files, get, secret_forms,
    stores_placement, wait_fetch_failed, wait_values, wiretap,
};

use common::*;
use flotilla_api::meta::condition_status;
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_testkit::NatsServer;
use flotilla_testkit::git::Repo;
use flotilla_testkit::sshd::{Sshd, keygen};
use std::time::Duration;

fn secret_yaml(private_key: &str, known_hosts: Option<&str>) -> String {
    let indented: String = private_key.lines().map(|l| format!("    {l}\n")).collect();
    let known = known_hosts.map_or(String::new(), |k| {
        format!("  known_hosts: {:?}\n", k.trim_end())
    });
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: shop-ssh, namespace: default}}\n\
         type: kubernetes.io/ssh-auth\nstringData:\n  ssh-privatekey: |\n{indented}{known}"
    )
}

fn gitrepo_yaml(url: &str) -> String {
    format!(
        "apiVersion: apps.flotilla.io/v1alpha1\nkind: GitRepo\n\
         metadata: {{name: shop, namespace: default}}\n\
         spec:\n  repo: {url}\n  branch: main\n  paths: [apps/*]\n  clientSecretName: shop-ssh\n\
         \x20 targets:\n  - name: stores\n    placementRef: {{name: stores}}\n"
    )
}

/// The key's forms: the armour's body lines (each one is the key), and the whole text in
/// base64 at each alignment (a Secret's data, a JSON of it).
fn needles(private_key: &str) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = private_key
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 16)
        .map(|l| l.as_bytes().to_vec())
        .collect();
    out.extend(
        secret_forms(private_key.as_bytes(), &["", "a", "ab"])
            .into_iter()
            .skip(1),
    );
    out
}

#[tokio::test]
async fn an_ssh_repository_is_followed_with_a_deploy_key_that_never_leaks() {
    let captured = Captured::default();
    let _log = capture_log(&captured);
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("1"));
    git.commit("web at 1");
    let sshd = Sshd::start();
    let key = String::from_utf8(sshd.client_key()).unwrap();

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

    // The key alone: no trust on first use.
    apply(&hub, dir, "secret.yaml", &secret_yaml(&key, None)).await;
    apply(
        &hub,
        dir,
        "gitrepo.yaml",
        &gitrepo_yaml(&sshd.url(&git.dir)),
    )
    .await;
    wait_fetch_failed(
        &mut api,
        "Secret default/shop-ssh: a kubernetes.io/ssh-auth Secret without known_hosts",
    )
    .await;

    // known_hosts with another key for this host: a man in the middle, refused.
    let impostor = keygen(base.path(), "impostor", "ed25519");
    let public = std::fs::read_to_string(impostor.with_extension("pub")).unwrap();
    let mut fields = public.split_whitespace();
    let wrong = format!(
        "[127.0.0.1]:{} {} {}",
        sshd.port,
        fields.next().unwrap(),
        fields.next().unwrap()
    );
    apply(&hub, dir, "secret.yaml", &secret_yaml(&key, Some(&wrong))).await;
    let (ok, out) = cli(&hub, &["gitrepo", "sync", "shop"]).await;
    assert!(ok, "{out}");
    wait_fetch_failed(&mut api, "HOST KEY MISMATCH").await;

    // The right host key: fetched, rendered, delivered; then a push.
    apply(
        &hub,
        dir,
        "secret.yaml",
        &secret_yaml(&key, Some(&sshd.known_hosts())),
    )
    .await;
    let (ok, out) = cli(
        &hub,
        &["gitrepo", "sync", "shop", "--wait", "--timeout", "20s"],
    )
    .await;
    assert!(ok, "{out}\nsshd: {}", sshd.log());
    wait_values(&hub, "1").await;
    git.write("apps/web/cm.yaml", configmap("2"));
    let second = git.commit("web at 2");
    let (ok, out) = cli(
        &hub,
        &["gitrepo", "sync", "shop", "--wait", "--timeout", "20s"],
    )
    .await;
    assert!(ok, "{out}");
    wait_values(&hub, "2").await;
    let r = get(&mut api).await;
    let status = r.status.clone().unwrap();
    assert_eq!(status.commit, second);
    assert_eq!(
        condition_status(&status.conditions, "Fetched"),
        Some("True")
    );

    // Nowhere in the clear.
    let needles = needles(&key);
    assert!(needles.len() > 4, "the key's lines are looked for");
    assert_holds_none("the GitRepo", &prost::Message::encode_to_vec(&r), &needles);
    let messages = wire.lock().unwrap().clone();
    assert!(messages.len() > 10, "the wiretap saw the traffic");
    for m in &messages {
        assert_holds_none("a NATS message", m, &needles);
    }
    let mut stored = Vec::new();
    files(&nats.store_dir(), &mut stored);
    for f in stored {
        if let Ok(bytes) = std::fs::read(&f) {
            assert_holds_none(&f.display().to_string(), &bytes, &needles);
        }
    }
    let log = captured.0.lock().unwrap().clone();
    assert!(
        String::from_utf8_lossy(&log).contains("GitRepo applied"),
        "the hub's log was captured"
    );
    assert_holds_none("the hub's log", &log, &needles);
    assert_holds_none("the CLI's output", out.as_bytes(), &needles);
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
