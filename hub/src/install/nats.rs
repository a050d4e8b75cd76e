//! The NATS cluster: a StatefulSet of JetStream servers in operator mode with TLS on the client
//! and route ports, its Services and disruption budget. Names, ports, probes and lame duck
//! follow the official Helm chart (nats-io/k8s `helm/charts/nats`): StatefulSet `nats`,
//! headless Service `nats-headless`, routes `nats-<i>.nats-headless:6222`, readiness
//! `/healthz?js-server-only=true`, liveness `/healthz?js-enabled-only=true`.

use super::secure::{Accounts, NATS_CONFIG_DIR, NATS_JWT_DIR, secret_key};
use super::{External, Plan, container_security, labels, metadata};
use serde_json::{Value, json};

/// The application label of the NATS pods.
pub const APP: &str = "nats";
/// The client port.
pub const CLIENT_PORT: u16 = 4222;
/// The route port.
pub const CLUSTER_PORT: u16 = 6222;
/// The monitoring port.
pub const MONITOR_PORT: u16 = 8222;
/// The user NATS servers authenticate each other's routes as.
const ROUTE_USER: &str = "flotilla-route";
/// The NATS image's non-root user.
const NATS_UID: i64 = 1000;

/// The route URL of server `i` (the headless Service's stable names).
pub fn route_host(plan: &Plan, i: u8) -> String {
    format!("nats-{i}.nats-headless.{}.svc", plan.namespace)
}

/// `nats.conf`: the accounts of `init`'s configuration, JetStream on the volume, TLS on the
/// client port, routes with TLS and a password between the servers.
pub fn config(plan: &Plan, accounts: &Accounts, routes_password: &str) -> String {
    let cert = |path: &str| format!("{NATS_CONFIG_DIR}/{}", secret_key(path));
    let tls = format!(
        "cert_file: {:?}\n    key_file: {:?}\n    ca_file: {:?}",
        cert("tls/server.pem"),
        cert("tls/server-key.pem"),
        cert("tls/ca.pem")
    );
    let mut out = format!(
        "# Flotilla NATS cluster (flotilla-hub manifests): operator mode, JetStream, TLS.\n\
         server_name: $SERVER_NAME\n\
         listen: \"0.0.0.0:{CLIENT_PORT}\"\n\
         http: \"0.0.0.0:{MONITOR_PORT}\"\n\
         pid_file: \"/var/run/nats/nats.pid\"\n\
         lame_duck_grace_period: 10s\n\
         lame_duck_duration: 30s\n\
         operator: \"{NATS_JWT_DIR}/operator.jwt\"\n\
         system_account: {system}\n\
         resolver: {{\n  type: full\n  dir: \"/data/jwt\"\n  allow_delete: false\n  interval: \"2m\"\n}}\n\
         resolver_preload: {{\n",
        system = accounts.system,
    );
    for (key, jwt) in &accounts.preload {
        out.push_str(&format!("  {key}: {jwt:?}\n"));
    }
    out.push_str(&format!(
        "}}\njetstream: {{\n  store_dir: \"/data/jetstream\"\n  max_file_store: {}\n}}\n",
        max_file_store(&plan.jetstream_size)
    ));
    out.push_str(&format!("tls: {{\n    {tls}\n    timeout: 5\n"));
    if accounts.tls_first {
        out.push_str("    handshake_first: true\n");
    }
    out.push_str("}\n");
    let routes: Vec<String> = (0..plan.nats_replicas)
        .map(|i| {
            format!(
                "    \"nats://{ROUTE_USER}:{routes_password}@{}:{CLUSTER_PORT}\"",
                route_host(plan, i)
            )
        })
        .collect();
    out.push_str(&format!(
        "cluster: {{\n  name: flotilla\n  listen: \"0.0.0.0:{CLUSTER_PORT}\"\n  \
         authorization: {{\n    user: {ROUTE_USER}\n    password: {routes_password:?}\n  }}\n  \
         tls: {{\n    {tls}\n    timeout: 5\n  }}\n  routes: [\n{}\n  ]\n}}\n",
        routes.join("\n")
    ));
    out
}

/// JetStream's file store: 90 % of the volume (the rest for the resolver's JWTs and the
/// filesystem's own use), in bytes.
fn max_file_store(size: &str) -> u64 {
    let digits = size.bytes().take_while(u8::is_ascii_digit).count();
    let n: u64 = size[..digits].parse().unwrap_or(0);
    let unit: u64 = match &size[digits..] {
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => 1,
    };
    n.saturating_mul(unit) / 10 * 9
}

