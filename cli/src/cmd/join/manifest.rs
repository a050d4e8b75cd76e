//! The install manifests, rendered from what the flags and the hub gave ([`Install`],
//! [`Bootstrap`]) by one pure function, [`manifests`], which tests call with any credential
//! text.

use super::rbac::{self, Rbac};
use super::{ANCHOR_CRD, NAMESPACE, quoted};

/// Everything wrong with a `flotilla join` before anything is rendered or asked of the hub,
/// one entry per problem, each naming its flag or argument; shown at once, `; `-separated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct Problems(pub Vec<String>);

/// The default agent image: the one of this CLI's version.
pub const DEFAULT_IMAGE: &str = concat!(
    "ghcr.io/flotilla-io/flotilla-agent:",
    env!("CARGO_PKG_VERSION")
);

/// The default size of the agent's state volume.
pub const DEFAULT_STATE_SIZE: &str = "1Gi";

/// The credential the agent registers with, put in the Secret `flotilla-agent-secrets` as
/// `bootstrap.creds` and passed as `--bootstrap-creds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bootstrap {
    /// None: a hub without secure mode.
    None,
    /// A join credential for this one cluster (`CreateJoinToken`'s `creds`): it may only ask to
    /// register this cluster's name, expires, and is spent by the first agent that registers.
    JoinToken(String),
    /// The fleet-wide bootstrap credentials (`flotilla-hub init`'s `bootstrap.creds`): the same
    /// secret on every spoke, valid until the hub's keys are rotated.
    Shared(String),
}

impl Bootstrap {
    fn creds(&self) -> Option<(&str, &'static str)> {
        match self {
            Bootstrap::None => None,
            Bootstrap::JoinToken(t) => Some((t, "a join credential for this cluster only")),
            Bootstrap::Shared(t) => Some((t, "the fleet-wide bootstrap credentials")),
        }
    }
}

/// What to install on a spoke, besides the credential: checked flags and the files' text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    /// Name of the cluster (DNS-1123 label).
    pub cluster: String,
    /// NATS URL the agent reaches the hub at.
    pub nats_url: String,
    /// The NATS server's CA (PEM text): required with a credential over TLS, since it is what
    /// authenticates the server.
    pub nats_ca: Option<String>,
    /// The NATS server starts TLS before its first line (`handshake_first`).
    pub nats_tls_first: bool,
    /// Agent image.
    pub image: String,
    /// The agent's RBAC.
    pub rbac: Rbac,
    /// Labels asked for at registration (`key=value`).
    pub labels: Vec<String>,
    /// Size of the state volume.
    pub state_size: String,
}

impl Install {
    /// An install of `cluster` reaching NATS at `nats_url` with the defaults: the image of this
    /// version, least-privilege RBAC, no CA, no labels, a 1Gi state volume.
    pub fn new(cluster: &str, nats_url: &str) -> Self {
        Self {
            cluster: cluster.to_string(),
            nats_url: nats_url.to_string(),
            nats_ca: None,
            nats_tls_first: false,
            image: DEFAULT_IMAGE.to_string(),
            rbac: Rbac::default(),
            labels: Vec::new(),
            state_size: DEFAULT_STATE_SIZE.to_string(),
        }
    }

    /// Sets the NATS CA (PEM text).
    pub fn nats_ca(mut self, pem: &str) -> Self {
        self.nats_ca = Some(pem.to_string());
        self
    }

    /// Sets the RBAC.
    pub fn rbac(mut self, rbac: Rbac) -> Self {
        self.rbac = rbac;
        self
    }

    /// Adds a registration label (`key=value`).
    pub fn label(mut self, label: &str) -> Self {
        self.labels.push(label.to_string());
        self
    }

    /// What is wrong with it, one entry per problem (none when it can be rendered).
    pub fn check(&self) -> Vec<String> {
        let mut errors = Vec::new();
        if let Err(e) = flotilla_api::names::validate_cluster_name(&self.cluster) {
            errors.push(format!("CLUSTER {:?}: {}", self.cluster, e.reason));
        }
        for l in &self.labels {
            if !l.contains('=') {
                errors.push(format!("--label {l:?}: want key=value"));
            }
        }
        errors.extend(rbac::check(&self.rbac));
        errors
    }
}

