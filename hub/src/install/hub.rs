//! The hubs: a Deployment whose pods never share a node, rolled one hub at a time (a stopping
//! hub drains and releases its shards, so the others take them at once — docs/operations.md,
//! "Upgrading"), its Services and disruption budget.
//!
//! The secure directory reaches a hub as a read-only Secret and ConfigMap; an init container
//! copies it into an in-memory `emptyDir` (0700) because the hub writes `revocations.json`
//! beside it.

use super::nats::CLIENT_PORT;
use super::secure::{HUB_FILES, HUB_SECURE_DIR, JWT_FILES, SERVER_CONF, SecureFiles, secret_key};
use super::{Plan, container_security, labels, metadata};
use serde_json::{Value, json};

/// The application label of the hub pods.
pub const APP: &str = "flotilla-hub";
/// The gRPC API's port.
pub const GRPC_PORT: u16 = 50051;
/// The metrics and probes' port.
pub const METRICS_PORT: u16 = 9464;
/// The dashboard's port.
pub const DASHBOARD_PORT: u16 = 8080;
/// The cluster proxy's port.
pub const PROXY_PORT: u16 = 8443;
/// The GitRepo push webhooks' port.
pub const WEBHOOK_PORT: u16 = 8090;
/// The image's user (the Dockerfile's `flotilla`).
const UID: i64 = 10001;
/// Where the init container reads the Secret and ConfigMap.
const SOURCE_DIR: &str = "/etc/flotilla/source";

/// The files the hub's copy of the secure directory holds, by their path in it.
fn hub_paths(files: &SecureFiles) -> Vec<(String, &'static str)> {
    let mut paths: Vec<(String, &'static str)> = HUB_FILES
        .iter()
        .map(|p| (p.to_string(), "secret"))
        .chain(JWT_FILES.iter().map(|p| (p.to_string(), "jwt")))
        .collect();
    paths.push((SERVER_CONF.into(), "secret"));
    paths.push(("api-tokens".into(), "secret"));
    if files.api_tls.is_some() {
        paths.push(("grpc-tls.crt".into(), "secret"));
        paths.push(("grpc-tls.key".into(), "secret"));
    }
    paths
}

/// The ServiceAccount, Services, Deployment and disruption budget.
pub fn objects(plan: &Plan, files: &SecureFiles) -> Vec<Value> {
    let service = |name: &str, port_name: &str, port: u16| {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(plan, name, APP),
            "spec": {
                "selector": labels(APP),
                "ports": [{ "name": port_name, "port": port, "targetPort": port_name }],
            },
        })
    };
    let mut objects = vec![
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(plan, APP, APP),
            "automountServiceAccountToken": false,
        }),
        service("flotilla-api", "grpc", GRPC_PORT),
        // Named after the job the alert rules expect (`job="flotilla-hub"`).
        service(APP, "metrics", METRICS_PORT),
    ];
    if plan.dashboard {
        objects.push(service("flotilla-dashboard", "dashboard", DASHBOARD_PORT));
    }
    if plan.cluster_proxy {
        objects.push(service("flotilla-cluster-proxy", "proxy", PROXY_PORT));
    }
    if plan.webhooks {
        objects.push(service("flotilla-webhooks", "webhooks", WEBHOOK_PORT));
    }
    objects.push(deployment(plan, files));
    objects.push(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(plan, APP, APP),
        "spec": { "maxUnavailable": 1, "selector": { "matchLabels": labels(APP) } },
    }));
    objects
}

/// The hub's command line.
fn args(plan: &Plan, files: &SecureFiles) -> Vec<String> {
    let file = |name: &str| format!("{HUB_SECURE_DIR}/{name}");
    let mut args = vec![
        "--secure-dir".to_string(),
        HUB_SECURE_DIR.into(),
        "--nats-url".into(),
        format!("tls://{}:{CLIENT_PORT}", plan.service_host("nats")),
        "--replicas".into(),
        plan.nats_replicas.to_string(),
        "--grpc-listen".into(),
        format!("0.0.0.0:{GRPC_PORT}"),
        "--metrics-listen".into(),
        format!("0.0.0.0:{METRICS_PORT}"),
        "--api-token-file".into(),
        file("api-tokens"),
    ];
    if files.api_tls.is_some() {
        args.extend([
            "--grpc-tls-cert".into(),
            file("grpc-tls.crt"),
            "--grpc-tls-key".into(),
            file("grpc-tls.key"),
        ]);
    }
    if plan.dashboard {
        args.extend([
            "--dashboard-listen".into(),
            format!("0.0.0.0:{DASHBOARD_PORT}"),
        ]);
    }
    if plan.cluster_proxy {
        args.extend([
            "--cluster-proxy-listen".into(),
            format!("0.0.0.0:{PROXY_PORT}"),
        ]);
    }
    if plan.webhooks {
        args.extend([
            "--gitops-webhook-listen".into(),
            format!("0.0.0.0:{WEBHOOK_PORT}"),
        ]);
    }
    args
}

