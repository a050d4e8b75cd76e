//! A GitRepo whose target's Placement has three decision groups: a push of a new commit rolls
//! out group by group (`ProgressivePerGroup`), the next group starting only once every cluster
//! of the one before runs the new commit, Applied and Available (the issue's "a push of a new
//! commit rolls out to 3 decision groups in order"). The order is read from the works the hub
//! holds: their `apps.flotilla.io/commit` annotation and conditions, sampled every 20 ms.

use crate::common;

use super::gitops::{configmap, delivered, setup, wait_repo, wait_works};
use common::*;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::git_repo_service_client::GitRepoServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::{GetGitRepoRequest, GitRepo, ManifestWork};
use flotilla_hub::Hub;
use flotilla_hub::replicaset::rules::{COMMIT_ANNOTATION, REPLICASET_LABEL};
use flotilla_testkit::NatsServer;
use flotilla_testkit::git::Repo;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Placement `rings`: three decision groups by the clusters' `ring` label.
const RINGS: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: rings, namespace: default}
spec:
  clusterSets: [default]
  decisionStrategy:
    groupStrategy:
      decisionGroups:
      - groupName: ring-1
        groupClusterSelector: {labelSelector: {matchLabels: {ring: "1"}}}
      - groupName: ring-2
        groupClusterSelector: {labelSelector: {matchLabels: {ring: "2"}}}
      - groupName: ring-3
        groupClusterSelector: {labelSelector: {matchLabels: {ring: "3"}}}
"#;

/// The clusters and their rings.
const CLUSTERS: [(&str, u32); 6] = [
    ("store-a", 2),
    ("store-b", 1),
    ("store-c", 3),
    ("store-d", 1),
    ("store-e", 3),
    ("store-f", 2),
];

/// GitRepo `rings` over `url` (file://), delivered group by group.
fn gitrepo(url: &str) -> GitRepo {
    let text = format!(
        "apiVersion: apps.flotilla.io/v1alpha1\nkind: GitRepo\n\
         metadata: {{name: rings, namespace: default}}\n\
         spec:\n  repo: {url}\n  branch: main\n  paths: [\"apps/*\"]\n  pollingInterval: \"0\"\n\
         \x20 targets:\n  - name: rings\n    placementRef: {{name: rings}}\n\
         \x20   rolloutStrategy: {{type: ProgressivePerGroup}}\n"
    );
    match parse_documents(&text).remove(0) {
        Ok(Document::GitRepo(r)) => r,
        other => panic!("GitRepo fixture: {other:?}"),
    }
}

/// Per cluster: whether its work of bundle `rings-apps-web` carries `commit`, and whether it is
/// Applied and Available there.
fn at_commit(hub: &Hub, commit: &str) -> BTreeMap<String, (bool, bool)> {
    hub.works
        .snapshot()
        .into_iter()
        .filter(|w| {
            w.metadata.as_ref().is_some_and(|m| {
                m.labels.get(REPLICASET_LABEL).map(String::as_str) == Some("default.rings-apps-web")
            })
        })
        .map(|w| {
            let w: ManifestWork = w.to_work();
            let m = w.metadata.as_ref().unwrap();
            let at = m.annotations.get(COMMIT_ANNOTATION).map(String::as_str) == Some(commit);
            let done = at && work::converged_at(&w, m.generation);
            (m.namespace.clone(), (at, done))
        })
        .collect()
}

fn ring_of(cluster: &str) -> u32 {
    CLUSTERS
        .iter()
        .find(|(c, _)| *c == cluster)
        .map_or(0, |(_, r)| *r)
}

#[tokio::test]
async fn a_push_rolls_out_to_three_decision_groups_in_order() {
    let base = tempfile::tempdir().unwrap();
    let git = Repo::init(base.path(), "rings");
    git.write("apps/web/cm.yaml", configmap("web", "1"));
    let first = git.commit("web at 1");

    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    let g = &mut config.families.gitops;
    g.worker = Some(flotilla_testkit::binary("flotilla-git-fetch"));
    g.cache_dir = base.path().join("cache");
    g.file_roots = vec![base.path().display().to_string()];
    g.retry_min = Duration::from_secs(1);
    let hub = start_hub(config).await;
    let names: Vec<&str> = CLUSTERS.iter().map(|(c, _)| *c).collect();
    let agents = setup(&hub, &nats, &names).await;
    for (cluster, ring) in CLUSTERS {
        label(&hub, cluster, &[("ring", &ring.to_string())], &[]).await;
    }
    let Ok(Document::Placement(p)) = parse_documents(RINGS).remove(0) else {
        panic!("placement fixture");
    };
    PlacementServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap()
        .apply_placement(p)
        .await
        .unwrap();
    let mut api = GitRepoServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    api.apply_git_repo(gitrepo(&format!("file://{}", git.dir.display())))
        .await
        .unwrap();
    wait_works(&hub, "rings-apps-web", 6, "1").await;
    wait_repo(&mut api, "rings", "commit 1 delivered", |r| {
        delivered(r) == first
    })
    .await;

    // The push, fetched on demand.
    git.write("apps/web/cm.yaml", configmap("web", "2"));
    let second = git.commit("web: 2");
    api.sync_git_repo(GetGitRepoRequest {
        namespace: "default".into(),
        name: "rings".into(),
    })
    .await
    .unwrap();

    // Sampled until every cluster runs commit 2: a cluster of ring n+1 at the new commit only
    // once every cluster of ring n runs it, done; and when each cluster first showed it.
    let start = Instant::now();
    let mut started: BTreeMap<String, Duration> = BTreeMap::new();
    loop {
        let now = at_commit(&hub, &second);
        for (cluster, (at, _)) in &now {
            if *at {
                started.entry(cluster.clone()).or_insert(start.elapsed());
            }
        }
        for (cluster, (at, _)) in now.iter().filter(|(_, (at, _))| *at) {
            let ring = ring_of(cluster);
            let unfinished: Vec<&String> = now
                .iter()
                .filter(|(c, (_, done))| ring_of(c) < ring && !done)
                .map(|(c, _)| c)
                .collect();
            assert!(
                unfinished.is_empty(),
                "{cluster} (ring {ring}) at {} while {unfinished:?} of an earlier ring are not \
                 done: {now:?} ({at})",
                &second[..7]
            );
        }
        if now.len() == 6 && now.values().all(|(_, done)| *done) {
            break;
        }
        assert!(
            start.elapsed() < SOON * 2,
            "the rollout of {} did not finish: {now:?}",
            &second[..7]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Each ring was first seen at the new commit in a later sample than every cluster of the
    // ring before: the samples saw the rollout between rings, so the check above had something
    // to check.
    let ring_start = |ring: u32| {
        started
            .iter()
            .filter(|(c, _)| ring_of(c) == ring)
            .map(|(_, t)| *t)
            .min()
            .unwrap()
    };
    let ring_end = |ring: u32| {
        started
            .iter()
            .filter(|(c, _)| ring_of(c) == ring)
            .map(|(_, t)| *t)
            .max()
            .unwrap()
    };
    for ring in 1..3 {
        assert!(
            ring_start(ring + 1) > ring_end(ring),
            "ring {} started {:?}, ring {ring}'s last cluster {:?}: {started:?}",
            ring + 1,
            ring_start(ring + 1),
            ring_end(ring)
        );
    }
    wait_works(&hub, "rings-apps-web", 6, "2").await;
    wait_repo(&mut api, "rings", "commit 2 delivered", |r| {
        delivered(r) == second
    })
    .await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}
