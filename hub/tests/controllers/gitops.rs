//! GitRepos end to end: a repository made with `git init` and served by a real `git daemon`
//! (and one read in place over `file://`), fetched by the real `flotilla-git-fetch` worker
//! processes, its bundles delivered as replica sets whose works land on simulated clusters; a
//! push changes the works, a bad commit is refused naming the file while the last good works
//! stay, and deleting the GitRepo takes its replica sets and works away.

use crate::common;

use common::*;
use flotilla_api::meta::{condition_status, find_condition};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient;
use flotilla_api::v1::{
    GetGitRepoRequest, GetReplicaSetRequest, GitRepo, LabelClusterRequest,
    ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ManifestWork, ObjectMeta,
};
use flotilla_hub::Hub;
use flotilla_hub::replicaset::rules::{REPLICASET_LABEL, TEMPLATE_HASH_ANNOTATION};
use flotilla_testkit::NatsServer;
use flotilla_testkit::git::{Daemon, Repo};
use std::time::Duration;

const PLACEMENT: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: stores, namespace: default}
spec:
  clusterSets: [default]
"#;

pub(super) fn gitrepo(name: &str, url: &str, paths: &str) -> GitRepo {
    let text = format!(
        "apiVersion: apps.flotilla.io/v1alpha1\nkind: GitRepo\n\
         metadata: {{name: {name}, namespace: default}}\n\
         spec:\n  repo: {url}\n  insecureTransport: true\n  branch: main\n  paths: {paths}\n\
         \x20 targets:\n  - name: stores\n    placementRef: {{name: stores}}\n"
    );
    match parse_documents(&text).remove(0) {
        Ok(Document::GitRepo(r)) => r,
        other => panic!("GitRepo fixture: {other:?}"),
    }
}

