//! The import policies' task: the only writer of both buckets. It answers applies and deletes,
//! follows the cluster inventory (changes gathered for [`ImportConfig::debounce`], and a pass at
//! least every [`ImportConfig::resync`] to retry what failed), lists object sources through
//! their spokes' agents every [`ImportConfig::poll`] (in tasks it owns, so an agent that does
//! not answer never holds an apply up), and carries each [`rules::Plan`] out: records first (a
//! crash re-applies the edit), then one write per cluster through its actor
//! ([`AdminEdit::Import`], which keeps the actor's revoked-key checks), then deletions through
//! the cluster's delete path (which revokes its keys in secure mode), each record dropped once
//! its cluster is gone.
//!
//! [`ImportConfig::debounce`]: super::ImportConfig::debounce
//! [`ImportConfig::resync`]: super::ImportConfig::resync
//! [`ImportConfig::poll`]: super::ImportConfig::poll

use super::compiled::CompiledPolicy;
use super::rules::{self, Edit, Listing, Plan, Tally};
use super::{Buckets, Deps, ImportError, Views, source};
use crate::cluster::{AdminEdit, ClusterError};
use crate::limits::TokenBucket;
use flotilla_api::importpolicy::{CONDITION_READY, CONDITION_SOURCES_LISTED};
use flotilla_api::meta::{remove_condition, set_condition, status};
use flotilla_api::v1::{ClusterImportPolicy, ClusterImportPolicyStatus, ImportEdit, ImportRecord};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

type Reply<T> = oneshot::Sender<Result<T, ImportError>>;

/// The task's messages.
#[derive(Debug)]
pub enum Msg {
    /// Create or update a policy.
    Apply(Box<ClusterImportPolicy>, Reply<ClusterImportPolicy>),
    /// Delete a policy.
    Delete(String, Reply<()>),
}

/// One policy's lists, as a poll brings them back.
struct Polled {
    policy: String,
    generation: i64,
    lists: BTreeMap<String, Listing>,
}

struct Actor {
    buckets: Buckets,
    deps: Deps,
    views: Views,
    policies: BTreeMap<String, ClusterImportPolicy>,
    compiled: BTreeMap<String, CompiledPolicy>,
    records: BTreeMap<String, ImportRecord>,
    /// Object sources: the latest list of each spoke, by policy.
    lists: BTreeMap<String, BTreeMap<String, Listing>>,
    /// Polls in flight (at most one per policy), stopped with the task.
    polls: JoinSet<Polled>,
    /// The policy each poll in flight is for.
    polling: std::collections::HashMap<tokio::task::Id, String>,
    /// Each object-source policy's creation rate.
    budgets: std::collections::HashMap<String, TokenBucket>,
}

