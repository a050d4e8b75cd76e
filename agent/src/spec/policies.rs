//! Replicated policies (governance): their spec events go to the [`PolicyManager`], which the
//! agent runs unless governance is off on it. I/O through the manager's actors.

use super::{Parts, SpecHandler};
use crate::policy::PolicyManager;
use flotilla_bus::envelope::Event;

/// The policy spec handler.
pub struct Policies {
    /// The replicated policies on this cluster (None: governance is off on this agent).
    manager: Option<PolicyManager>,
}

impl Policies {
    /// Over `manager`, or off without one.
    pub fn new(manager: Option<PolicyManager>) -> Self {
        Self { manager }
    }
}

#[async_trait::async_trait]
impl SpecHandler for Policies {
    fn kind(&self) -> &'static str {
        "policy spec"
    }

    fn handles(&self, event: &Event) -> bool {
        PolicyManager::handles(event)
    }

    fn off(&self) -> Option<&'static str> {
        self.manager
            .is_none()
            .then_some("governance is off on this agent")
    }

    async fn on_spec(&mut self, event: &Event, _parts: &Parts<'_>) {
        if let Some(manager) = self.manager.as_mut() {
            manager.on_spec(event).await;
        }
    }

    fn on_reconnect(&mut self) {
        if let Some(manager) = self.manager.as_mut() {
            manager.republish_all();
        }
    }

    /// Waits for every policy actor to stop, as the agent always has: each stops once its
    /// mailbox closes, after the evaluation it is making.
    async fn shutdown(self: Box<Self>) {
        if let Some(manager) = self.manager {
            manager.shutdown().await;
        }
    }
}
