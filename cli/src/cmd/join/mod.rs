//! `flotilla join CLUSTER --nats-url URL …`: prints the manifests that install the agent on a
//! spoke (as `clusteradm join` does), to pipe into `kubectl apply -f -` on that cluster:
//!
//! The AppliedManifestWork CRD (the anchor of each work's resources), namespace
//! `flotilla-agent`, a ServiceAccount, its RBAC ([`rbac`]: least privilege unless
//! `--rbac cluster-admin`), a Secret with the agent's registration credential and the NATS CA, a
//! PersistentVolumeClaim for the agent's state directory (its key, its credentials and its works
//! survive restarts), and a one-replica Deployment running `flotilla-agent --backend kubernetes`
//! with the in-cluster configuration.
//!
//! The credential ([`Bootstrap`]): by default the hub is asked for a join credential for this one
//! cluster (`ClusterService.CreateJoinToken`, an admin call; `--join-ttl`, `--accept`). A hub
//! without secure mode answers FAILED_PRECONDITION, and the manifest then carries no credential.
//! `--bootstrap-creds FILE` puts the fleet-wide bootstrap credentials in instead (the weaker
//! choice), and `--offline` asks the hub nothing.
//!
//! - [`rbac`]: the rules of each `--rbac` mode, and their documents.
//! - [`manifest`]: the manifests from an [`Install`] and a [`Bootstrap`], in one pure function
//!   tests call with any credential text.

pub mod manifest;
pub mod rbac;

pub use manifest::{Bootstrap, Install, manifests};

use crate::hub::Hub;
use anyhow::{Context, anyhow, bail};
use flotilla_api::v1::{CreateJoinTokenRequest, JoinToken};
use std::path::PathBuf;
use std::time::Duration;
use tonic::Code;

/// The AppliedManifestWork CRD: the anchor the agent makes every work's resources owned by.
pub const ANCHOR_CRD: &str = include_str!("../../../../deploy/appliedmanifestwork-crd.yaml");

/// The namespace the agent runs in.
pub const NAMESPACE: &str = "flotilla-agent";

/// The default lifetime of a join credential.
pub const DEFAULT_JOIN_TTL: &str = "24h";

/// The long help of `flotilla join`: what each RBAC mode grants and why, and the credentials.
pub const HELP: &str = "\
Credentials:
  By default the hub (--hub, with an admin --token) is asked for a join credential for CLUSTER
  alone: it may only ask to register that name, expires after --join-ttl, and is spent by the
  first agent that registers with it (--accept pre-approves that agent; --set SET puts its
  cluster in that cluster set — a --label cannot, the hub drops reserved labels). A hub without secure
  mode issues none; the manifest then carries no credential. --bootstrap-creds FILE puts the
  fleet-wide bootstrap credentials in instead: weaker, the same secret on every spoke, valid
  until the hub's keys are rotated, and whoever copies it from any spoke may ask to register any
  name. --offline asks the hub nothing.

RBAC (--rbac least-privilege, the default): exactly what the agent calls with its own identity.
  Cluster-wide:
  - get /version, /readyz, /api, /apis and below: version, health, discovery of kinds
  - nodes get/list/watch: capacity, allocatable, node count, platform and product claims
  - namespaces get/list/watch/create/patch: kube-system's UID (the id.k8s.io claim), and the
    managed namespaces of ManagedClusterSets (one label, server-side apply)
  - subjectaccessreviews create: the check of a work's executor
  - appliedmanifestworks get/create/delete: each work's anchor, owner of its resources
  - get/list/watch of configmaps, services, serviceaccounts, persistentvolumeclaims,
    deployments, statefulsets, daemonsets, jobs, cronjobs, ingresses, networkpolicies, roles,
    rolebindings, and each --allow GROUP/RESOURCE: observing works' resources, proxy queries
  No Secret outside the namespaces named below, and no write of any workload: the agent writes
  a work's manifests as the work's executor (its ServiceAccount), whose rights the cluster's
  admin grants; a work without an executor cannot be applied.
  Per --executor-namespace NS (a Role and RoleBinding in NS, which must exist):
  - serviceaccounts impersonate: acting as the works' executors of NS (the agent sends the
    ServiceAccount alone; the API server adds its groups), never cluster-wide
  Per --addon-namespace NS (a Role and RoleBinding in NS, which must exist):
  - secrets get/list/watch/create/update/delete: the hub credentials of add-ons installed in NS
    (secure mode)
  Nothing in its own namespace: its credentials are mounted, its state is on the volume.

RBAC (--rbac cluster-admin): every verb on every resource. For fleets that apply works without
  executors. The risk: the agent can read every Secret and write anything, and so can whoever
  controls the agent or may apply works on the hub. A warning is printed.";

