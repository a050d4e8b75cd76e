//! ClusterImportPolicy acceptance with real processes: `flotilla-sim` runs 1,000 agents whose
//! clusters match a policy and 20 that do not; the policy, applied with `flotilla apply -f`,
//! accepts, labels and puts in a cluster set the 1,000 within 30 s with no admin step while the
//! 20 stay pending; a template edit relabels only the policy's own clusters (a hand-made
//! matching cluster keeps its labels); a second policy for the same source is refused naming
//! the owner. In secure mode over TLS, a matching agent is accepted by the policy alone and
//! comes back over credentials of its own; a non-matching one gets none.

mod common;

use common::*;
use flotilla_testkit::NatsServer;
use serde_json::Value;
use std::time::{Duration, Instant};

const SET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";

fn policy(name: &str, template: &str) -> String {
    format!(
        "apiVersion: cluster.flotilla.io/v1alpha1\nkind: ClusterImportPolicy\n\
         metadata: {{name: {name}}}\nspec:\n  source:\n    group: registration.flotilla.io\n\
         \x20   resource: registrations\n    selector: 'source.metadata.labels[\"site\"] == \"edge\"'\n\
         \x20 template: '{template}'\n"
    )
}

fn label<'a>(c: &'a Value, key: &str) -> Option<&'a str> {
    c["metadata"]["labels"][key].as_str()
}

