//! ManagedClusters and their ManifestWorks.
//!
//! - [`handle`]: [`ClusterHandle`], the cheap-clone handle of a cluster actor, and the messages
//!   and errors it carries;
//! - `actor`: the task that owns one cluster and its works (state, run loop, persistence), with
//!   the cluster lifecycle and the work lifecycle in child modules of their own;
//! - [`rules`]: pure OCM rules for clusters (conditions, taints, registration, validation);
//! - [`work_rules`]: pure rules for works (spec events, resync diff, status application);
//! - [`Clusters`]: the registry that spawns and finds the actors.

mod actor;
pub mod handle;
pub mod rules;
pub mod work_rules;

pub use handle::{
    AdminEdit, ClusterError, ClusterHandle, LeaseEvent, Msg, SOURCE, StatusEvent, WorkStatusEvent,
};

use crate::inventory::ClusterInventory;
use crate::metrics::Metrics;
use crate::store::Bucket;
use dashmap::DashMap;
use flotilla_api::v1::ManagedCluster;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Settings of cluster actors.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Lease for clusters whose `spec.leaseDurationSeconds` is 0.
    pub default_lease_duration_seconds: i32,
    /// A cluster is lost after `multiplier × leaseDurationSeconds` without renewal (OCM: 5).
    pub lease_grace_multiplier: u32,
    /// Auto-accept policy for new clusters.
    pub auto_accept: rules::AutoAccept,
    /// Mailbox capacity of each actor.
    pub mailbox_capacity: usize,
    /// Largest event the hub sends or accepts.
    pub max_event_bytes: usize,
    /// Agent/server clock difference above which ClockSynced turns False.
    pub clock_skew_tolerance: Duration,
    /// A work spec whose status has not come back after this long is sent again (doubling up
    /// to 16 times this).
    pub work_resend_after: Duration,
    /// Whether an accepted cluster's agent key is pinned (secure mode) or just recorded.
    pub key_policy: rules::KeyPolicy,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            default_lease_duration_seconds: 60,
            lease_grace_multiplier: 5,
            auto_accept: rules::AutoAccept::default(),
            mailbox_capacity: 256,
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            clock_skew_tolerance: Duration::from_secs(10),
            work_resend_after: Duration::from_secs(30),
            key_policy: rules::KeyPolicy::Record,
        }
    }
}

/// What every cluster actor shares.
pub struct Shared {
    /// Settings.
    pub config: ClusterConfig,
    /// The clusters bucket.
    pub bucket: Bucket<ManagedCluster>,
    /// The shared read view.
    pub inventory: ClusterInventory,
    /// The works bucket (`<cluster>.<work>`).
    pub work_bucket: Bucket<flotilla_api::v1::ManifestWork>,
    /// The shared read view of works.
    pub works: crate::inventory::WorkInventory,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// NATS, for spec events and registration replies.
    pub nats: async_nats::Client,
    /// The status stream, purged of a cluster's subjects when it is deleted.
    pub status_stream: async_nats::jetstream::stream::Stream,
    /// When this hub process started: leases are never judged older than this, so a hub restart
    /// does not make live clusters flap to Unknown.
    pub started: SystemTime,
    /// Secure mode: issues cluster credentials and revokes agent keys.
    pub security: Option<crate::security::Security>,
    /// Purges status messages the actors refuse (unknown works).
    pub janitor: crate::janitor::Janitor,
}

/// The registry of cluster actors.
#[derive(Clone)]
pub struct Clusters {
    actors: Arc<DashMap<String, ClusterHandle>>,
    shared: Arc<Shared>,
}

impl Clusters {
    /// An empty registry.
    pub fn new(shared: Shared) -> Self {
        Self {
            actors: Arc::new(DashMap::new()),
            shared: Arc::new(shared),
        }
    }

    /// Spawns the actor of a cluster loaded from the store, with its works.
    pub fn spawn_loaded(
        &self,
        cluster: ManagedCluster,
        revision: u64,
        works: Vec<(flotilla_api::v1::ManifestWork, u64)>,
    ) {
        let name = crate::inventory::name(&cluster).to_string();
        let handle = actor::spawn(
            name.clone(),
            Some((cluster, revision)),
            works,
            self.shared.clone(),
            self.actors.clone(),
        );
        self.actors.insert(name, handle);
    }

    /// The actor of a known cluster.
    pub fn get(&self, name: &str) -> Option<ClusterHandle> {
        self.actors.get(name).map(|h| h.clone())
    }

    /// The actor of a cluster, spawning an empty one (for a first registration) if needed.
    pub fn get_or_spawn(&self, name: &str) -> ClusterHandle {
        self.actors
            .entry(name.to_string())
            .or_insert_with(|| {
                actor::spawn(
                    name.to_string(),
                    None,
                    Vec::new(),
                    self.shared.clone(),
                    self.actors.clone(),
                )
            })
            .clone()
    }

    /// Number of actors.
    pub fn len(&self) -> usize {
        self.actors.len()
    }

    /// Whether there are no actors.
    pub fn is_empty(&self) -> bool {
        self.actors.is_empty()
    }

    /// Shared state (metrics, inventory).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}