pub(super) fn configmap(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\n\
         data: {{v: \"{value}\"}}\n"
    )
}

pub(super) async fn setup(hub: &Hub, nats: &NatsServer, names: &[&str]) -> Vec<TestAgent> {
    let mut clusters = clusters_client(hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), names).await;
    for n in names {
        clusters
            .label_cluster(LabelClusterRequest {
                name: n.to_string(),
                set: [("store".to_string(), "yes".to_string())].into(),
                remove: vec![],
            })
            .await
            .unwrap();
    }
    sets_client(hub)
        .await
        .apply_binding(ManagedClusterSetBinding {
            metadata: Some(ObjectMeta {
                name: "default".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            spec: Some(ManagedClusterSetBindingSpec {
                cluster_set: "default".into(),
            }),
            status: None,
        })
        .await
        .unwrap();
    let Ok(Document::Placement(p)) = parse_documents(PLACEMENT).remove(0) else {
        panic!("placement fixture");
    };
    PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap()
        .apply_placement(p)
        .await
        .unwrap();
    agents
}

/// The works of replica set `default/<set>`, converged ones only when `converged`.
fn works_of(hub: &Hub, set: &str) -> Vec<ManifestWork> {
    let label = format!("default.{set}");
    hub.works
        .snapshot()
        .into_iter()
        .filter(|w| {
            w.metadata
                .as_ref()
                .is_some_and(|m| m.labels.get(REPLICASET_LABEL) == Some(&label))
        })
        .map(|w| w.to_work())
        .collect()
}

/// The `data.v` of the first ConfigMap in a work.
fn value_of(w: &ManifestWork) -> String {
    let manifests = &w
        .spec
        .as_ref()
        .unwrap()
        .workload
        .as_ref()
        .unwrap()
        .manifests;
    let cm: serde_json::Value = serde_json::from_slice(&manifests[0].raw).unwrap();
    cm["data"]["v"].as_str().unwrap_or_default().to_owned()
}

fn converged(w: &ManifestWork) -> bool {
    common::work::converged_at(w, w.metadata.as_ref().map(|m| m.generation).unwrap_or(0))
}

/// Waits until every one of `n` clusters holds a converged work of `set` with `data.v` =
/// `value`.
pub(super) async fn wait_works(hub: &Hub, set: &str, n: usize, value: &str) -> Vec<ManifestWork> {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let works = works_of(hub, set);
        if works.len() == n && works.iter().all(|w| converged(w) && value_of(w) == value) {
            return works;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{set}: wanted {n} converged works with v={value}: {:?}",
            works
                .iter()
                .map(|w| (value_of(w), converged(w), w.status.clone()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until GitRepo `default/<name>` satisfies `ok`.
pub(super) async fn wait_repo(
    api: &mut GitRepoServiceClient<tonic::transport::Channel>,
    name: &str,
    what: &str,
    ok: impl Fn(&GitRepo) -> bool,
) -> GitRepo {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let r = api
            .get_git_repo(GetGitRepoRequest {
                namespace: "default".into(),
                name: name.into(),
            })
            .await
            .unwrap()
            .into_inner();
        if ok(&r) {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "GitRepo {name}: {what}: {:#?}",
            r.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(super) fn delivered(r: &GitRepo) -> &str {
    r.status.as_ref().map_or("", |s| s.commit.as_str())
}

#[tokio::test]
async fn a_git_repository_s_commits_become_works_a_bad_one_is_refused_and_delete_takes_them() {
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("web", "1"))
        .write("apps/db/cm.yaml", configmap("db", "1"))
        .write("README.md", "not a bundle");
    let first = git.commit("web and db at 1");
    let daemon = Daemon::serve(base.path());

    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    let g = &mut config.families.gitops;
    g.worker = Some(flotilla_testkit::binary("flotilla-git-fetch"));
    g.cache_dir = base.path().join("cache");
    g.allow_loopback = true;
    g.file_roots = vec![base.path().display().to_string()];
    g.retry_min = Duration::from_secs(1);
    let hub = start_hub(config).await;
    let names = ["store-1", "store-2", "store-3"];
    let agents = setup(&hub, &nats, &names).await;
    let mut api = GitRepoServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();

    // Bad input is refused naming each field, before anything is stored.
    let mut bad = gitrepo("shop", &daemon.url("shop"), "[\"../etc\"]");
    let spec = bad.spec.as_mut().unwrap();
    spec.insecure_transport = false;
    spec.polling_interval = "5s".into();
    let err = api.apply_git_repo(bad).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    for part in [
        "spec.repo: git:// has no transport security",
        "spec.paths[0]",
        "spec.pollingInterval: 5s",
    ] {
        assert!(err.message().contains(part), "{part}: {}", err.message());
    }

    // Commit 1 over git://: one replica set per bundle, a work per cluster.
    api.apply_git_repo(gitrepo("shop", &daemon.url("shop"), "[\"apps/*\"]"))
        .await
        .unwrap();
    wait_works(&hub, "shop-apps-web", 3, "1").await;
    let db = wait_works(&hub, "shop-apps-db", 3, "1").await;
    let db_hash = db[0].metadata.as_ref().unwrap().annotations[TEMPLATE_HASH_ANNOTATION].clone();
    let r = wait_repo(&mut api, "shop", "commit 1 delivered and ready", |r| {
        delivered(r) == first
            && condition_status(&r.status.as_ref().unwrap().conditions, "Ready") == Some("True")
    })
    .await;
    let st = r.status.unwrap();
    assert_eq!(st.ready_bundles, "2/2");
    // A bundle's replica set is the GitRepo's: a user's delete is refused, naming it.
    let mut sets = ReplicaSetServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let err = sets
        .delete_replica_set(GetReplicaSetRequest {
            namespace: "default".into(),
            name: "shop-apps-web".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(
        err.message().starts_with(
            "ManifestWorkReplicaSet default/shop-apps-web belongs to GitRepo default/shop"
        ),
        "{}",
        err.message()
    );
    assert_eq!(st.head.as_ref().unwrap().subject, "web and db at 1");
    let bundles: Vec<(&str, &str)> = st
        .bundles
        .iter()
        .map(|b| (b.name.as_str(), b.path.as_str()))
        .collect();
    assert_eq!(
        bundles,
        [("shop-apps-db", "apps/db"), ("shop-apps-web", "apps/web")]
    );

    // A push, fetched on demand: web's works change; db's are not touched.
    git.write("apps/web/cm.yaml", configmap("web", "2"));
    let second = git.commit("web: 2");
    api.sync_git_repo(GetGitRepoRequest {
        namespace: "default".into(),
        name: "shop".into(),
    })
    .await
    .unwrap();
    wait_works(&hub, "shop-apps-web", 3, "2").await;
    wait_repo(&mut api, "shop", "commit 2 delivered", |r| {
        delivered(r) == second
    })
    .await;
    for w in works_of(&hub, "shop-apps-db") {
        let m = w.metadata.as_ref().unwrap();
        assert_eq!(
            m.annotations[TEMPLATE_HASH_ANNOTATION], db_hash,
            "db untouched"
        );
    }

    // A bad commit: refused with the file and the problem; the last good works stay.
    git.write(
        "apps/web/cm.yaml",
        "apiVersion: v1\nmetadata: {name: web}\n",
    );
    let third = git.commit("web: broken");
    api.sync_git_repo(GetGitRepoRequest {
        namespace: "default".into(),
        name: "shop".into(),
    })
    .await
    .unwrap();
    let r = wait_repo(&mut api, "shop", "commit 3 refused", |r| {
        r.status
            .as_ref()
            .and_then(|s| s.head.as_ref())
            .is_some_and(|h| h.sha == third)
            && condition_status(&r.status.as_ref().unwrap().conditions, "Rendered") == Some("False")
    })
    .await;
    let st = r.status.unwrap();
    let rendered = find_condition(&st.conditions, "Rendered").unwrap();
    assert!(
        rendered
            .message
            .starts_with(&format!("commit {}: apps/web/cm.yaml", &third[..7])),
        "{}",
        rendered.message
    );
    assert!(
        rendered
            .message
            .ends_with(&format!("the replica sets keep commit {}", &second[..7])),
        "{}",
        rendered.message
    );
    assert_eq!(st.commit, second, "the last good commit stays delivered");
    wait_works(&hub, "shop-apps-web", 3, "2").await;

    // The same repository read in place over file://, only its db bundle: delivered at the
    // head (web's breakage is outside its paths).
    let url = format!("file://{}", git.dir.display());
    api.apply_git_repo(gitrepo("local", &url, "[\"apps/db\"]"))
        .await
        .unwrap();
    wait_works(&hub, "local-apps-db", 3, "1").await;
    wait_repo(&mut api, "local", "commit 3 delivered over file://", |r| {
        delivered(r) == third
    })
    .await;

    // Deleting the GitRepo takes its replica sets and their works; the other's stay.
    api.delete_git_repo(GetGitRepoRequest {
        namespace: "default".into(),
        name: "shop".into(),
    })
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + SOON;
    while !works_of(&hub, "shop-apps-web").is_empty() || !works_of(&hub, "shop-apps-db").is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "works outlived their GitRepo"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left: Vec<String> =
        flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient::connect(format!(
            "http://{}",
            hub.grpc_addr
        ))
        .await
        .unwrap()
        .list_replica_sets(flotilla_api::v1::ListReplicaSetsRequest {
            namespace: "default".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .items
        .iter()
        .map(|rs| rs.metadata.as_ref().unwrap().name.clone())
        .collect();
    assert_eq!(left, ["local-apps-db"]);
    assert_eq!(works_of(&hub, "local-apps-db").len(), 3);
    let err = api
        .get_git_repo(GetGitRepoRequest {
            namespace: "default".into(),
            name: "shop".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