/// Spawns the task.
pub(super) fn spawn(
    buckets: Buckets,
    deps: Deps,
    views: Views,
    policies: Vec<(String, ClusterImportPolicy, u64)>,
    records: Vec<(String, ImportRecord, u64)>,
    shutdown: watch::Receiver<bool>,
) -> (mpsc::Sender<Msg>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(deps.config.mailbox.max(1));
    let mut actor = Actor {
        buckets,
        deps,
        views,
        policies: BTreeMap::new(),
        compiled: BTreeMap::new(),
        records: records.into_iter().map(|(k, r, _)| (k, r)).collect(),
        lists: BTreeMap::new(),
        polls: JoinSet::new(),
        polling: Default::default(),
        budgets: Default::default(),
    };
    for (_, p, rev) in policies {
        actor.adopt(p, rev);
    }
    let span = tracing::info_span!("import_policies");
    (tx, tokio::spawn(actor.run(rx, shutdown).instrument(span)))
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>, mut shutdown: watch::Receiver<bool>) {
        let mut changes = self.deps.inventory.subscribe();
        let mut resync = tokio::time::interval(self.deps.config.resync);
        let mut poll = tokio::time::interval(self.deps.config.poll.max(Duration::from_millis(10)));
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut due: Option<Instant> = Some(Instant::now());
        loop {
            let wake = due.unwrap_or_else(|| Instant::now() + self.deps.config.resync);
            tokio::select! {
                _ = shutdown.changed() => break,
                msg = rx.recv() => match msg {
                    Some(msg) => {
                        self.handle(msg).await;
                        due = Some(Instant::now());
                    }
                    None => break,
                },
                change = changes.recv() => match change {
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        due.get_or_insert(Instant::now() + self.deps.config.debounce);
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = resync.tick() => {
                    due.get_or_insert(Instant::now());
                }
                _ = poll.tick() => self.poll(),
                Some(done) = self.polls.join_next_with_id(), if !self.polls.is_empty() => {
                    match done {
                        Ok((id, polled)) => {
                            self.polling.remove(&id);
                            self.listed(polled);
                            due = Some(Instant::now());
                        }
                        Err(e) => {
                            let policy = self.polling.remove(&e.id());
                            tracing::warn!(?policy, error = %e, "import source poll failed");
                        }
                    }
                }
                _ = tokio::time::sleep_until(wake), if due.is_some() => {
                    due = None;
                    if !self.policies.is_empty() || !self.records.is_empty() {
                        self.pass().await;
                    }
                }
            }
        }
        tracing::debug!("import policies stopped");
    }

    async fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Apply(p, reply) => {
                let applied = self.apply(*p).await;
                if let Ok(p) = &applied {
                    let name = p
                        .metadata
                        .as_ref()
                        .map(|m| m.name.clone())
                        .unwrap_or_default();
                    // The source may have changed: its lists are made again, now.
                    self.lists.remove(&name);
                    self.poll_one(&name);
                }
                let _ = reply.send(applied);
            }
            Msg::Delete(name, reply) => {
                let _ = reply.send(self.delete(&name).await);
            }
        }
    }

    /// Keeps a stored policy (compiled when it compiles; one that no longer does is kept and
    /// shown, and imports nothing).
    fn adopt(&mut self, mut p: ClusterImportPolicy, rev: u64) {
        let name = p
            .metadata
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        if let Some(m) = p.metadata.as_mut() {
            m.resource_version = rev;
        }
        match CompiledPolicy::new(&p) {
            Ok(c) => {
                self.compiled.insert(name.clone(), c);
            }
            Err(e) => {
                tracing::warn!(policy = %name, errors = ?e, "stored ClusterImportPolicy does not compile");
                self.compiled.remove(&name);
            }
        }
        self.views.upsert(&name, p.clone());
        self.policies.insert(name, p);
    }

    async fn apply(
        &mut self,
        mut p: ClusterImportPolicy,
    ) -> Result<ClusterImportPolicy, ImportError> {
        let compiled = CompiledPolicy::new(&p).map_err(ImportError::Invalid)?;
        if let Some(owner) = rules::owner_of(
            &compiled.source_kind,
            &compiled.name,
            self.policies.values(),
        ) {
            return Err(ImportError::Owned {
                kind: compiled.source_kind,
                owner,
            });
        }
        let m = p.metadata.get_or_insert_with(Default::default);
        match self.policies.get(&compiled.name) {
            Some(stored) => {
                let old = stored.metadata.clone().unwrap_or_default();
                crate::identity::keep(m, &old, stored.spec != p.spec);
                p.status = stored.status.clone();
            }
            None => {
                crate::identity::create(m);
                p.status = None;
            }
        }
        if let Some(m) = p.metadata.as_mut() {
            m.resource_version = 0;
        }
        let rev = self.buckets.policies.put(&compiled.name, &p).await?;
        tracing::info!(policy = %compiled.name, generation = compiled.generation, "ClusterImportPolicy applied");
        self.adopt(p, rev);
        Ok(self.policies[&compiled.name].clone())
    }

    async fn delete(&mut self, name: &str) -> Result<(), ImportError> {
        if !self.policies.contains_key(name) {
            return Err(ImportError::NotFound(name.to_string()));
        }
        self.buckets.policies.purge(name).await?;
        self.policies.remove(name);
        self.compiled.remove(name);
        self.lists.remove(name);
        self.budgets.remove(name);
        self.views.remove(name);
        tracing::info!(policy = %name, "ClusterImportPolicy deleted; its clusters stay");
        Ok(())
    }

    /// One plan, carried out.
    async fn pass(&mut self) {
        let clusters = self.deps.inventory.snapshot();
        let policies: Vec<CompiledPolicy> = self.compiled.values().cloned().collect();
        let stored = self.policies.keys().cloned().collect();
        let budget = self.budget(&policies);
        let plan = rules::plan(&rules::Snapshot {
            policies: &policies,
            stored: &stored,
            clusters: &clusters,
            records: &self.records,
            secure: self.deps.secure,
            lists: &self.lists,
            budget: &budget,
            max_created: self.deps.config.max_created,
        });
        for (policy, n) in &plan.created {
            if let Some(b) = self.budgets.get_mut(policy) {
                b.spend(*n as u64);
            }
        }
        // Every list counts once.
        for listing in self.lists.values_mut().flat_map(|l| l.values_mut()) {
            listing.fresh = false;
        }
        self.execute(plan).await;
    }

    /// The creations each object-source policy's rate allows now.
    fn budget(&mut self, policies: &[CompiledPolicy]) -> BTreeMap<String, usize> {
        let now = std::time::Instant::now();
        let config = &self.deps.config;
        let burst = config.create_burst.max(1.0);
        policies
            .iter()
            .filter(|p| p.is_object_source())
            .map(|p| {
                let bucket = self
                    .budgets
                    .entry(p.name.clone())
                    .or_insert_with(|| TokenBucket::full(burst, now));
                let n = bucket.available(now, config.create_rate, burst);
                (p.name.clone(), usize::try_from(n).unwrap_or(usize::MAX))
            })
            .collect()
    }

    /// Starts a poll of every object source not being polled.
    fn poll(&mut self) {
        let names: Vec<String> = self
            .compiled
            .values()
            .filter(|p| p.is_object_source())
            .map(|p| p.name.clone())
            .collect();
        for name in names {
            self.poll_one(&name);
        }
    }

    fn poll_one(&mut self, name: &str) {
        let Some(p) = self.compiled.get(name).filter(|p| p.is_object_source()) else {
            return;
        };
        if self.polling.values().any(|n| n == name) {
            return;
        }
        let p = p.clone();
        let agents = self.deps.agents.clone();
        let clusters = self.deps.inventory.clone();
        let span = tracing::debug_span!("import_poll", policy = %p.name);
        let task = self.polls.spawn(
            async move {
                let lists = source::list_all(&agents, &clusters, &p).await;
                Polled {
                    policy: p.name,
                    generation: p.generation,
                    lists,
                }
            }
            .instrument(span),
        );
        self.polling.insert(task.id(), name.to_string());
    }

    /// Keeps a poll's lists, unless the policy changed meanwhile.
    fn listed(&mut self, polled: Polled) {
        for (spoke, l) in &polled.lists {
            match &l.result {
                Ok(objects) => {
                    tracing::debug!(policy = %polled.policy, %spoke, objects = objects.len(), "import source listed")
                }
                Err(e) => {
                    tracing::debug!(policy = %polled.policy, %spoke, error = %e, "import source not listed")
                }
            }
        }
        let current = self
            .compiled
            .get(&polled.policy)
            .is_some_and(|p| p.generation == polled.generation);
        if current {
            self.lists.insert(polled.policy, polled.lists);
        }
    }

    async fn execute(&mut self, plan: Plan) {
        let Plan {
            records_put,
            records_delete,
            edits,
            deletes,
            statuses,
            created: _,
        } = plan;
        for key in records_delete {
            match self.buckets.records.purge(&key).await {
                Ok(()) => {
                    self.records.remove(&key);
                }
                Err(e) => tracing::warn!(cluster = %key, error = %e, "import record not removed"),
            }
        }
        let bucket = &self.buckets.records;
        let stored: Vec<(String, ImportRecord, bool)> = futures::stream::iter(records_put)
            .map(|(k, r)| async move {
                let ok = bucket
                    .put(&k, &r)
                    .await
                    .map_err(
                        |e| tracing::warn!(cluster = %k, error = %e, "import record not written"),
                    )
                    .is_ok();
                (k, r, ok)
            })
            .buffer_unordered(self.deps.config.concurrency.max(1))
            .collect()
            .await;
        for (k, r, ok) in stored {
            if ok {
                self.records.insert(k, r);
            }
        }
        // Only clusters whose record is stored are edited.
        let edits: Vec<Edit> = edits
            .into_iter()
            .filter(|e| self.records.contains_key(&e.cluster))
            .collect();
        let clusters = &self.deps.clusters;
        let policies: BTreeMap<String, String> = self
            .records
            .iter()
            .map(|(k, r)| (k.clone(), r.policy.clone()))
            .collect();
        let refused: Vec<(String, String)> = futures::stream::iter(edits)
            .map(|e| {
                let policy = policies.get(&e.cluster).cloned().unwrap_or_default();
                edit(clusters, policy, e)
            })
            .buffer_unordered(self.deps.config.concurrency.max(1))
            .filter_map(|r| async move { r })
            .collect()
            .await;
        let mut statuses = statuses;
        // A refused write (a revoked key, another key waiting) is the policy's to show.
        for (policy, why) in refused {
            if let Some(t) = statuses.get_mut(&policy) {
                t.error(why);
            }
        }
        for cluster in deletes {
            if self.delete_cluster(&cluster).await {
                match self.buckets.records.purge(&cluster).await {
                    Ok(()) => {
                        self.records.remove(&cluster);
                    }
                    Err(e) => {
                        tracing::warn!(%cluster, error = %e, "import record not removed")
                    }
                }
            }
        }
        self.publish(statuses).await;
    }

    /// Deletes a cluster the policy created, through its actor (which revokes its keys in
    /// secure mode and fails closed); whether it is gone.
    async fn delete_cluster(&self, cluster: &str) -> bool {
        let Some(handle) = self.deps.clusters.get(cluster) else {
            return true;
        };
        match handle.delete().await {
            Ok(()) | Err(ClusterError::NotFound(_)) => {
                tracing::info!(%cluster, "cluster deleted: its import source is gone");
                true
            }
            Err(e) => {
                tracing::warn!(%cluster, error = %e, "cluster of a gone import source not deleted; retried");
                false
            }
        }
    }

    /// Stores the counts of every policy whose status changed.
    async fn publish(&mut self, statuses: BTreeMap<String, Tally>) {
        for (name, tally) in statuses {
            let Some(p) = self.policies.get(&name) else {
                continue;
            };
            let generation = p.metadata.as_ref().map_or(0, |m| m.generation);
            let mut next = p.clone();
            let changed = set_status(&mut next, &tally, generation);
            if !changed {
                continue;
            }
            if let Some(m) = next.metadata.as_mut() {
                m.resource_version = 0;
            }
            match self.buckets.policies.put(&name, &next).await {
                Ok(rev) => self.adopt(next, rev),
                Err(e) => tracing::warn!(policy = %name, error = %e, "status not stored"),
            }
        }
    }
}

