//! One module per verb, as in mini-redis's `cmd/`: the verb's subcommand table (clap) and its
//! `run`. What a verb shows of each kind comes from [`crate::kind`]; calls go through
//! [`crate::hub::Hub`], so every failure is worded once.
//!
//! - [`get`]: list or show clusters, sets, bindings, works, placements, decisions, scores,
//!   replica sets and the add-on kinds.
//! - [`describe`]: one cluster, work or placement in detail.
//! - [`apply`]: create or update resources from OCM YAML.
//! - [`delete`]: delete one resource.
//! - [`watch`]: stream changes of clusters, works or placements.
//! - [`policy`]: `policy status NAME [--watch]`: a policy's compliance per binding and overall;
//!   `policy render|explain NAME -c CLUSTER`: one cluster's copy, and why it stands there.
//! - [`gitrepo`]: `gitrepo sync NAME [--wait]`: fetch a GitRepo now, and say what it found.
//! - [`rollout`]: rollout status of a ManifestWorkReplicaSet (progress bars, `--watch`).
//! - [`addon`]: enable and disable add-ons, and their rollout status (progress bars, `--watch`).
//! - [`progress`]: the progress bars and the `--watch` loop `rollout` and `addon` share.
//! - [`kubeconfig`]: a kubeconfig for the hub's cluster proxy (`kubectl` to a spoke through the
//!   hub with the caller's token).
//! - [`proxy`]: read-only queries of a spoke's resources through its agent.
//! - [`recovery`]: the recovery window after a restore: status, orphans' decisions, finish.
//! - [`version`]: the CLI's and the hub's versions.
//! - [`whoami`]: who the hub takes the caller for, and the roles its grants give it.
//! - [`cluster_edits`]: accept, deny, label and taint clusters.
//! - [`join`]: the manifests that install the agent on a spoke, with a join credential from a
//!   secure hub.

pub mod addon;
pub mod apply;
pub mod cluster_edits;
pub mod delete;
pub mod describe;
pub mod get;
pub mod gitrepo;
pub mod join;
pub mod kubeconfig;
pub mod policy;
pub mod progress;
pub mod proxy;
pub mod recovery;
pub mod rollout;
pub mod version;
pub mod watch;
pub mod whoami;

/// Prints a rendering of a command's result.
fn print(rendering: Result<String, crate::output::RenderError>) -> anyhow::Result<()> {
    print!("{}", rendering?);
    Ok(())
}
