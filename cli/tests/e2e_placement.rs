//! End-to-end placement with the real binaries (nats-server, flotilla-hub, flotilla-agent,
//! flotilla-sim, flotilla): the seed `placement1` example applied as OCM users write it, the
//! `gpu` taint hidden unless tolerated, `describe placement`'s per-cluster verdicts and scores,
//! AddOnPlacementScores from YAML and from simulated clusters, bad input, delete.
//!
//! The binaries must be built first (`cargo build --workspace --bins`; `scripts/test.sh` does).

mod common;

use common::{AgentBuilder, HubBuilder, available, cli, cli_ok, row, start_sim, wait_for};
use flotilla_testkit::{NatsServer, Proc};
use serde_json::Value;

/// An agent of the placement tests: `purpose=PURPOSE`, reporting status every second.
fn start_agent(
    nats: &NatsServer,
    dir: &std::path::Path,
    name: &str,
    platform: &str,
    purpose: &str,
) -> Proc {
    AgentBuilder::new(nats, dir, name)
        .label(&format!("purpose={purpose}"))
        .platform(platform)
        .flag("--status-interval-seconds", "1")
        .start()
}

const SETS: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: prod
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata:
  name: prod
  namespace: default
spec:
  clusterSet: prod
"#;

/// The seed example, exactly as in OCM's docs.
const PLACEMENT1: &str = include_str!("../../examples/placement1.yaml");