/// The init container's script: each file copied to its place, private to the hub's user.
fn copy_script(paths: &[(String, &'static str)]) -> String {
    let mut script = String::from("set -eu\numask 077\n");
    let dirs: std::collections::BTreeSet<String> = paths
        .iter()
        .filter_map(|(path, _)| std::path::Path::new(path).parent())
        .map(|p| p.display().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    for dir in dirs {
        script.push_str(&format!("mkdir -p '{HUB_SECURE_DIR}/{dir}'\n"));
    }
    for (path, _) in paths {
        script.push_str(&format!(
            "cat '{SOURCE_DIR}/{path}' > '{HUB_SECURE_DIR}/{path}'\n"
        ));
    }
    script
}

/// The hub's secure directory in a pod: the volumes (the Secret and ConfigMap projected
/// read-only, an in-memory copy) and the init container that makes the copy.
pub(crate) fn secure_copy(plan: &Plan, files: &SecureFiles) -> (Vec<Value>, Value) {
    let paths = hub_paths(files);
    let items = |source: &str| -> Vec<Value> {
        paths
            .iter()
            .filter(|(_, s)| *s == source)
            .map(|(p, _)| {
                let key = if source == "jwt" {
                    p.clone()
                } else {
                    secret_key(p)
                };
                json!({ "key": key, "path": p })
            })
            .collect()
    };
    let volumes = vec![
        json!({ "name": "source", "projected": {
            "defaultMode": 0o440,
            "sources": [
                { "secret": { "name": "flotilla-hub", "items": items("secret") } },
                { "configMap": { "name": "flotilla-jwt", "items": items("jwt") } },
            ],
        } }),
        json!({ "name": "secure", "emptyDir": { "medium": "Memory", "sizeLimit": "16Mi" } }),
    ];
    let init = json!({
        "name": "secure-dir",
        "image": plan.image,
        "command": ["sh", "-c", copy_script(&paths)],
        "securityContext": container_security(),
        "volumeMounts": [
            { "name": "source", "mountPath": SOURCE_DIR, "readOnly": true },
            secure_mount(),
        ],
    });
    (volumes, init)
}

/// Where the hub's containers see the secure directory.
pub(crate) fn secure_mount() -> Value {
    json!({ "name": "secure", "mountPath": HUB_SECURE_DIR })
}

/// The pod security context of the image's user.
pub(crate) fn pod_security() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": UID,
        "runAsGroup": UID,
        "fsGroup": UID,
        "seccompProfile": { "type": "RuntimeDefault" },
    })
}

fn deployment(plan: &Plan, files: &SecureFiles) -> Value {
    let (volumes, init) = secure_copy(plan, files);
    let probe = |path: &str, period: u32| {
        json!({
            "httpGet": { "path": path, "port": "metrics" },
            "periodSeconds": period,
            "failureThreshold": 3,
            "timeoutSeconds": 5,
        })
    };
    let mut ports = vec![
        json!({ "name": "grpc", "containerPort": GRPC_PORT }),
        json!({ "name": "metrics", "containerPort": METRICS_PORT }),
    ];
    if plan.dashboard {
        ports.push(json!({ "name": "dashboard", "containerPort": DASHBOARD_PORT }));
    }
    if plan.cluster_proxy {
        ports.push(json!({ "name": "proxy", "containerPort": PROXY_PORT }));
    }
    if plan.webhooks {
        ports.push(json!({ "name": "webhooks", "containerPort": WEBHOOK_PORT }));
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(plan, APP, APP),
        "spec": {
            "replicas": plan.hubs,
            "selector": { "matchLabels": labels(APP) },
            // One hub down at a time and none added: with required anti-affinity a surge pod
            // would need a node more than there are hubs.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": { "maxUnavailable": 1, "maxSurge": 0 },
            },
            "template": {
                "metadata": { "labels": labels(APP) },
                "spec": {
                    "serviceAccountName": APP,
                    "automountServiceAccountToken": false,
                    // A hub drains and releases its shards on SIGTERM.
                    "terminationGracePeriodSeconds": 60,
                    "securityContext": pod_security(),
                    "affinity": { "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [{
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": { "matchLabels": labels(APP) },
                        }],
                    } },
                    "initContainers": [init],
                    "containers": [{
                        "name": "hub",
                        "image": plan.image,
                        "command": ["flotilla-hub"],
                        "args": args(plan, files),
                        "env": [
                            { "name": "FLOTILLA_HUB_ID", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                            { "name": "RUST_LOG", "value": "info" },
                        ],
                        "ports": ports,
                        "readinessProbe": probe("/readyz", 5),
                        "livenessProbe": probe("/healthz", 15),
                        "resources": {
                            "requests": { "cpu": "500m", "memory": "512Mi" },
                            "limits": { "memory": "4Gi" },
                        },
                        "securityContext": container_security(),
                        "volumeMounts": [secure_mount()],
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}
