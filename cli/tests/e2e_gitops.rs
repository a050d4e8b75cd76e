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

/// The commit GitRepo shop delivers (`describe gitrepo`'s `Delivered:`).
fn delivered(hub: &Hub) -> String {
    let (_, text, _) = cli(&hub.grpc, &["describe", "gitrepo", "shop"]);
    text.lines()
        .find_map(|l| l.strip_prefix("Delivered:"))
        .map(|c| c.trim().to_owned())
        .unwrap_or_default()
}

/// `data.v` of the ConfigMap in each of bundle web's works, with whether the work is Available.
fn web_values(hub: &Hub) -> Vec<(String, bool)> {
    let (_, out, _) = cli(&hub.grpc, &["get", "works", "-o", "json"]);
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&out) else {
        return Vec::new();
    };
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| w["metadata"]["name"] == "shop-apps-web")
        .map(|w| {
            let value = w["spec"]["workload"]["manifests"][0]["data"]["v"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (value, condition(w, "Available").as_deref() == Some("True"))
        })
        .collect()
}

/// Waits until GitRepo shop delivers `commit` and every cluster's work holds `value`, Available.
fn wait_ready_at(hub: &Hub, sim: &flotilla_testkit::Proc, commit: &str, value: &str, what: &str) {
    wait_for(what, &[&hub.proc, sim], || {
        let works = web_values(hub);
        let everywhere = works.len() == 3 && works.iter().all(|(v, ok)| v == value && *ok);
        (everywhere && delivered(hub) == commit).then_some(())
    });
}

#[test]
fn a_bad_commit_stops_its_rollout_undo_returns_to_the_last_good_and_a_revision_pins() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let git = Repo::init(dir.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("web", "1", ""));
    let good = git.commit("web at 1");
    let hub = hub_with_gitops(&nats, dir.path(), dir.path());
    let sim = start_sim(&nats, dir.path(), 3, "edge", &["--ready-delay-ms", "200"]);
    wait_available(&hub, &[&hub.proc, &sim], "edge", 3);
    apply(&hub, dir.path(), "setup.yaml", SETUP);
    let spec = |follows: &str, force: u32| gitrepo(&git.dir, follows, force);
    apply(&hub, dir.path(), "gitrepo.yaml", &spec("branch: main", 0));
    wait_ready_at(&hub, &sim, &good, "1", "the good commit everywhere");
    let (ok, _, err) = cli(&hub.grpc, &["rollout", "undo", "gitrepo", "shop"]);
    assert!(
        !ok && err.contains("no commit was delivered before"),
        "nothing to undo to yet: {err}"
    );

    // A commit every cluster refuses to apply: its rollout stops at the first (maxFailures 0).
    git.write(
        "apps/web/cm.yaml",
        configmap("web", "2", "sim.flotilla.io/apply-error: \"disk full\""),
    );
    let bad = git.commit("web: breaks");
    apply(&hub, dir.path(), "gitrepo.yaml", &spec("branch: main", 1));
    wait_for(
        "the bad commit's rollout stopped",
        &[&hub.proc, &sim],
        || {
            let (_, text, _) = cli(&hub.grpc, &["rollout", "status", "shop-apps-web"]);
            (text.contains("stopped") && delivered(&hub) == bad).then_some(())
        },
    );

    // Per cluster: the first refused it (ErrApplied, the simulator's message), the others wait
    // at the good commit (OutOfSync); the GitRepo shows the worst.
    wait_for("the rows of a stopped rollout", &[&hub.proc, &sim], || {
        let (_, table, _) = cli(&hub.grpc, &["get", "gitrepos", "shop", "--clusters"]);
        let states: Vec<&str> = table
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(2))
            .collect();
        let err = table
            .lines()
            .find(|l| l.contains("ErrApplied"))
            .is_some_and(|l| l.contains(&bad[..7]) && l.contains("disk full"));
        let waiting = table
            .lines()
            .filter(|l| l.contains("OutOfSync") && l.contains(&good[..7]))
            .count();
        (states.len() == 3 && err && waiting == 2).then_some(())
    });
    // The GitRepo's status follows its replica sets' (read every second).
    wait_row(&hub, &sim, "the GitRepo showing the worst state", |r| {
        r.contains("ErrApplied")
    });
    let text = cli_ok(&hub.grpc, &["describe", "gitrepo", "shop"]);
    assert!(
        text.contains("State:      ErrApplied")
            && text.contains("ErrApplied 1  OutOfSync 2")
            && text.contains("disk full"),
        "{text}"
    );

    // Undo: back to the good commit on every cluster, pinned there.
    let out = cli_ok(&hub.grpc, &["rollout", "undo", "gitrepo", "shop"]);
    assert!(
        out.contains(&format!(
            "gitrepo.apps.flotilla.io/shop undone to {}",
            &good[..7]
        )),
        "{out}"
    );
    wait_ready_at(&hub, &sim, &good, "1", "the good commit back everywhere");
    wait_for("every cluster Ready again", &[&hub.proc, &sim], || {
        let (_, table, _) = cli(
            &hub.grpc,
            &["get", "gitrepos", "shop", "--clusters", "--state", "Ready"],
        );
        (table.lines().filter(|l| l.contains(&good[..7])).count() == 3).then_some(())
    });
    let text = cli_ok(&hub.grpc, &["describe", "gitrepo", "shop"]);
    assert!(
        text.contains(&format!("Pinned:     {good}")) && text.contains("Pinned True Undone"),
        "{text}"
    );
    let works = cli_ok(&hub.grpc, &["get", "works", "-o", "json"]);
    assert!(!works.contains("disk full"), "{works}");

    // The fix is pushed; resume unpins and delivers it.
    git.write("apps/web/cm.yaml", configmap("web", "3", ""));
    let fixed = git.commit("web: fixed");
    let out = cli_ok(&hub.grpc, &["rollout", "resume", "gitrepo", "shop"]);
    assert!(out.contains("shop resumed"), "{out}");
    wait_ready_at(&hub, &sim, &fixed, "3", "the fix everywhere");
    let text = cli_ok(&hub.grpc, &["describe", "gitrepo", "shop"]);
    assert!(!text.contains("Pinned"), "{text}");

    // Pause holds every bundle: a new commit is delivered to the replica set, started nowhere.
    let out = cli_ok(&hub.grpc, &["rollout", "pause", "gitrepo", "shop"]);
    assert!(out.contains("shop paused"), "{out}");
    git.write("apps/web/cm.yaml", configmap("web", "4", ""));
    let held = git.commit("web at 4");
    apply(&hub, dir.path(), "gitrepo.yaml", &spec("branch: main", 2));
    wait_for(
        "the held commit delivered, paused",
        &[&hub.proc, &sim],
        || {
            let (_, text, _) = cli(&hub.grpc, &["rollout", "status", "shop-apps-web"]);
            (text.contains("rollout paused") && delivered(&hub) == held).then_some(())
        },
    );
    let works = web_values(&hub);
    assert!(
        works.iter().all(|(v, _)| v == "3"),
        "nothing started while paused: {works:?}"
    );
    cli_ok(&hub.grpc, &["rollout", "resume", "gitrepo", "shop"]);
    wait_ready_at(
        &hub,
        &sim,
        &held,
        "4",
        "the held commit everywhere once resumed",
    );

    // Fleet's pin: spec.revision names a commit, delivered whatever the branch says.
    apply(
        &hub,
        dir.path(),
        "gitrepo.yaml",
        &spec(&format!("revision: \"{good}\""), 2),
    );
    wait_ready_at(&hub, &sim, &good, "1", "the revision pinned");
}

