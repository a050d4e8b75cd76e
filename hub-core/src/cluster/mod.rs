//! ManagedClusters and their ManifestWorks.
//!
//! - [`handle`]: [`ClusterHandle`], the cheap-clone handle of a cluster actor, and the messages
//!   and errors it carries;
//! - `actor`: the task that owns one cluster and its works (state, run loop, persistence), with
//!   the cluster lifecycle and the work lifecycle in child modules of their own;
//! - [`rules`]: pure OCM rules for clusters (conditions, taints, registration, validation);
//! - [`work_rules`]: pure rules for works (spec events, resync diff, status application);
//! - [`resend`]: when a spec is re-sent (pure: heard from since the send, back-off, receipt)
//!   and the hub-wide re-send budget;
//! - [`stored_work`]: [`StoredWork`], a work as the hub holds it (the spec and status encoded, equal specs shared; pure);
//! - [`work_states`]: works by state, the gauge `flotilla_hub_works{state}` (pure, at scrape);
//! - [`parking`]: idle actors without a task, and each shard's alarm task that wakes them;
//! - [`Clusters`]: the registry that spawns and finds the actors.

mod actor;
pub mod handle;
pub mod parking;
pub mod resend;
pub mod resync_period;
pub mod route;
pub mod rules;
pub mod stored_work;
pub mod work_rules;
pub mod work_states;

pub use handle::{
    AdminEdit, Answer, Call, ClusterError, ClusterHandle, LeaseEvent, Msg, SOURCE, StatusEvent,
    WorkStatusEvent,
};
pub use stored_work::StoredWork;

use crate::ha::Fence;
use crate::inventory::ClusterInventory;
use crate::metrics::Metrics;
use crate::store::Bucket;
use dashmap::DashMap;
use flotilla_api::v1::ManagedCluster;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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
    /// A work spec whose status has not come back this long after the cluster was first heard
    /// from since the send is sent again (doubling up to 16 times this, the bound of a spec the
    /// agent acknowledged receiving); see [`resend`].
    pub work_resend_after: Duration,
    /// Re-sends of work specs per second across every cluster actor of the hub (`0`: no limit).
    pub work_resends_per_second: u32,
    /// The fleet's periodic resyncs per second the hub asks for at most: every resync answer
    /// tells the agent the period that keeps them under it ([`resync_period`]; `0`: none, the
    /// agents' own interval).
    pub periodic_resyncs_per_second: u32,
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
            work_resends_per_second: resend::DEFAULT_RESENDS_PER_SECOND,
            periodic_resyncs_per_second: resync_period::DEFAULT_PERIODIC_RESYNCS_PER_SECOND,
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
    pub work_bucket: Bucket<StoredWork>,
    /// The shared read view of works.
    pub works: crate::inventory::WorkInventory,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// NATS, for the calls between hubs.
    pub nats: async_nats::Client,
    /// Sends spec events and registration answers to the agents.
    pub publisher: flotilla_bus::publish::Publisher,
    /// The status stream, purged of a cluster's subjects when it is deleted.
    pub status_stream: async_nats::jetstream::stream::Stream,
    /// This hub's id, stamped on every state write.
    pub hub_id: String,
    /// Secure mode: issues cluster credentials and revokes agent keys.
    pub security: Option<crate::security::Security>,
    /// Purges status messages the actors refuse (unknown works).
    pub janitor: crate::janitor::Janitor,
    /// Seals join tokens to the hub that asked for them, and opens them there.
    pub seal: crate::sealed::HubSeal,
    /// The recovery window and its orphans: deletions the window withholds.
    pub recovery: crate::recovery::Recovery,
    /// The grants in force (none on an open hub): a new cluster may not register under the
    /// name of a workspace namespace they name (issue 48 review r1 §5).
    pub grants: Option<crate::grants::live::Live>,
}

/// Whether this hub can read a shard's status: while its status consumer is down (a NATS node
/// lost, the store re-electing a leader) the hub is blind, and lease expiries wait.
#[derive(Debug)]
pub struct Sight {
    blind: std::sync::atomic::AtomicBool,
    since: Mutex<tokio::time::Instant>,
}

impl Sight {
    fn new() -> Self {
        Self {
            blind: std::sync::atomic::AtomicBool::new(true),
            since: Mutex::new(tokio::time::Instant::now()),
        }
    }

