//! One controller family's shape, and the running set of them.
//!
//! A family (cluster sets, placements, replica sets, add-ons, policies, ManagedServiceAccounts,
//! import policies, MirrorPeers) is a [`Family`]: it names itself, adds its gRPC services to the
//! API once at boot (each behind a late slot it fills while it runs), declares who may call
//! them and the status report kinds it takes, and starts from a [`Start`] context that opens its buckets under the
//! controllers' fence, hands out the stop signal, owns its tasks and what stopping it takes,
//! and carries what earlier families provide. The hub's one list of families is
//! `controllers::families` in `flotilla-hub`; from it follow the gRPC services, the access
//! table, forwarding (which paths are the controllers'), the report sinks, start, stop and the
//! subscriptions waited for. A family writes only what is its own, as a [`Recipe`]; [`Served`]
//! makes it a `Family` (the slots, the serving, the filling).
//!
//! [`Controllers`] is the running set: started in list order, stopped in reverse (dependents
//! before what they need), with every task bounded on stop. (I/O: spawns and stops tasks.)

mod buckets;
mod flags;
mod provided;
mod recipe;
mod start;
#[cfg(test)]
mod tests;

pub use flags::positive_rate;
pub use provided::Provided;
pub use recipe::{Recipe, Served, Services};
pub use start::{Deps, Start};

use crate::ha::Fence;
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Where hubs not holding the controllers forward the controllers' gRPC calls (hub account
/// only).
pub const FORWARD_SUBJECT: &str = "flotilla.hub.controllers.grpc";
/// How long the controllers' subscriptions get to be in place before they serve anyway.
const SUBSCRIBED_WITHIN: Duration = Duration::from_secs(10);
/// How long each stop step and each task gets to end.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why a family could not start: the family, and the cause.
#[derive(Debug, thiserror::Error)]
#[error("controller family {family}: {source}")]
pub struct StartError {
    /// The family (filled in by [`Controllers::start`] when the error did not say).
    pub family: &'static str,
    /// What went wrong.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl StartError {
    /// `source`, as family `family`'s reason.
    pub fn new(
        family: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            family,
            source: Box::new(source),
        }
    }
}

impl From<crate::store::StoreError> for StartError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::new("", e)
    }
}

/// A family's start failing for a reason of its own, as text (a missing handle).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Missing(pub String);

/// One controller family.
pub trait Family: Send + Sync + 'static {
    /// Its name (the log, spans, errors).
    fn name(&self) -> &'static str;

    /// Adds its gRPC services to the API: each answers from a late slot the family fills while
    /// it runs here ([`Start::serve_from`]), and `UNAVAILABLE` otherwise.
    fn serve(&self, api: crate::grpc::api::Api) -> crate::grpc::api::Api;

    /// Who may call each method of the services it serves, one row per service (the hub's
    /// access table is the core's rows and every family's, [`Families::access`]).
    fn access(&self) -> &'static [crate::grpc::access::Rows];

    /// The status report kinds it takes from the router ([`Start::take_reports`]).
    fn reports(&self) -> &'static [crate::report::Kind] {
        &[]
    }

    /// Loads its state under the controllers' fence and starts its tasks.
    fn start<'a>(&'a self, cx: &'a mut Start<'_>) -> BoxFuture<'a, Result<(), StartError>>;
}

/// A family's gRPC service: the slot it fills while running here, and the service every hub
/// serves from it.
pub struct Slot<S> {
    slot: Arc<crate::grpc::late::LateSlot<S>>,
    served: crate::grpc::late::Late<S>,
}

impl<S> Default for Slot<S> {
    fn default() -> Self {
        let (slot, served) = crate::grpc::late::LateSlot::new();
        Self {
            slot: Arc::new(slot),
            served,
        }
    }
}

impl<S> Slot<S> {
    /// The service as the API serves it (add it in [`Family::serve`]).
    pub fn served(&self) -> crate::grpc::late::Late<S> {
        self.served.clone()
    }

    /// The slot to fill ([`Start::serve_from`]).
    pub fn slot(&self) -> &Arc<crate::grpc::late::LateSlot<S>> {
        &self.slot
    }
}

/// The hub's families, in start order.
#[derive(Clone)]
pub struct Families {
    list: Arc<Vec<Box<dyn Family>>>,
    paths: Arc<Vec<String>>,
}

impl Families {
    /// Adds every family's services to `api`, and remembers their paths (for forwarding).
    pub fn new(
        list: Vec<Box<dyn Family>>,
        mut api: crate::grpc::api::Api,
    ) -> (Self, crate::grpc::api::Api) {
        let before = api.names().len();
        for family in &list {
            api = family.serve(api);
        }
        let paths = api.names()[before..]
            .iter()
            .map(|name| format!("/{name}/"))
            .collect();
        let families = Self {
            list: Arc::new(list),
            paths: Arc::new(paths),
        };
        (families, api)
    }

