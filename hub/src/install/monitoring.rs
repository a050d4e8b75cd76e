//! Monitoring: the Grafana dashboards as a ConfigMap (the Grafana sidecar loads ConfigMaps
//! labelled `grafana_dashboard: "1"`), and for the prometheus-operator a ServiceMonitor of the
//! hubs' metrics and a PrometheusRule holding `deploy/prometheus/rules.yaml` — the file the
//! suite checks with promtool is the file the cluster gets.

use super::{Plan, hub, labels, metadata};
use serde_json::{Value, json};

/// The alert rules (`groups:` of a Prometheus rules file).
pub const RULES: &str = include_str!("../../../deploy/prometheus/rules.yaml");
/// The Grafana dashboards, by file name.
pub const DASHBOARDS: &[(&str, &str)] = &[
    (
        "fleet.json",
        include_str!("../../../deploy/grafana/fleet.json"),
    ),
    ("hub.json", include_str!("../../../deploy/grafana/hub.json")),
    (
        "agent.json",
        include_str!("../../../deploy/grafana/agent.json"),
    ),
    (
        "jetstream.json",
        include_str!("../../../deploy/grafana/jetstream.json"),
    ),
];

/// The dashboards' ConfigMap.
pub fn config_maps(plan: &Plan) -> Vec<Value> {
    let data: serde_json::Map<String, Value> = DASHBOARDS
        .iter()
        .map(|(name, text)| (name.to_string(), Value::String(text.to_string())))
        .collect();
    let mut meta = metadata(plan, "flotilla-dashboards", "flotilla");
    meta["labels"]["grafana_dashboard"] = json!("1");
    vec![json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": data,
    })]
}

/// The ServiceMonitor and the PrometheusRule.
pub fn prometheus_operator(plan: &Plan) -> Vec<Value> {
    let rules: Value = serde_yaml::from_str(RULES).expect("deploy/prometheus/rules.yaml parses");
    vec![
        json!({
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": metadata(plan, hub::APP, hub::APP),
            "spec": {
                "selector": { "matchLabels": labels(hub::APP) },
                "namespaceSelector": { "matchNames": [plan.namespace] },
                "endpoints": [{ "port": "metrics", "path": "/metrics", "interval": "30s" }],
            },
        }),
        json!({
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": metadata(plan, "flotilla", "flotilla"),
            "spec": { "groups": rules["groups"] },
        }),
    ]
}