#[test]
fn operator_applies_the_seed_placement1_and_follows_its_decisions() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let (hub_proc, hub) = (hub.proc, hub.grpc);
    let agents = [
        start_agent(&nats, dir.path(), "cluster1", "aws", "test"),
        start_agent(&nats, dir.path(), "cluster2", "aws", "test"),
        start_agent(&nats, dir.path(), "cluster3", "aws", "test"),
        start_agent(&nats, dir.path(), "cluster4", "gcp", "test"),
    ];
    let mut logs: Vec<&Proc> = vec![&hub_proc];
    logs.extend(agents.iter());
    wait_for("four Available clusters", &logs, || {
        let (ok, out, _) = cli(&hub, &["get", "clusters", "-o", "json"]);
        let v: Value = serde_json::from_str(&out).ok()?;
        let items = v["items"].as_array()?;
        let untainted_available = items
            .iter()
            .filter(|c| available(c) && c["spec"]["taints"].as_array().is_none_or(|t| t.is_empty()))
            .count();
        (ok && untainted_available == 4).then_some(())
    });
    for c in ["cluster1", "cluster2", "cluster3", "cluster4"] {
        cli_ok(
            &hub,
            &[
                "label",
                c,
                "cluster.open-cluster-management.io/clusterset=prod",
            ],
        );
    }
    let sets = dir.path().join("sets.yaml");
    std::fs::write(&sets, SETS).unwrap();
    cli_ok(&hub, &["apply", "-f", sets.to_str().unwrap()]);
    let file = dir.path().join("placement1.yaml");
    std::fs::write(&file, PLACEMENT1).unwrap();
    let out = cli_ok(&hub, &["apply", "-f", file.to_str().unwrap()]);
    assert!(
        out.contains("placement.cluster.open-cluster-management.io/placement1 applied"),
        "{out}"
    );

    // get placements: clusteradm's columns; three clusters selected.
    let table = wait_for("placement1 satisfied", &logs, || {
        let out = cli_ok(&hub, &["get", "placements", "-n", "default"]);
        row(&out, "placement1")
            .is_some_and(|r| r.contains("AllDecisionsScheduled") && r.trim_end().ends_with('3'))
            .then_some(out)
    });
    assert_eq!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["NAME", "STATUS", "REASON", "SELECTEDCLUSTERS"]
    );
    assert!(
        row(&table, "placement1").unwrap().contains("True"),
        "{table}"
    );
    let all_ns = cli_ok(&hub, &["get", "placements"]);
    assert!(all_ns.starts_with("NAMESPACE"), "{all_ns}");

    // get decisions: one page with the three aws clusters.
    let decisions = cli_ok(&hub, &["get", "decisions", "placement1", "-n", "default"]);
    let page = row(&decisions, "placement1-decision-1").expect(&decisions);
    assert!(page.contains("cluster1,cluster2,cluster3"), "{decisions}");
    let json: Value = serde_json::from_str(&cli_ok(
        &hub,
        &[
            "get",
            "decisions",
            "placement1",
            "-n",
            "default",
            "-o",
            "json",
        ],
    ))
    .unwrap();
    let d = &json["items"][0];
    assert_eq!(d["kind"], "PlacementDecision");
    assert_eq!(
        d["apiVersion"],
        "cluster.open-cluster-management.io/v1beta1"
    );
    assert_eq!(
        d["metadata"]["labels"]["cluster.open-cluster-management.io/placement"],
        "placement1"
    );
    assert_eq!(d["status"]["decisions"].as_array().unwrap().len(), 3);
    let yaml: serde_yaml::Value = serde_yaml::from_str(&cli_ok(
        &hub,
        &[
            "get",
            "placements",
            "placement1",
            "-n",
            "default",
            "-o",
            "yaml",
        ],
    ))
    .unwrap();
    assert_eq!(yaml["kind"], "Placement");
    assert_eq!(yaml["spec"]["numberOfClusters"], 3);
    assert_eq!(yaml["status"]["numberOfSelectedClusters"], 3);

    // describe: per cluster, each filter and each prioritizer's score.
    let described = cli_ok(
        &hub,
        &["describe", "placement", "placement1", "-n", "default"],
    );
    for col in [
        "CLUSTER",
        "SELECTED",
        "PREDICATES",
        "TAINTTOLERATION",
        "Balance",
        "Steady",
        "TOTAL",
    ] {
        assert!(described.contains(col), "missing {col}: {described}");
    }
    let c4 = described
        .lines()
        .find(|l| l.trim_start().starts_with("cluster4 "))
        .expect(&described);
    assert!(c4.contains(" no "), "{described}");
    assert!(
        described.contains("cluster4: Predicates: no predicate matched (predicates[0]: claimSelector does not match)"),
        "{described}"
    );
    let c1 = described
        .lines()
        .find(|l| l.trim_start().starts_with("cluster1 "))
        .unwrap();
    assert!(c1.contains("yes"), "{described}");
    let dj: Value = serde_json::from_str(&cli_ok(
        &hub,
        &[
            "describe",
            "placement",
            "placement1",
            "-n",
            "default",
            "-o",
            "json",
        ],
    ))
    .unwrap();
    assert_eq!(dj["eligibleSets"][0], "prod");

    // The gpu taint hides cluster1 ...
    cli_ok(&hub, &["taint", "cluster1", "gpu=true:NoSelect"]);
    wait_for("cluster1 dropped for its gpu taint", &logs, || {
        let out = cli_ok(&hub, &["get", "decisions", "placement1", "-n", "default"]);
        let r = row(&out, "placement1-decision-1")?;
        (r.contains("cluster2,cluster3") && !r.contains("cluster1")).then_some(())
    });
    let t = cli_ok(&hub, &["get", "placements", "-n", "default"]);
    assert!(
        row(&t, "placement1")
            .unwrap()
            .contains("NotAllDecisionsScheduled"),
        "{t}"
    );
    // ... unless tolerated (the seed's toleration example).
    let tolerating = PLACEMENT1.replace(
        "  numberOfClusters: 3\n",
        "  numberOfClusters: 3\n  tolerations:\n    - key: gpu\n      value: \"true\"\n      operator: Equal\n",
    );
    std::fs::write(&file, tolerating).unwrap();
    cli_ok(&hub, &["apply", "-f", file.to_str().unwrap()]);
    wait_for("cluster1 back with a toleration", &logs, || {
        let out = cli_ok(&hub, &["get", "decisions", "placement1", "-n", "default"]);
        row(&out, "placement1-decision-1")?
            .contains("cluster1,cluster2,cluster3")
            .then_some(())
    });

    // AddOnPlacementScores from YAML, as a score provider writes them.
    let score = r#"
apiVersion: cluster.open-cluster-management.io/v1alpha1
kind: AddOnPlacementScore
metadata:
  name: default
  namespace: cluster2
status:
  scores:
    - name: cpuratio
      value: 66
