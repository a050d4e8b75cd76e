//! What starting a family shares: the hub's parts every family is built from, its buckets
//! opened under the controllers' fence, the stop signal, the tasks it spawns (each in a span
//! naming its family), what stopping it takes, its services' and report sinks' slots (filled
//! once every family is up), and what earlier families provide. (I/O: opens buckets, spawns.)

use super::{Controllers, Provided, Stopper};
use super::{Missing, StartError};
use crate::cluster::Clusters;
use crate::grpc;
use crate::grpc::late::LateSlot;
use crate::ha::Fence;
use crate::inventory::{ClusterInventory, WorkInventory};
use crate::metrics::Metrics;
use crate::report::Taker;
use crate::router::RouterConfig;
use crate::store::Bucket;
use flotilla_bus::jetstream::StreamOptions;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

/// The hub's parts every family is built from (family settings live with each family).
#[derive(Clone)]
pub struct Deps {
    /// JetStream, to open the buckets.
    pub jetstream: async_nats::jetstream::Context,
    /// Replicas and storage of the buckets.
    pub stream: StreamOptions,
    /// NATS, for the subjects the families serve.
    pub nats: async_nats::Client,
    /// Every cluster.
    pub inventory: ClusterInventory,
    /// Every work.
    pub works: WorkInventory,
    /// Cluster actors (here or on their shard's hub).
    pub clusters: Clusters,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Secure mode.
    pub security: Option<crate::security::Security>,
    /// Router settings (the families' own NATS subjects).
    pub router: RouterConfig,
    /// This hub's id, stamped on writes.
    pub hub_id: String,
    /// Largest event (policy specs, forwarded reports).
    pub max_event_bytes: usize,
    /// The API as forwarded calls reach it (the vouched caller held to its role again).
    pub forwarded: grpc::auth::Authenticated<tonic::service::Routes>,
    /// The control plane's sealing, for forwarded calls.
    pub seal: crate::sealed::HubSeal,
    /// What the holder remembers to run each forwarded call once.
    pub inter_hub: crate::sealed::ReplayLimits,
    /// Where the router sends the reports the families take.
    pub reports: crate::report::Sinks,
}

type Fill = Box<dyn FnOnce() + Send + Sync>;
type Empty = Box<dyn Fn() + Send + Sync>;

/// The subscriptions the controllers wait for: one receiver per router handed out.
#[derive(Default)]
pub(super) struct Ready(Vec<mpsc::UnboundedReceiver<&'static str>>);

impl Ready {
    /// Until every router handed out said its subscription is in place (or ended).
    pub(super) async fn wait(mut self) {
        for rx in &mut self.0 {
            let _ = rx.recv().await;
        }
    }
}

/// The context a family starts in.
pub struct Start<'a> {
    deps: &'a Deps,
    fence: Fence,
    stop: watch::Receiver<bool>,
    family: &'static str,
    provided: Provided,
    ready: Ready,
    fills: Vec<Fill>,
    empty: Vec<Empty>,
    stoppers: Vec<Stopper>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
    takers: HashMap<&'static str, Arc<dyn Taker>>,
}

impl<'a> Start<'a> {
    pub(super) fn new(deps: &'a Deps, fence: Fence, stop: watch::Receiver<bool>) -> Self {
        Self {
            deps,
            fence,
            stop,
            family: "core",
            provided: Provided::default(),
            ready: Ready::default(),
            fills: Vec::new(),
            empty: Vec::new(),
            stoppers: Vec::new(),
            tasks: Vec::new(),
            takers: HashMap::new(),
        }
    }

    /// The next family to start.
    pub(super) fn begin(&mut self, family: &'static str) {
        self.family = family;
    }

    /// The hub's parts.
    pub fn deps(&self) -> &Deps {
        self.deps
    }