/// Puts a tally into a policy's status; whether anything changed.
fn set_status(p: &mut ClusterImportPolicy, t: &Tally, generation: i64) -> bool {
    let before = p.status.clone();
    let s = p
        .status
        .get_or_insert_with(ClusterImportPolicyStatus::default);
    s.imported = t.imported;
    s.adopted = t.adopted;
    s.sources = t.sources;
    s.errors.clone_from(&t.errors);
    s.observed_generation = generation;
    let (state, reason, message) = if t.errors.is_empty() {
        let mut waiting = String::new();
        if t.waiting > 0 {
            waiting += &format!("; {} wait for their agent key to be bound", t.waiting);
        }
        if t.deferred > 0 {
            waiting += &format!(
                "; {} wait to be created (at most --import-create-rate a second)",
                t.deferred
            );
        }
        (
            status::TRUE,
            "Evaluated",
            format!("{} imported, {} adopted{waiting}", t.imported, t.adopted),
        )
    } else {
        (
            status::FALSE,
            "EvaluationFailed",
            format!("{} evaluation errors (see status.errors)", t.errors.len()),
        )
    };
    set_condition(&mut s.conditions, CONDITION_READY, state, reason, &message);
    if t.object_source {
        let (state, reason, message) = if t.unlisted.is_empty() {
            (
                status::TRUE,
                "Listed",
                format!("{} source objects listed", t.sources),
            )
        } else {
            let which: Vec<String> = t
                .unlisted
                .iter()
                .take(flotilla_api::importpolicy::MAX_STATUS_ERRORS)
                .map(|(spoke, why)| format!("{spoke}: {why}"))
                .collect();
            (
                status::FALSE,
                "SourceUnreachable",
                format!(
                    "not listed (nothing created or deleted from them): {}",
                    which.join("; ")
                ),
            )
        };
        set_condition(
            &mut s.conditions,
            CONDITION_SOURCES_LISTED,
            state,
            reason,
            &message,
        );
    } else {
        remove_condition(&mut s.conditions, CONDITION_SOURCES_LISTED);
    }
    p.status != before
}