"#;
    let sf = dir.path().join("score.yaml");
    std::fs::write(&sf, score).unwrap();
    cli_ok(&hub, &["apply", "-f", sf.to_str().unwrap()]);
    let scores = cli_ok(&hub, &["get", "addonplacementscores", "-c", "cluster2"]);
    assert!(
        row(&scores, "cluster2")
            .is_some_and(|r| r.contains("cpuratio=66") && r.contains("never expires")),
        "{scores}"
    );

    // Simulated clusters report cpuAvailable / memAvailable over NATS.
    let sim = start_sim(
        &nats,
        dir.path(),
        2,
        "sim",
        &["--score-interval-seconds", "1"],
    );
    wait_for("simulated scores", &[&hub_proc, &sim], || {
        let out = cli_ok(&hub, &["get", "addonplacementscores"]);
        (out.lines()
            .filter(|l| {
                l.starts_with("sim-") && l.contains("cpuAvailable=") && l.contains("memAvailable=")
            })
            .count()
            == 2)
            .then_some(())
    });

    // Bad input: rejected naming the field, or applied with a PlacementMisconfigured warning.
    let bad = PLACEMENT1.replace(
        "  numberOfClusters: 3\n",
        "  numberOfClusters: 3\n  prioritizerPolicy:\n    configurations:\n      - scoreCoordinate:\n          builtIn: Balance\n        weight: 11\n",
    );
    std::fs::write(&file, &bad).unwrap();
    let (ok, _, err) = cli(&hub, &["apply", "-f", file.to_str().unwrap()]);
    assert!(!ok, "weight 11 is rejected");
    assert!(
        err.contains("invalid") && err.contains("spec.prioritizerPolicy.configurations[0].weight"),
        "{err}"
    );
    let odd = bad.replace(
        "builtIn: Balance\n        weight: 11",
        "builtIn: Cheapest\n        weight: 1",
    );
    std::fs::write(&file, &odd).unwrap();
    let out = cli_ok(&hub, &["apply", "-f", file.to_str().unwrap()]);
    assert!(
        out.contains("warning: PlacementMisconfigured") && out.contains("Cheapest"),
        "{out}"
    );
    let t = cli_ok(&hub, &["get", "placements", "-n", "default"]);
    assert!(
        row(&t, "placement1").unwrap().contains("Misconfigured"),
        "{t}"
    );

    cli_ok(
        &hub,
        &["delete", "placement", "placement1", "-n", "default"],
    );
    let (ok, out, err) = cli(&hub, &["get", "placements", "-n", "default"]);
    assert!(
        ok && out.is_empty() && err.contains("No placements found"),
        "{out}{err}"
    );
    let (ok, _, err) = cli(&hub, &["get", "decisions", "placement1", "-n", "default"]);
    assert!(!ok && err.contains("not found"), "{err}");
    drop(sim);
}

/// A placement as OCM's API (cluster v1beta1, 2026) writes `sortBy` and `scoreRateLimit`.
const BY_SCORE: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata:
  name: global
  namespace: default
spec:
  clusterSet: global
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: by-score
  namespace: default
spec:
  sortBy: Score
  scoreRateLimit: 5s
  prioritizerPolicy:
    mode: Exact
    configurations:
      - scoreCoordinate:
          type: AddOn
          addOn:
            resourceName: fleet-rank
            scoreName: rank
        weight: 2
"#;

/// An AddOnPlacementScore as a score provider writes it.
fn rank(cluster: &str, value: i32) -> String {
    format!(
        "apiVersion: cluster.open-cluster-management.io/v1alpha1\nkind: AddOnPlacementScore\n\
         metadata:\n  name: fleet-rank\n  namespace: {cluster}\nstatus:\n  scores:\n    \
         - name: rank\n      value: {value}\n---\n"
    )
}

