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
    /// When the NATS server stored it, on this hub's clock (the stream's stamp corrected by
    /// `router::clock`; not the agent's clock).
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
    /// When the NATS server stored it, on this hub's clock.
    pub server_time: SystemTime,
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
    /// When the NATS server stored it, on this hub's clock.
    pub server_time: SystemTime,
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
    /// A ClusterImportPolicy's one write: creates the cluster ahead of its agent (origin
    /// IMPORT) or relabels, taints, sets the lease of and accepts it, in one persist, with the
    /// checks of [`AdminEdit::Accept`]`(None)`.
    Import(Box<flotilla_api::v1::ImportEdit>),
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
        /// A new name's admission slot, held until the request is answered.
        permit: Option<crate::admission::Permit>,
    },
    /// A registration the router refused for its agent version, under the cluster's bound key:
    /// answered `REJECTED` with `why`, and recorded on the cluster
    /// (`AgentVersionAccepted=False`) when it is the cluster's own agent's.
    VersionRefused {
        /// The validated request.
        request: Box<RegistrationRequest>,
        /// Where the answer goes (an inbox).
        reply: Option<flotilla_bus::reply::ReplyTo>,
        /// The NATS user the request came from, as the server attests it (secure mode).
        credential: Option<String>,
        /// The refusal's text.
        why: String,
    },
    /// Mint a join credential for this cluster (secure mode), creating the cluster ahead of its
    /// agent when it does not exist.
    Join {
        /// Lifetime.
        ttl: std::time::Duration,
        /// Pre-approve the first agent registering with it.
        accept: bool,
        /// The set the cluster joins when an agent registers with it (empty: none).
        cluster_set: String,
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
    /// An add-on controller's word on one add-on installed here by someone else: the agent
    /// watches its spoke Lease in `install_namespace` (`None`: it no longer does).
    ExternalAddOn {
        /// The add-on.
        addon: String,
        /// Where its Lease is; `None` removes it.
        install_namespace: Option<String>,
        /// Answer once persisted (or kept for a retry).
        respond_to: Reply<()>,
    },
    /// One of the actor's deadlines is due, from its shard's alarm task while it was parked
    /// ([`super::parking`]): its own timers decide which.
    Tick,
    /// The store holds a newer version of the cluster (`work: None`) or of one of its works
    /// than this actor (or is without it): written by the shard's previous holder after this
    /// hub's view was read. The view holds the stored object; the actor takes it.
    Stored {
        /// The work's name; `None` for the cluster itself.
        work: Option<String>,
        /// The stored revision (of the write or the deletion).
        revision: u64,
        /// Whether it was a deletion.
        removed: bool,
    },
    /// The agent's spec resync request; the answer goes to the reply subject.
    Resync {
        /// `{resourceid: version}` held by the agent.
        request: Box<SpecResyncRequest>,
        /// Where the answer goes (an inbox).
        reply: Option<flotilla_bus::reply::ReplyTo>,
        /// The request's slot of the router's resync admission, freed once answered.
        permit: Option<crate::admission::Permit>,
    },
}

/// A call on a cluster actor, wherever it runs: what the API, the replica sets and the add-ons
/// ask of a cluster. Agent events ([`Msg::Register`], [`Msg::Lease`], …) never travel between
/// hubs: only the shard's holder receives them.
#[derive(Debug)]
pub enum Call {
    /// The current object.
    Get,
    /// An admin edit.
    Edit(AdminEdit),
    /// Mint a join credential.
    Join {
        /// Lifetime.
        ttl: std::time::Duration,
        /// Pre-approve the first agent registering with it.
        accept: bool,
        /// The set the cluster joins when an agent registers with it (empty: none).
        cluster_set: String,
    },
    /// Delete the cluster.
    Delete,
    /// Create or update a work.
    ApplyWork {
        /// The work.
        work: Box<ManifestWork>,
        /// The caller's trace.
        traceparent: Option<String>,
        /// Only create.
        only_new: bool,
    },
    /// Start deleting a work.
    DeleteWork(String),
    /// Set the managed namespaces.
    ManagedNamespaces(Vec<ClusterSetManagedNamespaceConfig>),
    /// Watch (or, with `None`, stop watching) an external add-on's spoke Lease.
    ExternalAddOn {
        /// The add-on.
        addon: String,
        /// Its install namespace; `None` removes it.
        install_namespace: Option<String>,
    },
}

/// What a [`Call`] answers.
#[derive(Debug)]
pub enum Answer {
    /// A cluster (boxed: the other answers are much smaller).
    Cluster(Box<ManagedCluster>),
    /// A work (boxed, like the cluster).
    Work(Box<ManifestWork>),
    /// A join credential.
    JoinToken(flotilla_api::v1::JoinToken),
    /// Done, nothing to return.
    Done,
}

