//! The handle of a cluster actor and the messages it takes (the actor itself is in
//! [`super::actor`]).

use flotilla_api::v1::{
    ClusterSetManagedNamespaceConfig, ClusterStatusReport, LeaseRenewal, ManagedCluster,
    ManifestWork, RegistrationRequest, SpecResyncRequest, Taint, TaintKey, WorkStatusReport,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};

/// The event source of everything the hub sends.
pub const SOURCE: &str = "flotilla-hub";

/// Why a request to a cluster actor failed.
#[derive(Debug, Clone, Error)]
pub enum ClusterError {
    /// No such object (the message names it: `managed cluster "edge-1"`, `ManifestWork c/w`).
    #[error("{0} not found")]
    NotFound(String),
    /// The request is invalid; the message names the field.
    #[error("{0}")]
    Invalid(String),
    /// The store could not be written; nothing changed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The actor is gone (cluster deleted meanwhile).
    #[error("managed cluster {0:?} is being deleted")]
    Gone(String),
    /// A stale resourceVersion.
    #[error("{0}")]
    Conflict(String),
    /// The object is in a state that does not allow the request.
    #[error("{0}")]
    Precondition(String),
}

/// A lease renewal as received from the status stream.
#[derive(Debug)]
pub struct LeaseEvent {
    /// The payload.
    pub renewal: LeaseRenewal,
    /// `sequenceid`.
    pub sequence: Option<u64>,
    /// When the NATS server stored it (the hub's time base, not the agent's clock).
    pub server_time: SystemTime,
    /// The JetStream message, acknowledged once handled.
    pub ack: Option<async_nats::jetstream::Message>,
}

/// A cluster status report as received from the status stream.
#[derive(Debug)]
pub struct StatusEvent {
    /// The payload.
    pub report: ClusterStatusReport,
    /// `sequenceid`.
    pub sequence: Option<u64>,
    /// `statushash`.
    pub hash: Option<String>,
    /// The JetStream message, acknowledged once handled (persisted or discarded).
    pub ack: Option<async_nats::jetstream::Message>,
}

/// A work status report as received from the status stream.
#[derive(Debug)]
pub struct WorkStatusEvent {
    /// The payload.
    pub report: WorkStatusReport,
    /// `resourceid` from the subject.
    pub resource_id: String,
    /// `sequenceid`.
    pub sequence: Option<u64>,
    /// `statushash`.
    pub hash: Option<String>,
    /// The JetStream message, acknowledged once handled.
    pub ack: Option<async_nats::jetstream::Message>,
    /// The agent's trace of this status (W3C `traceparent`).
    pub traceparent: Option<String>,
}

pub(super) type Reply<T> = oneshot::Sender<Result<T, ClusterError>>;

/// An admin edit of a cluster: applied to a copy, persisted, and only then adopted.
#[derive(Debug)]
pub enum AdminEdit {
    /// Accept the cluster (`hubAcceptsClient: true`); with a key (fingerprint or whole public
    /// key), only if that is the key bound or waiting under the name, which it then binds.
    Accept(Option<String>),
    /// Deny the cluster (`hubAcceptsClient: false`, its agent is told).
    Deny,
    /// Label edit.
    Label {
        /// Labels to set.
        set: HashMap<String, String>,
        /// Keys to remove.
        remove: Vec<String>,
    },
    /// Taint edit.
    Taint {
        /// Taints to add.
        add: Vec<Taint>,
        /// Taints to remove.
        remove: Vec<TaintKey>,
    },
    /// Lease duration change (0 = hub default).
    SetLease(i32),
    /// An OCM ManagedCluster document: creates the cluster ahead of its agent, or edits it.
    Apply(Box<ManagedCluster>),
}

