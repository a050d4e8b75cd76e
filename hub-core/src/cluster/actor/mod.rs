//! The ClusterActor: the single owner and writer of one ManagedCluster and its ManifestWorks.
//!
//! This module holds the actor's state, its run loop, message dispatch and persistence; each
//! lifecycle has an `impl Actor` block of its own:
//! - [`lifecycle`]: registration, acceptance and admin edits, lease renewals (a timer per cluster
//!   fires exactly at `lastRenew + grace`), status reports (ordered by `sequenceid`,
//!   de-duplicated by `statushash`) and deletion;
//! - [`work`]: the ManifestWork lifecycle — apply, delete, status from the agent, spec resync and
//!   re-sending unconfirmed specs to a cluster heard from since ([`super::resend`]).
//! - [`timers`]: the actor's five timers as one deadline (pure), and whether the actor may park.
//!
//! An idle actor has no task: it parks in its mailbox with its lease deadline and TTL expiry
//! left to its shard's alarm task ([`super::parking`]), and its next message or alarm spawns it
//! again.
//!
//! Every change is persisted to KV with the revision it read (compare-and-set), then published
//! to the inventory.

mod entries;
mod lifecycle;
mod recovery;
mod timers;
mod version;
mod work;

use super::handle::{ClusterError, ClusterHandle, Msg};
use super::rules;
use super::{Shared, StoredWork};
use crate::store::StoreError;
use dashmap::DashMap;
use flotilla_api::v1::ManagedCluster;
use std::sync::Arc;
use std::time::Duration;
use timers::Timer;
use tokio::time::Instant;
use tracing::Instrument;

const PERSIST_RETRY: Duration = Duration::from_secs(1);
const RESEND_CHECK: Duration = Duration::from_secs(1);

/// Spawns an actor into its shard's task set; `loaded` is the stored object and revision (None
/// for a first registration), `works` its stored works.
pub(super) fn spawn(
    name: String,
    loaded: Option<(ManagedCluster, u64)>,
    works: Vec<(StoredWork, u64)>,
    shared: Arc<Shared>,
    resend_budget: Arc<super::resend::Budget>,
    registry: Arc<DashMap<String, ClusterHandle>>,
    shard: &mut super::ShardRun,
) -> ClusterHandle {
    let (tx, rx) = crate::mailbox::channel(shared.config.mailbox_capacity.max(1));
    let mut actor = Box::new(Actor {
        name: name.clone(),
        cluster: None,
        revision: 0,
        bucket: shared.bucket.fenced(shard.fence.clone(), &shared.hub_id),
        work_bucket: shared
            .work_bucket
            .fenced(shard.fence.clone(), &shared.hub_id),
        acquired: shard.acquired,
        sight: shard.sight.clone(),
        stop: shard.stop.subscribe(),
        tasks: shard.tasks.clone(),
        alarms: shard.alarms.clone(),
        alarm: None,
        resend_at: Instant::now(),
        shared,
        resend_budget,
        registry: Arc::downgrade(&registry),
        lease_deadline: None,
        lease_sequence: 0,
        unread: false,
        dirty: false,
        coalesced: false,
        unsettled_works: crate::settle::Unsettled::default(),
        refusal_written: None,
        works: entries::WorkEntries::default(),
        rx,
    });
    actor.load_works(works);
    match loaded {
        Some((c, rev)) => actor.take_stored(c, rev),
        // Spawned for a name this hub's view did not know: the store may (a previous holder
        // wrote it after the view was read), and is read before the first message.
        None => actor.unread = true,
    }
    crate::mailbox::Parked::wake(actor);
    ClusterHandle::local(tx, &name)
}