fn named<'a>(clusters: &'a [Value], prefix: &str) -> Vec<&'a Value> {
    clusters
        .iter()
        .filter(|c| {
            c["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect()
}

fn accepted(c: &Value) -> bool {
    c["spec"]["hubAcceptsClient"].as_bool() == Some(true)
}

fn apply(hub: &Hub, dir: &std::path::Path, file: &str, text: &str) -> Output {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    run_cli(&hub.grpc, &["apply", "-f", path.to_str().unwrap()], None)
}

#[test]
fn import_policy_accepts_a_thousand_matching_agents_within_30s() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub = HubBuilder::new(&nats, dir.path())
        .flag("--bootstrap-pending-max", "2000")
        .start();
    let profile = |site: &str| {
        let p = dir.path().join(format!("{site}.yaml"));
        std::fs::write(&p, format!("labels:\n  site: {{{site}: 1}}\n  region: {{eu-west: 1}}\nscoreIntervalSeconds: 0\n"))
            .unwrap();
        p.to_str().unwrap().to_string()
    };
    let (edge_profile, core_profile) = (profile("edge"), profile("core"));
    let quiet = [
        "--share-connections",
        "100",
        "--simulate-addons",
        "false",
        "--cluster-proxy",
        "false",
        "--status-interval-seconds",
        "20",
    ];
    let edge_args: Vec<&str> = quiet
        .iter()
        .copied()
        .chain(["--profile", &edge_profile])
        .collect();
    let core_args: Vec<&str> = quiet
        .iter()
        .copied()
        .chain(["--profile", &core_profile])
        .collect();
    let edge = start_sim(&nats, dir.path(), 1000, "edge", &edge_args);
    let core = start_sim(&nats, dir.path(), 20, "core", &core_args);
    wait_for("the hub to answer", &[&hub.proc], || {
        clusters_json(&hub.grpc)
    });
    // A hand-made cluster that matches: accepted by its document before any policy.
    let out = apply(
        &hub,
        dir.path(),
        "hand.yaml",
        "apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\n\
         metadata: {name: hand, labels: {site: edge, tier: mine}}\nspec: {hubAcceptsClient: true}\n",
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let logs = [&hub.proc, &edge, &core];
    wait_for("1,020 registrations", &logs, || {
        let all = clusters_json(&hub.grpc)?;
        (named(&all, "edge-").len() == 1000 && named(&all, "core-").len() == 20).then_some(())
    });

    let started = Instant::now();
    let out = apply(
        &hub,
        dir.path(),
        "policy.yaml",
        &policy(
            "edge",
            r#"{"labels": {"tier": "edge"}, "clusterSet": "edge"}"#,
        ),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("clusterimportpolicy.cluster.flotilla.io/edge applied"),
        "{}",
        out.stdout
    );
    let all = wait_for("1,000 accepted, labelled and in set edge", &logs, || {
        let all = clusters_json(&hub.grpc)?;
        let done = named(&all, "edge-")
            .iter()
            .filter(|c| {
                accepted(c)
                    && label(c, "tier") == Some("edge")
                    && label(c, SET_LABEL) == Some("edge")
            })
            .count();
        (done == 1000).then_some(all)
    });
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(
        named(&all, "core-").iter().all(|c| !accepted(c)),
        "the 20 others stay pending"
    );
    let hand = &named(&all, "hand")[0];
    assert_eq!(
        label(hand, "tier"),
        Some("mine"),
        "a hand-made cluster is adopted, not relabelled"
    );

    // A second policy for the same source: refused, naming the owner.
    let out = apply(
        &hub,
        dir.path(),
        "second.yaml",
        &policy("second", r#"{"labels": {}}"#),
    );
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("\"edge\""),
        "names the owner: {}",
        out.stderr
    );

    // A template edit relabels the policy's own clusters only.
    let out = apply(
        &hub,
        dir.path(),
        "policy.yaml",
        &policy(
            "edge",
            r#"{"labels": {"tier": "edge2"}, "clusterSet": "edge"}"#,
        ),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let all = wait_for("1,000 relabelled", &logs, || {
        let all = clusters_json(&hub.grpc)?;
        let done = named(&all, "edge-")
            .iter()
            .filter(|c| label(c, "tier") == Some("edge2"))
            .count();
        (done == 1000).then_some(all)
    });
    assert_eq!(label(named(&all, "hand")[0], "tier"), Some("mine"));
    assert!(
        named(&all, "core-")
            .iter()
            .all(|c| !accepted(c) && label(c, "tier").is_none())
    );
    let table = cli_ok(&hub.grpc, &["get", "importpolicies"]);
    let line = wait_for("the policy's counts", &logs, || {
        let t = cli_ok(&hub.grpc, &["get", "importpolicies"]);
        row(&t, "edge")
            .filter(|l| l.contains(" 1000 ") && l.contains("True"))
            .map(str::to_string)
    });
    assert!(
        line.contains("registration.flotilla.io/registrations"),
        "{table}"
    );
    let described = cli_ok(&hub.grpc, &["describe", "importpolicy", "edge"]);
    assert!(
        described.contains("1000 imported, 1 adopted"),
        "{described}"
    );

    // Deleting the policy orphans its clusters: they stay accepted and labelled.
    let out = cli_ok(&hub.grpc, &["delete", "importpolicy", "edge"]);
    assert!(out.contains("its clusters stay"), "{out}");
    let all = clusters_json(&hub.grpc).unwrap();
    let kept = named(&all, "edge-")
        .iter()
        .filter(|c| accepted(c) && label(c, "tier") == Some("edge2"))
        .count();
    assert_eq!(kept, 1000);
}

#[test]
fn in_secure_mode_a_policy_accepts_a_matching_agent_which_gets_its_own_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let secure = dir.path().join("secure");
    let (nats, tls_url) = secure_nats(&secure);
    let hub = HubBuilder::new(&nats, dir.path())
        .nats_url(&tls_url)
        .flag("--secure-dir", &secure.display().to_string())
        .start();
    wait_for("the hub answering", &[&hub.proc], || {
        cli(&hub.grpc, &["get", "clusters"]).0.then_some(())
    });
    let out = apply(
        &hub,
        dir.path(),
        "policy.yaml",
        &policy("edge", "{\"labels\": {\"tier\": \"gold\"}}"),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let agent = |name: &str, site: &str| {
        AgentBuilder::at(&tls_url, dir.path(), name)
            .label(&format!("site={site}"))
            .flag(
                "--bootstrap-creds",
                &secure.join("bootstrap.creds").display().to_string(),
            )
            .flag(
                "--nats-ca",
                &secure.join("tls").join("ca.pem").display().to_string(),
            )
            .start()
    };
    let edge = agent("edge-1", "edge");
    let core = agent("core-1", "core");
    let logs = [&hub.proc, &edge, &core];
    // No admin step: the policy accepts edge-1, whose agent enrols and comes back over its own
    // credentials; core-1 waits for an admin, with none.
    wait_for("edge-1 Available over its own credentials", &logs, || {
        clusters_json(&hub.grpc)?
            .iter()
            .any(|c| {
                c["metadata"]["name"] == "edge-1"
                    && common::available(c)
                    && label(c, "tier") == Some("gold")
            })
            .then_some(())
    });
    assert!(
        dir.path()
            .join("state-edge-1")
            .join("cluster.creds")
            .is_file()
    );
    let clusters = clusters_json(&hub.grpc).unwrap();
    let core_cluster = clusters
        .iter()
        .find(|c| c["metadata"]["name"] == "core-1")
        .expect("core-1 registered");
    assert!(!accepted(core_cluster), "{core_cluster}");
    assert!(
        !dir.path()
            .join("state-core-1")
            .join("cluster.creds")
            .exists()
    );
}
