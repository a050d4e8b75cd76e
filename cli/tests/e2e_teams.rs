//! Teams (issue 48) with processes: a hub given a token file and a grants file, two teams of
//! `member` tokens, and the CLI run as each team runs it. Each team's `flotilla get` shows its
//! own clusters and works; an apply across the fence fails with the grant it misses; a set
//! viewer is refused a write before the service; a change of the grants file applies without a
//! restart. An add-on shows each team only its own placements and their rollout; `flotilla
//! whoami` says who the hub takes each caller for and whence each of its roles.

mod common;

use common::{HubBuilder, run_cli, wait_for};
use flotilla_testkit::NatsServer;
use serde_json::Value;

const ADMIN: &str = "admin-token-teams-00001";
const ANA: &str = "ana-token-team-a-00002";
const BEN: &str = "ben-token-team-b-00003";
const CLEO: &str = "cleo-token-team-a-0004";

const GRANTS: &str = "apiVersion: flotilla.io/v1alpha1
kind: Grants
clusterSets:
  team-a:
    admin: { groups: [team-a-sre] }
    view: { groups: [team-a-dev] }
  team-b:
    admin: { groups: [team-b-sre] }
";

/// Team A's and team B's sets and clusters, applied by the admin.
const FLEET: &str = "apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: team-a
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: team-b
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: shop-a1
  labels:
    cluster.open-cluster-management.io/clusterset: team-a
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: shop-a2
  labels:
    cluster.open-cluster-management.io/clusterset: team-a
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: shop-b1
  labels:
    cluster.open-cluster-management.io/clusterset: team-b
";

fn work(cluster: &str) -> String {
    format!(
        "apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  namespace: {cluster}
  name: web
spec:
  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: web
          namespace: default
        data:
          team: x
"
    )
}

/// `flotilla --token TOKEN ARGS`.
fn as_token(hub: &str, token: &str, args: &[&str], stdin: Option<&str>) -> common::Output {
    let all: Vec<&str> = ["--token", token].iter().chain(args).copied().collect();
    run_cli(hub, &all, stdin)
}

/// The names `flotilla get KIND -o json` lists for `token`.
fn names(hub: &str, token: &str, kind: &str) -> Option<Vec<String>> {
    let out = as_token(hub, token, &["get", kind, "-o", "json"], None);
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    let mut names: Vec<String> = v["items"]
        .as_array()?
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            match m["namespace"].as_str() {
                Some(ns) if kind == "works" => format!("{ns}/{}", m["name"].as_str().unwrap_or("")),
                _ => m["name"].as_str().unwrap_or("").to_string(),
            }
        })
        .collect();
    names.sort();
    Some(names)
}