struct Actor {
    name: String,
    /// Shared with the cluster inventory: one copy of each cluster at the hub (a change makes a
    /// new one, which the inventory then shares).
    cluster: Option<Arc<ManagedCluster>>,
    revision: u64,
    /// The clusters bucket, writing under the shard's fence.
    bucket: crate::store::Bucket<ManagedCluster>,
    /// The works bucket, writing under the shard's fence.
    work_bucket: crate::store::Bucket<StoredWork>,
    /// When this hub took the cluster's shard: leases are never judged older than this, so a
    /// restart or a failover does not make live clusters flap to Unknown.
    acquired: std::time::SystemTime,
    /// Whether this hub reads the shard's status now, and since when.
    sight: Arc<super::Sight>,
    /// Flips when the shard is handed over or lost.
    stop: tokio::sync::watch::Receiver<bool>,
    /// The shard's tasks, which the actor's task joins each time it is woken.
    tasks: crate::tasks::TaskGroup,
    /// The shard's alarm task, which wakes the actor while it is parked.
    alarms: super::parking::AlarmClock,
    /// The alarm last set there (it may have rung since).
    alarm: Option<Instant>,
    /// When unconfirmed specs are next checked for a re-send.
    resend_at: Instant,
    shared: Arc<Shared>,
    /// The hub-wide re-send budget.
    resend_budget: Arc<super::resend::Budget>,
    /// The registry holds this actor's handle (whose mailbox holds the actor while it is
    /// parked): weak, or the two would keep each other.
    registry: std::sync::Weak<DashMap<String, ClusterHandle>>,
    lease_deadline: Option<Instant>,
    lease_sequence: u64,
    /// Spawned without a stored object: the store is read before the first message.
    unread: bool,
    /// The in-memory state is newer than the store (a write failed); retried on a timer.
    dirty: bool,
    /// A renewal or status report was taken in memory only, because more messages were already
    /// waiting: written once the mailbox is empty ([`Actor::persist_soon`]).
    coalesced: bool,
    /// The cluster's works by name.
    works: entries::WorkEntries,
    /// Works whose last write had an unknown outcome: read again until the store answers.
    unsettled_works: crate::settle::Unsettled<String>,
    /// When a refused registration was last written to the cluster (at most once a minute).
    refusal_written: Option<Instant>,
    rx: crate::mailbox::Receiver<Msg>,
}

impl crate::mailbox::Parked for Actor {
    /// Runs the actor in a task of its shard again; one of a stopped shard (reached through a
    /// handle held past the stop) ends here instead: it parked clean, and its message is
    /// dropped with it, so the caller sees the actor gone as before the stop.
    fn wake(self: Box<Self>) {
        if self.stop.has_changed().unwrap_or(true) {
            return;
        }
        let span = tracing::info_span!("cluster", cluster.name = %self.name);
        let tasks = self.tasks.clone();
        let running = Running::new(&self.shared.metrics.cluster_actor_tasks);
        tasks.spawn_in(span, async move {
            let _running = running;
            self.run().await;
        });
    }
}

/// Counts an actor's task in the hub's gauge for as long as the task lives (aborted too).
struct Running(prometheus_client::metrics::gauge::Gauge);

impl Running {
    fn new(gauge: &prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.dec();
    }
}

enum Flow {
    Continue,
    Stop,
}

