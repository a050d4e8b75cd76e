//! What this hub does for each unit it holds (the [`Host`] of the shard-lease loop): for a
//! status shard, its cluster actors, its status consumer and the calls other hubs forward to
//! its clusters; for the controllers' unit, the [`Controllers`].

use crate::cluster::Clusters;
use crate::controller::{self, Controllers, Families};
use crate::ha::shards::Host;
use crate::ha::{CONTROLLERS, Fence};
use crate::metrics::Metrics;
use crate::router::{self, RouterConfig, StatusFeed};
use crate::views::Progress;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How long a new owner waits for its views to catch up with the store before starting a
/// shard's actors from them.
const CATCH_UP: Duration = Duration::from_secs(10);

struct Feed {
    feed: StatusFeed,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    calls: JoinHandle<()>,
}

/// The hub's side of every unit.
pub struct Units {
    /// The cluster actors.
    pub clusters: Clusters,
    /// The status stream.
    pub status_stream: async_nats::jetstream::stream::Stream,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Router settings (the status consumers').
    pub router: RouterConfig,
    /// The views a new owner starts actors from, and their buckets' streams.
    pub views: Vec<(Progress, async_nats::jetstream::stream::Stream)>,
    feeds: Mutex<HashMap<u32, Feed>>,
    families: Families,
    controller_deps: controller::Deps,
    controllers: watch::Sender<Option<Arc<Controllers>>>,
}

impl Units {
    /// The host over these parts.
    pub fn new(
        clusters: Clusters,
        status_stream: async_nats::jetstream::stream::Stream,
        metrics: Arc<Metrics>,
        router: RouterConfig,
        views: Vec<(Progress, async_nats::jetstream::stream::Stream)>,
        families: Families,
        controller_deps: controller::Deps,
    ) -> Self {
        Self {
            clusters,
            status_stream,
            metrics,
            router,
            views,
            feeds: Mutex::new(HashMap::new()),
            families,
            controller_deps,
            controllers: watch::channel(None).0,
        }
    }

    /// Stops every shard and the controllers (a stopping hub, after handing them over).
    pub async fn stop_all(self: &Arc<Self>) {
        let held: Vec<u32> = self
            .feeds
            .lock()
            .expect("feeds lock")
            .keys()
            .copied()
            .collect();
        for shard in held {
            self.clone().stop_shard(shard).await;
        }
        self.clone().stop_controllers().await;
    }

    /// Whether this hub runs `unit` now (its actors, or the controllers, started).
    pub fn started(&self, unit: u32) -> bool {
        if unit == CONTROLLERS {
            self.controllers().is_some()
        } else {
            self.clusters.holds_shard(unit)
        }
    }

    /// The controllers, while this hub runs them.
    pub fn controllers(&self) -> Option<Arc<Controllers>> {
        self.controllers.borrow().clone()
    }

    /// What the controller families are built from.
    pub fn controller_deps(&self) -> &controller::Deps {
        &self.controller_deps
    }

    /// The controller families (whose gRPC paths are the controllers').
    pub fn families(&self) -> &Families {
        &self.families
    }

    /// Follows the controllers starting and stopping on this hub (the dashboard's live feed
    /// subscribes to their views while they run here).
    pub fn watch_controllers(&self) -> watch::Receiver<Option<Arc<Controllers>>> {
        self.controllers.subscribe()
    }

    async fn start_controllers(self: Arc<Self>, fence: Fence) {
        // The store may be briefly unreachable (a NATS node lost): keep trying while the unit
        // is held.
        let mut wait = Duration::from_millis(200);
        while fence.is_valid() {
            match Controllers::start(&self.families, &self.controller_deps, fence.clone()).await {
                Ok(c) => {
                    self.controllers.send_replace(Some(Arc::new(c)));
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "starting the controllers failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn stop_controllers(self: Arc<Self>) {
        let running = self.controllers.send_replace(None);
        if let Some(c) = running {
            c.stop().await;
        }
    }

    /// Waits (bounded) until every view has read what its bucket held when asked.
    async fn catch_up(&self) {
        for (progress, stream) in &self.views {
            let mut stream = stream.clone();
            let Ok(info) = stream.info().await else {
                continue;
            };
            if !progress.reached(info.state.last_sequence, CATCH_UP).await {
                tracing::warn!(stream = %info.config.name, "views behind the store; starting the shard anyway");
            }
        }
    }

    async fn start_shard(self: Arc<Self>, shard: u32, fence: Fence) {
        self.catch_up().await;
        if !fence.is_valid() {
            return;
        }
        self.clusters.start_shard(shard, fence.clone());
        let feed = StatusFeed {
            shard,
            epoch: fence.epoch(),
        };
        let (stop, stop_rx) = watch::channel(false);
        let calls = tokio::spawn(
            crate::cluster::route::serve_shard(
                self.clusters.shared().nats.clone(),
                shard,
                fence.clone(),
                self.clusters.clone(),
                stop_rx.clone(),
            )
            .instrument(tracing::info_span!("shard_calls", shard)),
        );
        let task = tokio::spawn(
            router::run_status(
                self.status_stream.clone(),
                feed.clone(),
                fence,
                self.clusters.clone(),
                self.metrics.clone(),
                self.router.clone(),
                stop_rx,
            )
            .instrument(tracing::info_span!("status_feed", shard)),
        );
        if let Some(old) = self.feeds.lock().expect("feeds lock").insert(
            shard,
            Feed {
                feed,
                stop,
                task,
                calls,
            },
        ) {
            let _ = old.stop.send(true);
        }
    }

    async fn stop_shard(self: Arc<Self>, shard: u32) {
        let feed = self.feeds.lock().expect("feeds lock").remove(&shard);
        if let Some(f) = &feed {
            let _ = f.stop.send(true);
        }
        self.clusters.stop_shard(shard).await;
        if let Some(f) = feed {
            let _ = tokio::time::timeout(Duration::from_secs(5), f.task).await;
            let _ = tokio::time::timeout(Duration::from_secs(5), f.calls).await;
            router::remove_status_consumer(&self.status_stream, &f.feed).await;
        }
    }
}

/// [`Units`] shared with the lease loop.
pub struct UnitHost(pub Arc<Units>);

impl Host for UnitHost {
    fn start(&self, unit: u32, fence: Fence) -> BoxFuture<'static, ()> {
        let units = self.0.clone();
        Box::pin(async move {
            if unit == CONTROLLERS {
                units.start_controllers(fence).await;
            } else {
                units.start_shard(unit, fence).await;
            }
        })
    }

    fn stop(&self, unit: u32) -> BoxFuture<'static, ()> {
        let units = self.0.clone();
        Box::pin(async move {
            if unit == CONTROLLERS {
                units.stop_controllers().await;
            } else {
                units.stop_shard(unit).await;
            }
        })
    }
}
