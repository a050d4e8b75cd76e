//! The hub's controller families, in start order: the one list from which the controllers'
//! gRPC services, the access table, forwarding, report sinks, start, stop and the
//! subscriptions waited for all follow ([`crate::controller`]). Adding a family is a line here
//! and a folder of its own.
//!
//! They run on the one hub holding the controllers' unit, start when it takes the unit
//! (loading their state from the store) and stop when it gives it up or loses it; every write
//! they make is stamped with the unit's epoch and refused once its fence is gone.

use crate::Config;
use crate::controller::{Families, Family, Served};
use crate::grpc::access::{Table, Twice};
use crate::serviceaccount;
use crate::{
    addon, clusterset, gitops, importpolicy, mirrorpeer, placement, policy, recovery, replicaset,
};

/// Every family, each after the ones whose handles it needs (stopped in reverse), with its
/// settings.
pub fn families(config: &Config) -> Vec<Box<dyn Family>> {
    let s = &config.families;
    vec![
        Served::<clusterset::family::Sets>::boxed(()),
        Served::<placement::family::PlacementFamily>::boxed(s.placement.clone()),
        Served::<replicaset::family::ReplicaSetFamily>::boxed(()),
        Served::<addon::family::AddOnFamily>::boxed(s.addons.clone()),
        Served::<policy::family::PolicyFamily>::boxed(()),
        // After the policies: a GitRepo's credentials are their hub Secrets.
        Served::<gitops::family::GitRepoFamily>::boxed(s.gitops.clone()),
        Served::<serviceaccount::family::AccountFamily>::boxed(s.service_accounts.clone()),
        Served::<importpolicy::family::ImportFamily>::boxed(s.import_policies.clone()),
        Served::<mirrorpeer::family::PeerFamily>::boxed(s.mirror_peers.clone()),
        Served::<recovery::family::RecoveryFamily>::boxed(()),
        Served::<crate::info::family::InfoFamily>::boxed(()),
    ]
}

/// The families' settings (the hub's `Config::families`): one field a family with settings,
/// each its recipe's `Settings`.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Placements.
    pub placement: placement::PlacementConfig,
    /// Add-ons.
    pub addons: addon::AddOnConfig,
    /// ManagedServiceAccounts: the sealing key of their tokens (the same key seals the calls
    /// and reports forwarded between hubs; `--sealing-key-file`, read by the binary).
    pub service_accounts: serviceaccount::MsaConfig,
    /// ClusterImportPolicies: how their task paces itself.
    pub import_policies: importpolicy::ImportConfig,
    /// MirrorPeers: how their task pokes peers.
    pub mirror_peers: mirrorpeer::MirrorPeerConfig,
    /// GitRepos: the fetch worker, its cache and bounds.
    pub gitops: gitops::GitOpsConfig,
}

/// The families' flags, each family's from its `family.rs` (the `flotilla-hub` binary
/// flattens them into its own).
#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Flags {
    #[command(flatten)]
    placement: placement::family::Flags,
    #[command(flatten)]
    addons: addon::family::Flags,
    #[command(flatten)]
    import_policies: importpolicy::family::Flags,
    #[command(flatten)]
    mirror_peers: mirrorpeer::family::Flags,
    #[command(flatten)]
    gitops: gitops::family::Flags,
}

impl Flags {
    /// The settings they give (the rest at their defaults); each problem is pushed to
    /// `errors`, so the binary reports every one at once.
    pub fn settings(&self, errors: &mut Vec<String>) -> Settings {
        Settings {
            placement: self.placement.settings(errors),
            addons: self.addons.settings(errors),
            service_accounts: serviceaccount::MsaConfig::default(),
            import_policies: self.import_policies.settings(errors),
            mirror_peers: self.mirror_peers.settings(errors),
            gitops: self.gitops.settings(errors),
        }
    }
}

/// The hub's access table: the core's rows and those of every family in the list (what the
/// API's tokens decide by, [`crate::grpc::auth::Tokens::with_access`]).
pub fn access(config: &Config) -> Result<Table, Twice> {
    Families::access(&families(config))
}

#[cfg(test)]
mod tests;
