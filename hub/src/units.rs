//! What this hub does for each unit it holds (the [`Host`] of the shard-lease loop): for a
//! status shard, its cluster actors and its status consumer; for the controllers' unit, nothing
//! yet beyond recording it (the controllers run on every hub until they are partitioned too).

use crate::cluster::Clusters;
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

/// How long a new owner waits for its views to catch up with the store before starting a
/// shard's actors from them.
const CATCH_UP: Duration = Duration::from_secs(2);

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
}

impl Units {
    /// The host over these parts.
    pub fn new(
        clusters: Clusters,
        status_stream: async_nats::jetstream::stream::Stream,
        metrics: Arc<Metrics>,
        router: RouterConfig,
        views: Vec<(Progress, async_nats::jetstream::stream::Stream)>,
    ) -> Self {
        Self {
            clusters,
            status_stream,
            metrics,
            router,
            views,
            feeds: Mutex::new(HashMap::new()),
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
        let calls = tokio::spawn(crate::cluster::route::serve_shard(
            self.clusters.shared().nats.clone(),
            shard,
            fence.clone(),
            self.clusters.clone(),
            stop_rx.clone(),
        ));
        let task = tokio::spawn(router::run_status(
            self.status_stream.clone(),
            feed.clone(),
            fence,
            self.clusters.clone(),
            self.metrics.clone(),
            self.router.clone(),
            stop_rx,
        ));
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
                tracing::info!(epoch = fence.epoch(), "holding the controllers' unit");
            } else {
                units.start_shard(unit, fence).await;
            }
        })
    }

    fn stop(&self, unit: u32) -> BoxFuture<'static, ()> {
        let units = self.0.clone();
        Box::pin(async move {
            if unit != CONTROLLERS {
                units.stop_shard(unit).await;
            }
        })
    }
}
