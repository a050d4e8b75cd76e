//! `describe`: one cluster, work or placement in detail, or alone in its OCM shape with `-o`.

use super::print;
use crate::hub::Hub;
use crate::kind::{Kind, cluster, placement, work};
use crate::output::{self, Format};
use anyhow::Result;
use clap::Subcommand;
use flotilla_api::v1::{GetClusterRequest, GetWorkRequest, PlacementRef};
use serde::Serialize;

/// What `describe` shows.
#[derive(Subcommand, Debug)]
pub enum DescribeWhat {
    /// A ManagedCluster.
    Cluster {
        /// Name.
        name: String,
    },
    /// A Placement: status, decisions, and for every candidate cluster whether each filter
    /// passed and each prioritizer's score (OCM's debug endpoint).
    Placement {
        /// Name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// A ManifestWork: conditions, per-manifest conditions and feedback.
    Work {
        /// Name.
        name: String,
        /// Cluster (the work's namespace).
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: String,
    },
}

/// Runs `describe`.
pub async fn run(hub: &Hub, format: Format, what: DescribeWhat) -> Result<()> {
    match what {
        DescribeWhat::Cluster { name } => {
            let c = hub
                .call(hub.clusters().get_cluster(GetClusterRequest { name }))
                .await?;
            show(format, || cluster::describe(&c), c.to_ocm())
        }
        DescribeWhat::Work { name, cluster } => {
            let w = hub
                .call(hub.works().get_work(GetWorkRequest { cluster, name }))
                .await?;
            show(format, || work::describe(&w), w.to_ocm())
        }
        DescribeWhat::Placement { name, namespace } => {
            let r = PlacementRef { namespace, name };
            let debug = hub
                .call(hub.placements().debug_placement(r.clone()))
                .await?;
            if format != Format::Table {
                return show(format, String::new, placement::described(&debug));
            }
            // Only the text shows the decisions; the structured form has the placement's status.
            let decisions = hub.call(hub.placements().list_decisions(r)).await?.items;
            print(Ok(placement::describe(&debug, &decisions)))
        }
    }
}

/// Prints one object: its human description for a table, else its structured form alone.
fn show<O: Serialize>(format: Format, text: impl FnOnce() -> String, object: O) -> Result<()> {
    match format {
        Format::Table => print(Ok(text())),
        f => print(output::structured(f, vec![object], true)),
    }
}