/// One cluster's write: created, or labelled, tainted, leased and accepted (the actor refuses
/// a revoked key and never binds one). A refusal comes back as `(policy, why)`.
async fn edit(
    clusters: &crate::cluster::Clusters,
    policy: String,
    e: Edit,
) -> Option<(String, String)> {
    let handle = if e.create {
        match clusters.get_or_spawn(&e.cluster) {
            Ok(h) => h,
            Err(err) => {
                tracing::debug!(cluster = %e.cluster, error = %err, "import: no actor for the new cluster");
                return None;
            }
        }
    } else {
        clusters.get(&e.cluster)?
    };
    let import = ImportEdit {
        policy: policy.clone(),
        create: e.create,
        set_labels: e.set_labels,
        remove_labels: e.remove_labels,
        accept: e.accept,
        has_taints: e.taints.is_some(),
        taints: e.taints.unwrap_or_default(),
        lease_duration_seconds: e.lease_seconds.unwrap_or(0),
    };
    match handle.edit(AdminEdit::Import(Box::new(import))).await {
        Ok(_) if e.create => {
            tracing::info!(cluster = %e.cluster, "created by its ClusterImportPolicy");
            None
        }
        Ok(_) if e.accept => {
            tracing::info!(cluster = %e.cluster, "accepted by its ClusterImportPolicy");
            None
        }
        Ok(_) => None,
        Err(err @ (ClusterError::Precondition(_) | ClusterError::Invalid(_))) => {
            tracing::debug!(cluster = %e.cluster, error = %err, "import write refused");
            Some((policy, format!("cluster {}: {err}", e.cluster)))
        }
        Err(err) => {
            tracing::debug!(cluster = %e.cluster, error = %err, "import write failed; retried");
            None
        }
    }
}