/// `flotilla join` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct JoinArgs {
    /// Name of the cluster (DNS-1123 label).
    pub cluster: String,
    /// NATS URL the agent reaches the hub's NATS (or its site's leaf node) at.
    #[arg(long)]
    pub nats_url: String,
    /// Lifetime of the join credential the hub issues (`30m`, `24h`, `7d`, `1h30m`).
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_JOIN_TTL, value_parser = parse_ttl,
          conflicts_with_all = ["bootstrap_creds", "offline"])]
    pub join_ttl: Duration,
    /// Pre-approve: the hub accepts the first agent that registers with the join credential.
    #[arg(long, conflicts_with_all = ["bootstrap_creds", "offline"])]
    pub accept: bool,
    /// The cluster set the cluster joins when its agent registers with the join credential
    /// (`--label` cannot choose it: the hub drops the set label from a registration).
    #[arg(long = "set", value_name = "SET", conflicts_with_all = ["bootstrap_creds", "offline"])]
    pub cluster_set: Option<String>,
    /// Put these fleet-wide bootstrap credentials (`flotilla-hub init` wrote them) in the
    /// Secret instead of a join credential for this cluster: the weaker choice, the same secret
    /// on every spoke.
    #[arg(long, value_name = "FILE", conflicts_with = "offline")]
    pub bootstrap_creds: Option<PathBuf>,
    /// Ask the hub nothing: no credential in the manifest (a hub without secure mode).
    #[arg(long)]
    pub offline: bool,
    /// CA certificate of the NATS server's TLS (`secure/tls/ca.pem`). Required over TLS with
    /// a credential in the manifest: it is what authenticates the hub's server to the agent.
    #[arg(long, value_name = "FILE")]
    pub nats_ca: Option<PathBuf>,
    /// The NATS server starts TLS before its first line (`flotilla-hub init --tls-first`).
    #[arg(long)]
    pub nats_tls_first: bool,
    /// Agent image.
    #[arg(long, default_value = manifest::DEFAULT_IMAGE)]
    pub image: String,
    /// RBAC of the agent (see below).
    #[arg(long, value_enum, default_value_t = rbac::Mode::LeastPrivilege)]
    pub rbac: rbac::Mode,
    /// More resources the agent may read (get, list, watch) cluster-wide, to observe works'
    /// resources of that kind: `GROUP/RESOURCE`, `/RESOURCE` for the core group; repeatable.
    #[arg(long = "allow", value_name = "GROUP/RESOURCE")]
    pub allow: Vec<String>,
    /// A namespace of works' executors: the agent may impersonate its ServiceAccounts, and
    /// write works' manifests as them; repeatable.
    #[arg(long = "executor-namespace", value_name = "NS")]
    pub executor_namespaces: Vec<String>,
    /// An add-on install namespace: the agent may keep add-ons' hub credentials there as
    /// Secrets (secure mode); repeatable.
    #[arg(long = "addon-namespace", value_name = "NS")]
    pub addon_namespaces: Vec<String>,
    /// Label asked for at registration (repeatable): key=value.
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// Size of the state volume.
    #[arg(long, default_value = manifest::DEFAULT_STATE_SIZE)]
    pub state_size: String,
}

/// Parses a lifetime: whole numbers each followed by `s`, `m`, `h` or `d` (`90m`, `1h30m`,
/// `7d`); at least one second.
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?}: want a duration such as 30m, 24h, 7d or 1h30m");
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(bad)?;
        number.clear();
    }
    if !number.is_empty() || total == 0 {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// Where the agent's credential comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A join credential the hub issues now.
    Hub {
        /// Its lifetime.
        ttl: Duration,
        /// Pre-approve the agent that registers with it.
        accept: bool,
        /// The set its cluster joins.
        cluster_set: Option<String>,
    },
    /// Given locally: the shared bootstrap credentials, or none (`--offline`).
    Given(Bootstrap),
}

/// A checked `flotilla join`: what to install, and where its credential comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Join {
    /// Everything but the credential.
    pub install: Install,
    /// The credential's source.
    pub source: Source,
}

impl Join {
    /// Whether the hub must be asked (and so connected to).
    pub fn asks_hub(&self) -> bool {
        matches!(self.source, Source::Hub { .. })
    }
}

