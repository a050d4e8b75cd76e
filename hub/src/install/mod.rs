//! `flotilla-hub manifests`: the management-cluster install, rendered from a checked [`Plan`]
//! and the secure directory's files (pure; the command reads the files and prints).
//!
//! - [`secure`]: the secure directory's files, split by who needs them (NATS pods, hub pods, a
//!   ConfigMap of public JWTs; the offline keys never rendered), and the NATS cluster's
//!   configuration text.
//! - [`nats`]: the NATS StatefulSet (JetStream, TLS, routes), its Services and disruption
//!   budget — the official Helm chart's names, ports, probes and lame-duck conventions.
//! - [`backup`]: the scheduled backup — a CronJob running `flotilla-hub backup` into a volume.
//! - [`hub`]: the hubs' Deployment (anti-affinity, one hub down at a time), Services, budget.
//! - [`network`]: NetworkPolicies (default deny; routes only between NATS pods; metrics only
//!   from the monitoring namespace).
//! - [`monitoring`]: a ServiceMonitor, a PrometheusRule (the file promtool checks) and the
//!   Grafana dashboards as a ConfigMap.
//! - [`tls`]: the names the NATS server certificate must carry.
//!
//! Objects are built as JSON values (`serde_json::json!`), not text templates: quoting and
//! nesting are the serializer's, and the suite validates every object against the Kubernetes
//! OpenAPI schemas (hub/tests/manifests.rs).

pub mod backup;
pub mod hub;
pub mod monitoring;
pub mod nats;
pub mod network;
pub mod secure;
pub mod tls;

use serde_json::{Value, json};
use std::fmt;

pub use secure::SecureFiles;

/// The hub image's default: this build's version.
pub const DEFAULT_IMAGE: &str = concat!("ghcr.io/flotilla-io/flotilla:", env!("CARGO_PKG_VERSION"));
/// The NATS server image's default (the official image; 2.10 as docker-compose.yml runs).
pub const DEFAULT_NATS_IMAGE: &str = "nats:2.10.22-alpine";

/// How agents outside the management cluster reach NATS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum External {
    /// A `LoadBalancer` Service on 4222.
    Loadbalancer,
    /// A `NodePort` Service on 4222.
    Nodeport,
    /// No Service for agents (they come through an ingress of the operator's own).
    None,
}

/// What to install: the command's flags, checked by [`Plan::check`].
#[derive(Debug, Clone)]
pub struct Plan {
    /// The namespace of every object.
    pub namespace: String,
    /// Hub replicas.
    pub hubs: u8,
    /// NATS servers (1, 3 or 5: JetStream's quorum wants an odd count).
    pub nats_replicas: u8,
    /// The Flotilla image (the repository's Dockerfile).
    pub image: String,
    /// The NATS server image.
    pub nats_image: String,
    /// The StorageClass of the JetStream volumes (the cluster's default when none).
    pub storage_class: Option<String>,
    /// The size of each NATS server's JetStream volume (a Kubernetes quantity, `10Gi`).
    pub jetstream_size: String,
    /// How agents reach NATS.
    pub external: External,
    /// Serve the web dashboard (port 8080).
    pub dashboard: bool,
    /// Serve the cluster proxy (port 8443).
    pub cluster_proxy: bool,
    /// Serve GitRepo push webhooks (port 8090).
    pub webhooks: bool,
    /// Render the prometheus-operator objects (ServiceMonitor, PrometheusRule).
    pub prometheus_operator: bool,
    /// The namespace Prometheus scrapes from (the only one let in to the metrics ports).
    pub monitoring_namespace: String,
    /// A scheduled backup (none by default).
    pub backup: Option<backup::Schedule>,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            namespace: "flotilla".into(),
            hubs: 2,
            nats_replicas: 3,
            image: DEFAULT_IMAGE.into(),
            nats_image: DEFAULT_NATS_IMAGE.into(),
            storage_class: None,
            jetstream_size: "10Gi".into(),
            external: External::Loadbalancer,
            dashboard: false,
            cluster_proxy: false,
            webhooks: false,
            prometheus_operator: true,
            monitoring_namespace: "monitoring".into(),
            backup: None,
        }
    }
}

