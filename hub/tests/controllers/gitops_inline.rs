//! Issue 50's "targets by inline predicates": a GitRepo whose target carries its own
//! `placement:` (no Placement written by hand) — a repository made with `git init`, served by a
//! real `git daemon`, fetched by the real `flotilla-git-fetch` worker. The hub writes the owned
//! Placement `<gitrepo>-<target>` (labelled with the GitRepo), the bundle reaches only the
//! clusters it selects, and replacing the target deletes that Placement and its clusters' works
//! while the new target's clusters get theirs. A Placement of the same name the GitRepo does not
//! own is never overwritten: the commit is refused, saying so, and delivered once it is gone.

use crate::common;
use crate::gitops::{configmap, delivered, setup, wait_repo};

use common::*;
use flotilla_api::meta::{condition_status, find_condition};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::{GitRepo, LabelClusterRequest, ListPlacementsRequest, Placement};
use flotilla_hub::Hub;
use flotilla_hub::replicaset::rules::REPLICASET_LABEL;
use flotilla_testkit::NatsServer;
use flotilla_testkit::git::{Daemon, Repo};
use std::collections::BTreeSet;
use std::time::Duration;
use tonic::transport::Channel;

/// GitRepo `name` over `url` with `targets` (YAML list items, indented as under `targets:`).
fn gitrepo(name: &str, url: &str, targets: &str) -> GitRepo {
    let text = format!(
        "apiVersion: apps.flotilla.io/v1alpha1\nkind: GitRepo\n\
         metadata: {{name: {name}, namespace: default}}\n\
         spec:\n  repo: {url}\n  insecureTransport: true\n  branch: main\n  paths: [\"apps/*\"]\n\
         \x20 targets:\n{targets}"
    );
    match parse_documents(&text).remove(0) {
        Ok(Document::GitRepo(r)) => r,
        other => panic!("GitRepo fixture: {other:?}"),
    }
}

const DEPOTS: &str = "  - name: depots\n    placement:\n      clusterSets: [default]\n      \
                      clusterSelector: {matchLabels: {tier: depot}}\n";
const LAB: &str = "  - name: lab\n    placement: {clusterName: store-1}\n";

/// The clusters holding a converged work of replica set `default/<set>`.
fn clusters_with(hub: &Hub, set: &str) -> BTreeSet<String> {
    let label = format!("default.{set}");
    hub.works
        .snapshot()
        .into_iter()
        .map(|w| w.to_work())
        .filter(|w| {
            w.metadata
                .as_ref()
                .is_some_and(|m| m.labels.get(REPLICASET_LABEL) == Some(&label))
        })
        .filter(|w| {
            let generation = w.metadata.as_ref().map_or(0, |m| m.generation);
            common::work::converged_at(w, generation)
        })
        .map(|w| w.metadata.unwrap().namespace)
        .collect()
}

