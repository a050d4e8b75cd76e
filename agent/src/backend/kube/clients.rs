//! Clients by identity (I/O): the agent's own, and one per executor ServiceAccount
//! impersonating it (the user alone: the API server adds a ServiceAccount's groups itself). At
//! most [`MAX_EXECUTOR_CLIENTS`] are kept; the least recently used goes, with its watch caches.

use super::{KubeBackend, unavailable};
use crate::backend::{BackendError, Executor};
use kube::Client;
use std::sync::atomic::Ordering;

/// Executors with a client of their own kept at once; the least recently used goes first.
pub const MAX_EXECUTOR_CLIENTS: usize = 64;

/// The user name requests for `executor` go as; `""` for the agent itself.
pub(super) fn identity(executor: Option<&Executor>) -> String {
    executor.map(Executor::username).unwrap_or_default()
}

impl KubeBackend {
    /// The client whose requests go as `executor` (impersonating it), or as the agent for
    /// `None`.
    pub(super) fn client_as(&self, executor: Option<&Executor>) -> Result<Client, BackendError> {
        let Some(executor) = executor else {
            return Ok(self.client.clone());
        };
        let user = executor.username();
        let stamp = self.uses.fetch_add(1, Ordering::Relaxed);
        if let Some((client, used)) = self
            .impersonating
            .lock()
            .expect("clients lock")
            .get_mut(&user)
        {
            *used = stamp;
            return Ok(client.clone());
        }
        let mut config = self.config.clone();
        // The user alone: the API server adds a ServiceAccount's groups itself, so the agent
        // needs no right to impersonate groups.
        config.auth_info.impersonate = Some(user.clone());
        config.auth_info.impersonate_groups = None;
        let client = Client::try_from(config).map_err(unavailable)?;
        let (client, evicted) = {
            let mut clients = self.impersonating.lock().expect("clients lock");
            let evicted = if clients.len() >= MAX_EXECUTOR_CLIENTS && !clients.contains_key(&user) {
                let oldest = clients
                    .iter()
                    .min_by_key(|(_, (_, used))| *used)
                    .map(|(u, _)| u.clone());
                oldest.inspect(|u| {
                    clients.remove(u);
                })
            } else {
                None
            };
            let (client, _) = clients.entry(user).or_insert((client, stamp));
            (client.clone(), evicted)
        };
        if let Some(gone) = evicted {
            // Its watch caches go with it (their tasks end once the caches are dropped).
            self.caches
                .lock()
                .expect("caches lock")
                .retain(|(who, _, _), _| *who != gone);
        }
        Ok(client)
    }
}