impl Actor {
    /// Runs until the actor parks (idle: its next message or alarm runs it again), the shard
    /// stops or the cluster is deleted. The actor is boxed: an `async fn` keeps its moved-in
    /// argument beside the body's binding, which would hold it twice in every cluster's task.
    async fn run(mut self: Box<Self>) {
        if self.unread && !Box::pin(self.read_store()).await {
            return;
        }
        // One timer entry for all of the actor's timers, reset to the earliest armed one
        // (timers.rs).
        let sleep = tokio::time::sleep_until(Instant::now());
        tokio::pin!(sleep);
        loop {
            // The shard stopped: before anything else (a message that woke a parked actor of a
            // stopped shard is not handled under its old fence).
            if self.stop.has_changed().unwrap_or(true) {
                Box::pin(self.write_coalesced()).await;
                break;
            }
            let armed = self.armed();
            // An actor parks with nothing to do now: no message, nothing to write, no timer
            // but a lease deadline or TTL in the future.
            if let Ok(alarm) = timers::park_alarm(armed)
                && alarm.is_none_or(|at| at > Instant::now())
                && !self.coalesced
                && !self.ttl_overdue()
            {
                match self.park(alarm) {
                    Ok(()) => return,
                    Err(actor) => self = actor,
                }
            }
            let wake = timers::earliest(armed);
            if let Some((_, at)) = wake
                && sleep.deadline() != at
            {
                sleep.as_mut().reset(at);
            }
            // Each handler runs boxed: the task of an idle actor then holds only this loop's
            // state (a few hundred bytes) instead of the deepest handler's (about 9 KB), which
            // is what 10,000 mostly idle actors would otherwise each keep allocated.
            tokio::select! {
                _ = self.stop.changed() => {
                    Box::pin(self.write_coalesced()).await;
                    break;
                }
                msg = self.rx.recv() => {
                    let Some(msg) = msg else { break };
                    if let Flow::Stop = Box::pin(self.handle(msg)).await {
                        break;
                    }
                    if self.rx.is_empty() {
                        Box::pin(self.write_coalesced()).await;
                    }
                }
                () = &mut sleep, if wake.is_some() => match wake.map(|(t, _)| t) {
                    // Only clusters with unconfirmed specs tick: 10,000 idle actors cost nothing.
                    Some(Timer::Resend) => {
                        Box::pin(self.resend_unconfirmed()).await;
                        self.resend_at = Instant::now() + RESEND_CHECK;
                    }
                    Some(Timer::Lease) => Box::pin(self.lease_expired()).await,
                    Some(Timer::Expiry) => Box::pin(self.expire_works()).await,
                    Some(Timer::Persist) => Box::pin(self.flush()).await,
                    Some(Timer::Verify) => Box::pin(self.verify_works()).await,
                    None => {}
                },
            }
        }
        // Its alarm, if any, is left to ring: it ticks nobody, or a new actor of the same name
        // (a spurious turn) — clearing it could clear that actor's.
        tracing::debug!("cluster actor stopped");
    }

    /// Whether a finished work's TTL has run out: its expiry is retried every half second
    /// ([`Self::next_expiry`]), which only a running actor does.
    fn ttl_overdue(&self) -> bool {
        let now = std::time::SystemTime::now();
        self.works
            .values()
            .filter_map(|e| super::work_rules::ttl_deadline(&e.work))
            .any(|d| d <= now)
    }

    /// Takes the actor out of the registry (deleted, or forgotten): it ends after this.
    fn unregister(&self) {
        if let Some(registry) = self.registry.upgrade() {
            registry.remove(&self.name);
        }
    }

    /// The actor's timers, armed or not.
    fn armed(&self) -> [(Timer, Option<Instant>); 5] {
        [
            (
                Timer::Resend,
                self.resend_wanted().then_some(self.resend_at),
            ),
            (Timer::Lease, self.lease_deadline),
            (Timer::Expiry, self.next_expiry()),
            // From the last turn of the loop, as a fresh sleep in each turn was.
            (
                Timer::Persist,
                self.dirty.then(|| Instant::now() + PERSIST_RETRY),
            ),
            (Timer::Verify, self.unsettled_works.deadline()),
        ]
    }

    /// Parks the actor in its mailbox with its shard's alarm set to `alarm`, ending its task;
    /// given back when a message is already waiting (or every sender is gone).
    fn park(mut self: Box<Self>, alarm: Option<Instant>) -> Result<(), Box<Self>> {
        // An alarm that has rung is set no more.
        let set = self.alarm.filter(|at| *at > Instant::now());
        if set != alarm {
            self.alarms.set(&self.name, alarm);
            self.alarm = alarm;
        }
        self.rx.parker().park(self)
    }

    /// Takes `c`, stored at `rev`, as the cluster. An accepted cluster gets a full lease grace
    /// from now unless its lease is already being timed: a hub taking the shard (at start, or
    /// from another hub) never turns a healthy cluster Unknown.
    fn take_stored(&mut self, mut c: ManagedCluster, rev: u64) {
        if let Some(m) = c.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.revision = rev;
        if self.lease_deadline.is_none() && rules::accepted(&c) {
            self.lease_deadline = Some(Instant::now() + self.grace(&c));
        }
        self.adopt_cluster(c);
    }

