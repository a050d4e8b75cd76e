//! ManagedServiceAccounts: their spec events go to the agent's ServiceAccounts task
//! ([`crate::serviceaccount`]), started by the first one the hub sends, so a cluster without
//! any pays nothing. I/O: starts, feeds and stops that task.

use super::{Lazy, Parts, SpecHandler, TASK_GRACE};
use crate::serviceaccount::{self as sa, Deps, ServiceAccountConfig};
use flotilla_bus::envelope::Event;

/// The ManagedServiceAccount spec handler.
#[derive(Default)]
pub struct ServiceAccounts {
    /// The task, once the first ManagedServiceAccount started it.
    task: Lazy<sa::ServiceAccounts>,
}

/// What the task is started from.
fn deps(parts: &Parts<'_>) -> Deps {
    Deps {
        cluster: parts.config.cluster_name.clone(),
        backend: parts.backend.clone(),
        store: parts.store.clone(),
        client: parts.client.clone(),
        spoke: parts.spoke.cloned(),
        config: ServiceAccountConfig {
            namespace: parts.config.service_account_namespace.clone(),
            max_event_bytes: parts.config.max_event_bytes,
        },
    }
}

#[async_trait::async_trait]
impl SpecHandler for ServiceAccounts {
    fn kind(&self) -> &'static str {
        "ManagedServiceAccount spec"
    }

    fn handles(&self, event: &Event) -> bool {
        sa::ServiceAccounts::handles(event)
    }

    /// Starts the task if needed and hands it the spec without waiting.
    async fn on_spec(&mut self, event: &Event, parts: &Parts<'_>) {
        self.task
            .start(|| sa::ServiceAccounts::spawn(deps(parts)))
            .on_spec(event.clone());
    }

    /// Reports not sent yet go again, if the task runs.
    fn on_reconnect(&mut self) {
        if let Some(task) = self.task.running() {
            task.republish();
        }
    }

    /// Its last handle dropped, the task ends once it has finished what it is doing, waited
    /// for at most [`TASK_GRACE`].
    async fn shutdown(self: Box<Self>) {
        self.task.stop(TASK_GRACE).await;
    }
}
