//! ManagedServiceAccounts on the spoke: the hub delivers each one (with its public curve
//! key); the agent creates the ServiceAccount in its namespace for them
//! (`--service-account-namespace`, OCM's `open-cluster-management-agent-addon` by default),
//! requests a token with the spec's validity, seals it to the hub and reports it — sealed, with
//! the expiry the cluster actually answered — and requests a new one at [`ROTATE_AT`] of that
//! lifetime. A delete removes the ServiceAccount (its tokens stop working).
//!
//! - [`rules`]: pure — checks of a delivery, what to do next for one account.
//! - [`ServiceAccounts`]: the handle; one owned task holds every account, makes the backend
//!   calls (never on the agent's spec loop) and publishes the reports.
//!
//! State is in memory only: an agent restarted has none, and the hub's periodic re-delivery
//! makes it issue a token again (the hub then forgets the previous one).
//!
//! [`ROTATE_AT`]: flotilla_api::serviceaccount::ROTATE_AT

pub mod rules;

use crate::backend::Backend;
use crate::store::LocalStore;
use flotilla_api::v1::{ServiceAccountDelivery, ServiceAccountTokenReport};
use flotilla_bus::envelope::{Action, Event};
use flotilla_bus::serviceaccounts as msa;
use rules::{Held, Next, Token};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Settings.
#[derive(Debug, Clone)]
pub struct ServiceAccountConfig {
    /// The namespace of the ServiceAccounts on the cluster.
    pub namespace: String,
    /// Largest event sent.
    pub max_event_bytes: usize,
}

/// What the task needs.
pub struct Deps {
    /// This cluster's name.
    pub cluster: String,
    /// The cluster.
    pub backend: Arc<dyn Backend>,
    /// Sequence numbers of status events.
    pub store: Arc<LocalStore>,
    /// NATS (reports go to the status stream).
    pub client: async_nats::Client,
    /// Where the stream's acknowledgements come back (prefix wire; `None`: the client's inbox).
    pub spoke: Option<flotilla_bus::spoke::Spoke>,
    /// Settings.
    pub config: ServiceAccountConfig,
}

enum Msg {
    Spec(Box<Event>),
    Republish,
}

/// The handle of the agent's ManagedServiceAccounts (cheap to clone).
#[derive(Clone)]
pub struct ServiceAccounts {
    tx: mpsc::Sender<Msg>,
}

/// Specs waiting for the task at most; more are dropped (the hub delivers again).
const MAILBOX: usize = 256;

impl ServiceAccounts {
    /// Starts the task; it ends when every handle is dropped (the agent starts it on the
    /// first ManagedServiceAccount it is sent, so a cluster without any pays nothing).
    pub fn spawn(deps: Deps) -> (Self, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(MAILBOX);
        let task = Task {
            deps,
            held: HashMap::new(),
            failures: HashMap::new(),
            unsent: HashMap::new(),
        };
        let span = tracing::info_span!("serviceaccounts");
        let join = tokio::spawn(tracing::Instrument::instrument(task.run(rx), span));
        (Self { tx }, join)
    }

    /// Whether `event` is a ManagedServiceAccount spec (for the agent's dispatch).
    pub fn handles(event: &Event) -> bool {
        msa::is_msa(&event.event_type)
    }

    /// Hands a spec to the task without waiting (counted and dropped when it is busy: the hub
    /// delivers again).
    pub fn on_spec(&self, event: Event) {
        if self.tx.try_send(Msg::Spec(Box::new(event))).is_err() {
            tracing::debug!("ManagedServiceAccount spec dropped: the task is busy");
        }
    }

    /// Publishes every report that could not be sent again (after a reconnect).
    pub fn republish(&self) {
        let _ = self.tx.try_send(Msg::Republish);
    }
}