    /// Reads the cluster and its works from the store, retrying while the store does not
    /// answer; false when the shard was stopped meanwhile.
    async fn read_store(&mut self) -> bool {
        let mut wait = Duration::from_millis(200);
        loop {
            match self.read_stored().await {
                Ok(()) => {
                    self.unread = false;
                    return true;
                }
                Err(e) if e.is_corrupt() => {
                    // Quarantined (and said once): reading again would only find it again.
                    // The actor goes on with what it has; a good write replaces the record.
                    self.unread = false;
                    return true;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the stored cluster failed; retrying");
                    tokio::select! {
                        _ = self.stop.changed() => return false,
                        () = tokio::time::sleep(wait) => {}
                    }
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn read_stored(&mut self) -> Result<(), StoreError> {
        // A direct get (any replica answers): this runs for every first registration, and
        // the stream leader's API must not carry 10,000 of them. A write a lagging replica
        // has not shown yet reaches the actor through the view ([`Msg::Stored`]).
        let Some((c, rev)) = self.bucket.get(&self.name).await? else {
            return Ok(());
        };
        let works = self.work_bucket.load_prefix(&self.name).await?;
        tracing::info!(
            revision = rev,
            works = works.len(),
            "stored cluster read (this hub's view did not have it yet)"
        );
        self.load_works(works.into_iter().map(|(_, w, rev)| (w, rev)).collect());
        self.take_stored(c, rev);
        Ok(())
    }

    /// The store changed the cluster (`work: None`) or one of its works at `revision` behind
    /// this actor's back (the shard's previous holder wrote it): read it from the stream's
    /// leader and take what is newer than this actor's. The view also reports the actor's own
    /// writes it sees before the actor has shown them; those are recognised by their revision
    /// and cost nothing.
    async fn stored(&mut self, work: Option<String>, revision: u64, removed: bool) -> Flow {
        if let Some(name) = work {
            // This actor's own write or deletion, seen by the view before the actor showed it.
            let own = match self.works.get(&name) {
                Some(e) => e.revision >= revision,
                None => removed,
            };
            if own {
                return Flow::Continue;
            }
            if let Err(e) = self.adopt_stored_work(&name).await {
                tracing::warn!(error = %e, work = %name, "re-reading a work failed");
                self.unsettled_works.note(name);
            }
            return Flow::Continue;
        }
        if revision <= self.revision {
            // This actor's own write, seen by the view before the actor showed it.
            return Flow::Continue;
        }
        match self.bucket.get_latest(&self.name).await {
            Ok(Some((c, rev))) if rev > self.revision => {
                tracing::info!(
                    revision = rev,
                    "taking the stored cluster: written by the shard's previous holder"
                );
                if self.dirty {
                    // What this actor has not managed to store yet is newer: written over it.
                    self.revision = rev;
                } else {
                    self.take_stored(c, rev);
                }
            }
            Ok(Some(_)) => {}
            Ok(None) if self.revision > 0 && self.cluster.is_some() => {
                tracing::info!("the cluster was deleted by the shard's previous holder");
                self.forget();
                return Flow::Stop;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "reading the stored cluster failed"),
        }
        Flow::Continue
    }

    fn grace(&self, c: &ManagedCluster) -> Duration {
        let secs = c.spec.as_ref().map_or(0, |s| s.lease_duration_seconds);
        let secs = if secs > 0 {
            secs
        } else {
            self.shared.config.default_lease_duration_seconds.max(1)
        };
        Duration::from_secs(
            secs as u64 * u64::from(self.shared.config.lease_grace_multiplier.max(1)),
        )
    }

    fn lease_seconds(&self, c: &ManagedCluster) -> i32 {
        match c.spec.as_ref().map_or(0, |s| s.lease_duration_seconds) {
            0 => self.shared.config.default_lease_duration_seconds,
            n => n,
        }
    }

    async fn handle(&mut self, msg: Msg) -> Flow {
        match msg {
            Msg::Register {
                request,
                reply,
                credential,
                // The admission slot of a new name is free again once it is answered.
                permit: _permit,
            } => self.register(*request, reply, credential).await,
            Msg::VersionRefused {
                request,
                reply,
                credential,
                why,
            } => {
                self.version_refused(*request, reply, credential, &why)
                    .await;
            }
            Msg::Join {
                ttl,
                accept,
                cluster_set,
                respond_to,
            } => {
                let _ = respond_to.send(self.join(ttl, accept, cluster_set).await);
            }
            Msg::Lease(ev) => self.lease(*ev).await,
            Msg::Status(ev) => self.status(*ev).await,
            Msg::Get(tx) => {
                let _ = tx.send(self.current());
            }
            Msg::Edit { edit, respond_to } => {
                let r = self.admin_edit(*edit).await;
                let _ = respond_to.send(r);
            }
            Msg::ApplyWork {
                work,
                traceparent,
                only_new,
                respond_to,
            } => {
                let span = tracing::info_span!("work.apply", cluster.name = %self.name);
                flotilla_bus::trace::follow(&span, traceparent.as_deref());
                let r = self.apply_work(*work, only_new).instrument(span).await;
                let _ = respond_to.send(r);
            }
            Msg::DeleteWork { name, respond_to } => {
                let r = self.delete_work(&name).await;
                let _ = respond_to.send(r);
            }
            Msg::WorkStatus(ev) => {
                let span = tracing::info_span!(
                    "work.status",
                    cluster.name = %self.name,
                    work.name = %ev.report.work_name
                );
                flotilla_bus::trace::follow(&span, ev.traceparent.as_deref());
                self.work_status(*ev).instrument(span).await
            }
            Msg::ManagedNamespaces {
                desired,
                respond_to,
            } => {
                let r = self.managed_namespaces(desired).await;
                let _ = respond_to.send(r);
            }
            Msg::ExternalAddOn {
                addon,
                install_namespace,
                respond_to,
            } => {
                let r = self
                    .external_addon(&addon, install_namespace.as_deref())
                    .await;
                let _ = respond_to.send(r);
            }
            Msg::Resync {
                request,
                reply,
                permit,
            } => match permit {
                // Its agent stopped waiting and asked again: answering it is wasted work.
                Some(p)
                    if p.outlived(
                        std::time::Instant::now(),
                        crate::router::LONGEST_RESYNC_WAIT,
                    ) =>
                {
                    self.shared
                        .metrics
                        .resync_request(crate::router::resync_kind(&request), "outlived");
                    p.abandon();
                }
                permit => {
                    self.resync(*request, reply).await;
                    drop(permit);
                }
            },
            Msg::Stored {
                work,
                revision,
                removed,
            } => return self.stored(work, revision, removed).await,
            Msg::Tick => {}
            Msg::Delete(tx) => {
                let r = self.delete().await;
                let stop = r.is_ok();
                let _ = tx.send(r);
                if stop {
                    return Flow::Stop;
                }
            }
        }
        Flow::Continue
    }

    fn current(&self) -> Result<ManagedCluster, ClusterError> {
        self.cluster
            .as_deref()
            .cloned()
            .ok_or_else(|| ClusterError::NotFound(format!("managed cluster {:?}", self.name)))
    }

    /// Applies an admin edit to a copy, persists it, and only then adopts it.
    async fn edit(
        &mut self,
        f: impl FnOnce(&mut ManagedCluster) -> Result<bool, rules::RuleError>,
    ) -> Result<ManagedCluster, ClusterError> {
        let mut next = self.current()?;
        // The message crosses the hub-to-hub wire as `ClusterError::Invalid`'s text.
        let changed = f(&mut next).map_err(|e| ClusterError::Invalid(e.to_string()))?;
        if changed {
            self.persist(next)
                .await
                .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
        }
        self.current()
    }

    /// Writes `next` with compare-and-set, adopting it and publishing it to the inventory.
    async fn persist(&mut self, next: ManagedCluster) -> Result<(), StoreError> {
        let rev = self.write_cluster(&next).await?;
        self.adopt_written(next, rev);
        Ok(())
    }

    /// Writes `next` with compare-and-set (over the stored revision after a lost race);
    /// returns the new revision.
    async fn write_cluster(&self, next: &ManagedCluster) -> Result<u64, StoreError> {
        let start = std::time::Instant::now();
        let mut result = self.bucket.write(&self.name, next, self.revision).await;
        if let Err(e) = &result
            && e.is_conflict()
        {
            // Someone else wrote (a previous incarnation of this actor, an operator, or a
            // previous owner of the shard whose late write landed — a newer owner's write is
            // `Fenced` instead): this actor owns the cluster, so take the stored revision and
            // write again. Boxed: the rare path stays out of every actor's write future.
            tracing::warn!(error = %e, "revision conflict, rewriting over the stored revision");
            result = Box::pin(self.write_over_stored(next)).await;
        }
        self.shared
            .metrics
            .kv_write_seconds
            .observe(start.elapsed().as_secs_f64());
        result
    }

    /// Adopts `next`, written at `rev`.
    fn adopt_written(&mut self, mut next: ManagedCluster, rev: u64) {
        if let Some(m) = next.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.revision = rev;
        self.dirty = false;
        self.adopt_cluster(next);
    }

    /// Writes `next` over whatever revision the store holds.
    async fn write_over_stored(&self, next: &ManagedCluster) -> Result<u64, StoreError> {
        let stored = self.bucket.get(&self.name).await?;
        let rev = stored.map_or(0, |(_, rev)| rev);
        self.bucket.write(&self.name, next, rev).await
    }

    /// Persists an agent- or timer-driven change; on failure keeps it in memory and retries.
    async fn persist_or_retry(&mut self, next: ManagedCluster) {
        match self.write_cluster(&next).await {
            Ok(rev) => self.adopt_written(next, rev),
            // Another hub owns the cluster now: this actor's view is not the cluster's state
            // any more, and its shard is being stopped.
            Err(e @ StoreError::Fenced { .. }) => {
                tracing::warn!(error = %e, "change dropped: the shard has moved to another hub");
            }
            Err(e) => {
                tracing::warn!(error = %e, "persisting cluster failed; will retry");
                self.adopt_cluster(next);
                self.dirty = true;
            }
        }
    }

    /// [`Self::persist_or_retry`] for a lease renewal or a status report — unless more messages
    /// are already waiting, in which case `next` is taken in memory and written once the
    /// mailbox is empty: one write for a burst. A cluster just accepted sends its first lease
    /// and status at once, and a fleet coming back sends its renewal, status and the reports it
    /// missed together; each was a write of the whole cluster, on the store every registering
    /// cluster waits for. Their messages are acknowledged before the write, as they are when a
    /// write fails (the state is kept and written again).
    async fn persist_soon(&mut self, next: ManagedCluster) {
        if self.rx.is_empty() {
            self.persist_or_retry(next).await;
        } else {
            self.adopt_cluster(next);
            self.coalesced = true;
        }
    }

    /// Writes what [`Self::persist_soon`] took in memory only.
    async fn write_coalesced(&mut self) {
        if std::mem::take(&mut self.coalesced)
            && let Some(c) = self.cluster.as_deref().cloned()
        {
            self.persist_or_retry(c).await;
        }
    }

    /// Makes `c` the cluster, shared with the inventory.
    fn adopt_cluster(&mut self, c: ManagedCluster) {
        let c = Arc::new(c);
        self.shared.inventory.upsert_shared(&self.name, c.clone());
        self.cluster = Some(c);
    }

    async fn flush(&mut self) {
        if let Some(c) = self.cluster.as_deref().cloned()
            && self.persist(c).await.is_ok()
        {
            tracing::info!("pending cluster state persisted");
        }
    }
}

impl Actor {
    /// Acknowledges a status message the actor refused and has its subject purged, so refused
    /// input never accumulates in the status stream.
    async fn purge_refused(&self, ack: Option<async_nats::jetstream::Message>) {
        if let Some(m) = &ack {
            let sequence = m.info().ok().map(|i| i.stream_sequence);
            self.shared
                .janitor
                .purge(&self.name, m.subject.as_str(), sequence);
        }
        ack_message(ack).await;
    }
}

async fn ack_message(ack: Option<async_nats::jetstream::Message>) {
    if let Some(m) = ack
        && let Err(e) = m.ack().await
    {
        tracing::debug!(error = %e, "ack failed; the message will be redelivered");
    }
}

/// When the NATS server stored a message (`at`, on this hub's wall clock: see
/// `router::clock`), on this process's monotonic clock: a message replayed from the stream
/// proves only that the agent was heard then.
fn server_instant(at: std::time::SystemTime) -> Instant {
    let now = Instant::now();
    let age = std::time::SystemTime::now()
        .duration_since(at)
        .unwrap_or_default();
    now.checked_sub(age).unwrap_or(now)
}