    /// The report kinds every family takes.
    pub fn report_kinds(list: &[Box<dyn Family>]) -> Vec<crate::report::Kind> {
        list.iter()
            .flat_map(|f| f.reports().iter().copied())
            .collect()
    }

    /// The hub's access table: the core's rows and every family's in `list`; a method declared
    /// twice is refused.
    pub fn access(
        list: &[Box<dyn Family>],
    ) -> Result<crate::grpc::access::Table, crate::grpc::access::Twice> {
        let families = list.iter().map(|f| (f.name(), f.access()));
        crate::grpc::access::Table::new(
            [("core", crate::grpc::access::CORE)]
                .into_iter()
                .chain(families),
        )
    }

    /// Whether the call at `path` is one of the controllers'.
    pub fn serves(&self, path: &str) -> bool {
        self.paths.iter().any(|p| path.starts_with(p.as_str()))
    }

    /// The families' names, in start order.
    pub fn names(&self) -> Vec<&'static str> {
        self.list.iter().map(|f| f.name()).collect()
    }
}

/// A stop step: what stopping one family takes beyond its tasks (an actor's own stop).
pub type Stopper = (
    &'static str,
    Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send + Sync>,
);

/// The running controllers.
pub struct Controllers {
    provided: Provided,
    stop: watch::Sender<bool>,
    empty: Vec<Box<dyn Fn() + Send + Sync>>,
    stoppers: Mutex<Vec<Stopper>>,
    tasks: Mutex<Vec<(&'static str, JoinHandle<()>)>>,
}

impl std::fmt::Debug for Controllers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controllers")
            .field("provided", &self.provided)
            .finish_non_exhaustive()
    }
}

impl Controllers {
    /// Starts every family in order under `fence`, then the forwarded calls' and reports'
    /// servers; waits (bounded) for their subscriptions, then fills their services and report
    /// sinks. A family that fails to start stops the ones started before it.
    pub async fn start(families: &Families, deps: &Deps, fence: Fence) -> Result<Self, StartError> {
        let (stop, stop_rx) = watch::channel(false);
        let mut cx = Start::new(deps, fence.clone(), stop_rx);
        for family in families.list.iter() {
            cx.begin(family.name());
            if let Err(mut e) = family.start(&mut cx).await {
                if e.family.is_empty() {
                    e.family = family.name();
                }
                let started = cx.finish(stop);
                started.stop().await;
                return Err(e);
            }
        }
        cx.begin("core");
        cx.serve_forwarded();
        let (ready, fills, controllers) = cx.into_parts(stop);
        if tokio::time::timeout(SUBSCRIBED_WITHIN, ready.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "the controllers' subscriptions were not confirmed within {SUBSCRIBED_WITHIN:?}; \
                 serving anyway"
            );
        }
        for fill in fills {
            fill();
        }
        tracing::info!(epoch = fence.epoch(), families = ?families.names(), "controllers started");
        Ok(controllers)
    }

    /// What a family provided (its handle): `None` for a type no family provides.
    pub fn try_get<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.provided.get::<T>()
    }

    /// What a family provided (its handle).
    ///
    /// # Panics
    /// When no family in the list provides a `T` (a programming error: the list is fixed).
    pub fn get<T: Clone + Send + Sync + 'static>(&self) -> T {
        self.provided.get::<T>().unwrap_or_else(|| {
            panic!(
                "no controller family provides a {}",
                std::any::type_name::<T>()
            )
        })
    }

    /// Stops them: empties their services and sinks (calls then answer `UNAVAILABLE` or go to
    /// the next holder), signals every task, runs each family's stop in reverse start order,
    /// then waits for the tasks — each step bounded.
    pub async fn stop(&self) {
        for empty in &self.empty {
            empty();
        }
        let _ = self.stop.send(true);
        let stoppers = std::mem::take(&mut *self.stoppers.lock().expect("controller stoppers"));
        for (name, stopper) in stoppers.into_iter().rev() {
            if tokio::time::timeout(STOP_GRACE, stopper()).await.is_err() {
                tracing::warn!(family = name, "stopping a controller family took too long");
            }
        }
        let tasks = std::mem::take(&mut *self.tasks.lock().expect("controller tasks"));
        for (name, task) in tasks.into_iter().rev() {
            let abort = task.abort_handle();
            if tokio::time::timeout(STOP_GRACE, task).await.is_err() {
                tracing::warn!(
                    family = name,
                    "a controller task did not end in time; aborted"
                );
                abort.abort();
            }
        }
        tracing::info!("controllers stopped");
    }
}
