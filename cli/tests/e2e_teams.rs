//! Teams (issue 48) with processes: a hub given a token file and a grants file, two teams of
//! `member` tokens, and the CLI run as each team runs it. Each team's `flotilla get` shows its
//! own clusters and works; an apply across the fence fails with the grant it misses; a set
//! viewer is refused a write before the service; a change of the grants file applies without a
//! restart; each write is an audit line naming the grant. An add-on shows each team only its own
//! placements and their rollout; `flotilla whoami` says who the hub takes each caller for and
//! whence each of its roles. A team's Placement selects only the sets bound in its namespace (one
//! naming another team's set selects nothing, and that set cannot be bound there) and lists only
//! its workspace's policies; a team gets the ManagedServiceAccount tokens of its set's clusters
//! only.

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
    // Each write, allowed or refused, is an audit line: who, groups, how they came, what, and
    // the grant that allowed it or the one missing.
    let audited = |parts: &[&str]| {
        wait_for(&format!("the audit line {parts:?}"), &[&hub.proc], || {
            (common::audit_lines(&hub.proc.output()).into_iter())
                .find(|l| parts.iter().all(|p| l.contains(p)))
        })
    };
    let line = audited(&[
        "user=ana",
        "action=\"apply ManifestWork shop-a1/web\"",
        "outcome=\"allowed\"",
    ]);
    for part in [
        "groups=\"team-a-sre\"",
        "via=token",
        "grant=admin on cluster set",
        "team-a",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    let line = audited(&[
        "user=ana",
        "action=\"apply ManifestWork shop-b1/web\"",
        "outcome=\"refused\"",
    ]);
    assert!(
        line.contains("admin on a cluster set that contains shop-b1"),
        "{line}"
    );

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

/// Each team edits its workspace and administers its set; the admin puts the sim's clusters in
/// the sets.
const PLACEMENT_GRANTS: &str = "apiVersion: flotilla.io/v1alpha1
kind: Grants
clusterSets:
  team-a:
    admin: { groups: [team-a-sre] }
  team-b:
    admin: { groups: [team-b-sre] }
namespaces:
  team-a-apps:
    edit: { groups: [team-a-sre] }
  team-b-apps:
    edit: { groups: [team-b-sre] }
";

/// Team A binds its set into its workspace and places there: once on every bound set, once
/// naming team B's set.
const TEAM_A_PLACEMENTS: &str = "apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: team-a, namespace: team-a-apps}
spec: {clusterSet: team-a}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: everywhere, namespace: team-a-apps}
spec: {}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: theirs, namespace: team-a-apps}
spec: {clusterSets: [team-b]}
";

/// A placement's `status` as `token` reads it, once it has been scheduled.
fn placement_status(hub: &str, token: &str, namespace: &str, name: &str) -> Option<Value> {
    let out = as_token(
        hub,
        token,
        &["get", "placement", name, "-n", namespace, "-o", "json"],
        None,
    );
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    let status = v["status"].clone();
    let scheduled =
        (status["conditions"].as_array()?.iter()).any(|c| c["type"] == "PlacementSatisfied");
    scheduled.then_some(status)
}

