//! Issue 50's "a per-target customization reaches only its targets": a repository made with
//! `git init`, served by a real `git daemon` and fetched by the real `flotilla-git-fetch`
//! worker; a bundle whose fleet.yaml customizes the clusters labelled `size=big` (a patch) and
//! deploys nothing to one cluster by name. The labelled cluster gets the customized value, the
//! others the default, the named one no work; relabelling a cluster moves it to the
//! customization, and the GitRepo's per-cluster rows say so.

use crate::common;
use crate::gitops::{configmap, delivered, gitrepo, setup, wait_repo};

use common::*;
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_api::v1::{LabelClusterRequest, ListGitRepoClustersRequest, ManifestWork};
use flotilla_hub::Hub;
use flotilla_hub::replicaset::rules::REPLICASET_LABEL;
use flotilla_testkit::NatsServer;
use flotilla_testkit::git::{Daemon, Repo};
use std::collections::BTreeMap;
use std::time::Duration;

const FLEET_YAML: &str = r#"
targetCustomizations:
- name: big
  clusterSelector: {matchLabels: {size: big}}
  patches:
  - target: {kind: ConfigMap, name: web}
    type: merge
    patch: {data: {v: big}}
- name: lab
  clusterName: store-3
  doNotDeploy: true
"#;

/// Each cluster's converged work of `default/<set>`: its `data.v`.
fn values(hub: &Hub, set: &str) -> BTreeMap<String, String> {
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
        .map(|w| {
            let cluster = w.metadata.as_ref().unwrap().namespace.clone();
            (cluster, value_of(&w))
        })
        .collect()
}

fn value_of(w: &ManifestWork) -> String {
    let raw = &w
        .spec
        .as_ref()
        .unwrap()
        .workload
        .as_ref()
        .unwrap()
        .manifests[0]
        .raw;
    let cm: serde_json::Value = serde_json::from_slice(raw).unwrap();
    cm["data"]["v"].as_str().unwrap_or_default().to_owned()
}

async fn wait_values(hub: &Hub, set: &str, want: &[(&str, &str)]) {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(c, v)| (c.to_string(), v.to_string()))
        .collect();
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let got = values(hub, set);
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{set}: wanted {want:?}, have {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_per_target_customization_reaches_only_its_targets() {
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("web", "default"))
        .write("apps/web/fleet.yaml", FLEET_YAML);
    let first = git.commit("web, big stores customized");
    let daemon = Daemon::serve(base.path());

    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    let g = &mut config.families.gitops;
    g.worker = Some(flotilla_testkit::binary("flotilla-git-fetch"));
    g.cache_dir = base.path().join("cache");
    g.allow_loopback = true;
    g.retry_min = Duration::from_secs(1);
    let hub = start_hub(config).await;
    let names = ["store-1", "store-2", "store-3"];
    let agents = setup(&hub, &nats, &names).await;
    let mut clusters = clusters_client(&hub).await;
    let label = |name: &str| LabelClusterRequest {
        name: name.into(),
        set: [("size".to_string(), "big".to_string())].into(),
        remove: vec![],
    };
    clusters.label_cluster(label("store-1")).await.unwrap();
    let mut api = GitRepoServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();

    api.apply_git_repo(gitrepo("shop", &daemon.url("shop"), "[\"apps/*\"]"))
        .await
        .unwrap();
    // The labelled cluster gets the customization, the other the default, store-3 nothing.
    wait_values(
        &hub,
        "shop-apps-web",
        &[("store-1", "big"), ("store-2", "default")],
    )
    .await;
    wait_repo(&mut api, "shop", "commit 1 delivered", |r| {
        delivered(r) == first
    })
    .await;
    let rows = api
        .list_git_repo_clusters(ListGitRepoClustersRequest {
            namespace: "default".into(),
            name: "shop".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .rows;
    let mut listed: Vec<&str> = rows.iter().map(|r| r.cluster.as_str()).collect();
    listed.sort();
    assert_eq!(
        listed,
        ["store-1", "store-2"],
        "store-3 gets no work: {rows:?}"
    );

    // A label moves a cluster to the customization; removing it moves it back.
    clusters.label_cluster(label("store-2")).await.unwrap();
    wait_values(
        &hub,
        "shop-apps-web",
        &[("store-1", "big"), ("store-2", "big")],
    )
    .await;
    clusters
        .label_cluster(LabelClusterRequest {
            name: "store-1".into(),
            set: Default::default(),
            remove: vec!["size".into()],
        })
        .await
        .unwrap();
    wait_values(
        &hub,
        "shop-apps-web",
        &[("store-1", "default"), ("store-2", "big")],
    )
    .await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