/// Copies the directory `from` into `to` (files only, as they are).
fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn the_example_repository_rolls_out_as_its_readme_says() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/gitops");
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let git = Repo::init(dir.path(), "shop");
    copy_tree(&examples.join("repo"), &git.dir);
    let commit = git.commit("shop: web and settings");
    let hub = hub_with_gitops(&nats, dir.path(), dir.path());
    let sim = start_sim(&nats, dir.path(), 2, "store", &["--ready-delay-ms", "200"]);
    wait_available(&hub, &[&hub.proc, &sim], "store", 2);
    cli_ok(
        &hub.grpc,
        &["apply", "-f", examples.join("setup.yaml").to_str().unwrap()],
    );
    let text = std::fs::read_to_string(examples.join("gitrepo.yaml")).unwrap();
    assert!(text.contains("repo: file:///srv/git/shop"), "{text}");
    let url = format!("repo: file://{}", git.dir.display());
    apply(
        &hub,
        dir.path(),
        "gitrepo.yaml",
        &text.replace("repo: file:///srv/git/shop", &url),
    );
    wait_for(
        "both bundles ready on both clusters",
        &[&hub.proc, &sim],
        || {
            let (_, table, _) = cli(&hub.grpc, &["get", "gitrepos", "-n", "default"]);
            row(&table, "shop")
                .filter(|r| r.contains(&commit[..7]) && r.contains("2/2") && r.contains("Ready"))
                .map(|_| ())
        },
    );
    let table = cli_ok(&hub.grpc, &["get", "gitrepos", "shop", "--clusters"]);
    for bundle in ["shop-apps-settings", "shop-apps-web"] {
        let rows = table.lines().filter(|l| l.starts_with(bundle)).count();
        assert_eq!(rows, 2, "{bundle}:\n{table}");
    }
    assert_eq!(
        table.lines().filter(|l| l.contains("Ready")).count(),
        4,
        "{table}"
    );
    // The inline target's Placement, written and owned by the GitRepo, listed like any other.
    let placements = cli_ok(&hub.grpc, &["get", "placements", "-n", "default"]);
    assert!(
        row(&placements, "shop-depots").is_some() && row(&placements, "stores").is_some(),
        "{placements}"
    );
    let owned = cli_ok(
        &hub.grpc,
        &[
            "get",
            "placement",
            "shop-depots",
            "-n",
            "default",
            "-o",
            "yaml",
        ],
    );
    assert!(owned.contains("apps.flotilla.io/gitrepo: shop"), "{owned}");
}

