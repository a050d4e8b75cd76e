//! `flotilla join CLUSTER --nats-url URL [--bootstrap-creds FILE] [--nats-ca FILE] …`: prints the
//! manifests that install the agent on a spoke (as `clusteradm join` does), to pipe into
//! `kubectl apply -f -` on that cluster:
//!
//! The AppliedManifestWork CRD (the anchor of each work's resources), namespace
//! `flotilla-agent`, a ServiceAccount, RBAC (`--rbac admin`, the default, lets the
//! agent apply any kind as OCM's work agent can; `--rbac least-privilege` grants only the common
//! kinds plus `--allow GROUP/RESOURCE` entries), a Secret with the bootstrap credentials and the
//! NATS CA, a PersistentVolumeClaim for the agent's state directory (its key, its credentials
//! and its works survive restarts), and a one-replica Deployment running
//! `flotilla-agent --backend kubernetes` with the in-cluster configuration.
//!
//! Nothing is sent to the hub; secrets are read from local files only.

use std::path::PathBuf;

/// The AppliedManifestWork CRD: the anchor the agent makes every work's resources owned by.
pub const ANCHOR_CRD: &str = include_str!("../../../deploy/appliedmanifestwork-crd.yaml");

/// The namespace the agent runs in.
pub const NAMESPACE: &str = "flotilla-agent";

/// What RBAC the agent gets.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rbac {
    /// Every verb on every resource (what applying arbitrary ManifestWorks needs).
    Admin,
    /// The common workload kinds only, plus `--allow` entries.
    LeastPrivilege,
}

/// `flotilla join` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct JoinArgs {
    /// Name of the cluster (DNS-1123 label).
    pub cluster: String,
    /// NATS URL the agent reaches the hub's NATS (or its site's leaf node) at.
    #[arg(long)]
    pub nats_url: String,
    /// Bootstrap credentials (`flotilla-hub init` wrote them) to put in the Secret.
    #[arg(long)]
    pub bootstrap_creds: Option<PathBuf>,
    /// CA certificate of the NATS server's TLS (`secure/tls/ca.pem`).
    #[arg(long)]
    pub nats_ca: Option<PathBuf>,
    /// Agent image.
    #[arg(long, default_value = concat!("ghcr.io/flotilla-io/flotilla-agent:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// RBAC of the agent.
    #[arg(long, value_enum, default_value_t = Rbac::Admin)]
    pub rbac: Rbac,
    /// With `--rbac least-privilege`: more resources the agent may manage (`GROUP/RESOURCE`,
    /// `/RESOURCE` for the core group; repeatable).
    #[arg(long = "allow")]
    pub allow: Vec<String>,
    /// Label asked for at registration (repeatable): key=value.
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// Size of the state volume.
    #[arg(long, default_value = "1Gi")]
    pub state_size: String,
}

fn indent(text: &str, spaces: usize) -> String {
    let pad = " ".repeat(spaces);
    text.lines()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>()
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The common kinds a least-privilege agent may manage: `(group, resources)`.
const COMMON: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "namespaces",
            "configmaps",
            "secrets",
            "services",
            "serviceaccounts",
            "persistentvolumeclaims",
        ],
    ),
    ("apps", &["deployments", "statefulsets", "daemonsets"]),
    ("batch", &["jobs", "cronjobs"]),
    ("networking.k8s.io", &["ingresses", "networkpolicies"]),
    ("rbac.authorization.k8s.io", &["roles", "rolebindings"]),
    ("work.open-cluster-management.io", &["appliedmanifestworks"]),
];

fn rules(args: &JoinArgs) -> Result<String, String> {
    // Reading the cluster's facts: nodes, the kube-system namespace, discovery, health.
    let mut out = String::from(
        "- apiGroups: [\"\"]\n  resources: [nodes]\n  verbs: [get, list, watch]\n\
         - nonResourceURLs: [/version, /readyz, /api, /api/*, /apis, /apis/*]\n  verbs: [get]\n",
    );
    match args.rbac {
        Rbac::Admin => {
            out.push_str("- apiGroups: [\"*\"]\n  resources: [\"*\"]\n  verbs: [\"*\"]\n");
        }
        Rbac::LeastPrivilege => {
            // Checking a work's executor. (The escalation dry run for Roles and bindings also
            // needs `impersonate`, which would hand the agent every ServiceAccount's rights, so
            // it is not granted here: such manifests of works with an executor are refused.)
            out.push_str(
                "- apiGroups: [authorization.k8s.io]\n  resources: [subjectaccessreviews]\n  verbs: [create]\n",
            );
            let mut groups: Vec<(String, Vec<String>)> = COMMON
                .iter()
                .map(|(g, rs)| (g.to_string(), rs.iter().map(|r| r.to_string()).collect()))
                .collect();
            for a in &args.allow {
                let (group, resource) = a.split_once('/').ok_or_else(|| {
                    format!("--allow {a:?}: want GROUP/RESOURCE (/RESOURCE for the core group)")
                })?;
                if resource.is_empty() || resource.contains('/') {
                    return Err(format!(
                        "--allow {a:?}: the resource is missing or malformed"
                    ));
                }
                match groups.iter_mut().find(|(g, _)| g == group) {
                    Some((_, rs)) if !rs.iter().any(|r| r == resource) => rs.push(resource.into()),
                    Some(_) => {}
                    None => groups.push((group.into(), vec![resource.into()])),
                }
            }
            for (group, resources) in groups {
                out.push_str(&format!(
                    "- apiGroups: [{}]\n  resources: [{}]\n  verbs: [get, list, watch, create, update, patch, delete]\n",
                    quoted(&group),
                    resources.join(", ")
                ));
            }
        }
    }
    Ok(out)
}

