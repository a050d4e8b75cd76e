//! Governance as a controller family: policies, bindings, policy sets and placement rules over
//! the placements; provides [`Policies`] and takes policy status reports.
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.PolicyService` | | `GetPolicy`, `ListPolicies`, `GetPolicyDetails`, `WatchPolicies`, `ListPlacementBindings`, `ListPolicySets`, `ListPlacementRules`, `ListHubData`, `RenderPolicy` | | `ApplyPolicy`, `DeletePolicy`, `ApplyPlacementBinding`, `DeletePlacementBinding`, `ApplyPolicySet`, `DeletePolicySet`, `ApplyPlacementRule`, `DeletePlacementRule`, `ApplyHubConfigMap`, `DeleteHubConfigMap`, `ApplyHubSecret`, `DeleteHubSecret` |

use super::route::{KIND, PolicyTaker};
use super::{Buckets, Deps, Policies};
use crate::clusterset::ClusterSets;
use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::placement::Placements;
use crate::policy::grpc::PolicyApi;
use crate::report::Kind;
use flotilla_api::v1::policy_service_server::PolicyServiceServer;
use std::sync::Arc;

/// Largest policy message (object templates carry whole manifests).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The family.
pub struct PolicyFamily;

impl Recipe for PolicyFamily {
    const NAME: &'static str = "policies";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.PolicyService",
        &[
            ("ApplyPolicy", Write, NAMESPACE_WRITE),
            ("GetPolicy", Read, FILTERED),
            ("ListPolicies", Read, FILTERED),
            ("DeletePolicy", Write, NAMESPACE_WRITE),
            ("GetPolicyDetails", Read, FILTERED),
            ("WatchPolicies", Read, FILTERED),
            ("ApplyPlacementBinding", Write, NAMESPACE_WRITE),
            ("ListPlacementBindings", Read, FILTERED),
            ("DeletePlacementBinding", Write, NAMESPACE_WRITE),
            ("ApplyPolicySet", Write, NAMESPACE_WRITE),
            ("ListPolicySets", Read, FILTERED),
            ("DeletePolicySet", Write, NAMESPACE_WRITE),
            ("ApplyPlacementRule", Write, NAMESPACE_WRITE),
            ("ListPlacementRules", Read, FILTERED),
            ("DeletePlacementRule", Write, NAMESPACE_WRITE),
            ("ApplyHubConfigMap", Write, NAMESPACE_WRITE),
            ("DeleteHubConfigMap", Write, NAMESPACE_WRITE),
            ("ApplyHubSecret", Write, NAMESPACE_WRITE),
            ("DeleteHubSecret", Write, NAMESPACE_WRITE),
            ("ListHubData", Read, FILTERED),
            ("RenderPolicy", Read, FILTERED),
        ],
    )];
    const REPORTS: &'static [Kind] = &[KIND];
    type Settings = ();
    type Services = (PolicyServiceServer<PolicyApi>,);

    async fn start(_: &(), cx: &mut Start<'_>) -> Result<Self::Services, StartError> {
        let buckets = Buckets::open(cx).await?;
        let deps = Deps {
            placements: cx.need::<Placements>()?,
            clusters: cx.deps().inventory.clone(),
            sets: cx.need::<ClusterSets>()?,
            publisher: cx.deps().clusters.shared().publisher.clone(),
            metrics: cx.deps().metrics.clone(),
            sealing: cx.deps().seal.key().clone(),
        };
        let policies = Policies::start(buckets, deps)
            .await
            .map_err(|e| cx.failed(e))?;
        let stopped = policies.clone();
        cx.on_stop(move || async move { stopped.stop().await });
        cx.take_reports(KIND.name, Arc::new(PolicyTaker(policies.clone())));
        cx.provide(policies.clone());
        Ok((PolicyServiceServer::new(PolicyApi::new(policies))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),))
    }
}
