//! What this hub holds, as gauges computed at each scrape (I/O-free; read from
//! [`Shards`]): `flotilla_hub_units_held` (the units whose lease this hub holds now) and
//! `flotilla_hub_units` (every unit of a control plane, the same on every hub). Summed over the
//! hubs, held below the total for minutes is a unit no hub serves: its clusters' registrations,
//! statuses and works wait (alert `FlotillaShardUnheld`).

use super::UNITS;
use super::shards::Shards;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// `flotilla_hub_units_held` and `flotilla_hub_units`.
pub struct HeldMetrics(pub Shards);

impl std::fmt::Debug for HeldMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeldMetrics")
    }
}

impl Collector for HeldMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let held = self.0.ownership().held().len() as i64;
        let family = encoder.encode_descriptor(
            "units_held",
            "Units (status shards and the controllers) whose lease this hub holds now",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(held).encode(family)?;
        let family = encoder.encode_descriptor(
            "units",
            "Units of a control plane: the status shards and the controllers (every hub exports the same)",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::from(UNITS)).encode(family)?;
        Ok(())
    }
}
