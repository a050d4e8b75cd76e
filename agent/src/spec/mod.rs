//! The agent's spec handlers: one per kind of spec the hub sends on `flotilla.spec.<cluster>`
//! besides works and registration answers, behind one [`SpecHandler`] trait and in one list
//! ([`handlers`]). The registration actor hands every spec event to the first handler whose type
//! it is, and tells each handler, in list order, that the agent resumed accepted, that the
//! connection came back, and that the agent stops.
//!
//! - [`Handlers`]: the list and its dispatch — plain code over the trait, unit-tested with fake
//!   handlers (`tests.rs`). The acceptance check is made here once for every kind.
//! - `policies`: replicated policies (governance), when this agent runs it.
//! - `service_accounts`: ManagedServiceAccounts; their task starts with the first one.
//! - `mirror_peers`: MirrorPeer pokes; their task starts with the first poke, or at start when
//!   the local store names MirrorPeers.
//!
//! The handlers do I/O: they start, poke and stop tasks. Works are not here: the work manager
//! also serves the cluster proxy's queries, the status tick's actor check and the spec resync
//! (its versions, its deletions, the specs in its answer), so the registration actor keeps it
//! as its own part.
//!
//! Adding a kind touches its module here and one line in [`handlers`].

mod mirror_peers;
mod policies;
mod service_accounts;

use crate::AgentConfig;
use crate::backend::Backend;
use crate::policy::PolicyManager;
use crate::store::LocalStore;
use flotilla_bus::envelope::Event;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long the agent's shutdown waits for a lazily started task to finish what it is doing.
const TASK_GRACE: Duration = Duration::from_secs(5);

/// One kind of spec the hub sends to the agent, and what the agent runs for it.
#[async_trait::async_trait]
pub trait SpecHandler: Send + Sync {
    /// What one of its events is called in logs (`policy spec`, `MirrorPeer poke`).
    fn kind(&self) -> &'static str;

    /// Whether `event` is of its type. The types of the handlers of one list do not overlap;
    /// should they, the first handler in the list takes the event.
    fn handles(&self, event: &Event) -> bool;

    /// Why this agent takes none of its events at all (a part switched off here), logged at
    /// debug instead of handling them; `None` (the default) when it takes them.
    fn off(&self) -> Option<&'static str> {
        None
    }

    /// An event of its type for this cluster, which the hub accepted. A task the handler
    /// starts now is made from `parts`.
    async fn on_spec(&mut self, event: &Event, parts: &Parts<'_>);

    /// The agent started already accepted: starts (from `parts`) what its local state says it
    /// needs. Nothing by default.
    fn resume(&mut self, _parts: &Parts<'_>) {}

    /// The connection to NATS came back: sends again what the hub may have missed (republish,
    /// poke).
    fn on_reconnect(&mut self);

    /// The agent stops: stops what it runs and waits for it, within its own bound.
    async fn shutdown(self: Box<Self>);
}

/// The spec handlers of one agent, in the order events are offered to them.
pub struct Handlers {
    list: Vec<Box<dyn SpecHandler>>,
}

impl Handlers {
    /// The handlers of `list`, in that order.
    pub fn new(list: Vec<Box<dyn SpecHandler>>) -> Self {
        Self { list }
    }

    /// Hands `event` to the first handler whose type it is, if the handler is on and the
    /// cluster `accepted`; otherwise logs why it was ignored. False when no handler takes its
    /// type: the event is the caller's.
    pub async fn on_spec(&mut self, event: &Event, accepted: bool, parts: &Parts<'_>) -> bool {
        let Some(handler) = self.list.iter_mut().find(|h| h.handles(event)) else {
            return false;
        };
        if let Some(why) = handler.off() {
            tracing::debug!("{} ignored: {why}", handler.kind());
        } else if accepted {
            handler.on_spec(event, parts).await;
        } else {
            tracing::warn!("{} ignored: this cluster is not accepted", handler.kind());
        }
        true
    }

    /// The agent started already accepted: tells every handler, in order.
    pub fn resume(&mut self, parts: &Parts<'_>) {
        for handler in &mut self.list {
            handler.resume(parts);
        }
    }

    /// The connection came back: tells every handler, in order.
    pub fn on_reconnect(&mut self) {
        for handler in &mut self.list {
            handler.on_reconnect();
        }
    }

    /// Shuts every handler down, one after the other in order; the list is empty afterwards.
    pub async fn shutdown(&mut self) {
        for handler in self.list.drain(..) {
            handler.shutdown().await;
        }
    }
}

/// The registration actor's parts a handler starts its task from, lent for one call: a handler
/// keeps no copy of them before it needs them (a simulator runs many thousands of agents, most
/// of which never start these tasks).
pub struct Parts<'a> {
    /// The agent's configuration (cluster name, limits, namespaces).
    pub config: &'a AgentConfig,
    /// The cluster.
    pub backend: &'a Arc<dyn Backend>,
    /// The agent's local state.
    pub store: &'a Arc<LocalStore>,
    /// The agent's NATS connection.
    pub client: &'a async_nats::Client,
    /// Its one subscription, through which answers and acknowledgements come back (prefix
    /// wire; `None` on the previous wire).
    pub spoke: Option<&'a flotilla_bus::spoke::Spoke>,
}

/// The agent's spec handlers, in the order of the `if` chain they replaced; `policies` is None
/// when governance is off on this agent. Nothing is started here: the tasks that start lazily
/// start with their first event.
pub fn handlers(policies: Option<PolicyManager>) -> Handlers {
    Handlers::new(vec![
        Box::new(policies::Policies::new(policies)),
        Box::new(service_accounts::ServiceAccounts::default()),
        Box::new(mirror_peers::MirrorPeers::default()),
    ])
}

/// A task a handler starts when it first needs it: the handle it is driven through, and its
/// join handle. The task ends once every handle is dropped.
struct Lazy<H> {
    /// Its handle and task, once started.
    running: Option<(H, JoinHandle<()>)>,
}

impl<H> Default for Lazy<H> {
    fn default() -> Self {
        Self { running: None }
    }
}

impl<H> Lazy<H> {
    /// Its handle, started now by `spawn` if it was not.
    fn start(&mut self, spawn: impl FnOnce() -> (H, JoinHandle<()>)) -> &H {
        let (handle, _) = self.running.get_or_insert_with(spawn);
        handle
    }

    /// Its handle if it was started.
    fn running(&self) -> Option<&H> {
        self.running.as_ref().map(|(handle, _)| handle)
    }

    /// Drops its last handle and waits at most `grace` for the task to finish what it is doing.
    async fn stop(self, grace: Duration) {
        if let Some((handle, task)) = self.running {
            drop(handle);
            let _ = tokio::time::timeout(grace, task).await;
        }
    }
}

#[cfg(test)]
mod tests;