/// `(cluster, score)` of every decision of `default/by-score`, in page order.
fn decisions_by_score(hub: &str) -> Option<Vec<(String, i64)>> {
    let (ok, out, _) = cli(
        hub,
        &[
            "get",
            "decisions",
            "by-score",
            "-n",
            "default",
            "-o",
            "json",
        ],
    );
    let v: Value = serde_json::from_str(&out).ok().filter(|_| ok)?;
    let pages = v["items"].as_array()?;
    Some(
        pages
            .iter()
            .flat_map(|p| {
                p["status"]["decisions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|d| {
                (
                    d["clusterName"].as_str().unwrap_or_default().to_owned(),
                    d["score"].as_i64().unwrap_or(0),
                )
            })
            .collect(),
    )
}

fn last_score_update(hub: &str) -> Option<i64> {
    let out = cli_ok(
        hub,
        &[
            "get",
            "placement",
            "by-score",
            "-n",
            "default",
            "-o",
            "json",
        ],
    );
    let v: Value = serde_json::from_str(&out).ok()?;
    let at = v["status"]["lastScoreUpdateTime"].as_str()?;
    Some(
        flotilla_api::meta::parse_rfc3339(at)
            .expect("lastScoreUpdateTime is RFC 3339")
            .seconds,
    )
}

#[test]
fn sort_by_score_orders_decisions_and_score_rate_limit_spaces_score_only_updates() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let sim = start_sim(&nats, dir.path(), 4, "edge", &[]);
    common::wait_available(&hub, &[&hub.proc, &sim], "edge-", 4);
    let hub_url = hub.grpc.clone();
    let file = dir.path().join("by-score.yaml");
    let scores: String = [
        ("edge-0001", 10),
        ("edge-0002", 60),
        ("edge-0003", 60),
        ("edge-0004", -5),
    ]
    .iter()
    .map(|&(c, v)| rank(c, v))
    .collect();
    std::fs::write(&file, format!("{scores}{BY_SCORE}")).unwrap();
    cli_ok(&hub_url, &["apply", "-f", file.to_str().unwrap()]);

    // Highest score first (weight 2 applied), ties by name.
    let want = |v: &[(&str, i64)]| {
        v.iter()
            .map(|&(c, s)| (c.to_owned(), s))
            .collect::<Vec<_>>()
    };
    let first = want(&[
        ("edge-0002", 120),
        ("edge-0003", 120),
        ("edge-0001", 20),
        ("edge-0004", -10),
    ]);
    wait_for("decisions ordered by score", &[&hub.proc, &sim], || {
        (decisions_by_score(&hub_url)? == first).then_some(())
    });
    let written = last_score_update(&hub_url).expect("lastScoreUpdateTime is set");

    // edge-0002 falls behind edge-0001: the same clusters stay selected, so the new scores
    // reach the decisions no sooner than scoreRateLimit after the last write.
    std::fs::write(&file, rank("edge-0002", 0)).unwrap();
    cli_ok(&hub_url, &["apply", "-f", file.to_str().unwrap()]);
    let second = want(&[
        ("edge-0003", 120),
        ("edge-0001", 20),
        ("edge-0002", 0),
        ("edge-0004", -10),
    ]);
    wait_for("re-ordered decisions", &[&hub.proc, &sim], || {
        (decisions_by_score(&hub_url)? == second).then_some(())
    });
    let rewritten = last_score_update(&hub_url).expect("lastScoreUpdateTime is set");
    assert!(
        rewritten - written >= 5,
        "score-only change written {}s after the previous one (limit 5s)",
        rewritten - written
    );
    let yaml = cli_ok(
        &hub_url,
        &[
            "get",
            "placement",
            "by-score",
            "-n",
            "default",
            "-o",
            "yaml",
        ],
    );
    assert!(
        yaml.contains("sortBy: Score") && yaml.contains("scoreRateLimit: 5s"),
        "{yaml}"
    );

    // OCM's CRD rejects a rate limit off its pattern and an unknown sortBy.
    for (field, bad) in [
        ("scoreRateLimit: 5s", "scoreRateLimit: 1m30s"),
        ("sortBy: Score", "sortBy: Random"),
    ] {
        std::fs::write(&file, BY_SCORE.replace(field, bad)).unwrap();
        let (ok, _, err) = cli(&hub_url, &["apply", "-f", file.to_str().unwrap()]);
        let path = format!("spec.{}", field.split(':').next().unwrap());
        assert!(!ok && err.contains(&path), "{bad}: {err}");
    }
    assert_eq!(
        decisions_by_score(&hub_url).unwrap(),
        second,
        "a refused apply changes nothing"
    );
    drop(sim);
}