/// A problem with the plan or the secure directory, saying what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem(pub String);

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Plan {
    /// Every problem of the flags at once.
    pub fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut say = |text: String| problems.push(Problem(text));
        for (flag, name) in [
            ("--namespace", &self.namespace),
            ("--monitoring-namespace", &self.monitoring_namespace),
        ] {
            if !dns_label(name) {
                say(format!(
                    "{flag} {name:?}: not a DNS-1123 label (lower-case letters, digits and '-', \
                     at most 63, starting and ending with a letter or digit)"
                ));
            }
        }
        if !(1..=5).contains(&self.hubs) {
            say(format!(
                "--hubs {}: give 1 to 5 (2 or 3 is usual)",
                self.hubs
            ));
        }
        if ![1, 3, 5].contains(&self.nats_replicas) {
            say(format!(
                "--nats-replicas {}: give 1, 3 or 5 (JetStream needs a majority of the servers)",
                self.nats_replicas
            ));
        }
        if !quantity(&self.jetstream_size) {
            say(format!(
                "--jetstream-size {:?}: not a Kubernetes quantity such as 10Gi or 500Mi",
                self.jetstream_size
            ));
        }
        if let Some(class) = &self.storage_class
            && !dns_subdomain(class)
        {
            say(format!(
                "--storage-class {class:?}: not a DNS-1123 subdomain"
            ));
        }
        for (flag, image) in [("--image", &self.image), ("--nats-image", &self.nats_image)] {
            if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
                say(format!("{flag} {image:?}: not an image reference"));
            }
        }
        if let Some(schedule) = &self.backup {
            problems.extend(backup::check(schedule));
        }
        problems
    }

    /// The DNS name of a Service of the plan's namespace.
    pub fn service_host(&self, service: &str) -> String {
        format!("{service}.{}.svc", self.namespace)
    }
}

/// Renders every object, in apply order; every problem with the plan and the files at once.
pub fn render(plan: &Plan, files: &SecureFiles) -> Result<Vec<Value>, Vec<Problem>> {
    let mut problems = plan.check();
    problems.extend(files.check(plan));
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut objects = vec![namespace(plan)];
    objects.extend(secure::objects(plan, files));
    objects.extend(monitoring::config_maps(plan));
    objects.extend(nats::objects(plan));
    objects.extend(hub::objects(plan, files));
    if let Some(schedule) = &plan.backup {
        objects.extend(backup::objects(plan, files, schedule));
    }
    objects.extend(network::objects(plan));
    if plan.prometheus_operator {
        objects.extend(monitoring::prometheus_operator(plan));
    }
    Ok(objects)
}

/// The objects as one multi-document YAML stream, `---` between documents.
pub fn to_yaml(objects: &[Value]) -> String {
    let mut out = String::from(
        "# Flotilla management-cluster install (flotilla-hub manifests). Apply with\n\
         #   kubectl apply --server-side -f FILE\n\
         # (server-side: client-side apply would copy every Secret into an annotation).\n",
    );
    for object in objects {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(object).expect("a JSON value serializes as YAML"));
    }
    out
}

/// The namespace, at the `restricted` Pod Security level.
fn namespace(plan: &Plan) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": plan.namespace,
            "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "app.kubernetes.io/part-of": "flotilla",
            },
        },
    })
}

/// The metadata of an object of the plan's namespace, labelled as part of `name`.
pub(crate) fn metadata(plan: &Plan, name: &str, app: &str) -> Value {
    json!({
        "name": name,
        "namespace": plan.namespace,
        "labels": labels(app),
    })
}

/// The labels every object of one application carries (and its pods are selected by).
pub(crate) fn labels(app: &str) -> Value {
    json!({
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/part-of": "flotilla",
    })
}

/// The security context of every container: the `restricted` Pod Security profile.
pub(crate) fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "capabilities": { "drop": ["ALL"] },
        "seccompProfile": { "type": "RuntimeDefault" },
    })
}

fn dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(dns_label)
}

/// A Kubernetes quantity as volumes are sized: digits, then an optional binary or decimal
/// suffix.
fn quantity(text: &str) -> bool {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let suffix = &text[digits..];
    digits > 0
        && [
            "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
        ]
        .contains(&suffix)
}

#[cfg(test)]
mod tests;
