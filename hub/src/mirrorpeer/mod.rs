//! MirrorPeers (`multicluster.odf.openshift.io/v1alpha1`, ODF's Multicluster Orchestrator):
//! storage peers that exchange a Secret, sealed end to end. Each peer's agent seals its source
//! Secret with its static curve key to every other peer's key; the hub holds and forwards only
//! the boxes; each destination writes a GREEN Secret.
//!
//! The transport is pull on demand, poke on change: an agent asks on
//! `flotilla.peers.<cluster>` (its curve key, the boxes it sealed, what it applied) and is
//! answered with its MirrorPeers, the peers' keys and the boxes for it; the hub pokes a cluster
//! (an empty `…mirrorpeer.spec.update_request` on its spec subject) when a MirrorPeer naming it
//! changes, a box for it arrives or a peer's key changes, and again, backing off, while the
//! cluster has something to do. An agent in no MirrorPeer is never poked and never asks.
//!
//! - [`rules`]: pure — the checks of a request, the answer, the status, who has work left.
//! - [`actor`]: the one task owning the buckets: applies, deletes, requests, pokes, statuses.
//! - [`route`]: the `flotilla.peers.*` subscription (the controllers' hub only).
//!
//! KV buckets: `mirrorpeers` (`<name>`: the object and its status), `peersecrets`
//! (`<mirrorpeer>.<from>.<to>`: the sealed box, its keys and revisions — never plaintext) and
//! `peerkeys` (`<cluster>`: the curve key its agent last presented).

pub mod actor;
pub mod family;
pub mod grpc;
pub mod route;
pub mod rules;

use crate::handle::{Gone, Handle};
use crate::store::StoreError;
use flotilla_api::v1::{
    MirrorPeer, PeerKeyRecord, PeerSyncRequest, PeerSyncResponse, SealedPeerSecret,
};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{oneshot, watch};

/// KV bucket of the MirrorPeers.
pub const PEERS: &str = "mirrorpeers";
/// KV bucket of the sealed boxes.
pub const SECRETS: &str = "peersecrets";
/// KV bucket of the agents' curve keys.
pub const KEYS: &str = "peerkeys";

/// Settings.
#[derive(Debug, Clone)]
pub struct MirrorPeerConfig {
    /// The first re-poke of a cluster with work left (default 2 s), doubling to
    /// [`MirrorPeerConfig::repoke_max`].
    pub repoke_min: Duration,
    /// The longest wait between pokes (default 60 s).
    pub repoke_max: Duration,
    /// Sealed bytes in one answer at most (default 512 KiB; the agent asks again for more).
    pub answer_budget: usize,
    /// The task's mailbox (default 1024): a request finding it full is refused, and asked again.
    pub mailbox: usize,
    /// Per-cluster limits on `flotilla.peers.<cluster>` requests and on the warnings they
    /// cause (flags `--mirrorpeer-request-rate`, `--mirrorpeer-request-burst`).
    pub requests: rules::limit::RequestLimits,
    /// Serve MirrorPeers although the hub is not in secure mode
    /// (`--allow-insecure-mirrorpeers`): there any NATS client can present a curve key under a
    /// cluster's name, so applies are refused unless this is set, and then each MirrorPeer's
    /// status says its keys are not authenticated (default false).
    pub allow_insecure: bool,
}

impl Default for MirrorPeerConfig {
    fn default() -> Self {
        Self {
            repoke_min: Duration::from_secs(2),
            repoke_max: Duration::from_secs(60),
            answer_budget: 512 * 1024,
            mailbox: 1024,
            requests: rules::limit::RequestLimits::default(),
            allow_insecure: false,
        }
    }
}

/// Why a call failed.
#[derive(Debug, Error)]
pub enum MirrorPeerError {
    /// Invalid input (every problem, each naming its field).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// No such MirrorPeer.
    #[error("MirrorPeer {0} not found")]
    NotFound(String),
    /// A stale resourceVersion.
    #[error("{0}")]
    Conflict(String),
    /// Storage failed.
    #[error("storage unavailable: {0}")]
    Unavailable(#[from] StoreError),
    /// The task ended (hub shutting down or the controllers moved).
    #[error("MirrorPeers are not being served")]
    Gone,
    /// The hub is not in secure mode and insecure MirrorPeers were not allowed.
    #[error(
        "MirrorPeer {0}: refused because the hub is not in secure mode (--secure-dir): without \
         it any NATS client can present a curve key under a peer's name and be sent that \
         peer's Secrets; run the hub in secure mode, or pass --allow-insecure-mirrorpeers to \
         apply MirrorPeers with unauthenticated keys"
    )]
    Insecure(String),
}