/// Messages a cluster actor handles.
#[derive(Debug)]
pub enum Msg {
    /// An agent asks to join; the answer goes to the NATS reply subject.
    Register {
        /// The validated request.
        request: Box<RegistrationRequest>,
        /// Where the answer goes (an inbox).
        reply: Option<flotilla_bus::reply::ReplyTo>,
        /// The NATS user the request came from, as the server attests it (secure mode).
        credential: Option<String>,
    },
    /// Mint a join credential for this cluster (secure mode), creating the cluster ahead of its
    /// agent when it does not exist.
    Join {
        /// Lifetime.
        ttl: std::time::Duration,
        /// Pre-approve the first agent registering with it.
        accept: bool,
        /// Answer.
        respond_to: Reply<flotilla_api::v1::JoinToken>,
    },
    /// Lease renewal.
    Lease(Box<LeaseEvent>),
    /// Status report.
    Status(Box<StatusEvent>),
    /// Current object.
    Get(Reply<ManagedCluster>),
    /// An admin edit from the API.
    Edit {
        /// What to change.
        edit: Box<AdminEdit>,
        /// Answer: the cluster as stored after the edit.
        respond_to: Reply<ManagedCluster>,
    },
    /// Delete the cluster and everything the hub keeps for it.
    Delete(Reply<()>),
    /// Create or update a work (validated by the API).
    ApplyWork {
        /// The work as submitted.
        work: Box<ManifestWork>,
        /// The caller's trace (W3C `traceparent`), carried into the spec event.
        traceparent: Option<String>,
        /// Only create: refused (Conflict) when a work of that name exists by then — what a
        /// caller that checked there was none (and so checked no stored executor) needs.
        only_new: bool,
        /// Answer.
        respond_to: Reply<ManifestWork>,
    },
    /// Start deleting a work.
    DeleteWork {
        /// Work name.
        name: String,
        /// Answer.
        respond_to: Reply<ManifestWork>,
    },
    /// Work status from the agent.
    WorkStatus(Box<WorkStatusEvent>),
    /// The managed namespaces the cluster's sets ask for (from set membership): written into
    /// `status.managedNamespaces` and, when the list changed, sent to the agent.
    ManagedNamespaces {
        /// `(set, name)` entries, without conditions.
        desired: Vec<ClusterSetManagedNamespaceConfig>,
        /// Answer once persisted (or kept for a retry).
        respond_to: Reply<()>,
    },
    /// The agent's spec resync request; the answer goes to the reply subject.
    Resync {
        /// `{resourceid: version}` held by the agent.
        request: Box<SpecResyncRequest>,
        /// Where the answer goes (an inbox).
        reply: Option<flotilla_bus::reply::ReplyTo>,
    },
}

/// A cloneable handle to one cluster actor.
#[derive(Clone, Debug)]
pub struct ClusterHandle {
    pub(super) tx: mpsc::Sender<Msg>,
    pub(super) name: Arc<str>,
}

impl ClusterHandle {
    /// Sends without waiting; a full mailbox returns the message (the caller counts the drop).
    pub fn try_send(&self, msg: Msg) -> Result<(), Box<mpsc::error::TrySendError<Msg>>> {
        self.tx.try_send(msg).map_err(Box::new)
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Msg) -> Result<T, ClusterError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx))
            .await
            .map_err(|_| ClusterError::Gone(self.name.to_string()))?;
        rx.await
            .map_err(|_| ClusterError::Gone(self.name.to_string()))?
    }

    /// The current object.
    pub async fn get(&self) -> Result<ManagedCluster, ClusterError> {
        self.call(Msg::Get).await
    }

    /// Applies an admin edit; the answer is the cluster as stored afterwards.
    pub async fn edit(&self, edit: AdminEdit) -> Result<ManagedCluster, ClusterError> {
        self.call(|respond_to| Msg::Edit {
            edit: Box::new(edit),
            respond_to,
        })
        .await
    }

    /// Mints a join credential for the cluster (secure mode).
    pub async fn join(
        &self,
        ttl: std::time::Duration,
        accept: bool,
    ) -> Result<flotilla_api::v1::JoinToken, ClusterError> {
        self.call(|respond_to| Msg::Join {
            ttl,
            accept,
            respond_to,
        })
        .await
    }

    /// Deletes the cluster.
    pub async fn delete(&self) -> Result<(), ClusterError> {
        self.call(Msg::Delete).await
    }

    /// Creates or updates a work.
    pub async fn apply_work(&self, work: ManifestWork) -> Result<ManifestWork, ClusterError> {
        self.call(|respond_to| Msg::ApplyWork {
            work: Box::new(work),
            traceparent: flotilla_bus::trace::traceparent(),
            only_new: false,
            respond_to,
        })
        .await
    }

    /// Creates a work; Conflict when one of that name exists by the time the actor looks.
    pub async fn create_work(&self, work: ManifestWork) -> Result<ManifestWork, ClusterError> {
        self.call(|respond_to| Msg::ApplyWork {
            work: Box::new(work),
            traceparent: flotilla_bus::trace::traceparent(),
            only_new: true,
            respond_to,
        })
        .await
    }

    /// Sets the managed namespaces the cluster's sets ask for.
    pub async fn set_managed_namespaces(
        &self,
        desired: Vec<ClusterSetManagedNamespaceConfig>,
    ) -> Result<(), ClusterError> {
        self.call(|respond_to| Msg::ManagedNamespaces {
            desired,
            respond_to,
        })
        .await
    }

    /// Starts deleting a work.
    pub async fn delete_work(&self, name: String) -> Result<ManifestWork, ClusterError> {
        self.call(|respond_to| Msg::DeleteWork { name, respond_to })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailbox_messages_stay_small_so_idle_actors_stay_cheap() {
        // tokio allocates mailbox slots in blocks of 32: every byte here costs 32 per cluster.
        assert!(
            std::mem::size_of::<Msg>() <= 96,
            "Msg is {} bytes",
            std::mem::size_of::<Msg>()
        );
    }
}