#[test]
fn each_team_gets_only_its_clusters_and_works_and_is_refused_across_the_fence() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        format!(
            "{ADMIN},alice,admin\n{ANA},ana,member,team-a-sre\n{BEN},ben,member,team-b-sre\n\
             {CLEO},cleo,member,team-a-dev\n"
        ),
    )
    .unwrap();
    let grants = dir.path().join("grants.yaml");
    std::fs::write(&grants, GRANTS).unwrap();
    let hub = HubBuilder::new(&nats, dir.path())
        .flag("--api-token-file", &tokens.display().to_string())
        .flag("--grants-file", &grants.display().to_string())
        .start();
    let h = hub.grpc.as_str();
    wait_for("the admin's fleet applied", &[&hub.proc], || {
        (as_token(h, ADMIN, &["apply", "-f", "-"], Some(FLEET)).code == Some(0)).then_some(())
    });

    // Each team's `get clusters`: its set's clusters only; a set's viewer the same.
    let want = |token: &str, kind: &str, want: &[&str]| {
        wait_for(
            &format!("{kind} as listed to {token}"),
            &[&hub.proc],
            || (names(h, token, kind)? == want).then_some(()),
        )
    };
    want(ANA, "clusters", &["shop-a1", "shop-a2"]);
    want(BEN, "clusters", &["shop-b1"]);
    want(CLEO, "clusters", &["shop-a1", "shop-a2"]);
    want(ADMIN, "clusters", &["shop-a1", "shop-a2", "shop-b1"]);

    // Works: each team applies on its own cluster; across the fence, refused naming the grant.
    let out = as_token(h, ANA, &["apply", "-f", "-"], Some(&work("shop-a1")));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let out = as_token(h, BEN, &["apply", "-f", "-"], Some(&work("shop-b1")));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let out = as_token(h, ANA, &["apply", "-f", "-"], Some(&work("shop-b1")));
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "ana (groups team-a-sre) may not apply ManifestWork shop-b1/web: it needs admin on \
             a cluster set that contains shop-b1; shop-b1 is in none of ana's sets"
        ),
        "{}",
        out.stderr
    );
    let out = as_token(h, CLEO, &["apply", "-f", "-"], Some(&work("shop-a2")));
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr
            .contains("cleo (member) may not call /flotilla.v1.WorkService/ApplyWork"),
        "{}",
        out.stderr
    );
    want(ANA, "works", &["shop-a1/web"]);
    want(BEN, "works", &["shop-b1/web"]);
    want(CLEO, "works", &["shop-a1/web"]);

    // The grants file changes while the hub runs: ben views team-a too.
    std::fs::write(
        &grants,
        GRANTS.replace(
            "view: { groups: [team-a-dev] }",
            "view: { groups: [team-a-dev, team-b-sre] }",
        ),
    )
    .unwrap();
    want(BEN, "clusters", &["shop-a1", "shop-a2", "shop-b1"]);
    want(BEN, "works", &["shop-a1/web", "shop-b1/web"]);
    // Viewing is not writing.
    let out = as_token(h, BEN, &["apply", "-f", "-"], Some(&work("shop-a2")));
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr
            .contains("ben (groups team-b-sre) may not apply ManifestWork shop-a2/web"),
        "{}",
        out.stderr
    );
}

/// ana views team-a-apps, ben team-b-apps; an add-on rolled out by a placement in each.
const ADDON_GRANTS: &str = "apiVersion: flotilla.io/v1alpha1
kind: Grants
clusterSets:
  team-a:
    admin: { groups: [team-a-sre] }
namespaces:
  team-a-apps:
    view: { groups: [team-a-sre] }
  team-b-apps:
    view: { groups: [team-b-sre] }
";

const ADDON: &str = "apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: edge, namespace: team-a-apps}
spec: {}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: edge, namespace: team-b-apps}
spec: {}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata: {name: probe}
spec:
  addonName: probe
  agentSpec:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: probe, namespace: default}
          data: {cluster: \"{{CLUSTER_NAME}}\"}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: probe}
spec:
  addOnMeta: {displayName: Probe}
  # A template add-on: the hub rolls it out and reports each placement's progression (one
  # with no template is someone else's, and the hub reports none).
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: probe}
  installStrategy:
    type: Placements
    placements:
      - {namespace: team-a-apps, name: edge}
      - {namespace: team-b-apps, name: edge}
";

/// A hub with the admin, ana (team-a-sre) and ben (team-b-sre), following `grants`.
fn teams_hub(nats: &NatsServer, dir: &std::path::Path, grants: &str) -> common::Hub {
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{ADMIN},alice,admin\n{ANA},ana,member,team-a-sre\n{BEN},ben,member,team-b-sre\n"),
    )
    .unwrap();
    let file = dir.join("grants.yaml");
    std::fs::write(&file, grants).unwrap();
    HubBuilder::new(nats, dir)
        .flag("--api-token-file", &tokens.display().to_string())
        .flag("--grants-file", &file.display().to_string())
        .start()
}