impl Answer {
    fn unexpected(self, what: &str) -> ClusterError {
        ClusterError::Unavailable(format!(
            "expected {what}, the cluster's hub answered {self:?}"
        ))
    }
}

/// Where a cluster's actor runs.
#[derive(Clone, Debug)]
enum Target {
    /// Here: its mailbox.
    Local(crate::mailbox::Sender<Msg>),
    /// On the hub holding its shard.
    Remote {
        /// Calls over NATS.
        route: super::route::Remote,
        /// Create the actor there when there is none.
        spawn: bool,
    },
}

/// A cloneable handle to one cluster actor, on this hub or on the hub holding its shard.
#[derive(Clone, Debug)]
pub struct ClusterHandle {
    target: Target,
    name: Arc<str>,
}

impl ClusterHandle {
    /// The handle of an actor running here.
    pub(super) fn local(tx: crate::mailbox::Sender<Msg>, name: &str) -> Self {
        Self {
            target: Target::Local(tx),
            name: name.into(),
        }
    }

    /// The handle of an actor on the hub holding the cluster's shard.
    pub(super) fn remote(route: super::route::Remote, name: &str, spawn: bool) -> Self {
        Self {
            target: Target::Remote { route, spawn },
            name: name.into(),
        }
    }

    /// Whether the actor runs on this hub.
    pub fn is_local(&self) -> bool {
        matches!(self.target, Target::Local(_))
    }

    /// Sends without waiting; a full mailbox returns the message (the caller counts the drop).
    /// Only actors on this hub take agent events: for another hub's the message comes back.
    pub fn try_send(&self, msg: Msg) -> Result<(), Box<mpsc::error::TrySendError<Msg>>> {
        match &self.target {
            Target::Local(tx) => tx.try_send(msg).map_err(Box::new),
            Target::Remote { .. } => Err(Box::new(mpsc::error::TrySendError::Closed(msg))),
        }
    }

    async fn ask<T>(
        &self,
        tx: &crate::mailbox::Sender<Msg>,
        make: impl FnOnce(Reply<T>) -> Msg,
    ) -> Result<T, ClusterError> {
        let (reply, rx) = oneshot::channel();
        tx.send(make(reply))
            .await
            .map_err(|_| ClusterError::Gone(self.name.to_string()))?;
        // Taken but never answered: the actor was stopped mid-call — its shard changed hands
        // or the cluster went. The call may have been carried out; every call is safe to retry.
        rx.await.map_err(|_| {
            ClusterError::Unavailable(format!(
                "managed cluster {:?}: the call was cut off before its answer (the cluster's \
                 shard changed hands, or the cluster is being deleted); retry",
                self.name
            ))
        })?
    }

    /// Carries a call out, here or on the cluster's hub.
    pub async fn call(&self, call: Call) -> Result<Answer, ClusterError> {
        let tx = match &self.target {
            Target::Local(tx) => tx,
            Target::Remote { route, spawn } => return route.call(&self.name, *spawn, call).await,
        };
        Ok(match call {
            Call::Get => Answer::Cluster(Box::new(self.ask(tx, Msg::Get).await?)),
            Call::Edit(edit) => Answer::Cluster(Box::new(
                self.ask(tx, |respond_to| Msg::Edit {
                    edit: Box::new(edit),
                    respond_to,
                })
                .await?,
            )),
            Call::Join {
                ttl,
                accept,
                cluster_set,
            } => Answer::JoinToken(
                self.ask(tx, |respond_to| Msg::Join {
                    ttl,
                    accept,
                    cluster_set,
                    respond_to,
                })
                .await?,
            ),
            Call::Delete => {
                self.ask(tx, Msg::Delete).await?;
                Answer::Done
            }
            Call::ApplyWork {
                work,
                traceparent,
                only_new,
            } => Answer::Work(Box::new(
                self.ask(tx, |respond_to| Msg::ApplyWork {
                    work,
                    traceparent,
                    only_new,
                    respond_to,
                })
                .await?,
            )),
            Call::DeleteWork(name) => Answer::Work(Box::new(
                self.ask(tx, |respond_to| Msg::DeleteWork { name, respond_to })
                    .await?,
            )),
            Call::ManagedNamespaces(desired) => {
                self.ask(tx, |respond_to| Msg::ManagedNamespaces {
                    desired,
                    respond_to,
                })
                .await?;
                Answer::Done
            }
            Call::ExternalAddOn {
                addon,
                install_namespace,
            } => {
                self.ask(tx, |respond_to| Msg::ExternalAddOn {
                    addon,
                    install_namespace,
                    respond_to,
                })
                .await?;
                Answer::Done
            }
        })
    }