struct Task {
    deps: Deps,
    held: HashMap<String, Held>,
    failures: HashMap<String, u32>,
    /// Reports not yet taken by the status stream, by account: sent again.
    unsent: HashMap<String, ServiceAccountTokenReport>,
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        loop {
            let now = SystemTime::now();
            let due: Vec<String> = self
                .held
                .values()
                .filter(|h| rules::next(h, now) == Next::Issue)
                .map(|h| h.name.clone())
                .collect();
            for name in due {
                self.issue(&name).await;
            }
            // When to look again, over what the issues just changed: a token just issued is
            // rotated at its own time, not at the next message.
            let now = SystemTime::now();
            let mut wake: Option<SystemTime> = None;
            for h in self.held.values() {
                let at = match rules::next(h, now) {
                    Next::Issue => now,
                    Next::At(t) => t,
                    Next::Idle => continue,
                };
                wake = Some(wake.map_or(at, |w| w.min(at)));
            }
            if !self.unsent.is_empty() {
                let retry = SystemTime::now() + Duration::from_secs(5);
                wake = Some(wake.map_or(retry, |w| w.min(retry)));
            }
            let sleep = wake
                .and_then(|w| w.duration_since(SystemTime::now()).ok())
                .unwrap_or(Duration::from_secs(3600))
                .max(Duration::from_millis(10));
            tokio::select! {
                msg = rx.recv() => match msg {
                    None => return,
                    Some(Msg::Spec(event)) => self.on_spec(&event).await,
                    Some(Msg::Republish) => self.flush().await,
                },
                () = tokio::time::sleep(sleep) => self.flush().await,
            }
        }
    }

    async fn on_spec(&mut self, event: &Event) {
        let delivery: ServiceAccountDelivery = match event.decode_data("ServiceAccountDelivery") {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "malformed ManagedServiceAccount spec dropped");
                return;
            }
        };
        let name = match rules::check(&delivery, &self.deps.cluster, event.resource_id.as_deref()) {
            Ok(n) => n,
            Err(why) => {
                tracing::warn!(reason = %why.0, "ManagedServiceAccount spec refused");
                return;
            }
        };
        let account = delivery.account.clone().unwrap_or_default();
        let meta = account.metadata.clone().unwrap_or_default();
        if event.event_type.action == Action::DeleteRequest || meta.deletion_timestamp.is_some() {
            self.delete(&name, meta.generation).await;
            return;
        }
        let previous = self.held.get(&name);
        if previous.is_some_and(|p| p.generation > meta.generation) {
            tracing::debug!(account = %name, "ManagedServiceAccount spec older than the one held");
            return;
        }
        let unchanged = previous.is_some_and(|p| p.generation == meta.generation);
        let held = rules::hold(&account, &delivery.hub_xkey, previous);
        if unchanged && held.token.is_some() {
            return;
        }
        self.held.insert(name, held);
    }

    /// Creates the ServiceAccount if needed, issues a token, seals and reports it.
    async fn issue(&mut self, name: &str) {
        let Some(held) = self.held.get(name).cloned() else {
            return;
        };
        let ns = self.deps.config.namespace.clone();
        let backend = self.deps.backend.clone();
        let attempt = async {
            backend.ensure_service_account(&ns, name).await?;
            backend.request_token(&ns, name, held.validity).await
        };
        let mut report = self.report(&held, name);
        match attempt.await {
            Ok(issued) => {
                let sealed = match msa::seal(&issued.token, &held.hub_xkey) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(account = %name, error = %e, "sealing a token failed");
                        self.failed(name);
                        return;
                    }
                };
                let issued_at = SystemTime::now();
                report.sealed_token = sealed.0;
                report.sender_xkey = sealed.1;
                report.expiration_timestamp = Some(flotilla_api::meta::timestamp(issued.expires));
                report.issued_at = Some(flotilla_api::meta::timestamp(issued_at));
                tracing::info!(
                    account = %name, namespace = %ns,
                    expires_in_s = issued.expires.duration_since(issued_at).unwrap_or_default().as_secs(),
                    "ServiceAccount token issued"
                );
                if let Some(h) = self.held.get_mut(name) {
                    h.token = Some(Token {
                        generation: held.generation,
                        issued: issued_at,
                        expires: issued.expires,
                    });
                    h.retry_at = None;
                }
                self.failures.remove(name);
            }
            Err(e) => {
                tracing::warn!(account = %name, namespace = %ns, error = %e, "ServiceAccount token not issued");
                report.error = e.to_string();
                self.failed(name);
            }
        }
        self.unsent.insert(name.to_string(), report);
        self.flush().await;
    }

    fn failed(&mut self, name: &str) {
        let n = self.failures.entry(name.to_string()).or_default();
        *n += 1;
        let at = SystemTime::now() + rules::backoff(*n);
        if let Some(h) = self.held.get_mut(name) {
            h.retry_at = Some(at);
        }
    }

    fn report(&self, held: &Held, name: &str) -> ServiceAccountTokenReport {
        ServiceAccountTokenReport {
            cluster_name: self.deps.cluster.clone(),
            name: name.to_string(),
            resource_id: msa::resource_id(&self.deps.cluster, name),
            observed_generation: held.generation,
            hub_xkey: held.hub_xkey.clone(),
            service_account_namespace: self.deps.config.namespace.clone(),
            ..Default::default()
        }
    }

    async fn delete(&mut self, name: &str, generation: i64) {
        self.held.remove(name);
        self.failures.remove(name);
        let ns = &self.deps.config.namespace;
        let mut report = ServiceAccountTokenReport {
            cluster_name: self.deps.cluster.clone(),
            name: name.to_string(),
            resource_id: msa::resource_id(&self.deps.cluster, name),
            observed_generation: generation,
            service_account_namespace: ns.clone(),
            deleted: true,
            ..Default::default()
        };
        match self.deps.backend.delete_service_account(ns, name).await {
            Ok(existed) => {
                tracing::info!(account = %name, namespace = %ns, existed, "ServiceAccount deleted");
            }
            Err(e) => {
                // Reported: the hub sends the delete again.
                tracing::warn!(account = %name, namespace = %ns, error = %e, "deleting a ServiceAccount failed");
                report.deleted = false;
                report.error = format!("deleting the ServiceAccount failed: {e}");
            }
        }
        self.unsent.insert(name.to_string(), report);
        self.flush().await;
    }

    /// Publishes every unsent report; those the stream did not take stay.
    async fn flush(&mut self) {
        let names: Vec<String> = self.unsent.keys().cloned().collect();
        for name in names {
            let Some(report) = self.unsent.get(&name) else {
                continue;
            };
            if self.publish(report).await {
                self.unsent.remove(&name);
            }
        }
    }

    async fn publish(&self, report: &ServiceAccountTokenReport) -> bool {
        let seq = match self.deps.store.next_sequence() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "saving the sequence counter failed");
                return false;
            }
        };
        let ev = Event::new(
            msa::status_type(),
            format!("flotilla-agent/{}", self.deps.cluster),
            self.deps.cluster.clone(),
            report,
        )
        .with_sequence(seq)
        .with_status_hash()
        .with_resource_id(report.resource_id.clone())
        .with_resource_version(report.observed_generation);
        let subject = msa::status_subject(&self.deps.cluster, &report.resource_id);
        let publisher = flotilla_bus::publish::Publisher::new(
            self.deps.client.clone(),
            self.deps.config.max_event_bytes,
            Duration::from_secs(5),
        )
        .with_spoke(self.deps.spoke.clone());
        match publisher.publish_acked(subject, &ev).await {
            Ok(_) => true,
            Err(e) if e.is_permanent() => {
                tracing::error!(error = %e, account = %report.name, "report cannot be encoded");
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "ManagedServiceAccount report not taken; will retry");
                false
            }
        }
    }
}