    /// The status feed is down.
    pub fn lost(&self) {
        self.blind.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The status feed is up (again): leases are judged from now on, with a full grace.
    pub fn regained(&self) {
        if self.blind.swap(false, std::sync::atomic::Ordering::AcqRel) {
            *self.since.lock().expect("sight lock") = tokio::time::Instant::now();
        }
    }

    /// When a lease expiring `now` must be judged again instead (`None`: judge it now).
    pub fn postpone(
        &self,
        now: tokio::time::Instant,
        grace: Duration,
    ) -> Option<tokio::time::Instant> {
        // Blind: judged a full grace after the sight comes back at the earliest, so looking
        // again a grace from now decides the same (and wakes 100,000 parked actors once a
        // grace, not every second).
        if self.blind.load(std::sync::atomic::Ordering::Acquire) {
            return Some(now + grace);
        }
        let seen_from = *self.since.lock().expect("sight lock") + grace;
        (now < seen_from).then_some(seen_from)
    }
}

/// The actors of one shard this hub holds: stopped and awaited together when it is handed over
/// or lost. Idle actors are parked, not tasks ([`parking`]).
pub struct ShardRun {
    pub(crate) fence: Fence,
    /// When this hub took the shard.
    pub acquired: SystemTime,
    pub(crate) stop: tokio::sync::watch::Sender<bool>,
    /// The running actors' tasks and the alarm task.
    pub(crate) tasks: crate::tasks::TaskGroup,
    /// Wakes parked actors when a deadline of theirs is due.
    pub(crate) alarms: parking::AlarmClock,
    /// Whether the shard's status is being read.
    pub sight: Arc<Sight>,
}

/// One call to another hub's cluster actor, at most, beyond the store's patience (the holder
/// may wait that long for a JetStream election before it answers).
const REMOTE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a call waits for a shard changing hands to get a holder again.
const REMOTE_PATIENCE: Duration = Duration::from_secs(30);

/// How long a shard's actors get to finish what they are doing when it is handed over, beyond
/// the store's patience: a write riding through a JetStream election (a NATS node lost while
/// a hub joins and the shards rebalance) finishes, rather than being cut off unanswered. A
/// fenced actor stops sooner: its writes are refused at once.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The registry of cluster actors: one per cluster of every shard this hub holds.
#[derive(Clone)]
pub struct Clusters {
    actors: Arc<DashMap<String, ClusterHandle>>,
    shards: Arc<Mutex<HashMap<u32, ShardRun>>>,
    shared: Arc<Shared>,
    remote: route::Remote,
    /// The re-sends every actor of this hub draws from.
    resend_budget: Arc<resend::Budget>,
}

impl Clusters {
    /// An empty registry holding no shard.
    pub fn new(shared: Shared) -> Self {
        Self {
            actors: Arc::new(DashMap::new()),
            shards: Arc::new(Mutex::new(HashMap::new())),
            remote: route::Remote::new(
                shared.nats.clone(),
                shared.seal.clone(),
                REMOTE_TIMEOUT + crate::store::ride::patience(),
                REMOTE_PATIENCE,
            ),
            resend_budget: Arc::new(resend::Budget::per_second(
                shared.config.work_resends_per_second,
            )),
            shared: Arc::new(shared),
        }
    }

    /// Starts acting for `shard`: one actor per cluster of it in the inventory, with its works,
    /// each with a full lease grace from now.
    pub fn start_shard(&self, shard: u32, fence: Fence) {
        let (alarms, alarm_rx) = parking::AlarmClock::new();
        let mut run = ShardRun {
            fence,
            acquired: SystemTime::now(),
            stop: tokio::sync::watch::channel(false).0,
            tasks: crate::tasks::TaskGroup::default(),
            alarms,
            sight: Arc::new(Sight::new()),
        };
        run.tasks.spawn(parking::ring(
            alarm_rx,
            self.actors.clone(),
            run.stop.subscribe(),
        ));
        // One pass over the works for the whole shard: a pass per cluster (10,000 works read
        // for each of 300 clusters, on a runtime thread, under this lock) kept a takeover of 16
        // shards from letting anything else run — lease renewals included — for 20 s.
        let mut works = self.works_of_shard(shard);
        let mut shards = self.shards.lock().expect("shards lock");
        let mut spawned = 0;
        for cluster in self.shared.inventory.snapshot() {
            let name = crate::inventory::name(&cluster);
            if flotilla_bus::subjects::shard(name) != shard {
                continue;
            }
            let works = works.remove(name).unwrap_or_default();
            let handle = self.spawn_with(name, &cluster, works, &mut run);
            self.actors.insert(name.to_string(), handle);
            spawned += 1;
        }
        tracing::info!(shard, clusters = spawned, "shard started");
        if let Some(old) = shards.insert(shard, run) {
            let _ = old.stop.send(true);
        }
    }