/// Checks the arguments and reads the local files, before anything touches the network: every
/// problem at once.
pub fn prepare(args: &JoinArgs) -> Result<Join, manifest::Problems> {
    let mut errors = Vec::new();
    let mut read = |flag: &str, path: &Option<PathBuf>| {
        path.as_ref()
            .and_then(|p| match std::fs::read_to_string(p) {
                Ok(text) => Some(text),
                Err(e) => {
                    errors.push(format!("{flag} {}: {e}", p.display()));
                    None
                }
            })
    };
    let shared = read("--bootstrap-creds", &args.bootstrap_creds);
    let nats_ca = read("--nats-ca", &args.nats_ca);
    let mut allowed = Vec::new();
    for a in &args.allow {
        match rbac::parse_allow(a) {
            Ok(entry) => allowed.push(entry),
            Err(e) => errors.push(e),
        }
    }
    // Checked before the hub is asked for a credential: a manifest whose agent could not
    // authenticate the server must not cost one. (The rest of the transport rules are checked
    // with the manifest, once it is known whether it holds a credential.)
    if !args.offline
        && nats_ca.is_none()
        && flotilla_api::transport::tls_required(false, &args.nats_url)
    {
        errors.push(format!(
            "--nats-url {}: a manifest with a credential over TLS needs the server's CA \
             (--nats-ca secure/tls/ca.pem): it is what authenticates the hub's server to the \
             agent; with the system's roots any public certificate for a host on the path would \
             be trusted",
            args.nats_url
        ));
    }
    let install = Install {
        cluster: args.cluster.clone(),
        nats_url: args.nats_url.clone(),
        nats_ca,
        nats_tls_first: args.nats_tls_first,
        image: args.image.clone(),
        rbac: rbac::Rbac {
            mode: args.rbac,
            read: allowed,
            executor_namespaces: args.executor_namespaces.clone(),
            addon_namespaces: args.addon_namespaces.clone(),
        },
        labels: args.labels.clone(),
        state_size: args.state_size.clone(),
    };
    errors.extend(install.check());
    if !errors.is_empty() {
        return Err(manifest::Problems(errors));
    }
    let source = match (shared, args.offline) {
        (Some(text), _) => Source::Given(Bootstrap::Shared(text)),
        (None, true) => Source::Given(Bootstrap::None),
        (None, false) => Source::Hub {
            ttl: args.join_ttl,
            accept: args.accept,
            cluster_set: args.cluster_set.clone(),
        },
    };
    Ok(Join { install, source })
}

/// What the hub answered to a request for a join credential.
#[derive(Debug, Clone, PartialEq)]
pub enum Issued {
    /// The credential.
    Token(JoinToken),
    /// The hub is not in secure mode (FAILED_PRECONDITION, with the hub's words): there is no
    /// credential to give.
    NotSecure(String),
}

/// What to tell the admin about a join credential: its key (fingerprint and whole), expiry,
/// whether it pre-approves, and the cluster set it puts its cluster in.
pub fn token_summary(token: &JoinToken, accept: bool) -> String {
    let expires = token
        .expires
        .as_ref()
        .map(flotilla_api::meta::rfc3339)
        .unwrap_or_default();
    format!(
        "key {} ({}), valid until {expires}{}{}",
        flotilla_api::fingerprint::of(&token.public_key),
        token.public_key,
        if accept { ", pre-approved" } else { "" },
        if token.cluster_set.is_empty() {
            String::new()
        } else {
            format!(", cluster set {}", token.cluster_set)
        }
    )
}

/// Asks the hub for a join credential for `cluster` (`CreateJoinToken`; admin only); with
/// `cluster_set`, the cluster joins that set when an agent registers with it.
pub async fn request_join_token(
    hub: &Hub,
    cluster: &str,
    ttl: Duration,
    accept: bool,
    cluster_set: Option<&str>,
) -> anyhow::Result<Issued> {
    let request = CreateJoinTokenRequest {
        cluster_name: cluster.to_string(),
        ttl_seconds: i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX),
        accept,
        cluster_set: cluster_set.unwrap_or_default().to_string(),
    };
    let token = match hub.clusters().create_join_token(request).await {
        Ok(answer) => answer.into_inner(),
        Err(status) if status.code() == Code::FailedPrecondition => {
            return Ok(Issued::NotSecure(status.message().to_string()));
        }
        Err(status) if status.code() == Code::Unimplemented => {
            return Err(hub.error(status)).context(
                "the hub issues no join credentials (an older version): pass --bootstrap-creds \
                 FILE (secure hub) or --offline",
            );
        }
        Err(status) => return Err(hub.error(status)),
    };
    if token.cluster_name != cluster || token.creds.trim().is_empty() {
        bail!(
            "the hub answered a join credential for {:?}{} instead of one for {cluster:?}",
            token.cluster_name,
            if token.creds.trim().is_empty() {
                " without credentials"
            } else {
                ""
            }
        );
    }
    Ok(Issued::Token(token))
}

