//! Governance on the spoke: replicated policies evaluated and enforced here, so enforce keeps
//! working while the spoke is offline.
//!
//! - [`PolicyManager`]: receives policy spec events, spawns one [`actor`] per replicated policy,
//!   restarts them from the local store, lists `{resourceid: generation}` for the spec resync.
//! - [`actor`]: one task per policy — evaluation on every change the backend signals (the
//!   simulated cluster's store; the Kubernetes backend's watches) and on `evaluationInterval`,
//!   enforce, bounded history, status when it changes. Templates whose `dependencies` /
//!   `extraDependencies` are not met on this cluster wait, Pending; the actors share their
//!   compliance ([`rules::Compliances`]) so a dependency met wakes the policies waiting on it.
//!   CertificatePolicies are judged against the cluster's Secrets on changes and when a
//!   certificate crosses its minimum duration.
//! - [`rules`]: pure decisions (templates, dependencies, cluster compliance, next evaluation).
//! - [`executor`]: reads the cluster into a snapshot, carries out enforce's writes.
//! - [`templates`]: managed-cluster templates (`{{ lookup … }}`, `fromConfigMap`,
//!   `fromClusterClaim`, …) resolved through the backend before each evaluation.
//!
//! Matching and evaluation are `flotilla_api::policy`, shared with the hub's validation.

pub mod actor;
pub mod executor;
pub mod rules;
pub mod templates;

use crate::backend::Backend;
use crate::store::LocalStore;
use flotilla_api::v1::{AppliedPolicy, Policy, PolicyStatusReport};
use flotilla_bus::envelope::{Action, Event};
use flotilla_bus::policies;
use flotilla_bus::publish::Publisher;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Policy settings.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// How often a `watch` template is evaluated on a backend that signals no changes.
    pub poll_interval: Duration,
    /// How long a burst of changes settles before an evaluation.
    pub debounce: Duration,
    /// How often a status that could not be published is tried again.
    pub retry_interval: Duration,
    /// History events kept per template.
    pub history_limit: usize,
    /// The claims configured on the agent (`--claim`), which templates read with
    /// `fromClusterClaim` besides the reserved ones the cluster gives.
    pub claims: Vec<flotilla_api::v1::ClusterClaim>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(10),
            debounce: Duration::from_millis(100),
            retry_interval: Duration::from_secs(5),
            history_limit: flotilla_api::policy::HISTORY_LIMIT,
            claims: Vec::new(),
        }
    }
}

/// Where policy status goes: the status stream, or a test's channel.
#[async_trait::async_trait]
pub trait StatusSink: Send + Sync + 'static {
    /// Publishes a report; false when it could not be (offline): the caller retries.
    async fn publish(&self, report: &PolicyStatusReport) -> bool;
}

/// How long a policy status publish waits for the stream's acknowledgement.
pub const STATUS_PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);

/// Publishes policy status into the `FLOTILLA_STATUS` stream on
/// `flotilla.status.<shard>.<cluster>.policy.<resourceid>`.
pub struct StreamSink {
    publisher: Publisher,
    store: Arc<LocalStore>,
    cluster: String,
    source: String,
}

impl StreamSink {
    /// A sink for `cluster` over `publisher` (the agent's, acknowledged within its timeout,
    /// [`STATUS_PUBLISH_TIMEOUT`]).
    pub fn new(publisher: Publisher, store: Arc<LocalStore>, cluster: &str) -> Self {
        Self {
            publisher,
            store,
            cluster: cluster.to_string(),
            source: format!("flotilla-agent/{cluster}"),
        }
    }
}

#[async_trait::async_trait]
impl StatusSink for StreamSink {
    async fn publish(&self, report: &PolicyStatusReport) -> bool {
        let seq = match self.store.next_sequence() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "saving the sequence counter failed");
                return false;
            }
        };
        let ev = Event::new(
            policies::status_type(),
            self.source.clone(),
            self.cluster.clone(),
            report,
        )
        .with_sequence(seq)
        .with_status_hash()
        .with_resource_id(report.resource_id.clone())
        .with_resource_version(report.observed_generation);
        let subject = policies::status_subject(&self.cluster, &report.resource_id);
        match self.publisher.publish_acked(subject, &ev).await {
            Ok(_) => {
                tracing::debug!(policy = %report.policy_name, compliant = %report.compliant, "policy status published");
                true
            }
            Err(e) if e.is_permanent() => {
                tracing::error!(error = %e, policy = %report.policy_name, "policy status cannot be encoded");
                false
            }
            Err(e) => {
                tracing::debug!(error = %e, "policy status publish failed; will retry");
                false
            }
        }
    }
}

/// Every replicated policy on this cluster.
pub struct PolicyManager {
    deps: actor::Deps,
    actors: HashMap<String, actor::PolicyHandle>,
}

