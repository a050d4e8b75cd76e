//! What the hub runs: `flotilla.v1.InfoService` ([`family`]: its version, id and the agent
//! versions it accepts, for `flotilla version`) and `flotilla_hub_build_info`.

pub mod family;

use flotilla_api::version;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// The version label of `flotilla_hub_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

/// Exports `flotilla_hub_build_info{version}` = 1 (every hub, not only the one serving the
/// service: a dashboard counts the versions running).
pub fn export_build_info(metrics: &crate::metrics::Metrics) {
    let build: Family<BuildLabels, Gauge> = Family::default();
    build
        .get_or_create(&BuildLabels {
            version: version::VERSION,
        })
        .set(1);
    metrics.register_component("build", |registry| {
        registry.register("info", "1, labelled with the hub's version", build);
    });
}