    /// The works of every cluster of `shard` in the view, by cluster name (keys
    /// `<cluster>/<work>`), in one pass.
    fn works_of_shard(&self, shard: u32) -> HashMap<String, Vec<Arc<StoredWork>>> {
        let mut by_cluster: HashMap<String, Vec<Arc<StoredWork>>> = HashMap::new();
        for (key, work) in self.shared.works.with_prefix("") {
            let Some((cluster, _)) = key.split_once('/') else {
                continue;
            };
            if flotilla_bus::subjects::shard(cluster) == shard {
                by_cluster
                    .entry(cluster.to_string())
                    .or_default()
                    .push(work);
            }
        }
        by_cluster
    }

    /// An actor for `cluster` as the view holds it, with its works from the view.
    fn spawn_loaded(
        &self,
        name: &str,
        cluster: &ManagedCluster,
        run: &mut ShardRun,
    ) -> ClusterHandle {
        let works = self
            .shared
            .works
            .with_prefix(&format!("{name}/"))
            .into_iter()
            .map(|(_, w)| w)
            .collect();
        self.spawn_with(name, cluster, works, run)
    }

    /// An actor for `cluster` as the view holds it, with `works`.
    fn spawn_with(
        &self,
        name: &str,
        cluster: &ManagedCluster,
        works: Vec<Arc<StoredWork>>,
        run: &mut ShardRun,
    ) -> ClusterHandle {
        let revision = cluster.metadata.as_ref().map_or(0, |m| m.resource_version);
        let works = works
            .into_iter()
            .map(|w| {
                let rev = w.metadata.as_ref().map_or(0, |m| m.resource_version);
                ((*w).clone(), rev)
            })
            .collect();
        actor::spawn(
            name.to_string(),
            Some((cluster.clone(), revision)),
            works,
            self.shared.clone(),
            self.resend_budget.clone(),
            self.actors.clone(),
            run,
        )
    }

    /// Stops acting for `shard`: its actors finish their current message and end (bounded);
    /// parked ones, idle by rule, are dropped with their registry entries.
    pub async fn stop_shard(&self, shard: u32) {
        let Some(run) = self.shards.lock().expect("shards lock").remove(&shard) else {
            return;
        };
        let _ = run.stop.send(true);
        // Parked actors end with their last handle: dropped after the retain, not under the
        // registry's write locks.
        let mut gone = Vec::new();
        self.actors.retain(|name, handle| {
            let keep = flotilla_bus::subjects::shard(name) != shard;
            if !keep {
                gone.push(handle.clone());
            }
            keep
        });
        drop(gone);
        run.tasks
            .join(STOP_GRACE + crate::store::ride::patience())
            .await;
        self.refresh_views(shard).await;
        tracing::info!(shard, "shard stopped");
    }

    /// Re-reads the shard's clusters and works into the views: what its actors published but
    /// could not store (fenced, or the store was down) must not outlive them here. A read older
    /// than the view (a lagging replica answered) changes nothing.
    async fn refresh_views(&self, shard: u32) {
        use crate::views::Versioned;
        let in_shard = |name: &str| flotilla_bus::subjects::shard(name) == shard;
        for cluster in self.shared.inventory.snapshot() {
            let name = crate::inventory::name(&cluster).to_string();
            if !in_shard(&name) {
                continue;
            }
            match self.shared.bucket.get(&name).await {
                Ok(Some((mut stored, rev))) => {
                    stored.set_revision(rev);
                    if rev >= cluster.revision() && *cluster != stored {
                        self.shared.inventory.upsert(&name, stored);
                    }
                }
                // Never stored (its first write was refused): only this hub ever showed it.
                Ok(None) if cluster.revision() == 0 => self.shared.inventory.remove(&name),
                Ok(None) => {}
                Err(e) => tracing::debug!(cluster = %name, error = %e, "refreshing a view failed"),
            }
        }
        // The works in one pass (not one pass over every work per cluster).
        for (key, work) in self.shared.works.with_prefix("") {
            let Some(r) = crate::keys::ObjectRef::from_inventory_key(&key) else {
                continue;
            };
            if !in_shard(&r.namespace) {
                continue;
            }
            match self.shared.work_bucket.get(&r.store_key()).await {
                Ok(Some((mut stored, rev))) => {
                    stored.set_revision(rev);
                    if rev >= work.revision() && *work != stored {
                        self.shared.works.upsert(&key, stored);
                    }
                }
                Ok(None) if work.revision() == 0 => self.shared.works.remove(&key),
                Ok(None) => {}
                Err(e) => tracing::debug!(work = %key, error = %e, "refreshing a view failed"),
            }
        }
    }

    /// Stops every shard.
    pub async fn stop_all(&self) {
        let held: Vec<u32> = self
            .shards
            .lock()
            .expect("shards lock")
            .keys()
            .copied()
            .collect();
        for shard in held {
            self.stop_shard(shard).await;
        }
    }