    async fn cluster(&self, call: Call) -> Result<ManagedCluster, ClusterError> {
        match self.call(call).await? {
            Answer::Cluster(c) => Ok(*c),
            other => Err(other.unexpected("a cluster")),
        }
    }

    async fn work(&self, call: Call) -> Result<ManifestWork, ClusterError> {
        match self.call(call).await? {
            Answer::Work(w) => Ok(*w),
            other => Err(other.unexpected("a work")),
        }
    }

    async fn done(&self, call: Call) -> Result<(), ClusterError> {
        match self.call(call).await? {
            Answer::Done => Ok(()),
            other => Err(other.unexpected("an acknowledgement")),
        }
    }

    /// The current object.
    pub async fn get(&self) -> Result<ManagedCluster, ClusterError> {
        self.cluster(Call::Get).await
    }

    /// Applies an admin edit; the answer is the cluster as stored afterwards.
    pub async fn edit(&self, edit: AdminEdit) -> Result<ManagedCluster, ClusterError> {
        self.cluster(Call::Edit(edit)).await
    }

    /// Mints a join credential for the cluster (secure mode); `cluster_set` (empty: none) is
    /// the set the cluster joins when an agent registers with it.
    pub async fn join(
        &self,
        ttl: std::time::Duration,
        accept: bool,
        cluster_set: String,
    ) -> Result<flotilla_api::v1::JoinToken, ClusterError> {
        match self
            .call(Call::Join {
                ttl,
                accept,
                cluster_set,
            })
            .await?
        {
            Answer::JoinToken(t) => Ok(t),
            other => Err(other.unexpected("a join token")),
        }
    }

    /// Deletes the cluster.
    pub async fn delete(&self) -> Result<(), ClusterError> {
        self.done(Call::Delete).await
    }

    /// Creates or updates a work.
    pub async fn apply_work(&self, work: ManifestWork) -> Result<ManifestWork, ClusterError> {
        self.work(Call::ApplyWork {
            work: Box::new(work),
            traceparent: flotilla_bus::trace::traceparent(),
            only_new: false,
        })
        .await
    }

    /// Creates a work; Conflict when one of that name exists by the time the actor looks.
    pub async fn create_work(&self, work: ManifestWork) -> Result<ManifestWork, ClusterError> {
        self.work(Call::ApplyWork {
            work: Box::new(work),
            traceparent: flotilla_bus::trace::traceparent(),
            only_new: true,
        })
        .await
    }

    /// Sets the managed namespaces the cluster's sets ask for.
    pub async fn set_managed_namespaces(
        &self,
        desired: Vec<ClusterSetManagedNamespaceConfig>,
    ) -> Result<(), ClusterError> {
        self.done(Call::ManagedNamespaces(desired)).await
    }

    /// Tells the agent to watch `addon`'s spoke Lease in `install_namespace`, or (`None`) to
    /// stop: the add-on is installed here by someone else (not an AddOnTemplate).
    pub async fn set_external_addon(
        &self,
        addon: &str,
        install_namespace: Option<&str>,
    ) -> Result<(), ClusterError> {
        self.done(Call::ExternalAddOn {
            addon: addon.to_string(),
            install_namespace: install_namespace.map(str::to_string),
        })
        .await
    }

    /// Starts deleting a work.
    pub async fn delete_work(&self, name: String) -> Result<ManifestWork, ClusterError> {
        self.work(Call::DeleteWork(name)).await
    }
}

/// The gRPC status a cluster call's failure answers with.
impl From<ClusterError> for tonic::Status {
    fn from(e: ClusterError) -> Self {
        match &e {
            ClusterError::NotFound(_) | ClusterError::Gone(_) => {
                tonic::Status::not_found(e.to_string())
            }
            ClusterError::Invalid(_) => tonic::Status::invalid_argument(e.to_string()),
            ClusterError::Unavailable(_) => tonic::Status::unavailable(e.to_string()),
            ClusterError::Conflict(_) => tonic::Status::aborted(e.to_string()),
            ClusterError::Precondition(_) => tonic::Status::failed_precondition(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailbox_messages_stay_small_so_idle_actors_stay_cheap() {
        // A mailbox holds up to its capacity of these during a burst.
        assert!(
            std::mem::size_of::<Msg>() <= 96,
            "Msg is {} bytes",
            std::mem::size_of::<Msg>()
        );
    }
}