flotilla_hub_core::buckets! {
    /// The buckets.
    pub struct Buckets {
        /// The MirrorPeers.
        peers: MirrorPeer = PEERS,
        /// The sealed boxes.
        secrets: SealedPeerSecret = SECRETS,
        /// The agents' curve keys.
        keys: PeerKeyRecord = KEYS,
    }
}

/// What the MirrorPeers work with.
#[derive(Clone)]
pub struct Deps {
    /// Every cluster (availability, deletions).
    pub inventory: crate::inventory::ClusterInventory,
    /// Sends pokes (`flotilla.spec.<cluster>`).
    pub publisher: flotilla_bus::publish::Publisher,
    /// Settings.
    pub config: MirrorPeerConfig,
    /// Whether the hub is in secure mode (only a cluster's own credentials may publish on
    /// `flotilla.peers.<cluster>`, so the key a request presents is the cluster's).
    pub secure: bool,
}

/// The published MirrorPeers, by name.
type Views = crate::handle::Views<MirrorPeer>;

/// The hub's MirrorPeers (cheap to clone).
#[derive(Clone)]
pub struct MirrorPeers {
    handle: Handle<actor::Msg, MirrorPeer>,
}

impl From<Gone> for MirrorPeerError {
    fn from(_: Gone) -> Self {
        Self::Gone
    }
}

impl std::fmt::Debug for MirrorPeers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorPeers").finish_non_exhaustive()
    }
}

impl MirrorPeers {
    /// Loads the stored state and spawns the task; it ends when `shutdown` turns true or every
    /// handle is gone.
    pub async fn spawn(
        buckets: Buckets,
        deps: Deps,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), MirrorPeerError> {
        let stored = actor::Stored {
            peers: buckets.peers.load_all().await?,
            secrets: buckets.secrets.load_all().await?,
            keys: buckets.keys.load_all().await?,
        };
        let views: Views = Arc::default();
        let (tx, task) = actor::spawn(buckets, deps, views.clone(), stored, shutdown);
        let handle = Handle::new(tx, views);
        Ok((Self { handle }, task))
    }

    /// Creates or updates a MirrorPeer (ODF's webhook rules); answered once stored.
    pub async fn apply(&self, mut peer: MirrorPeer) -> Result<MirrorPeer, MirrorPeerError> {
        flotilla_api::mirrorpeer::set_defaults(&mut peer);
        let errors = flotilla_api::mirrorpeer::validate(&peer);
        if !errors.is_empty() {
            return Err(MirrorPeerError::Invalid(errors));
        }
        self.handle
            .ask(|r| actor::Msg::Apply(Box::new(peer), r))
            .await?
    }

    /// One MirrorPeer.
    pub fn get(&self, name: &str) -> Option<MirrorPeer> {
        self.handle.get(name)
    }

    /// Every MirrorPeer.
    pub fn list(&self) -> Vec<MirrorPeer> {
        self.handle.list("")
    }

    /// Deletes a MirrorPeer and its boxes; its peers are poked to remove their GREEN Secrets.
    pub async fn delete(&self, name: &str) -> Result<(), MirrorPeerError> {
        let name = name.to_string();
        self.handle.ask(|r| actor::Msg::Delete(name, r)).await?
    }

    /// Answers `cluster`'s request (its subject, envelope and acceptance checked); a full
    /// mailbox is an answer saying so, never a wait.
    pub async fn sync(&self, cluster: &str, request: PeerSyncRequest) -> PeerSyncResponse {
        let (reply, rx) = oneshot::channel();
        let msg = actor::Msg::Sync(cluster.to_string(), Box::new(request), reply);
        if self.handle.try_send(msg).is_err() {
            return PeerSyncResponse {
                error: "the hub is busy; ask again".into(),
                ..Default::default()
            };
        }
        rx.await.unwrap_or_else(|_| PeerSyncResponse {
            error: "MirrorPeers are not being served; ask again".into(),
            ..Default::default()
        })
    }
}