/// The manifests, or what is wrong with the arguments.
pub fn manifests(args: &JoinArgs) -> Result<String, String> {
    if let Err(e) = flotilla_api::names::validate_cluster_name(&args.cluster) {
        return Err(format!("CLUSTER {:?}: {}", args.cluster, e.reason));
    }
    if args.rbac == Rbac::Admin && !args.allow.is_empty() {
        return Err(
            "--allow needs --rbac least-privilege (admin already allows everything)".into(),
        );
    }
    let mut errors = Vec::new();
    let mut secret_data = String::new();
    let mut agent_args = vec![
        "--backend=kubernetes".to_string(),
        format!("--cluster-name={}", args.cluster),
        format!("--nats-url={}", args.nats_url),
        "--state-dir=/var/lib/flotilla".to_string(),
    ];
    for (flag, file, key) in [
        (
            "--bootstrap-creds",
            &args.bootstrap_creds,
            "bootstrap.creds",
        ),
        ("--nats-ca", &args.nats_ca, "ca.pem"),
    ] {
        if let Some(path) = file {
            match std::fs::read_to_string(path) {
                Ok(text) => {
                    secret_data.push_str(&format!("  {key}: |\n{}", indent(&text, 4)));
                    agent_args.push(format!("{flag}=/etc/flotilla/{key}"));
                }
                Err(e) => errors.push(format!("{flag} {}: {e}", path.display())),
            }
        }
    }
    for l in &args.labels {
        if !l.contains('=') {
            errors.push(format!("--label {l:?}: want key=value"));
        }
        agent_args.push(format!("--label={l}"));
    }
    let rules = match rules(args) {
        Ok(r) => r,
        Err(e) => {
            errors.push(e);
            String::new()
        }
    };
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    let args_yaml: String = agent_args
        .iter()
        .map(|a| format!("            - {}\n", quoted(a)))
        .collect();
    let secret = if secret_data.is_empty() {
        String::new()
    } else {
        format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: flotilla-agent-secrets\n  namespace: {NAMESPACE}\ntype: Opaque\nstringData:\n{secret_data}"
        )
    };
    let (secret_volume, secret_mount) = if secret_data.is_empty() {
        (String::new(), String::new())
    } else {
        (
            "        - name: secrets\n          secret:\n            secretName: flotilla-agent-secrets\n            defaultMode: 0400\n".to_string(),
            "            - name: secrets\n              mountPath: /etc/flotilla\n              readOnly: true\n".to_string(),
        )
    };
    let cluster = &args.cluster;
    let image = &args.image;
    let size = &args.state_size;
    let crd = ANCHOR_CRD
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(format!(
        "# The Flotilla agent for cluster {cluster}: flotilla join {cluster} | kubectl apply -f -\n\
---
{crd}
---
apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: flotilla-agent
  namespace: {NAMESPACE}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: flotilla-agent
rules:
{rules}---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: flotilla-agent
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: flotilla-agent
subjects:
  - kind: ServiceAccount
    name: flotilla-agent
    namespace: {NAMESPACE}
{secret}---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: flotilla-agent-state
  namespace: {NAMESPACE}
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: {size}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: flotilla-agent
  namespace: {NAMESPACE}
  labels:
    app.kubernetes.io/name: flotilla-agent
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      app.kubernetes.io/name: flotilla-agent
  template:
    metadata:
      labels:
        app.kubernetes.io/name: flotilla-agent
    spec:
      serviceAccountName: flotilla-agent
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        fsGroup: 65532
      containers:
        - name: agent
          image: {image}
          args:
{args_yaml}          env:
            - name: RUST_LOG
              value: info
          resources:
            requests:
              cpu: 50m
              memory: 64Mi
            limits:
              memory: 256Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
          volumeMounts:
            - name: state
              mountPath: /var/lib/flotilla
{secret_mount}      volumes:
        - name: state
          persistentVolumeClaim:
            claimName: flotilla-agent-state
{secret_volume}"
    ))
}

/// Prints the manifests.
pub fn run(args: &JoinArgs) -> anyhow::Result<()> {
    print!("{}", manifests(args).map_err(anyhow::Error::msg)?);
    Ok(())
}