/// The clusters a placement decided, as `token` reads its decisions.
fn decided(hub: &str, token: &str, namespace: &str, name: &str) -> Option<Vec<String>> {
    let out = as_token(
        hub,
        token,
        &["get", "decisions", name, "-n", namespace, "-o", "json"],
        None,
    );
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    let mut clusters: Vec<String> = (v["items"].as_array()?.iter())
        .flat_map(|d| {
            d["status"]["decisions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|d| d["clusterName"].as_str().map(str::to_string))
        .collect();
    clusters.sort();
    Some(clusters)
}

#[test]
fn a_teams_placement_selects_only_its_bound_sets_and_another_teams_set_cannot_be_bound() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{ADMIN},alice,admin\n{ANA},ana,member,team-a-sre\n{BEN},ben,member,team-b-sre\n"),
    )
    .unwrap();
    let grants = dir.path().join("grants.yaml");
    std::fs::write(&grants, PLACEMENT_GRANTS).unwrap();
    let hub = HubBuilder::new(&nats, dir.path())
        .auto_accept()
        .flag("--api-token-file", &tokens.display().to_string())
        .flag("--grants-file", &grants.display().to_string())
        .start();
    let sim = common::start_sim(&nats, dir.path(), 3, "shop", &[]);
    let h = hub.grpc.as_str();
    let logs = [&sim, &hub.proc];
    let sets = "apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: team-a}
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: team-b}
";
    wait_for("the sets applied", &logs, || {
        (as_token(h, ADMIN, &["apply", "-f", "-"], Some(sets)).code == Some(0)).then_some(())
    });
    wait_for("the sim's clusters", &logs, || {
        let all = names(h, ADMIN, "clusters")?;
        (all == ["shop-0001", "shop-0002", "shop-0003"]).then_some(())
    });
    for (cluster, set) in [
        ("shop-0001", "team-a"),
        ("shop-0002", "team-a"),
        ("shop-0003", "team-b"),
    ] {
        let label = format!("cluster.open-cluster-management.io/clusterset={set}");
        let out = as_token(h, ADMIN, &["label", cluster, &label], None);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    wait_for("team A's clusters", &logs, || {
        (names(h, ANA, "clusters")? == ["shop-0001", "shop-0002"]).then_some(())
    });

    // ana binds her set into her workspace and places there.
    let out = as_token(h, ANA, &["apply", "-f", "-"], Some(TEAM_A_PLACEMENTS));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let mine = wait_for("ana's placement decided", &logs, || {
        let d = decided(h, ANA, "team-a-apps", "everywhere")?;
        (d.len() == 2).then_some(d)
    });
    assert_eq!(mine, ["shop-0001", "shop-0002"]);
    // Naming team B's set selects nothing: it is not bound in team-a-apps.
    let theirs = wait_for("the placement naming team B's set scheduled", &logs, || {
        placement_status(h, ANA, "team-a-apps", "theirs")
    });
    let selected = theirs["numberOfSelectedClusters"].as_i64().unwrap_or(0);
    assert_eq!(selected, 0, "{theirs:#}");
    let satisfied = (theirs["conditions"].as_array().unwrap().iter())
        .find(|c| c["type"] == "PlacementSatisfied")
        .unwrap();
    assert_eq!(
        (&satisfied["status"], &satisfied["reason"]),
        (&Value::from("False"), &Value::from("NoIntersection")),
        "{theirs:#}"
    );
    assert_eq!(
        satisfied["message"], "None of ManagedClusterSets [team-b] is bound to placement namespace",
        "{theirs:#}"
    );
    assert_eq!(
        decided(h, ANA, "team-a-apps", "theirs"),
        Some(Vec::new()),
        "{theirs:#}"
    );
    // Nor can she bind it there (bind on team-b missing), or place in team B's workspace.
    let bind_b = "apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: team-b, namespace: team-a-apps}
spec: {clusterSet: team-b}
";
    let out = as_token(h, ANA, &["apply", "-f", "-"], Some(bind_b));
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "ana (groups team-a-sre) may not bind cluster set \"team-b\" into namespace \
             \"team-a-apps\": it needs bind on cluster set \"team-b\" (holds none)"
        ),
        "{}",
        out.stderr
    );
    let place_b = "apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: mine-now, namespace: team-b-apps}
spec: {}
";
    let out = as_token(h, ANA, &["apply", "-f", "-"], Some(place_b));
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("it needs edit on namespace \"team-b-apps\" (holds none)"),
        "{}",
        out.stderr
    );
    // ben does not see team A's placements.
    let listed = as_token(h, BEN, &["get", "placements", "-o", "json"], None);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert!(!listed.stdout.contains("team-a-apps"), "{}", listed.stdout);

    // Each team's policies in its workspace: each lists its own, the admin both.
    for (token, ns) in [(ANA, "team-a-apps"), (BEN, "team-b-apps")] {
        let out = as_token(h, token, &["apply", "-f", "-"], Some(&policy(ns)));
        assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    }
    let want = |token: &str, want: &[&str]| {
        wait_for(&format!("policies as listed to {token}"), &logs, || {
            (names(h, token, "policies")? == want).then_some(())
        })
    };
    want(ANA, &["marker-team-a-apps"]);
    want(BEN, &["marker-team-b-apps"]);
    want(ADMIN, &["marker-team-a-apps", "marker-team-b-apps"]);
}

/// An inform policy `marker-<namespace>` in `namespace`.
fn policy(namespace: &str) -> String {
    format!(
        "apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {{name: marker-{namespace}, namespace: {namespace}}}
spec:
  remediationAction: inform
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {{name: marker}}
        spec:
          remediationAction: inform
          severity: low
          object-templates:
            - complianceType: musthave
              objectDefinition: {{apiVersion: v1, kind: Namespace, metadata: {{name: marked}}}}
"
    )
}