/// The Services, the StatefulSet and its disruption budget.
pub fn objects(plan: &Plan) -> Vec<Value> {
    let port = |name: &str, port: u16| json!({ "name": name, "port": port, "targetPort": name });
    let mut objects = vec![
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(plan, "nats", APP),
            "automountServiceAccountToken": false,
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(plan, "nats-headless", APP),
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": true,
                "selector": labels(APP),
                "ports": [
                    port("client", CLIENT_PORT),
                    port("cluster", CLUSTER_PORT),
                    port("monitor", MONITOR_PORT),
                ],
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(plan, "nats", APP),
            "spec": { "selector": labels(APP), "ports": [port("client", CLIENT_PORT)] },
        }),
    ];
    let external = match plan.external {
        External::Loadbalancer => Some("LoadBalancer"),
        External::Nodeport => Some("NodePort"),
        External::None => None,
    };
    if let Some(kind) = external {
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(plan, "nats-external", APP),
            "spec": {
                "type": kind,
                "selector": labels(APP),
                "ports": [port("client", CLIENT_PORT)],
            },
        }));
    }
    objects.push(statefulset(plan));
    objects.push(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(plan, "nats", APP),
        "spec": { "maxUnavailable": 1, "selector": { "matchLabels": labels(APP) } },
    }));
    objects
}

fn statefulset(plan: &Plan) -> Value {
    let mut claim = json!({
        "metadata": { "name": "jetstream" },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": { "requests": { "storage": plan.jetstream_size } },
        },
    });
    if let Some(class) = &plan.storage_class {
        claim["spec"]["storageClassName"] = json!(class);
    }
    let probe = |path: &str, period: u32, failures: u32| {
        json!({
            "httpGet": { "path": path, "port": "monitor" },
            "periodSeconds": period,
            "failureThreshold": failures,
            "timeoutSeconds": 5,
        })
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(plan, "nats", APP),
        "spec": {
            "serviceName": "nats-headless",
            "replicas": plan.nats_replicas,
            "podManagementPolicy": "Parallel",
            "selector": { "matchLabels": labels(APP) },
            "template": {
                "metadata": { "labels": labels(APP) },
                "spec": {
                    "serviceAccountName": "nats",
                    "automountServiceAccountToken": false,
                    "terminationGracePeriodSeconds": 60,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": NATS_UID,
                        "runAsGroup": NATS_UID,
                        "fsGroup": NATS_UID,
                        "seccompProfile": { "type": "RuntimeDefault" },
                    },
                    "affinity": { "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [{
                            "weight": 100,
                            "podAffinityTerm": {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": { "matchLabels": labels(APP) },
                            },
                        }],
                    } },
                    "containers": [{
                        "name": "nats",
                        "image": plan.nats_image,
                        "args": ["--config", format!("{NATS_CONFIG_DIR}/nats.conf")],
                        "env": [
                            { "name": "SERVER_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                        ],
                        "ports": [
                            { "name": "client", "containerPort": CLIENT_PORT },
                            { "name": "cluster", "containerPort": CLUSTER_PORT },
                            { "name": "monitor", "containerPort": MONITOR_PORT },
                        ],
                        "startupProbe": probe("/healthz", 10, 90),
                        "readinessProbe": probe("/healthz?js-server-only=true", 10, 3),
                        "livenessProbe": probe("/healthz?js-enabled-only=true", 30, 3),
                        "lifecycle": { "preStop": { "exec": {
                            "command": ["nats-server", "-sl=ldm=/var/run/nats/nats.pid"],
                        } } },
                        "resources": {
                            "requests": { "cpu": "500m", "memory": "1Gi" },
                            "limits": { "memory": "2Gi" },
                        },
                        "securityContext": container_security(),
                        "volumeMounts": [
                            { "name": "config", "mountPath": NATS_CONFIG_DIR, "readOnly": true },
                            { "name": "jwt", "mountPath": NATS_JWT_DIR, "readOnly": true },
                            { "name": "jetstream", "mountPath": "/data" },
                            { "name": "pid", "mountPath": "/var/run/nats" },
                        ],
                    }],
                    "volumes": [
                        { "name": "config", "secret": { "secretName": "flotilla-nats", "defaultMode": 0o440 } },
                        { "name": "jwt", "configMap": {
                            "name": "flotilla-jwt",
                            "items": [{ "key": "operator.jwt", "path": "operator.jwt" }],
                        } },
                        { "name": "pid", "emptyDir": {} },
                    ],
                },
            },
            "volumeClaimTemplates": [claim],
        },
    })
}
