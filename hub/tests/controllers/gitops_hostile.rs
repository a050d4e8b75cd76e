//! A hostile repository through the whole hub (the issue's "a malicious repository is
//! refused"): a GitRepo delivering a good commit is pushed a symlink out of its tree, then a
//! file over the size limit, then a file named `..` in its bundle (a tree forged with
//! `git mktree`: path traversal). Each is refused by the hub's fetch worker, and the GitRepo's
//! `Fetched` condition names the file and why, while the last good commit stays delivered and
//! its works stay.

use crate::common;

use super::gitops::{configmap, delivered, setup, wait_repo, wait_works};
use common::*;
use flotilla_api::meta::{condition_status, find_condition};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_api::v1::{GetGitRepoRequest, GitRepo};
use flotilla_testkit::NatsServer;
use flotilla_testkit::git::Repo;
use std::time::Duration;

/// GitRepo `hostile` over `url` (file://), bundles `apps/*`, to Placement `stores`.
fn gitrepo(url: &str) -> GitRepo {
    let text = format!(
        "apiVersion: apps.flotilla.io/v1alpha1\nkind: GitRepo\n\
         metadata: {{name: hostile, namespace: default}}\n\
         spec:\n  repo: {url}\n  branch: main\n  paths: [\"apps/*\"]\n  pollingInterval: \"0\"\n\
         \x20 targets:\n  - name: stores\n    placementRef: {{name: stores}}\n"
    );
    match parse_documents(&text).remove(0) {
        Ok(Document::GitRepo(r)) => r,
        other => panic!("GitRepo fixture: {other:?}"),
    }
}

/// Pushes one commit; returns its id.
type Push<'a> = Box<dyn Fn() -> String + 'a>;

/// The `Fetched` condition's (status, message).
fn fetched(r: &GitRepo) -> (String, String) {
    let st = r.status.clone().unwrap_or_default();
    let c = find_condition(&st.conditions, "Fetched");
    (
        condition_status(&st.conditions, "Fetched")
            .unwrap_or_default()
            .to_owned(),
        c.map(|c| c.message.clone()).unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_hostile_repository_is_refused_naming_the_file_and_the_last_good_commit_stays() {
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "hostile");
    let good_cm = configmap("web", "1");
    git.write("apps/web/cm.yaml", &good_cm);
    let good = git.commit("web at 1");

    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    let g = &mut config.families.gitops;
    g.worker = Some(flotilla_testkit::binary("flotilla-git-fetch"));
    g.cache_dir = base.path().join("cache");
    g.file_roots = vec![base.path().display().to_string()];
    g.retry_min = Duration::from_secs(1);
    let hub = start_hub(config).await;
    let agents = setup(&hub, &nats, &["store-1", "store-2"]).await;
    let mut api = GitRepoServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    api.apply_git_repo(gitrepo(&format!("file://{}", git.dir.display())))
        .await
        .unwrap();
    wait_works(&hub, "hostile-apps-web", 2, "1").await;
    wait_repo(&mut api, "hostile", "the good commit delivered", |r| {
        delivered(r) == good
    })
    .await;

    // A symlink out of the tree; a file over the 1 MiB a file may have; a file named `..`
    // in the bundle (the last: its tree is forged, the work tree left behind). Each pushed
    // and synced, each refused naming it.
    let blob = git.blob(&good_cm);
    let secret = git.blob("kind: Secret\n");
    let cases: Vec<(Push<'_>, &str)> = vec![
        (
            Box::new(|| {
                git.symlink("apps/web/secret.yaml", "../../../etc/passwd");
                git.commit("escape")
            }),
            "apps/web/secret.yaml is a symlink to ../../../etc/passwd, outside apps/web",
        ),
        (
            Box::new(|| {
                std::fs::remove_file(git.dir.join("apps/web/secret.yaml")).unwrap();
                git.write(
                    "apps/web/big.yaml",
                    "a: b\n".repeat(2 * 1024 * 1024 / 5 + 1),
                );
                git.commit("big")
            }),
            "apps/web/big.yaml: 2.0 MiB; a file may have at most 1 MiB (--gitops-max-file-bytes)",
        ),
        (
            Box::new(|| {
                let web = git.mktree(&format!(
                    "100644 blob {blob}\tcm.yaml\n100644 blob {secret}\t..\n"
                ));
                let apps = git.mktree(&format!("040000 tree {web}\tweb\n"));
                let root = git.mktree(&format!("040000 tree {apps}\tapps\n"));
                git.commit_root(&root, "traversal")
            }),
            "apps/web/..: not a usable file name (a relative step)",
        ),
    ];
    for (push, why) in cases {
        let bad = push();
        api.sync_git_repo(GetGitRepoRequest {
            namespace: "default".into(),
            name: "hostile".into(),
        })
        .await
        .unwrap();
        let r = wait_repo(&mut api, "hostile", why, |r| {
            let (status, message) = fetched(r);
            status == "False" && message.starts_with(why)
        })
        .await;
        let (_, message) = fetched(&r);
        assert!(
            message.contains(&good[..7]) && !message.contains(&bad[..7]),
            "the message says the last good commit stays: {message}"
        );
        assert_eq!(delivered(&r), good, "{why}: the last good commit stays");
        wait_works(&hub, "hostile-apps-web", 2, "1").await;
    }
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