impl PolicyManager {
    /// Loads the policies kept in the local store and restarts their actors (an agent
    /// restarted offline keeps enforcing).
    pub fn start(
        cluster: &str,
        backend: Arc<dyn Backend>,
        store: Arc<LocalStore>,
        sink: Arc<dyn StatusSink>,
        config: PolicyConfig,
    ) -> Result<Self, crate::store::StoreError> {
        let records = store.load_policies()?;
        let deps = actor::Deps {
            cluster: cluster.to_string(),
            backend,
            store,
            sink,
            config,
            compliances: Arc::new(tokio::sync::watch::Sender::new(
                rules::Compliances::default(),
            )),
        };
        let mut actors = HashMap::new();
        for r in records {
            tracing::info!(resource_id = %r.resource_id, "resuming a policy from local state");
            actors.insert(r.resource_id.clone(), actor::spawn(r, deps.clone()));
        }
        Ok(Self { deps, actors })
    }

    /// `{resourceid: generation}` of every policy held (for the spec resync).
    pub fn versions(&self) -> HashMap<String, i64> {
        self.actors
            .iter()
            .filter(|(_, h)| !h.is_finished())
            .map(|(rid, h)| (rid.clone(), h.generation()))
            .collect()
    }

    /// Whether `event` is a policy spec event (for the agent's dispatch).
    pub fn handles(event: &Event) -> bool {
        event.event_type.group == "policy" && event.event_type.resource == "policy"
    }

    /// Handles a policy spec event from the hub. The payload is checked like everything that
    /// arrives: the replicated policy must live in this cluster's namespace and its resource id
    /// must match its name.
    pub async fn on_spec(&mut self, event: &Event) {
        self.actors.retain(|_, h| !h.is_finished());
        let policy: Policy = match event.decode_data("Policy") {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "malformed policy spec dropped");
                return;
            }
        };
        let meta = policy.metadata.clone().unwrap_or_default();
        if meta.namespace != self.deps.cluster {
            tracing::warn!(namespace = %meta.namespace, policy = %meta.name, "policy spec for another cluster rejected");
            return;
        }
        let rid = policies::resource_id(&self.deps.cluster, &meta.name);
        if event.resource_id.as_deref() != Some(rid.as_str()) {
            tracing::warn!(policy = %meta.name, "policy spec whose resourceid does not match its name rejected");
            return;
        }
        if event.event_type.action == Action::DeleteRequest || meta.deletion_timestamp.is_some() {
            self.remove(&rid, &meta.name, meta.generation).await;
            return;
        }
        match self.actors.get_mut(&rid) {
            Some(h) if h.generation() >= meta.generation => {
                tracing::debug!(policy = %meta.name, "policy spec not newer than the one held");
            }
            Some(h) => h.update(policy).await,
            None => {
                let record = AppliedPolicy {
                    resource_id: rid.clone(),
                    policy: Some(policy),
                    details: Vec::new(),
                    created: Vec::new(),
                };
                if let Err(e) = self.deps.store.save_policy(&record) {
                    tracing::error!(error = %e, "saving the policy record failed");
                }
                self.actors
                    .insert(rid, actor::spawn(record, self.deps.clone()));
            }
        }
    }

    async fn remove(&mut self, rid: &str, name: &str, generation: i64) {
        match self.actors.remove(rid) {
            Some(h) => h.remove().await,
            None => {
                // Nothing here: confirm at once so the hub forgets the cluster's status.
                let report = PolicyStatusReport {
                    cluster_name: self.deps.cluster.clone(),
                    policy_name: name.to_string(),
                    resource_id: rid.to_string(),
                    observed_generation: generation,
                    compliant: String::new(),
                    details: Vec::new(),
                    deleted: true,
                };
                self.deps.sink.publish(&report).await;
            }
        }
    }

    /// Publishes every policy's status again (after a reconnect). The hub re-sends specs whose
    /// generation a report shows behind, and answers a report for a policy it no longer has
    /// with a delete: this is how a spoke that was away catches up.
    pub fn republish_all(&mut self) {
        self.actors.retain(|_, h| !h.is_finished());
        for h in self.actors.values() {
            h.republish();
        }
    }

    /// Removes every policy the hub no longer has (from a spec resync answer).
    pub async fn delete_unknown(&mut self, ids: &[String]) {
        for rid in ids {
            if let Some(h) = self.actors.remove(rid) {
                h.remove().await;
            }
        }
    }

    /// Stops every policy task (agent shutdown); nothing is removed.
    pub async fn shutdown(self) {
        for (_, h) in self.actors {
            h.stop().await;
        }
    }
}

#[cfg(test)]
mod tests;