    /// The stop signal every task of the controllers follows.
    pub fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop.clone()
    }

    /// `bucket`, its writes stamped with the controllers' epoch and refused once the fence is
    /// gone.
    pub fn fenced<T: prost::Message + Default>(&self, bucket: Bucket<T>) -> Bucket<T> {
        bucket.fenced(self.fence.clone(), &self.deps.hub_id)
    }

    /// Opens the bucket `name`, fenced.
    pub async fn open<T: prost::Message + Default>(
        &self,
        name: &'static str,
    ) -> Result<Bucket<T>, StartError> {
        let bucket = Bucket::open(&self.deps.jetstream, name, self.deps.stream).await?;
        Ok(self.fenced(bucket))
    }

    /// Offers `handle` to the families after this one (and to the hub: [`Controllers::get`]).
    pub fn provide<T: Clone + Send + Sync + 'static>(&mut self, handle: T) {
        self.provided.insert(handle);
    }

    /// What an earlier family provided; an error naming both families when none did (the list
    /// is in the wrong order).
    pub fn need<T: Clone + Send + Sync + 'static>(&self) -> Result<T, StartError> {
        self.provided.get::<T>().ok_or_else(|| {
            let why = format!(
                "needs a {}, which no family started before it provides",
                std::any::type_name::<T>()
            );
            StartError::new(self.family, Missing(why))
        })
    }

    /// `source`, as the starting family's reason.
    pub fn failed(&self, source: impl std::error::Error + Send + Sync + 'static) -> StartError {
        StartError::new(self.family, source)
    }

    /// Router settings whose subscriptions are waited for before the controllers serve.
    pub fn router(&mut self) -> RouterConfig {
        let (tx, rx) = mpsc::unbounded_channel();
        self.ready.0.push(rx);
        let mut router = self.deps.router.clone();
        router.ready = Some(tx);
        router
    }

    /// Spawns one of the family's tasks, in a span naming the family and the task; stopping
    /// the controllers waits for it (bounded), then aborts it.
    pub fn spawn<F>(&mut self, task: &'static str, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let span = tracing::info_span!("controller", family = self.family, task);
        self.adopt(tokio::spawn(future.instrument(span)));
    }

    /// A task the family spawned itself, owned from now on like [`Start::spawn`]'s.
    pub fn adopt(&mut self, task: JoinHandle<()>) {
        self.tasks.push((self.family, task));
    }

    /// What stopping the family takes beyond signalling its tasks (an actor's own stop); run
    /// in reverse start order, bounded.
    pub fn on_stop<F, Fut>(&mut self, stop: F)
    where
        F: FnOnce() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.stoppers
            .push((self.family, Box::new(move || Box::pin(stop()))));
    }

    /// Serves `service` from `slot` once every family is up; empties it first thing on stop.
    pub fn serve_from<S: Send + Sync + 'static>(&mut self, slot: &Arc<LateSlot<S>>, service: S) {
        let (fill, empty) = (slot.clone(), slot.clone());
        self.fills.push(Box::new(move || fill.set(Some(service))));
        self.empty.push(Box::new(move || empty.set(None)));
    }

    /// Takes the reports of status kind `kind` with `taker`: here once every family is up, and
    /// from the other hubs (forwarded) while the controllers run here.
    pub fn take_reports(&mut self, kind: &'static str, taker: Arc<dyn Taker>) {
        if let Some(sink) = self.deps.reports.get(kind) {
            let (fill, empty) = (sink.clone(), sink.clone());
            let local = taker.clone();
            self.fills
                .push(Box::new(move || fill.set_local(Some(local))));
            self.empty.push(Box::new(move || empty.set_local(None)));
        } else {
            tracing::warn!(
                family = self.family,
                kind,
                "a family takes a report kind its reports() does not declare; the router will not send it"
            );
        }
        self.takers.insert(kind, taker);
    }

    /// The core's own tasks: forwarded gRPC calls and forwarded reports.
    pub(super) fn serve_forwarded(&mut self) {
        let deps = self.deps;
        let (nats, service, stop) = (
            deps.nats.clone(),
            deps.forwarded.clone(),
            self.stop_signal(),
        );
        let (seal, replay) = (deps.seal.clone(), deps.inter_hub);
        let metrics = grpc::forward::ForwardMetrics::new(&deps.metrics);
        self.spawn("forwarded calls", async move {
            if let Err(e) = grpc::forward::serve(
                nats,
                super::FORWARD_SUBJECT,
                service,
                seal,
                replay,
                metrics,
                stop,
            )
            .await
            {
                tracing::error!(error = %e, "serving forwarded controller calls failed");
            }
        });
        let takers = std::mem::take(&mut self.takers);
        let (nats, max, stop) = (deps.nats.clone(), deps.max_event_bytes, self.stop_signal());
        self.spawn(
            "forwarded reports",
            crate::report::serve(nats, takers, max, stop),
        );
    }

    /// What waits, what fills, and the running set.
    pub(super) fn into_parts(self, stop: watch::Sender<bool>) -> (Ready, Vec<Fill>, Controllers) {
        let controllers = Controllers {
            provided: self.provided,
            stop,
            empty: self.empty,
            stoppers: Mutex::new(self.stoppers),
            tasks: Mutex::new(self.tasks),
        };
        (self.ready, self.fills, controllers)
    }

    /// The running set so far (a start that failed: stopped at once).
    pub(super) fn finish(self, stop: watch::Sender<bool>) -> Controllers {
        self.into_parts(stop).2
    }
}