/// ManagedServiceAccount `ops` on `cluster`, its token rotated by the cluster's agent.
fn service_account(cluster: &str) -> String {
    format!(
        "apiVersion: authentication.open-cluster-management.io/v1beta1
kind: ManagedServiceAccount
metadata: {{name: ops, namespace: {cluster}}}
spec:
  rotation: {{enabled: true, validity: 8640h0m0s}}
"
    )
}

#[test]
fn a_team_gets_service_account_tokens_only_of_its_sets_clusters() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, ca) = common::self_signed_tls(dir.path());
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{ADMIN},alice,admin\n{ANA},ana,member,team-a-sre\n"),
    )
    .unwrap();
    let grants = dir.path().join("grants.yaml");
    std::fs::write(&grants, GRANTS).unwrap();
    let proxy = flotilla_testkit::free_port();
    let hub = HubBuilder::new(&nats, dir.path())
        .auto_accept()
        .flag("--api-token-file", &tokens.display().to_string())
        .flag("--grants-file", &grants.display().to_string())
        .flag("--cluster-proxy-listen", &format!("127.0.0.1:{proxy}"))
        .flag(
            "--sealing-key-file",
            &dir.path().join("sealing.xk").display().to_string(),
        )
        .tls(&cert, &key)
        .start();
    let sim = common::start_sim(
        &nats,
        dir.path(),
        2,
        "edge",
        &["--token-max-seconds", "86400"],
    );
    let (h, ca) = (hub.grpc.as_str(), ca.display().to_string());
    let logs = [&sim, &hub.proc];
    let run = |token: &str, args: &[&str], stdin: Option<&str>| {
        let all: Vec<&str> = ["--ca", ca.as_str(), "--token", token]
            .iter()
            .chain(args)
            .copied()
            .collect();
        run_cli(h, &all, stdin)
    };
    let sets = "apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: team-a}
";
    wait_for("the set applied", &logs, || {
        (run(ADMIN, &["apply", "-f", "-"], Some(sets)).code == Some(0)).then_some(())
    });
    wait_for("the sim's clusters", &logs, || {
        let out = run(ADMIN, &["get", "clusters", "-o", "json"], None);
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        let up = (v["items"].as_array()?.iter())
            .filter(|c| common::available(c))
            .count();
        (up == 2).then_some(())
    });
    let label = "cluster.open-cluster-management.io/clusterset=team-a";
    let out = run(ADMIN, &["label", "edge-0001", label], None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for cluster in ["edge-0001", "edge-0002"] {
        let out = run(
            ADMIN,
            &["apply", "-f", "-"],
            Some(&service_account(cluster)),
        );
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    // ana lists only her set's cluster's account, once its token is reported.
    wait_for("ana's account reported", &logs, || {
        let out = run(ANA, &["get", "managedserviceaccounts"], None);
        let rows: Vec<&str> = out.stdout.lines().skip(1).collect();
        (out.code == Some(0)
            && rows.len() == 1
            && rows[0].contains("edge-0001")
            && rows[0].contains("True"))
        .then_some(())
    });

    // The token of her set's cluster's account: a kubeconfig kubectl uses.
    let server = format!("https://localhost:{proxy}");
    let kubeconfig = |cluster: &str| {
        run(
            ANA,
            &[
                "kubeconfig",
                cluster,
                "--server",
                &server,
                "--service-account",
                "ops",
            ],
            None,
        )
    };
    let mine = kubeconfig("edge-0001");
    assert_eq!(mine.code, Some(0), "{}", mine.stderr);
    assert!(
        mine.stdout.contains("token:") && !mine.stdout.contains(ANA),
        "{}",
        mine.stdout
    );
    let file = dir.path().join("ops.kubeconfig");
    std::fs::write(&file, &mine.stdout).unwrap();
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&file)
        .arg("--cache-dir")
        .arg(dir.path().join("kube-cache"))
        .args(["--request-timeout=30s", "get", "namespaces", "-o", "name"])
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl is installed");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("namespace/default"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Another cluster's: refused naming the grant, as a cluster that does not exist would be.
    for cluster in ["edge-0002", "edge-9999"] {
        let out = kubeconfig(cluster);
        assert_ne!(out.code, Some(0), "{}", out.stdout);
        assert!(
            out.stderr.contains(&format!(
                "ana (groups team-a-sre) may not fetch the token of ManagedServiceAccount \
                 {cluster}/ops: it needs admin on a cluster set that contains {cluster}"
            )),
            "{}",
            out.stderr
        );
    }
}