/// Gets the credential (from `hub` when the source says so), then prints the manifests;
/// warnings and notes go to stderr.
pub async fn run(join: Join, hub: Option<&Hub>) -> anyhow::Result<()> {
    let cluster = &join.install.cluster;
    let bootstrap = match join.source {
        Source::Given(bootstrap) => bootstrap,
        Source::Hub {
            ttl,
            accept,
            cluster_set,
        } => {
            let hub =
                hub.ok_or_else(|| anyhow!("flotilla join: no hub to ask for a join credential"))?;
            match request_join_token(hub, cluster, ttl, accept, cluster_set.as_deref()).await? {
                Issued::Token(token) => {
                    eprintln!(
                        "note: the manifest holds a join credential for {cluster} ({}); the first \
                         agent that registers with it spends it",
                        token_summary(&token, accept)
                    );
                    Bootstrap::JoinToken(token.creds)
                }
                Issued::NotSecure(reason) if accept => bail!(
                    "--accept: the hub at {} issues no join credential ({reason}); accept the \
                     cluster with `flotilla accept {cluster}` once its agent registers",
                    hub.endpoint()
                ),
                Issued::NotSecure(reason) => {
                    eprintln!(
                        "note: the hub at {} issues no join credential ({reason}): the manifest \
                         carries no credential, for a hub without secure mode",
                        hub.endpoint()
                    );
                    Bootstrap::None
                }
            }
        }
    };
    let text = manifests(&join.install, &bootstrap)?;
    for warning in rbac::warnings(&join.install.rbac) {
        eprintln!("{warning}");
    }
    print!("{text}");
    Ok(())
}

/// A string as a double-quoted YAML (JSON) scalar.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        join: JoinArgs,
    }

    fn args(extra: &[&str]) -> Result<JoinArgs, clap::Error> {
        let base = [
            "flotilla-join",
            "edge-1",
            "--nats-url",
            "nats://127.0.0.1:4222",
        ];
        Cli::try_parse_from(base.iter().chain(extra)).map(|c| c.join)
    }

    #[test]
    fn lifetimes_take_units_and_refuse_nothing_or_garbage() {
        assert_eq!(parse_ttl("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_ttl("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_ttl("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_ttl("45s"), Ok(Duration::from_secs(45)));
        for bad in [
            "",
            "0s",
            "24",
            "h",
            "1.5h",
            "-1h",
            "1w",
            "99999999999999999999d",
        ] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn by_default_the_hub_is_asked_for_a_join_credential_for_a_day() {
        let join = prepare(&args(&[]).unwrap()).unwrap();
        assert_eq!(
            join.source,
            Source::Hub {
                ttl: Duration::from_secs(86_400),
                accept: false,
                cluster_set: None,
            }
        );
        assert_eq!(join.install.rbac.mode, rbac::Mode::LeastPrivilege);
        let join =
            prepare(&args(&["--join-ttl", "2h", "--accept", "--set", "edge"]).unwrap()).unwrap();
        assert_eq!(
            join.source,
            Source::Hub {
                ttl: Duration::from_secs(7_200),
                accept: true,
                cluster_set: Some("edge".into()),
            }
        );
    }

    #[test]
    fn shared_credentials_or_offline_ask_the_hub_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bootstrap.creds");
        std::fs::write(&file, "shared").unwrap();
        let join = prepare(&args(&["--bootstrap-creds", file.to_str().unwrap()]).unwrap()).unwrap();
        assert_eq!(
            join.source,
            Source::Given(Bootstrap::Shared("shared".into()))
        );
        assert!(!join.asks_hub());
        let join = prepare(&args(&["--offline"]).unwrap()).unwrap();
        assert_eq!(join.source, Source::Given(Bootstrap::None));
        // A join credential's flags make no sense with either.
        for extra in [
            &["--offline", "--accept"][..],
            &["--offline", "--join-ttl", "1h"],
            &["--bootstrap-creds", "f", "--accept"],
            &["--bootstrap-creds", "f", "--offline"],
        ] {
            assert!(args(extra).is_err(), "{extra:?}");
        }
    }

    #[test]
    fn every_local_problem_is_reported_at_once_before_the_network() {
        let e = prepare(
            &args(&[
                "--nats-ca",
                "/no/such/ca.pem",
                "--allow",
                "nogroup",
                "--executor-namespace",
                "Bad_NS",
                "--label",
                "novalue",
            ])
            .unwrap(),
        )
        .unwrap_err()
        .to_string();
        for part in [
            "--nats-ca /no/such/ca.pem",
            "--allow \"nogroup\"",
            "--executor-namespace \"Bad_NS\"",
            "--label \"novalue\"",
        ] {
            assert!(e.contains(part), "{part}: {e}");
        }
    }

    #[test]
    fn admin_is_still_accepted_for_cluster_admin() {
        let join = prepare(&args(&["--offline", "--rbac", "admin"]).unwrap()).unwrap();
        assert_eq!(join.install.rbac.mode, rbac::Mode::ClusterAdmin);
    }
}