fn indent(text: &str, spaces: usize) -> String {
    let pad = " ".repeat(spaces);
    text.lines()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>()
}

/// The manifests that install the agent with `bootstrap`, or what is wrong with `install`:
/// checked, then rendered document by document.
pub fn manifests(install: &Install, bootstrap: &Bootstrap) -> Result<String, Problems> {
    check(install, bootstrap)?;
    let secret = Secrets::of(install, bootstrap);
    let deployment = deployment(install, &agent_args(install, bootstrap), &secret);
    Ok([
        namespace_documents(&install.cluster),
        rbac::documents(&install.rbac, NAMESPACE),
        secret.document,
        state_claim(&install.state_size),
        deployment,
    ]
    .concat())
}

/// Every problem of `install`, and of its NATS URL with `bootstrap`, at once.
fn check(install: &Install, bootstrap: &Bootstrap) -> Result<(), Problems> {
    let mut errors = install.check();
    if let Err(e) = flotilla_api::transport::check_transport(
        &install.nats_url,
        install.nats_ca.is_some(),
        bootstrap.creds().is_some(),
    ) {
        errors.push(format!("--nats-url {e}"));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Problems(errors))
    }
}

/// The agent's command-line arguments: its cluster and NATS URL, and the files the Secret
/// mounts.
fn agent_args(install: &Install, bootstrap: &Bootstrap) -> Vec<String> {
    let mut args = vec![
        "--backend=kubernetes".to_string(),
        format!("--cluster-name={}", install.cluster),
        format!("--nats-url={}", install.nats_url),
        "--state-dir=/var/lib/flotilla".to_string(),
    ];
    if bootstrap.creds().is_some() {
        args.push("--bootstrap-creds=/etc/flotilla/bootstrap.creds".to_string());
    }
    if install.nats_ca.is_some() {
        args.push("--nats-ca=/etc/flotilla/ca.pem".to_string());
    }
    if install.nats_tls_first {
        args.push("--nats-tls-first".to_string());
    }
    for l in &install.labels {
        args.push(format!("--label={l}"));
    }
    args
}

/// The Secret `flotilla-agent-secrets` (the credential, the NATS CA) and where the agent's pod
/// mounts it; all empty when there is nothing to keep secret.
struct Secrets {
    /// The Secret's document.
    document: String,
    /// The pod's volume of it.
    volume: String,
    /// The agent container's mount of that volume.
    mount: String,
}

impl Secrets {
    fn of(install: &Install, bootstrap: &Bootstrap) -> Self {
        let mut data = String::new();
        let mut comment = String::new();
        if let Some((creds, what)) = bootstrap.creds() {
            comment = format!("# bootstrap.creds: {what}\n");
            data.push_str(&format!("  bootstrap.creds: |\n{}", indent(creds, 4)));
        }
        if let Some(ca) = &install.nats_ca {
            data.push_str(&format!("  ca.pem: |\n{}", indent(ca, 4)));
        }
        if data.is_empty() {
            return Self {
                document: String::new(),
                volume: String::new(),
                mount: String::new(),
            };
        }
        Self {
            document: format!(
                "---\n{comment}apiVersion: v1\nkind: Secret\nmetadata:\n  name: flotilla-agent-secrets\n  namespace: {NAMESPACE}\ntype: Opaque\nstringData:\n{data}"
            ),
            volume: "        - name: secrets\n          secret:\n            secretName: flotilla-agent-secrets\n            defaultMode: 0400\n".to_string(),
            mount: "            - name: secrets\n              mountPath: /etc/flotilla\n              readOnly: true\n".to_string(),
        }
    }
}

/// The header, the anchor CRD, the agent's namespace and its service account.
fn namespace_documents(cluster: &str) -> String {
    let crd = ANCHOR_CRD
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    format!(
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
"
    )
}

/// The agent's state volume claim.
fn state_claim(size: &str) -> String {
    format!(
        "---
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
"
    )
}

