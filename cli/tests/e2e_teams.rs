//! Teams (issue 48) with processes: a hub given a token file and a grants file, two teams of
//! `member` tokens, and the CLI run as each team runs it. Each team's `flotilla get` shows its
//! own clusters and works; an apply across the fence fails with the grant it misses; a set
//! viewer is refused a write before the service; a change of the grants file applies without a
//! restart.

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
