//! How full the store's streams are: `flotilla_hub_stream_bytes{stream}`,
//! `flotilla_hub_stream_max_bytes{stream}` (0: no limit) and `flotilla_hub_stream_messages{stream}`
//! for every stream of the hub's JetStream account (the status stream, the buckets' `KV_…`
//! streams), read with one stream list every [`EVERY`].
//!
//! One poller per fleet, not per hub: [`spawn`]'s task lists the streams only while this hub
//! holds the controllers' unit (the caller says which unit through a watch), and exports nothing
//! the rest of the time, so a fleet of hubs asks the servers once a period and a dashboard sums
//! nothing twice. The status stream near its `max_bytes` (`--status-stream-max-bytes`) drops its oldest
//! statuses (discard old): alert `FlotillaStatusStreamNearLimit`.
//!
//! The list rides elections ([`super::ride`]); a list that fails keeps the last values (the
//! fill of a stream does not jump while its leader is elected) and says so in the log.

use super::StoreError;
use super::ride::{Call, ride};
use async_nats::jetstream::{self, stream};
use futures::TryStreamExt;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How often the holder lists the streams.
pub const EVERY: Duration = Duration::from_secs(30);
/// Most streams exported (the first page of JetStream's stream list): the series stay bounded
/// on a server shared with other applications.
pub const MAX_STREAMS: usize = 256;

/// One stream's fill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fill {
    /// The stream's name (`FLOTILLA_STATUS`, `KV_works`, …).
    pub stream: String,
    /// Bytes it holds.
    pub bytes: u64,
    /// Its `max_bytes` (0: no limit; JetStream says -1).
    pub max_bytes: u64,
    /// Messages it holds.
    pub messages: u64,
}

impl Fill {
    /// The fill a stream's info states.
    pub fn of(info: &stream::Info) -> Self {
        Self {
            stream: info.config.name.clone(),
            bytes: info.state.bytes,
            max_bytes: u64::try_from(info.config.max_bytes).unwrap_or(0),
            messages: info.state.messages,
        }
    }
}

/// Every stream's fill, listed once (riding elections); at most [`MAX_STREAMS`], by name.
pub async fn list(js: &jetstream::Context) -> Result<Vec<Fill>, StoreError> {
    let what = Call {
        op: "read",
        bucket: "streams",
        key: "",
    };
    let mut fills = ride(what, || async {
        let mut fills = Vec::new();
        let mut streams = js.streams();
        while let Some(info) = streams.try_next().await.map_err(|e| StoreError::Read {
            bucket: "streams".into(),
            key: String::new(),
            message: e.to_string(),
            election: flotilla_bus::election::explains(&e),
        })? {
            fills.push(Fill::of(&info));
            if fills.len() == MAX_STREAMS {
                break;
            }
        }
        Ok::<_, StoreError>(fills)
    })
    .await?;
    fills.sort_by(|a, b| a.stream.cmp(&b.stream));
    Ok(fills)
}

/// The last fills listed, exported at each scrape (none while another hub lists them).
#[derive(Clone, Default)]
pub struct FillMetrics(Arc<Mutex<Vec<Fill>>>);

impl std::fmt::Debug for FillMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FillMetrics")
    }
}

impl FillMetrics {
    /// Replaces the fills.
    pub fn set(&self, fills: Vec<Fill>) {
        *self.0.lock().expect("fills lock") = fills;
    }

    /// The fills exported now.
    pub fn get(&self) -> Vec<Fill> {
        self.0.lock().expect("fills lock").clone()
    }
}

/// Labels of the stream gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabels {
    stream: String,
}

/// A gauge of the fill: its name, its help, and its value for one stream.
type Gauge = (&'static str, &'static str, fn(&Fill) -> u64);

impl Collector for FillMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let fills = self.get();
        let gauges: [Gauge; 3] = [
            (
                "stream_bytes",
                "Bytes a JetStream stream holds (exported by the hub holding the controllers' unit)",
                |f| f.bytes,
            ),
            (
                "stream_max_bytes",
                "A JetStream stream's max_bytes, 0 when it has no limit (exported by the hub holding the controllers' unit)",
                |f| f.max_bytes,
            ),
            (
                "stream_messages",
                "Messages a JetStream stream holds (exported by the hub holding the controllers' unit)",
                |f| f.messages,
            ),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for f in &fills {
                let labels = StreamLabels {
                    stream: f.stream.clone(),
                };
                let v = i64::try_from(value(f)).unwrap_or(i64::MAX);
                ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// Lists the streams into `metrics` every `every` while `holds(&holder)` (this hub holds the
/// unit that polls), and clears them when it stops holding it; ends on `shutdown`.
pub fn spawn<T: Send + Sync + 'static>(
    js: jetstream::Context,
    mut holder: watch::Receiver<T>,
    holds: fn(&T) -> bool,
    metrics: FillMetrics,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let run = async move {
        loop {
            if *shutdown.borrow() {
                return;
            }
            let holding = holds(&holder.borrow_and_update());
            if holding {
                tokio::select! {
                    listed = list(&js) => match listed {
                        Ok(fills) => metrics.set(fills),
                        Err(e) => tracing::warn!(error = %e, "listing the streams failed; the last fills stay"),
                    },
                    _ = shutdown.changed() => return,
                }
            } else {
                metrics.set(Vec::new());
            }
            let next = async {
                if holding {
                    tokio::time::sleep(every).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = next => {}
                changed = holder.changed() => if changed.is_err() { return },
                _ = shutdown.changed() => return,
            }
        }
    };
    tokio::spawn(run.instrument(tracing::info_span!("stream_fill")))
}

#[cfg(test)]
mod tests;
