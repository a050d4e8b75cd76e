//! NetworkPolicies: nothing comes into the namespace unless let in. Agents and hubs reach NATS'
//! client port from anywhere (TLS and NATS credentials guard it); only NATS pods reach the
//! route port, so a pod elsewhere cannot join the cluster and read every stream; the API,
//! dashboard and proxy ports are open (tokens and TLS guard them), and the webhook port (each
//! webhook's signature guards it); the metrics and NATS monitoring ports only from the
//! monitoring namespace.

use super::nats::{CLIENT_PORT, CLUSTER_PORT, MONITOR_PORT};
use super::{Plan, hub, labels, metadata, nats};
use serde_json::{Value, json};

/// The policies.
pub fn objects(plan: &Plan) -> Vec<Value> {
    let monitoring = json!([{ "namespaceSelector": { "matchLabels": {
        "kubernetes.io/metadata.name": plan.monitoring_namespace,
    } } }]);
    let tcp = |port: u16| json!([{ "protocol": "TCP", "port": port }]);
    let policy = |name: &str, app: &str, ingress: Value| {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": metadata(plan, name, app),
            "spec": {
                "podSelector": { "matchLabels": labels(app) },
                "policyTypes": ["Ingress"],
                "ingress": ingress,
            },
        })
    };
    let mut hub_ports = vec![hub::GRPC_PORT];
    if plan.dashboard {
        hub_ports.push(hub::DASHBOARD_PORT);
    }
    if plan.cluster_proxy {
        hub_ports.push(hub::PROXY_PORT);
    }
    if plan.webhooks {
        hub_ports.push(hub::WEBHOOK_PORT);
    }
    let open: Vec<Value> = hub_ports
        .iter()
        .map(|p| json!({ "protocol": "TCP", "port": p }))
        .collect();
    vec![
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": metadata(plan, "default-deny-ingress", "flotilla"),
            "spec": { "podSelector": {}, "policyTypes": ["Ingress"] },
        }),
        policy(
            "nats",
            nats::APP,
            json!([
                { "ports": tcp(CLIENT_PORT) },
                {
                    "from": [{ "podSelector": { "matchLabels": labels(nats::APP) } }],
                    "ports": tcp(CLUSTER_PORT),
                },
                { "from": monitoring, "ports": tcp(MONITOR_PORT) },
            ]),
        ),
        policy(
            hub::APP,
            hub::APP,
            json!([
                { "ports": open },
                { "from": monitoring, "ports": tcp(hub::METRICS_PORT) },
            ]),
        ),
    ]
}
