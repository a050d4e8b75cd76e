//! Add-ons (OCM `addon.open-cluster-management.io/v1alpha1`): install an add-on agent on the
//! clusters placements select (or that an operator names), configure it per cluster, per
//! placement or by default, roll config changes out progressively, and watch its health.
//!
//! - [`rules`]: pure — which clusters an add-on belongs on, where each stands in the rollout of
//!   its configs (over all its works), the status of each ManagedClusterAddOn, the next step of
//!   removing one (its pre-delete hook first).
//! - [`actor`]: one task per ClusterManagementAddOn: creates and removes its
//!   ManagedClusterAddOns as placements decide, renders its template into a cluster's
//!   ManifestWorks (more than one when its manifests exceed one work) as the rollout allows,
//!   writes every ManagedClusterAddOn's status and its own; removals go through it, step by
//!   step.
//! - [`effects`]: what the actors change: a cluster's works moved to the rendered ones, status
//!   writes, uninstalling (hook work, works, stored object, lease, credentials).
//! - [`router`]: the add-on agents' NATS subjects (lease renewals, scores) and credential
//!   requests.
//!
//! [`AddOns`] is the handle: apply, get, list and delete the four kinds, enable and disable,
//! take lease renewals. Each kind has its KV bucket (`addons`, `clusteraddons`,
//! `addontemplates`, `addonconfigs`); the rollout position is never stored (see [`rules`]).
//! Under the handle, from the ground up:
//!
//! - `error` (pure): [`AddOnError`], what an add-on call fails with.
//! - `deps` (pure data): [`AddOnConfig`] and [`Deps`], what the handle and actors work with.
//! - `meta` (pure): the metadata of a write — resourceVersion checked, identity kept.
//! - `store` (I/O): [`Store`], the four buckets and their views, lease renewals.
//! - `handle` (I/O): [`AddOns`] itself — the actors started, reached and stopped.
//! - its calls, one module per kind (I/O): `addons` (ClusterManagementAddOn), `installs`
//!   (ManagedClusterAddOn), `templates` (AddOnTemplate), `configs` (AddOnDeploymentConfig,
//!   with `in_use`: who names a config); `enable` (`clusteradm addon enable` / `disable`);
//!   `agents` (an agent's credentials — [`CredentialsError`] — and lease renewals).
//! - `fence` (pure): what a caller who sees only some namespaces reads of an add-on (its
//!   placements and their progress), for the API and the dashboard.

pub mod actor;
mod addons;
mod agents;
mod configs;
mod deps;
mod dirty;
pub mod effects;
mod enable;
mod error;
pub mod family;
pub mod fence;
pub mod grpc;
mod handle;
mod in_use;
mod installs;
mod meta;
pub mod router;
pub mod rules;
mod settled;
mod store;
mod templates;

pub use agents::CredentialsError;
pub use deps::{AddOnConfig, Deps};
pub use error::AddOnError;
pub use handle::AddOns;
pub use store::{BUCKET_ADDONS, BUCKET_CLUSTER_ADDONS, BUCKET_CONFIGS, BUCKET_TEMPLATES, Store};