/// The namespaces of an add-on's placements (`spec`) and of its progressions (`status`).
fn addon_namespaces(addon: &Value) -> (Vec<String>, Vec<String>) {
    let of = |list: &Value| -> Vec<String> {
        (list.as_array().into_iter().flatten())
            .filter_map(|p| p["namespace"].as_str().map(str::to_string))
            .collect()
    };
    (
        of(&addon["spec"]["installStrategy"]["placements"]),
        of(&addon["status"]["installProgressions"]),
    )
}

#[test]
fn an_add_on_shows_a_team_only_its_own_placements_and_their_rollout() {
    // Review r4 §2, the API's half: GetClusterManagementAddOn and the list.
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = teams_hub(&nats, dir.path(), ADDON_GRANTS);
    let h = hub.grpc.as_str();
    wait_for("the admin's add-on applied", &[&hub.proc], || {
        (as_token(h, ADMIN, &["apply", "-f", "-"], Some(ADDON)).code == Some(0)).then_some(())
    });
    let get = |token: &str, args: &[&str]| -> Option<Value> {
        serde_json::from_str(&as_token(h, token, args, None).stdout).ok()
    };
    let both = vec!["team-a-apps".to_string(), "team-b-apps".to_string()];
    wait_for("the add-on's progress per placement", &[&hub.proc], || {
        let addon = get(ADMIN, &["get", "cma", "probe", "-o", "json"])?;
        (addon_namespaces(&addon) == (both.clone(), both.clone())).then_some(())
    });
    for (token, own) in [(ANA, "team-a-apps"), (BEN, "team-b-apps")] {
        let own = vec![own.to_string()];
        let addon = get(token, &["get", "cma", "probe", "-o", "json"]).expect("the add-on");
        assert_eq!(
            addon_namespaces(&addon),
            (own.clone(), own.clone()),
            "{addon:#}"
        );
        let list = get(token, &["get", "cma", "-o", "json"]).expect("the add-ons");
        assert_eq!(
            addon_namespaces(&list["items"][0]),
            (own.clone(), own),
            "{list:#}"
        );
    }
}

#[test]
fn whoami_says_who_the_hub_takes_each_caller_for_and_whence_each_role() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = teams_hub(&nats, dir.path(), GRANTS);
    let h = hub.grpc.as_str();
    let whoami = |token: &str| -> Value {
        let out = wait_for("whoami answered", &[&hub.proc], || {
            let out = as_token(h, token, &["whoami", "-o", "json"], None);
            (out.code == Some(0)).then_some(out.stdout)
        });
        serde_json::from_str(&out).unwrap()
    };
    let ana = whoami(ANA);
    assert_eq!(
        (&ana["user"], &ana["via"], &ana["tokenRole"], &ana["groups"]),
        (
            &Value::from("ana"),
            &Value::from("token"),
            &Value::from("member"),
            &serde_json::json!(["team-a-sre"])
        ),
        "{ana:#}"
    );
    assert_eq!(
        ana["roles"],
        serde_json::json!([
            {"scope": "clusterset", "name": "team-a", "role": "admin", "from": ["group team-a-sre"]}
        ]),
        "{ana:#}"
    );
    assert_eq!(
        ana["grantsDigest"].as_str().map(str::len),
        Some(64),
        "{ana:#}"
    );
    let admin = whoami(ADMIN);
    assert_eq!(
        admin["roles"],
        serde_json::json!([{"scope": "fleet", "role": "admin", "from": ["token role admin"]}]),
        "{admin:#}"
    );
    // The table a person reads.
    let table = as_token(h, BEN, &["whoami"], None);
    assert_eq!(table.code, Some(0), "{}", table.stderr);
    assert!(
        table
            .stdout
            .starts_with("User:       ben\nGroups:     team-b-sre\n"),
        "{}",
        table.stdout
    );
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["clusterset", "team-b", "admin", "group", "team-b-sre"]),
        "{}",
        table.stdout
    );
    // Without a token the hub takes the caller for nobody.
    let nobody = run_cli(h, &["whoami"], None);
    assert_ne!(nobody.code, Some(0));
    assert!(
        nobody.stderr.contains("no bearer token"),
        "{}",
        nobody.stderr
    );
}
