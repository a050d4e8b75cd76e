//! MirrorPeers: the hub's pokes make the agent's MirrorPeer task ([`crate::peersecrets`]) ask
//! `flotilla.peers.<cluster>` again. The task starts with the first poke, or at start when the
//! local store names MirrorPeers this cluster is in. I/O: starts, pokes and stops that task.

use super::{Lazy, Parts, SpecHandler, TASK_GRACE};
use crate::peersecrets::{Deps, PeerConfig, PeerSecrets};
use flotilla_bus::envelope::Event;

/// The MirrorPeer poke handler.
#[derive(Default)]
pub struct MirrorPeers {
    /// The task, once a poke (or the local store) started it.
    task: Lazy<PeerSecrets>,
}

impl MirrorPeers {
    /// The task's handle, started now (it asks at once) if it was not.
    fn start(&mut self, parts: &Parts<'_>) -> &PeerSecrets {
        self.task.start(|| {
            PeerSecrets::spawn(Deps {
                cluster: parts.config.cluster_name.clone(),
                backend: parts.backend.clone(),
                store: parts.store.clone(),
                client: parts.client.clone(),
                spoke: parts.spoke.cloned(),
                config: PeerConfig {
                    max_event_bytes: parts.config.max_event_bytes,
                    request_timeout: parts.config.nats.request_timeout,
                    ..Default::default()
                },
            })
        })
    }
}

#[async_trait::async_trait]
impl SpecHandler for MirrorPeers {
    fn kind(&self) -> &'static str {
        "MirrorPeer poke"
    }

    fn handles(&self, event: &Event) -> bool {
        PeerSecrets::handles(event)
    }

    /// Starts the task if needed, and pokes it.
    async fn on_spec(&mut self, _event: &Event, parts: &Parts<'_>) {
        self.start(parts).poke();
    }

    /// A cluster the local store names in MirrorPeers asks at start (the task asks as it
    /// starts), without waiting for the hub's poke.
    fn resume(&mut self, parts: &Parts<'_>) {
        if !parts.store.get().mirror_peers.is_empty() {
            self.start(parts);
        }
    }

    /// The task, if it runs, asks again.
    fn on_reconnect(&mut self) {
        if let Some(task) = self.task.running() {
            task.poke();
        }
    }

    /// Its last handle dropped, the task ends once it has finished what it is doing, waited
    /// for at most [`TASK_GRACE`].
    async fn shutdown(self: Box<Self>) {
        self.task.stop(TASK_GRACE).await;
    }
}
