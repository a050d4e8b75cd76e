//! GitRepos with the real binaries: a repository made with `git init`, read in place over
//! `file://` by the hub's `flotilla-git-fetch` workers, its bundle delivered as a replica set to
//! simulated clusters (`flotilla-sim`), driven with `flotilla` as an operator would. The replica
//! sets a GitRepo writes are refused to a user's `apply` and `rollout undo` (naming the GitRepo)
//! unless `--force`; pausing one stays allowed.

mod common;

use common::*;
use flotilla_testkit::git::Repo;
use flotilla_testkit::{NatsServer, binary};
use std::path::Path;

const SETUP: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: default, namespace: default}
spec: {clusterSet: default}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: edge, namespace: default}
spec:
  clusterSets: [default]
"#;

/// A ConfigMap document; `annotations` inside `{}` (the simulator's `sim.flotilla.io/…`).
fn configmap(name: &str, value: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n  \
         annotations: {{{annotations}}}\ndata: {{v: \"{value}\"}}\n"
    )
}

/// GitRepo `shop` over `repo`, following `follows` (`branch: main` or `revision: <sha>`), one
/// cluster at a time and stopping at the first failure; `force` its forceSyncGeneration.
fn gitrepo(repo: &Path, follows: &str, force: u32) -> String {
    format!(
        r#"apiVersion: apps.flotilla.io/v1alpha1
kind: GitRepo
metadata: {{name: shop, namespace: default}}
spec:
  repo: file://{}
  {follows}
  paths: ["apps/*"]
  pollingInterval: "0"
  forceSyncGeneration: {force}
  targets:
  - name: edge
    placementRef: {{name: edge}}
    rolloutStrategy:
      type: Progressive
      progressive: {{maxConcurrency: 1, maxFailures: 0}}
"#,
        repo.display()
    )
}

/// `flotilla apply -f` of `text` (written to `dir/<file>`), which must succeed.
fn apply(hub: &Hub, dir: &Path, file: &str, text: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    cli_ok(&hub.grpc, &["apply", "-f", path.to_str().unwrap()])
}

/// The hub with GitOps on: `file://` repositories under `root`, the workspace's fetch worker.
fn hub_with_gitops<'a>(nats: &'a NatsServer, dir: &'a Path, root: &Path) -> Hub {
    let worker = binary("flotilla-git-fetch");
    HubBuilder::new(nats, dir)
        .auto_accept()
        .flag("--gitops-fetch-worker", worker.to_str().unwrap())
        .flag("--gitops-cache-dir", dir.join("cache").to_str().unwrap())
        .flag("--gitops-file-root", root.to_str().unwrap())
        .start()
}

/// Waits until `get gitrepos` shows GitRepo shop's row satisfying `ok`; returns the row.
fn wait_row(hub: &Hub, sim: &flotilla_testkit::Proc, what: &str, ok: impl Fn(&str) -> bool) {
    wait_for(what, &[&hub.proc, sim], || {
        let (_, table, _) = cli(&hub.grpc, &["get", "gitrepos", "-n", "default"]);
        row(&table, "shop").filter(|r| ok(r)).map(|_| ())
    });
}

#[test]
fn a_gitrepo_s_replica_sets_are_refused_to_users_unless_forced() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let git = Repo::init(dir.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("web", "1", ""));
    let first = git.commit("web at 1");
    let hub = hub_with_gitops(&nats, dir.path(), dir.path());
    let sim = start_sim(&nats, dir.path(), 3, "edge", &["--ready-delay-ms", "200"]);
    wait_available(&hub, &[&hub.proc, &sim], "edge", 3);
    apply(&hub, dir.path(), "setup.yaml", SETUP);
    let out = apply(
        &hub,
        dir.path(),
        "gitrepo.yaml",
        &gitrepo(&git.dir, "branch: main", 0),
    );
    assert!(out.contains("shop"), "{out}");
    wait_row(&hub, &sim, "commit 1 delivered, 1/1 bundles ready", |r| {
        r.contains(&first[..7]) && r.contains("1/1")
    });

    // A user's apply of the bundle's replica set: refused, naming the GitRepo and the way out.
    let mine = r#"apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata: {name: shop-apps-web, namespace: default}
spec:
  placementRefs: [{name: edge}]
  manifestWorkTemplate:
    workload:
      manifests:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: web, namespace: default}, data: {v: "hand"}}
"#;
    let file = dir.path().join("mine.yaml");
    std::fs::write(&file, mine).unwrap();
    let (ok, out, err) = cli(&hub.grpc, &["apply", "-f", file.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(
        err.contains(
            "ManifestWorkReplicaSet default/shop-apps-web belongs to GitRepo default/shop: \
             change the repository, or `flotilla rollout undo gitrepo shop -n default`"
        ) && err.contains("--force"),
        "{err}"
    );
    // Undoing it by hand is refused too; pausing and resuming it is not.
    let (ok, _, err) = cli(&hub.grpc, &["rollout", "undo", "shop-apps-web"]);
    assert!(
        !ok && err.contains("belongs to GitRepo default/shop"),
        "{err}"
    );
    let out = cli_ok(&hub.grpc, &["rollout", "pause", "shop-apps-web"]);
    assert!(out.contains("paused"), "{out}");
    cli_ok(&hub.grpc, &["rollout", "resume", "shop-apps-web"]);
    let works = cli_ok(&hub.grpc, &["get", "works", "-o", "json"]);
    assert!(!works.contains("hand"), "nothing was written: {works}");

    // Forced, the hand-written replica set is applied (and its works follow).
    let out = cli_ok(
        &hub.grpc,
        &["apply", "-f", file.to_str().unwrap(), "--force"],
    );
    assert!(out.contains("shop-apps-web applied"), "{out}");
    wait_for(
        "the forced template on the clusters",
        &[&hub.proc, &sim],
        || {
            let works = cli_ok(&hub.grpc, &["get", "works", "-o", "json"]);
            works.contains("hand").then_some(())
        },
    );
}