async fn wait_clusters(hub: &Hub, set: &str, want: &[&str]) {
    let want: BTreeSet<String> = want.iter().map(|c| c.to_string()).collect();
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let got = clusters_with(hub, set);
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{set}: wanted works on {want:?}, have {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Placements of namespace default.
async fn placements(api: &mut PlacementServiceClient<Channel>) -> Vec<Placement> {
    api.list_placements(ListPlacementsRequest {
        namespace: "default".into(),
    })
    .await
    .unwrap()
    .into_inner()
    .items
}

/// Waits until the Placements of namespace default are named `want`; returns them.
async fn wait_placements(
    api: &mut PlacementServiceClient<Channel>,
    want: &[&str],
) -> Vec<Placement> {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let found = placements(api).await;
        let names: Vec<&str> = found
            .iter()
            .map(|p| p.metadata.as_ref().unwrap().name.as_str())
            .collect();
        if names == want {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "wanted Placements {want:?}, have {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_inline_target_delivers_only_to_the_clusters_it_selects_and_goes_with_its_placement() {
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("web", "1"));
    let first = git.commit("web");
    let daemon = Daemon::serve(base.path());

    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    let g = &mut config.families.gitops;
    g.worker = Some(flotilla_testkit::binary("flotilla-git-fetch"));
    g.cache_dir = base.path().join("cache");
    g.allow_loopback = true;
    g.retry_min = Duration::from_secs(1);
    let hub = start_hub(config).await;
    let names = ["store-1", "store-2", "depot-1", "depot-2"];
    // Binds cluster set default to namespace default, and writes Placement `stores` (not ours).
    let agents = setup(&hub, &nats, &names).await;
    let mut clusters = clusters_client(&hub).await;
    for depot in ["depot-1", "depot-2"] {
        clusters
            .label_cluster(LabelClusterRequest {
                name: depot.into(),
                set: [("tier".to_string(), "depot".to_string())].into(),
                remove: vec![],
            })
            .await
            .unwrap();
    }
    let mut api = GitRepoServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let mut placement_api = PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let url = daemon.url("shop");

    // An inline target: the hub writes Placement shop-depots, and only the depots get the work.
    api.apply_git_repo(gitrepo("shop", &url, DEPOTS))
        .await
        .unwrap();
    let found = wait_placements(&mut placement_api, &["shop-depots", "stores"]).await;
    let owned = found[0].metadata.as_ref().unwrap();
    assert_eq!(owned.labels["apps.flotilla.io/gitrepo"], "shop");
    wait_clusters(&hub, "shop-apps-web", &["depot-1", "depot-2"]).await;
    wait_repo(&mut api, "shop", "delivered, its target placed", |r| {
        let placed = r
            .status
            .as_ref()
            .and_then(|s| condition_status(&s.conditions, "TargetsPlaced"));
        delivered(r) == first && placed == Some("True")
    })
    .await;

    // The target replaced by one naming a cluster: shop-depots and the depots' works go, the
    // named cluster gets its work.
    api.apply_git_repo(gitrepo("shop", &url, LAB))
        .await
        .unwrap();
    wait_clusters(&hub, "shop-apps-web", &["store-1"]).await;
    wait_placements(&mut placement_api, &["shop-lab", "stores"]).await;

    // A Placement named like another GitRepo's inline target, not its own: never overwritten,
    // the commit refused and the status naming it.
    let mut theirs = found[1].clone();
    let m = theirs.metadata.get_or_insert_default();
    m.name = "shop2-stores".into();
    m.uid.clear();
    m.resource_version = 0;
    theirs.status = None;
    placement_api.apply_placement(theirs.clone()).await.unwrap();
    let stores =
        "  - name: stores\n    placement: {clusterSelector: {matchLabels: {tier: depot}}}\n";
    api.apply_git_repo(gitrepo("shop2", &url, stores))
        .await
        .unwrap();
    let refused = wait_repo(&mut api, "shop2", "the commit refused", |r| {
        r.status
            .as_ref()
            .and_then(|s| condition_status(&s.conditions, "Rendered"))
            == Some("False")
    })
    .await;
    let status = refused.status.unwrap();
    let message = &find_condition(&status.conditions, "Rendered")
        .unwrap()
        .message;
    assert!(
        message
            .contains("Placement default/shop2-stores exists and does not belong to this GitRepo"),
        "{message}"
    );
    let kept = placements(&mut placement_api)
        .await
        .into_iter()
        .find(|p| p.metadata.as_ref().unwrap().name == "shop2-stores")
        .unwrap();
    assert_eq!(kept.spec, theirs.spec, "never overwritten");
    // That Placement removed: the GitRepo writes its own and delivers the commit it held back.
    placement_api
        .delete_placement(flotilla_api::v1::PlacementRef {
            namespace: "default".into(),
            name: "shop2-stores".into(),
        })
        .await
        .unwrap();
    wait_clusters(&hub, "shop2-apps-web", &["depot-1", "depot-2"]).await;
    wait_repo(&mut api, "shop2", "delivered once the name is free", |r| {
        delivered(r) == first
    })
    .await;

    // Deleting the GitRepo takes its Placement and its works.
    api.delete_git_repo(flotilla_api::v1::GetGitRepoRequest {
        namespace: "default".into(),
        name: "shop".into(),
    })
    .await
    .unwrap();
    wait_clusters(&hub, "shop-apps-web", &[]).await;
    wait_placements(&mut placement_api, &["shop2-stores", "stores"]).await;
    let owned = &placements(&mut placement_api).await[0];
    assert_eq!(
        owned.metadata.as_ref().unwrap().labels["apps.flotilla.io/gitrepo"],
        "shop2",
        "shop2's own now"
    );
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

/// Review A3 (session 16): an inline target's Placement is the GitRepo's. A user's write or
/// delete of it is refused unless forced (and a forced edit is put back), a user's Placement
/// may not carry the owner label (a copy of the owned one's YAML), and one another replica set
/// still delivers over is never deleted with the target or the GitRepo — it is handed over to
/// the namespace instead, its label removed.
#[tokio::test]
async fn an_inline_targets_placement_is_written_only_by_its_gitrepo_and_kept_while_another_set_uses_it()
 {
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("web", "1"));
    git.commit("web");
    let daemon = Daemon::serve(base.path());

    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    let g = &mut config.families.gitops;
    g.worker = Some(flotilla_testkit::binary("flotilla-git-fetch"));
    g.cache_dir = base.path().join("cache");
    g.allow_loopback = true;
    g.retry_min = Duration::from_secs(1);
    let hub = start_hub(config).await;
    let agents = setup(&hub, &nats, &["store-1", "depot-1"]).await;
    let mut clusters = clusters_client(&hub).await;
    clusters
        .label_cluster(LabelClusterRequest {
            name: "depot-1".into(),
            set: [("tier".to_string(), "depot".to_string())].into(),
            remove: vec![],
        })
        .await
        .unwrap();
    let mut api = GitRepoServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let mut placement_api = PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let url = daemon.url("shop");
    api.apply_git_repo(gitrepo("shop", &url, DEPOTS))
        .await
        .unwrap();
    let owned = wait_placements(&mut placement_api, &["shop-depots", "stores"]).await[0].clone();
    wait_clusters(&hub, "shop-apps-web", &["depot-1"]).await;
    let mut fresh = owned.clone();
    let m = fresh.metadata.get_or_insert_default();
    m.uid.clear();
    m.resource_version = 0;
    fresh.status = None;

    // A user's edit: refused, naming the GitRepo; forced, written, and then put back.
    let mut edited = fresh.clone();
    edited.spec.as_mut().unwrap().number_of_clusters = Some(1);
    let refused = placement_api
        .apply_placement(edited.clone())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused
            .message()
            .contains("Placement default/shop-depots belongs to GitRepo default/shop"),
        "{}",
        refused.message()
    );
    let mut forced = tonic::Request::new(edited);
    forced.metadata_mut().insert(
        flotilla_api::meta::FORCE_HEADER,
        tonic::metadata::AsciiMetadataValue::from_static("true"),
    );
    placement_api.apply_placement(forced).await.unwrap();
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let now = placements(&mut placement_api).await.remove(0);
        if now.spec == owned.spec {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the forced edit was not put back: {:?}",
            now.spec
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gone = placement_api
        .delete_placement(flotilla_api::v1::PlacementRef {
            namespace: "default".into(),
            name: "shop-depots".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), tonic::Code::FailedPrecondition);
    assert!(
        gone.message()
            .contains("remove the target from the GitRepo"),
        "{}",
        gone.message()
    );

    // A copy of its YAML under another name carries the owner label: refused.
    let mut copy = fresh.clone();
    copy.metadata.as_mut().unwrap().name = "my-depots".into();
    let marked = placement_api.apply_placement(copy).await.unwrap_err();
    assert!(
        marked
            .message()
            .contains("apps.flotilla.io/gitrepo (shop) marks the Placements a GitRepo writes"),
        "{}",
        marked.message()
    );

    // A user's replica set delivering over shop-depots: the target replaced, the Placement
    // stays while that set names it.
    let mine = "apiVersion: work.open-cluster-management.io/v1alpha1\n\
                kind: ManifestWorkReplicaSet\nmetadata: {name: mine, namespace: default}\n\
                spec:\n  placementRefs: [{name: shop-depots}]\n  manifestWorkTemplate:\n    \
                workload:\n      manifests:\n      - {apiVersion: v1, kind: ConfigMap, \
                metadata: {name: mine, namespace: default}, data: {v: \"1\"}}\n";
    let Ok(Document::ReplicaSet(mine)) = parse_documents(mine).remove(0) else {
        panic!("replica set fixture");
    };
    let mut sets = flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient::connect(
        format!("http://{}", hub.grpc_addr),
    )
    .await
    .unwrap();
    sets.apply_replica_set(mine).await.unwrap();
    wait_clusters(&hub, "mine", &["depot-1"]).await;
    api.apply_git_repo(gitrepo("shop", &url, LAB))
        .await
        .unwrap();
    wait_clusters(&hub, "shop-apps-web", &["store-1"]).await;
    // The web bundle moved off shop-depots: without the other set it would now go (the first
    // test shows it does). Several refreshes (1 s apart) later it is still there.
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until {
        let names: Vec<String> = placements(&mut placement_api)
            .await
            .iter()
            .map(|p| p.metadata.as_ref().unwrap().name.clone())
            .collect();
        assert!(
            names.contains(&"shop-depots".to_string()),
            "deleted while replica set mine delivers over it: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        clusters_with(&hub, "mine"),
        BTreeSet::from(["depot-1".into()])
    );

    // The GitRepo deleted: its other Placement goes, shop-depots stays, handed over.
    api.delete_git_repo(flotilla_api::v1::GetGitRepoRequest {
        namespace: "default".into(),
        name: "shop".into(),
    })
    .await
    .unwrap();
    let left = wait_placements(&mut placement_api, &["shop-depots", "stores"]).await;
    assert!(
        !left[0]
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .contains_key("apps.flotilla.io/gitrepo"),
        "handed over: its owner label removed"
    );
    assert_eq!(
        clusters_with(&hub, "mine"),
        BTreeSet::from(["depot-1".into()])
    );
    // Now the namespace's: its users edit it freely.
    let mut theirs = left[0].clone();
    theirs.status = None;
    theirs.spec.as_mut().unwrap().number_of_clusters = Some(1);
    placement_api.apply_placement(theirs).await.unwrap();
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