/// The row of cluster `cluster` in `get gitrepos shop --clusters`: its state and the line.
fn cluster_row(hub: &Hub, cluster: &str) -> Option<(String, String)> {
    let (_, table, _) = cli(&hub.grpc, &["get", "gitrepos", "shop", "--clusters"]);
    let line = table.lines().find(|l| l.contains(cluster))?;
    let state = line.split_whitespace().nth(2)?.to_owned();
    Some((state, line.to_owned()))
}

/// The issue's "a spoke edited by hand is put back and shows `Modified` then `Ready`": a
/// ConfigMap the GitRepo delivered, changed with kubectl through the hub's cluster proxy, is
/// put back by the simulated cluster's agent (its periodic re-apply), whose `Repaired`
/// condition makes the cluster's row `Modified` (naming the ConfigMap) for its drift window,
/// then `Ready` again.
#[test]
fn a_spoke_edited_by_hand_is_put_back_and_shows_modified_then_ready() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let git = Repo::init(dir.path(), "shop");
    git.write("apps/web/cm.yaml", configmap("web", "1", ""));
    let first = git.commit("web at 1");
    let port = flotilla_testkit::free_port();
    let worker = binary("flotilla-git-fetch");
    let hub = HubBuilder::new(&nats, dir.path())
        .auto_accept()
        .flag("--gitops-fetch-worker", worker.to_str().unwrap())
        .flag(
            "--gitops-cache-dir",
            dir.path().join("cache").to_str().unwrap(),
        )
        .flag("--gitops-file-root", dir.path().to_str().unwrap())
        .flag("--cluster-proxy-listen", &format!("127.0.0.1:{port}"))
        .start();
    // Observed every 200 ms, so re-applied every 6 s; Repaired for 4 s after a repair.
    let sim = start_sim(
        &nats,
        dir.path(),
        1,
        "edge",
        &[
            "--ready-delay-ms",
            "200",
            "--work-status-interval-ms",
            "200",
            "--drift-window-seconds",
            "4",
        ],
    );
    wait_available(&hub, &[&hub.proc, &sim], "edge", 1);
    apply(&hub, dir.path(), "setup.yaml", SETUP);
    apply(
        &hub,
        dir.path(),
        "gitrepo.yaml",
        &gitrepo(&git.dir, "branch: main", 0),
    );
    wait_for(
        "the cluster Ready at the commit",
        &[&hub.proc, &sim],
        || {
            cluster_row(&hub, "edge-0001")
                .filter(|(s, l)| s == "Ready" && l.contains(&first[..7]))
                .map(|_| ())
        },
    );

    let kubectl = Kubectl::new(&hub, dir.path(), "edge-0001", &format!("127.0.0.1:{port}"));
    let value = || kubectl.ok(&["get", "configmap", "web", "-o", "jsonpath={.data.v}"]);
    assert_eq!(value(), "1");
    kubectl.ok(&[
        "patch",
        "configmap",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"v":"by-hand"}}"#,
    ]);
    assert_eq!(value(), "by-hand");

    let (_, line) = wait_for("the cluster Modified", &[&hub.proc, &sim], || {
        cluster_row(&hub, "edge-0001").filter(|(s, _)| s == "Modified")
    });
    assert!(
        line.contains(&first[..7])
            && line.contains("1 resource changed on the cluster was put back")
            && line.contains("v1 ConfigMap default/web"),
        "{line}"
    );
    assert_eq!(value(), "1", "put back by the time the row says Modified");
    let modified_at = std::time::Instant::now();
    wait_for("the cluster Ready again", &[&hub.proc, &sim], || {
        cluster_row(&hub, "edge-0001")
            .filter(|(s, _)| s == "Ready")
            .map(|_| ())
    });
    assert!(
        modified_at.elapsed() < std::time::Duration::from_secs(10),
        "Modified for {:?}, the drift window is 4 s",
        modified_at.elapsed()
    );
    assert_eq!(value(), "1");
}
