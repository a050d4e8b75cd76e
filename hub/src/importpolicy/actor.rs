//! The import policies' task: the only writer of both buckets. It answers applies and deletes,
//! follows the cluster inventory (changes gathered for [`ImportConfig::debounce`], and a pass at
//! least every [`ImportConfig::resync`] to retry what failed), and carries each
//! [`rules::Plan`] out: records first (a crash re-applies the edit), then the clusters' edits
//! through their actors — labels, then acceptance, which keeps the actor's revoked-key checks.

use super::compiled::CompiledPolicy;
use super::rules::{self, Edit, Plan, Tally};
use super::{Buckets, Deps, ImportError, Views};
use crate::cluster::AdminEdit;
use flotilla_api::importpolicy::CONDITION_READY;
use flotilla_api::meta::{set_condition, status};
use flotilla_api::v1::{ClusterImportPolicy, ClusterImportPolicyStatus, ImportRecord};
use futures::StreamExt;
use std::collections::BTreeMap;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
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

struct Actor {
    buckets: Buckets,
    deps: Deps,
    views: Views,
    policies: BTreeMap<String, ClusterImportPolicy>,
    compiled: BTreeMap<String, CompiledPolicy>,
    records: BTreeMap<String, ImportRecord>,
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
                let _ = reply.send(self.apply(*p).await);
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
        self.views
            .write()
            .expect("views lock")
            .insert(name.clone(), p.clone());
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
        self.views.write().expect("views lock").remove(name);
        tracing::info!(policy = %name, "ClusterImportPolicy deleted; its clusters stay");
        Ok(())
    }

    /// One plan, carried out.
    async fn pass(&mut self) {
        let clusters = self.deps.inventory.snapshot();
        let policies: Vec<CompiledPolicy> = self.compiled.values().cloned().collect();
        let stored = self.policies.keys().cloned().collect();
        let plan = rules::plan(&rules::Snapshot {
            policies: &policies,
            stored: &stored,
            clusters: &clusters,
            records: &self.records,
            secure: self.deps.secure,
        });
        self.execute(plan).await;
    }

    async fn execute(&mut self, plan: Plan) {
        let Plan {
            records_put,
            records_delete,
            edits,
            statuses,
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
        futures::stream::iter(edits)
            .for_each_concurrent(self.deps.config.concurrency.max(1), |e| edit(clusters, e))
            .await;
        self.publish(statuses).await;
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
    s.errors.clone_from(&t.errors);
    s.observed_generation = generation;
    let (state, reason, message) = if t.errors.is_empty() {
        let waiting = if t.waiting > 0 {
            format!("; {} wait for their agent key to be bound", t.waiting)
        } else {
            String::new()
        };
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
    p.status != before
}

/// One cluster's edit: labels, then acceptance (the actor refuses a revoked key).
async fn edit(clusters: &crate::cluster::Clusters, e: Edit) {
    let Some(handle) = clusters.get(&e.cluster) else {
        return;
    };
    if !e.set_labels.is_empty() || !e.remove_labels.is_empty() {
        let label = AdminEdit::Label {
            set: e.set_labels,
            remove: e.remove_labels,
        };
        if let Err(err) = handle.edit(label).await {
            tracing::debug!(cluster = %e.cluster, error = %err, "import labels not set");
            return;
        }
    }
    if e.accept {
        match handle.edit(AdminEdit::Accept(None)).await {
            Ok(_) => tracing::info!(cluster = %e.cluster, "accepted by its ClusterImportPolicy"),
            Err(err) => {
                tracing::debug!(cluster = %e.cluster, error = %err, "import acceptance refused")
            }
        }
    }
}