    /// Whether this hub reads `shard`'s status (the status router reports it).
    pub fn sight(&self, shard: u32) -> Option<Arc<Sight>> {
        self.shards
            .lock()
            .expect("shards lock")
            .get(&shard)
            .map(|r| r.sight.clone())
    }

    /// Whether this hub holds `shard` (with a valid fence).
    pub fn holds_shard(&self, shard: u32) -> bool {
        self.shards
            .lock()
            .expect("shards lock")
            .get(&shard)
            .is_some_and(|r| r.fence.is_valid())
    }

    /// The actor of a known cluster of a shard this hub holds.
    pub fn local(&self, name: &str) -> Option<ClusterHandle> {
        self.actors.get(name).map(|h| h.clone())
    }

    /// The actor of a known cluster of a shard this hub holds: running, or started from the
    /// view (which learnt of the cluster after the shard was taken).
    pub fn local_or_load(&self, name: &str) -> Option<ClusterHandle> {
        if let Some(h) = self.local(name) {
            return Some(h);
        }
        let cluster = self.shared.inventory.get(name)?;
        let shard = flotilla_bus::subjects::shard(name);
        let mut shards = self.shards.lock().expect("shards lock");
        let run = shards.get_mut(&shard).filter(|r| r.fence.is_valid())?;
        Some(
            self.actors
                .entry(name.to_string())
                .or_insert_with(|| {
                    tracing::info!(cluster = %name, shard, "starting an actor for a cluster the view learnt of late");
                    self.spawn_loaded(name, &cluster, run)
                })
                .clone(),
        )
    }

    /// The actor of a known cluster: here, or on the hub holding its shard (known: in the
    /// views).
    pub fn get(&self, name: &str) -> Option<ClusterHandle> {
        if let Some(h) = self.local_or_load(name) {
            return Some(h);
        }
        let shard = flotilla_bus::subjects::shard(name);
        (!self.holds_shard(shard) && self.shared.inventory.get(name).is_some())
            .then(|| ClusterHandle::remote(self.remote.clone(), name, false))
    }

    /// The actor of a cluster, spawned empty (for a first registration, an apply ahead of its
    /// agent) if needed: here when this hub holds its shard, else on the hub that does.
    pub fn get_or_spawn(&self, name: &str) -> Result<ClusterHandle, ClusterError> {
        let shard = flotilla_bus::subjects::shard(name);
        if self.holds_shard(shard) {
            self.local_or_spawn(name)
        } else {
            Ok(ClusterHandle::remote(self.remote.clone(), name, true))
        }
    }

    /// The actor of a cluster of a shard this hub holds, spawned empty if needed (it reads the
    /// store before its first message);
    /// `Unavailable` when this hub does not hold the cluster's shard.
    pub fn local_or_spawn(&self, name: &str) -> Result<ClusterHandle, ClusterError> {
        if let Some(h) = self.local_or_load(name) {
            return Ok(h);
        }
        let shard = flotilla_bus::subjects::shard(name);
        let mut shards = self.shards.lock().expect("shards lock");
        let run = shards
            .get_mut(&shard)
            .filter(|r| r.fence.is_valid())
            .ok_or_else(|| {
                ClusterError::Unavailable(format!(
                    "shard {shard} of managed cluster {name:?} is not held by this hub"
                ))
            })?;
        Ok(self
            .actors
            .entry(name.to_string())
            .or_insert_with(|| {
                actor::spawn(
                    name.to_string(),
                    None,
                    Vec::new(),
                    self.shared.clone(),
                    self.resend_budget.clone(),
                    self.actors.clone(),
                    run,
                )
            })
            .clone())
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

impl crate::views::Holder for Clusters {
    fn holds(&self, shard: u32) -> bool {
        self.holds_shard(shard)
    }

    fn stored(&self, keys: crate::views::Keys, key: &str, revision: u64, removed: bool) {
        let (cluster, work) = match keys {
            crate::views::Keys::Cluster => (key, None),
            crate::views::Keys::InCluster => match key.split_once('/') {
                Some((cluster, work)) => (cluster, Some(work.to_string())),
                None => return,
            },
        };
        let Some(h) = self.local(cluster) else {
            // A cluster this hub has no actor for: one that reads the store before anything
            // else (its works come along). Nothing to do for a deletion.
            if !removed && let Err(e) = self.local_or_spawn(cluster) {
                tracing::debug!(error = %e, "a stored cluster of a shard no longer held");
            }
            return;
        };
        let notice = Msg::Stored {
            work,
            revision,
            removed,
        };
        if h.try_send(notice).is_err() {
            self.shared.metrics.dropped("cluster");
        }
    }
}
