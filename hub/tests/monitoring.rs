//! The dashboards and alert rules in deploy/ (issue 49 §7): every metric they name is exported
//! by a running hub (with an agent registered, so every family has its samples) or an agent,
//! and the rules pass `promtool check rules` and their unit tests (`promtool test rules`).

mod common;

use common::*;
use flotilla_testkit::NatsServer;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// The metric names an exposition exports: each sample's, and each `# TYPE` line's with the
/// suffixes its type gives its samples (a family with no sample yet still names itself).
fn exported(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

/// Every `flotilla_…` name in `text` (a word starting `flotilla_`, of `[a-z0-9_]`).
fn named(text: &str) -> BTreeSet<String> {
    let word = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("flotilla_") {
        let starts_word = !rest[..at].ends_with(|c: char| word(c) || c.is_ascii_uppercase());
        let tail = &rest[at..];
        let end = tail.find(|c: char| !word(c)).unwrap_or(tail.len());
        if starts_word {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_a_dashboard_or_rule_names_is_exported_by_a_hub_or_an_agent() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_agent(&mut clusters, agent_config("c1", &nats.url())).await;
    let mut exports = exported(&metrics_text(&hub).await);
    exports.extend(exported(
        &flotilla_agent::metrics::AgentMetrics::default().render(),
    ));

    let mut files = vec![deploy().join("prometheus/rules.yaml")];
    for entry in std::fs::read_dir(deploy().join("grafana")).unwrap() {
        files.push(entry.unwrap().path());
    }
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        if file.extension().is_some_and(|e| e == "json") {
            let doc: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            assert!(
                doc["templating"]["list"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|v| v["type"] == "datasource")),
                "{}: no datasource variable",
                file.display()
            );
            for panel in doc["panels"].as_array().into_iter().flatten() {
                let optional = panel["flotilla"]["optional"] == true;
                let exprs = panel["targets"].to_string();
                assert!(
                    optional || !exprs.contains("gnatsd_"),
                    "{}: panel {} names nats-server exporter metrics but is not marked \
                     {{\"flotilla\": {{\"optional\": true}}}}",
                    file.display(),
                    panel["title"]
                );
            }
        }
        for name in named(&text) {
            assert!(
                exports.contains(&name),
                "{} names {name}, which no hub or agent exports",
                file.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} names found in {files:?}");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_holding_the_controllers_exports_the_streams_fill_and_works_by_state() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    // A lone hub takes every unit, the controllers' too, and lists the streams at once.
    let text = tokio::time::timeout(SOON, async {
        loop {
            let text = metrics_text(&hub).await;
            if text.contains("flotilla_hub_stream_max_bytes{stream=\"FLOTILLA_STATUS\"}") {
                return text;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "no stream fill exported:\n{}",
            hub.metrics.render(&hub.inventory)
        )
    });
    let limit = format!(
        "flotilla_hub_stream_max_bytes{{stream=\"FLOTILLA_STATUS\"}} {}",
        flotilla_testkit::STATUS_STREAM_MAX_BYTES
    );
    assert!(text.contains(&limit), "{limit} not in\n{text}");
    assert!(
        text.contains("flotilla_hub_stream_messages{stream=\"KV_works\"}"),
        "{text}"
    );
    assert_eq!(
        text.matches("flotilla_hub_works{state=").count(),
        5,
        "{text}"
    );
}

/// Runs promtool in deploy/prometheus.
fn promtool(args: &[&str]) -> std::process::Output {
    std::process::Command::new("promtool")
        .args(args)
        .current_dir(deploy().join("prometheus"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "promtool: {e} — install it: apt-get install prometheus (scripts/lib.sh \
                 ensure_promtool)"
            )
        })
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    for args in [
        &["check", "rules", "rules.yaml"][..],
        &["test", "rules", "rules_test.yaml"][..],
    ] {
        let out = promtool(args);
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
