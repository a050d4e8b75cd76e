//! One client per service of the hub's API, each over the hub's one channel, with the message
//! limits its objects need.

use super::{Hub, HubChannel};
use flotilla_api::v1::add_on_service_client::AddOnServiceClient;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;

/// Largest placement message: a placement over 100,000 clusters has 1,000 decision pages. Lists
/// of ManagedClusterAddOns (one per cluster) are bounded the same way.
const MAX_PLACEMENT_MESSAGE: usize = 64 * 1024 * 1024;
/// Largest work message: works carry up to 500 KiB of manifests; the largest event plus
/// headroom.
const MAX_WORK_MESSAGE: usize = 16 * 1024 * 1024;

impl Hub {
    /// ManagedClusters.
    pub fn clusters(&self) -> ClusterServiceClient<HubChannel> {
        ClusterServiceClient::new(self.channel())
    }

    /// ManagedClusterSets and their bindings.
    pub fn sets(&self) -> ClusterSetServiceClient<HubChannel> {
        ClusterSetServiceClient::new(self.channel())
    }

    /// Placements, their decisions, and AddOnPlacementScores.
    pub fn placements(&self) -> PlacementServiceClient<HubChannel> {
        PlacementServiceClient::new(self.channel()).max_decoding_message_size(MAX_PLACEMENT_MESSAGE)
    }

    /// GitRepos.
    pub fn git_repos(
        &self,
    ) -> flotilla_api::v1::git_repo_service_client::GitRepoServiceClient<HubChannel> {
        flotilla_api::v1::git_repo_service_client::GitRepoServiceClient::new(self.channel())
    }

    /// ManifestWorkReplicaSets.
    pub fn replica_sets(
        &self,
    ) -> flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient<HubChannel> {
        flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient::new(self.channel())
            .max_decoding_message_size(MAX_WORK_MESSAGE)
            .max_encoding_message_size(MAX_WORK_MESSAGE)
    }

    /// Add-ons: ClusterManagementAddOns, ManagedClusterAddOns, AddOnTemplates and
    /// AddOnDeploymentConfigs, and enabling/disabling add-ons. Templates carry a work's
    /// manifests; a list of ManagedClusterAddOns spans the fleet.
    pub fn addons(&self) -> AddOnServiceClient<HubChannel> {
        AddOnServiceClient::new(self.channel())
            .max_decoding_message_size(MAX_PLACEMENT_MESSAGE)
            .max_encoding_message_size(MAX_WORK_MESSAGE)
    }

    /// Governance: Policies, PlacementBindings, PolicySets and PlacementRules (a policy's
    /// status lists every decided cluster).
    pub fn policies(
        &self,
    ) -> flotilla_api::v1::policy_service_client::PolicyServiceClient<HubChannel> {
        flotilla_api::v1::policy_service_client::PolicyServiceClient::new(self.channel())
            .max_decoding_message_size(MAX_WORK_MESSAGE)
            .max_encoding_message_size(MAX_WORK_MESSAGE)
    }

    /// ClusterImportPolicies.
    pub fn import_policies(
        &self,
    ) -> flotilla_api::v1::import_policy_service_client::ImportPolicyServiceClient<HubChannel> {
        flotilla_api::v1::import_policy_service_client::ImportPolicyServiceClient::new(
            self.channel(),
        )
    }

    /// MirrorPeers.
    pub fn mirror_peers(
        &self,
    ) -> flotilla_api::v1::mirror_peer_service_client::MirrorPeerServiceClient<HubChannel> {
        flotilla_api::v1::mirror_peer_service_client::MirrorPeerServiceClient::new(self.channel())
    }

    /// What the hub runs (its version).
    pub fn info(&self) -> flotilla_api::v1::info_service_client::InfoServiceClient<HubChannel> {
        flotilla_api::v1::info_service_client::InfoServiceClient::new(self.channel())
    }

    /// Who the hub takes the caller for (`flotilla whoami`).
    pub fn access(
        &self,
    ) -> flotilla_api::v1::access_service_client::AccessServiceClient<HubChannel> {
        flotilla_api::v1::access_service_client::AccessServiceClient::new(self.channel())
    }

    /// The recovery window and its orphans.
    pub fn recovery(
        &self,
    ) -> flotilla_api::v1::recovery_service_client::RecoveryServiceClient<HubChannel> {
        flotilla_api::v1::recovery_service_client::RecoveryServiceClient::new(self.channel())
    }

    /// ManagedServiceAccounts and their tokens.
    pub fn service_accounts(
        &self,
    ) -> flotilla_api::v1::service_account_service_client::ServiceAccountServiceClient<HubChannel>
    {
        flotilla_api::v1::service_account_service_client::ServiceAccountServiceClient::new(
            self.channel(),
        )
    }

    /// ManifestWorks and the read-only proxy to spokes.
    pub fn works(&self) -> WorkServiceClient<HubChannel> {
        WorkServiceClient::new(self.channel())
            .max_decoding_message_size(MAX_WORK_MESSAGE)
            .max_encoding_message_size(MAX_WORK_MESSAGE)
    }
}