/// The agent's Deployment: one replica, non-root, read-only, with `args`.
fn deployment(install: &Install, args: &[String], secret: &Secrets) -> String {
    let image = &install.image;
    let args_yaml: String = args
        .iter()
        .map(|a| format!("            - {}\n", quoted(a)))
        .collect();
    let (secret_mount, secret_volume) = (&secret.mount, &secret.volume);
    format!(
        "---
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
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREDS: &str = "-----BEGIN NATS USER JWT-----\nj.w.t\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\nSUAEXAMPLE\n------END USER NKEY SEED------\n";

    /// The documents of a manifest, parsed.
    fn documents(yaml: &str) -> Vec<serde_json::Value> {
        use serde::Deserialize;
        serde_yaml::Deserializer::from_str(yaml)
            .map(|d| serde_json::Value::deserialize(d).unwrap())
            .filter(|v| !v.is_null())
            .collect()
    }

    fn find<'a>(docs: &'a [serde_json::Value], kind: &str) -> Option<&'a serde_json::Value> {
        docs.iter().find(|d| d["kind"] == kind)
    }

    #[test]
    fn a_join_credential_goes_into_the_secret_and_the_agent_registers_with_it() {
        let install = Install::new("edge-1", "tls://hub:4222").nats_ca("PEM\n");
        let yaml = manifests(&install, &Bootstrap::JoinToken(CREDS.into())).unwrap();
        let docs = documents(&yaml);
        let secret = find(&docs, "Secret").unwrap();
        assert_eq!(secret["stringData"]["bootstrap.creds"], CREDS);
        assert_eq!(secret["stringData"]["ca.pem"], "PEM\n");
        assert!(yaml.contains("# bootstrap.creds: a join credential for this cluster only\n"));
        let args = &find(&docs, "Deployment").unwrap()["spec"]["template"]["spec"]["containers"][0]
            ["args"];
        let args: Vec<&str> = args
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(args.contains(&"--bootstrap-creds=/etc/flotilla/bootstrap.creds"));
        assert!(args.contains(&"--nats-ca=/etc/flotilla/ca.pem"));
        assert!(args.contains(&"--cluster-name=edge-1"));
    }

    #[test]
    fn shared_credentials_are_marked_as_the_fleet_wide_ones() {
        let install = Install::new("edge-1", "tls://hub:4222").nats_ca("PEM\n");
        let yaml = manifests(&install, &Bootstrap::Shared(CREDS.into())).unwrap();
        assert!(yaml.contains("# bootstrap.creds: the fleet-wide bootstrap credentials\n"));
        assert_eq!(
            find(&documents(&yaml), "Secret").unwrap()["stringData"]["bootstrap.creds"],
            CREDS
        );
    }

    #[test]
    fn a_credential_is_never_rendered_for_a_server_the_agent_cannot_authenticate() {
        let creds = Bootstrap::JoinToken(CREDS.into());
        let e = manifests(&Install::new("edge-1", "tls://hub:4222"), &creds)
            .unwrap_err()
            .to_string();
        assert!(e.contains("CA pinned") && e.contains("--nats-ca"), "{e}");
        let e = manifests(&Install::new("edge-1", "nats://hub:4222"), &creds)
            .unwrap_err()
            .to_string();
        assert!(e.contains("TLS is required"), "{e}");
        let mut first = Install::new("edge-1", "tls://hub:4222").nats_ca("PEM\n");
        first.nats_tls_first = true;
        let yaml = manifests(&first, &creds).unwrap();
        assert!(yaml.contains("\"--nats-tls-first\""), "{yaml}");
    }

    #[test]
    fn a_plain_hub_gets_no_secret() {
        let install = Install::new("edge-1", "nats://hub:4222").label("env=prod");
        let yaml = manifests(&install, &Bootstrap::None).unwrap();
        let docs = documents(&yaml);
        assert!(find(&docs, "Secret").is_none());
        assert!(!yaml.contains("--bootstrap-creds") && !yaml.contains("name: secrets"));
        assert!(yaml.contains("\"--label=env=prod\""));
        // The CRD, namespace, account, ClusterRole and binding, volume claim and Deployment.
        assert_eq!(docs.len(), 7, "{yaml}");
    }

    #[test]
    fn every_problem_is_named_at_once() {
        let install = Install::new("Bad_Name", "nats://hub:4222").label("novalue");
        let Problems(e) = manifests(&install, &Bootstrap::None).unwrap_err();
        assert!(
            e.iter().any(|p| p.starts_with("CLUSTER \"Bad_Name\"")),
            "{e:?}"
        );
        assert!(
            e.iter().any(|p| p.starts_with("--label \"novalue\"")),
            "{e:?}"
        );
    }
}
