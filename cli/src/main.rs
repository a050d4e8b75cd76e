//! `flotilla`: the operator CLI. Talks to the hub's gRPC API (`--hub`, env `FLOTILLA_HUB`).
//!
//! This file is the flags and the dispatch; every verb lives in `flotilla_cli::cmd`. Bad flags
//! exit with clap's usage error; a bearer token refused for plain http off loopback
//! (`flotilla_cli::hub::Cleartext`) exits 64 (bad configuration) before any connection; any other
//! failure prints one `error:` line and exits 1.

use anyhow::{Context, Result};
use clap::{ArgAction, Parser, Subcommand};
use flotilla_cli::cmd::{
    self, delete::DeleteWhat, describe::DescribeWhat, get::GetWhat, proxy::ProxyWhat,
    watch::WatchWhat,
};
use flotilla_cli::hub::{Cleartext, Hub};
use flotilla_cli::output::Format;
use std::process::ExitCode;

/// Operate a Flotilla hub: clusters, cluster sets and bindings, works, placements, add-ons.
#[derive(Parser, Debug)]
#[command(name = "flotilla", version)]
struct Cli {
    /// Hub gRPC endpoint, or several hubs of one control plane comma-separated (tried in order;
    /// an unreachable or unavailable hub is passed over).
    #[arg(
        long,
        global = true,
        env = "FLOTILLA_HUB",
        default_value = "http://127.0.0.1:50051"
    )]
    hub: String,
    /// Bearer token for a hub that requires one: a token of its token file, or an ID token of
    /// its OIDC issuer. Wins over --exec-command.
    #[arg(long, global = true, env = "FLOTILLA_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// An exec credential plugin, as kubectl's (`client.authentication.k8s.io/v1`): this
    /// command prints an ExecCredential whose status.token is the bearer (e.g. `kubectl`
    /// with --exec-arg oidc-login --exec-arg get-token …). Run before connecting, and again
    /// once if the hub answers UNAUTHENTICATED.
    #[arg(long, global = true, env = "FLOTILLA_EXEC_COMMAND")]
    exec_command: Option<String>,
    /// An argument of --exec-command (repeatable, in order).
    #[arg(
        long,
        global = true,
        allow_hyphen_values = true,
        requires = "exec_command"
    )]
    exec_arg: Vec<String>,
    /// NAME=VALUE in --exec-command's environment (repeatable).
    #[arg(long, global = true, value_parser = flotilla_cli::exec_credential::parse_env, requires = "exec_command")]
    exec_env: Vec<(String, String)>,
    /// Whether --exec-command may use the terminal (stdin): never, if-available, always.
    #[arg(long, global = true, value_enum, default_value_t = flotilla_cli::exec_credential::Interactive::IfAvailable)]
    exec_interactive: flotilla_cli::exec_credential::Interactive,
    /// CA bundle (PEM) to verify an https:// hub.
    #[arg(long, global = true, env = "FLOTILLA_CA")]
    ca: Option<std::path::PathBuf>,
    /// Send the token over plain http:// to a hub that is not on this host (loopback) anyway,
    /// with a warning: anyone on the network path can read it. Refused without this flag.
    #[arg(
        long,
        global = true,
        env = "FLOTILLA_INSECURE",
        action = ArgAction::SetTrue,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    insecure: bool,
    /// How long to retry a call the hub answers "unavailable" (its store is electing a leader
    /// after a NATS node was lost), in seconds from the call's first attempt; waits double from
    /// 0.5 s, each retry said on stderr. Only calls safe to repeat are retried (reads, apply,
    /// delete, accept/deny/label/taint); 0: never.
    #[arg(
        long,
        global = true,
        env = "FLOTILLA_RETRY_SECONDS",
        value_name = "SECONDS",
        default_value_t = flotilla_cli::hub::DEFAULT_RETRY_SECONDS
    )]
    retry_seconds: u64,
    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List or show resources.
    Get {
        #[command(subcommand)]
        what: GetWhat,
    },
    /// Show one resource in detail.
    Describe {
        #[command(subcommand)]
        what: DescribeWhat,
    },
    /// Accept clusters (the hub side of the double opt-in).
    Accept {
        /// Cluster names.
        #[arg(required = true)]
        clusters: Vec<String>,
        /// Accept only this agent key (the fingerprint `get clusters -o wide` shows, or the whole
        /// public key) — compare it with the one the spoke's agent logs; refused when the key
        /// waiting under the name is another. One cluster only.
        #[arg(long)]
        key: Option<String>,
    },
    /// Print a join credential for one cluster name (secure hubs): a NATS credentials file that
    /// may only ask to register that name, expires, and is spent once the agent has its own
    /// credentials. Give it to the spoke's agent as --bootstrap-creds (or use `flotilla join`,
    /// which puts it in the install manifest).
    JoinToken {
        /// The cluster name.
        cluster: String,
        /// How long it is valid (30m, 24h, 7d).
        #[arg(long, default_value = "24h", value_parser = cmd::join::parse_ttl)]
        ttl: std::time::Duration,
        /// Accept the first agent that registers with it (you have already said yes).
        #[arg(long)]
        accept: bool,
        /// Put the cluster in this cluster set when an agent registers with the credential (the
        /// set may be created later). A registering agent's own labels never choose its set.
        #[arg(long = "set", value_name = "SET")]
        cluster_set: Option<String>,
    },
    /// Deny clusters: they can no longer join or report.
    Deny {
        /// Cluster names.
        #[arg(required = true)]
        clusters: Vec<String>,
    },
    /// Set (key=value) or remove (key-) labels of a cluster.
    Label {
        /// Cluster name.
        cluster: String,
        /// Edits: key=value sets, key- removes.
        #[arg(required = true)]
        labels: Vec<String>,
    },
    /// Add (key=value:Effect) or remove (key:Effect- or key-) taints of a cluster.
    Taint {
        /// Cluster name.
        cluster: String,
        /// Edits. Effects: NoSelect, PreferNoSelect, NoSelectIfNew.
        #[arg(required = true)]
        taints: Vec<String>,
    },
    /// Create or update resources from OCM YAML (multi-document); FILE or - for stdin.
    Apply {
        /// File to read.
        #[arg(short = 'f', long = "filename", required = true)]
        file: String,
        /// Namespace of namespaced documents that name none (default: `default`, as kubectl).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Write ManifestWorkReplicaSets a GitRepo writes all the same (refused otherwise: the
        /// repository is their source; the GitRepo writes over them at its next commit).
        #[arg(long)]
        force: bool,
    },
    /// Delete a resource.
    Delete {
        #[command(subcommand)]
        what: DeleteWhat,
    },
    /// Stream changes.
    Watch {
        #[command(subcommand)]
        what: WatchWhat,
    },
    /// Read-only queries of a spoke's resources, through its agent.
    Proxy {
        /// Cluster name.
        cluster: String,
        #[command(subcommand)]
        what: ProxyWhat,
    },
    /// Print a kubeconfig for CLUSTER through the hub's cluster proxy, carrying your token:
    /// `kubectl --kubeconfig <(flotilla kubeconfig edge-1) get pods -A`.
    Kubeconfig(cmd::kubeconfig::KubeconfigArgs),
    /// Print the manifests that install the agent on a spoke (pipe into `kubectl apply -f -`),
    /// with a join credential for it from a secure hub.
    #[command(after_long_help = cmd::join::HELP)]
    Join(cmd::join::JoinArgs),
    /// Governance: a policy's compliance across its clusters (`policy status NAME --watch`),
    /// its copy for one cluster (`policy render NAME -c C`) and why it stands there
    /// (`policy explain NAME -c C`).
    Policy {
        #[command(subcommand)]
        what: cmd::policy::PolicyWhat,
    },
    /// GitRepos: `gitrepo sync NAME [--wait]` fetches one now.
    Gitrepo {
        #[command(subcommand)]
        what: cmd::gitrepo::GitrepoWhat,
    },
    /// Rollouts of ManifestWorkReplicaSets.
    Rollout {
        #[command(subcommand)]
        what: cmd::rollout::RolloutWhat,
    },
    /// Add-ons: enable, disable, rollout status.
    Addon {
        #[command(subcommand)]
        what: cmd::addon::AddonWhat,
    },
    /// The recovery window after a restore: status, decide orphans (`get orphans` lists them),
    /// finish.
    Recovery {
        #[command(subcommand)]
        what: cmd::recovery::RecoveryWhat,
    },
    /// The CLI's version and the hub's (and the agent versions the hub accepts).
    Version,
    /// Who the hub takes you for — user, groups, how you were authenticated — and every role
    /// you hold under its grants, with whence (`-o yaml`/`-o json` too).
    Whoami,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<Cleartext>().is_some() {
                ExitCode::from(64)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let exec = cli
        .exec_command
        .clone()
        .map(|command| flotilla_cli::exec_credential::ExecPlugin {
            command,
            args: cli.exec_arg.clone(),
            env: cli.exec_env.clone(),
            interactive: cli.exec_interactive,
        });
    // --token wins over the plugin, as a kubeconfig's token over its exec (client-go). The
    // plugin runs when a hub is connected to (after the exposure checks), not before.
    let credentials = flotilla_cli::hub::Credentials {
        token: cli.token.clone(),
        ca: cli.ca.clone(),
        insecure: cli.insecure,
        exec: exec.filter(|_| cli.token.is_none()),
    };
    let retry = std::time::Duration::from_secs(cli.retry_seconds);
    if let Command::Kubeconfig(args) = &cli.command {
        let token = match &args.service_account {
            Some(flag) => {
                // Checked before the hub is asked anything.
                cmd::kubeconfig::service_account_name(&args.cluster, flag)?;
                let hub = Hub::connect(&cli.hub, &credentials)
                    .await?
                    .retrying_for(retry);
                Some(cmd::kubeconfig::service_account_token(&hub, args, flag).await?)
            }
            None => credentials.token.clone(),
        };
        // Without a token of its own, the kubeconfig runs the plugin as kubectl does: an
        // `exec` user, not the plugin's short-lived token written to disk.
        let exec = credentials.exec.as_ref().filter(|_| token.is_none());
        return cmd::kubeconfig::run(args, token.as_deref(), exec, credentials.ca.as_deref());
    }
    if let Command::Join(args) = &cli.command {
        let join = cmd::join::prepare(args)?;
        let hub = if join.asks_hub() {
            Some(
                Hub::connect(&cli.hub, &credentials)
                    .await
                    .context("asking the hub for a join credential (without the hub: --offline, or --bootstrap-creds FILE)")?,
            )
        } else {
            None
        };
        return cmd::join::run(join, hub.as_ref()).await;
    }
    // Parse local input before touching the network, so bad input fails fast and alone.
    let documents = match &cli.command {
        Command::Apply {
            file, namespace, ..
        } => cmd::apply::read_in(file, namespace.as_deref())?,
        _ => Vec::new(),
    };
    let addon = match &cli.command {
        Command::Addon { what } => Some(cmd::addon::prepare(what.clone())?),
        _ => None,
    };
    let hub = Hub::connect(&cli.hub, &credentials)
        .await?
        .retrying_for(retry);
    let format = cli.output;
    match cli.command {
        Command::Get { what } => cmd::get::run(&hub, format, what).await,
        Command::Describe { what } => cmd::describe::run(&hub, format, what).await,
        Command::Accept { clusters, key } => cmd::cluster_edits::accept(&hub, clusters, key).await,
        Command::JoinToken {
            cluster,
            ttl,
            accept,
            cluster_set,
        } => cmd::cluster_edits::join_token(&hub, cluster, ttl, accept, cluster_set).await,
        Command::Deny { clusters } => cmd::cluster_edits::deny(&hub, clusters).await,
        Command::Label { cluster, labels } => {
            cmd::cluster_edits::label(&hub, cluster, labels).await
        }
        Command::Taint { cluster, taints } => {
            cmd::cluster_edits::taint(&hub, cluster, taints).await
        }
        Command::Apply { force, .. } => cmd::apply::run(&hub, documents, force).await,
        Command::Delete { what } => cmd::delete::run(&hub, what).await,
        Command::Watch { what } => cmd::watch::run(&hub, format, what).await,
        Command::Proxy { cluster, what } => cmd::proxy::run(&hub, format, cluster, what).await,
        Command::Join(_) | Command::Kubeconfig(_) => Ok(()),
        Command::Rollout { what } => cmd::rollout::run(&hub, what).await,
        Command::Gitrepo { what } => cmd::gitrepo::run(&hub, what).await,
        Command::Policy { what } => cmd::policy::run(&hub, what).await,
        Command::Recovery { what } => cmd::recovery::run(&hub, what).await,
        Command::Version => cmd::version::run(&hub).await,
        Command::Whoami => cmd::whoami::run(&hub, format).await,
        Command::Addon { .. } => match addon {
            Some(action) => cmd::addon::run(&hub, action).await,
            None => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    /// clap checks its definitions (duplicate names and aliases, conflicting flags) only in
    /// debug builds at parse time: check every subcommand once here.
    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
