//! Placements as a controller family: their actors, the dispatcher and the scores, over the
//! cluster sets; provides [`Placements`] and takes AddOnPlacementScore reports. Its settings
//! come from its [`Flags`].
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.PlacementService` | | `GetPlacement`, `ListPlacements`, `ListDecisions`, `WatchPlacements`, `DebugPlacement`, `ListScores` | | `ApplyPlacement`, `DeletePlacement`, `ApplyScore`, `DeleteScore` |

use super::score_route::{KIND, ScoreTaker};
use super::{Buckets, Deps, PlacementConfig, Placements};
use crate::clusterset::ClusterSets;
use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::placement::grpc::PlacementApi;
use crate::report::Kind;
use flotilla_api::v1::placement_service_server::PlacementServiceServer;
use std::sync::Arc;
use std::time::Duration;

/// The family.
pub struct PlacementFamily;

impl Recipe for PlacementFamily {
    const NAME: &'static str = "placements";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.PlacementService",
        &[
            ("ApplyPlacement", Write, NAMESPACE_WRITE),
            ("GetPlacement", Read, FILTERED),
            ("ListPlacements", Read, FILTERED),
            ("DeletePlacement", Write, NAMESPACE_WRITE),
            ("ListDecisions", Read, NAMESPACE_READ),
            ("WatchPlacements", Read, FILTERED),
            ("DebugPlacement", Read, NAMESPACE_READ),
            ("ApplyScore", Write, CLUSTER_WRITE),
            ("ListScores", Read, FILTERED),
            ("DeleteScore", Write, CLUSTER_WRITE),
        ],
    )];
    const REPORTS: &'static [Kind] = &[KIND];
    type Settings = PlacementConfig;
    type Services = (PlacementServiceServer<PlacementApi>,);

    async fn start(
        config: &PlacementConfig,
        cx: &mut Start<'_>,
    ) -> Result<Self::Services, StartError> {
        let sets = cx.need::<ClusterSets>()?;
        let buckets = Buckets::open(cx).await?;
        let deps = Deps {
            buckets,
            clusters: cx.deps().inventory.clone(),
            sets,
            metrics: cx.deps().metrics.clone(),
        };
        let (placements, dispatcher) =
            Placements::start(deps, config.clone(), cx.stop_signal()).await?;
        cx.adopt(dispatcher);
        let joined = placements.clone();
        cx.on_stop(move || async move { joined.join().await });
        let taker = ScoreTaker {
            scores: placements.scores().clone(),
            metrics: cx.deps().metrics.clone(),
        };
        cx.take_reports(KIND.name, Arc::new(taker));
        cx.provide(placements.clone());
        Ok((PlacementServiceServer::new(PlacementApi::new(placements)),))
    }
}

/// The family's flags (flattened into the `flotilla-hub` binary's through
/// [`crate::controllers::Flags`]).
#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Flags {
    /// Milliseconds cluster, set, binding and score changes are collected before the affected
    /// placements are rescheduled (one fleet index rebuild per window).
    #[arg(long, env = "FLOTILLA_PLACEMENT_DEBOUNCE_MS", default_value_t = 100)]
    placement_debounce_ms: u64,
    /// Placements using AddOn scores are rescheduled at least this often (OCM: 300).
    #[arg(
        long,
        env = "FLOTILLA_PLACEMENT_ADDON_RESYNC_SECONDS",
        default_value_t = 300
    )]
    placement_addon_resync_seconds: u64,
}

impl Flags {
    /// The settings they give; each problem is pushed to `errors`.
    pub fn settings(&self, errors: &mut Vec<String>) -> PlacementConfig {
        if self.placement_debounce_ms > 60_000 {
            errors.push(format!(
                "--placement-debounce-ms: {} is above 60000",
                self.placement_debounce_ms
            ));
        }
        if self.placement_addon_resync_seconds == 0 {
            errors.push("--placement-addon-resync-seconds: must be at least 1".into());
        }
        PlacementConfig {
            debounce: Duration::from_millis(self.placement_debounce_ms),
            addon_resync: Duration::from_secs(self.placement_addon_resync_seconds),
            ..PlacementConfig::default()
        }
    }
}
