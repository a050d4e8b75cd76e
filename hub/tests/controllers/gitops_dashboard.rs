//! The dashboard's GitRepo pages over HTTP on a real hub: a repository made with `git init`,
//! fetched over `file://` by the real worker, delivered to simulated clusters; the list shows
//! the commit and its subject, the GitRepo's page its bundles and each cluster's state and
//! commit, filtered by state; a state that is not Fleet's and a GitRepo that does not exist
//! are refused.

use crate::common;
use crate::dashboard_fixture::http;
use crate::gitops::{configmap, delivered, gitrepo, setup, wait_repo, wait_works};

use common::*;
use flotilla_api::meta::condition_status;
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_testkit::NatsServer;
use flotilla_testkit::git::Repo;

#[tokio::test]
async fn the_dashboard_shows_each_gitrepo_s_commit_bundles_and_clusters() {
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("web", "1"));
    let first = git.commit("web at 1");
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.dashboard.listen = Some("127.0.0.1:0".parse().unwrap());
    let g = &mut config.families.gitops;
    g.worker = Some(flotilla_testkit::binary("flotilla-git-fetch"));
    g.cache_dir = base.path().join("cache");
    g.file_roots = vec![base.path().display().to_string()];
    let hub = start_hub(config).await;
    let agents = setup(&hub, &nats, &["store-1", "store-2"]).await;
    let mut api = GitRepoServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let url = format!("file://{}", git.dir.display());
    api.apply_git_repo(gitrepo("shop", &url, "[\"apps/*\"]"))
        .await
        .unwrap();
    wait_works(&hub, "shop-apps-web", 2, "1").await;
    wait_repo(&mut api, "shop", "commit 1 delivered and ready", |r| {
        delivered(r) == first
            && condition_status(&r.status.as_ref().unwrap().conditions, "Ready") == Some("True")
    })
    .await;

    let list = http(&hub, "GET", "/gitrepos", &[], "").await;
    assert_eq!(list.status, 200, "{}", list.body);
    for part in [
        "href=\"/gitrepos\" class=\"active\"",
        "href=\"/gitrepos/default/shop\"",
        &first[..12],
        "web at 1",
        "2 Ready",
    ] {
        assert!(list.body.contains(part), "{part}: {}", list.body);
    }

    let page = http(&hub, "GET", "/gitrepos/default/shop", &[], "").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for part in [
        "href=\"/rollouts/default/shop-apps-web\"",
        "data-cluster=\"store-1\" data-state=\"Ready\"",
        "data-cluster=\"store-2\" data-state=\"Ready\"",
        "2/2",
    ] {
        assert!(page.body.contains(part), "{part}: {}", page.body);
    }
    let only = http(
        &hub,
        "GET",
        "/gitrepos/default/shop?state=Modified",
        &[],
        "",
    )
    .await;
    assert_eq!(only.status, 200);
    assert!(
        only.body.contains("No cluster in Modified."),
        "{}",
        only.body
    );

    let bad = http(&hub, "GET", "/gitrepos/default/shop?state=Broken", &[], "").await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.body.contains("state: &quot;Broken&quot; is not one of"),
        "{}",
        bad.body
    );
    let missing = http(&hub, "GET", "/gitrepos/default/nope", &[], "").await;
    assert_eq!(missing.status, 404);
    assert!(
        missing.body.contains("No GitRepo default/nope."),
        "{}",
        missing.body
    );
    drop(agents);
}
