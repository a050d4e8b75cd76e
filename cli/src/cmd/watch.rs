//! `watch`: the current state as ADDED events, then every change, until the hub ends the
//! stream. A table prints its header once and one unaligned row per event (rows are printed as
//! they come, so widths follow the header); `-o yaml` separates the objects with `---`.
//!
//! Opening the stream is retried while the hub answers UNAVAILABLE ([`Hub::idempotent`]); a
//! stream the hub breaks later ends the command.

use crate::hub::Hub;
use crate::kind::{Kind, decision};
use crate::output::{self, Format};
use anyhow::Result;
use clap::Subcommand;
use flotilla_api::v1::{
    ClusterEvent, EventType, WatchClustersRequest, WatchPlacementsRequest, WatchWorksRequest,
    WorkEvent,
};
use tonic::Streaming;

/// What `watch` follows.
#[derive(Subcommand, Debug)]
pub enum WatchWhat {
    /// ManagedClusters: current state, then every change.
    Clusters {
        /// Label selector.
        #[arg(short = 'l', long)]
        selector: Option<String>,
    },
    /// ManifestWorks: current state, then every change including status.
    Works {
        /// Only works of this cluster.
        #[arg(short = 'c', long, alias = "namespace", short_alias = 'n')]
        cluster: Option<String>,
    },
    /// Placements and their decisions: current state, then every change.
    Placements {
        /// Namespace (all when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// ClusterImportPolicies: current state, then every change including status.
    #[command(alias = "importpolicy", alias = "clusterimportpolicies")]
    Importpolicies,
}

/// Runs `watch`.
pub async fn run(hub: &Hub, format: Format, what: WatchWhat) -> Result<()> {
    match what {
        WatchWhat::Clusters { selector } => {
            let label_selector = selector.unwrap_or_default();
            let r = WatchClustersRequest { label_selector };
            let stream = hub
                .idempotent(async || hub.clusters().watch_clusters(r.clone()).await)
                .await?;
            let change = |ev: ClusterEvent| Some(Change::of(ev.r#type, ev.cluster?));
            follow(hub, format, stream, &[], &[], change).await
        }
        WatchWhat::Works { cluster } => {
            let cluster = cluster.unwrap_or_default();
            let label_selector = String::new();
            let r = WatchWorksRequest {
                cluster,
                label_selector,
            };
            let stream = hub
                .idempotent(async || hub.works().watch_works(r.clone()).await)
                .await?;
            let change = |ev: WorkEvent| Some(Change::of(ev.r#type, ev.work?));
            follow(hub, format, stream, &[], &[], change).await
        }
        WatchWhat::Placements { namespace } => {
            let r = WatchPlacementsRequest {
                namespace: namespace.unwrap_or_default(),
                name: String::new(),
            };
            let stream = hub
                .idempotent(async || hub.placements().watch_placements(r.clone()).await)
                .await?;
            follow(hub, format, stream, &["NAMESPACE"], &["DECISIONS"], |ev| {
                let placement = ev.placement?;
                let clusters: Vec<&str> =
                    ev.decisions.iter().flat_map(decision::clusters).collect();
                Some(Change {
                    event: ev.r#type,
                    before: vec![placement.namespace()],
                    after: vec![clusters.join(",")],
                    object: placement,
                })
            })
            .await
        }
        WatchWhat::Importpolicies => {
            let r = flotilla_api::v1::ListImportPoliciesRequest {};
            let stream = hub
                .idempotent(async || hub.import_policies().watch_import_policies(r).await)
                .await?;
            let change =
                |ev: flotilla_api::v1::ImportPolicyEvent| Some(Change::of(ev.r#type, ev.policy?));
            follow(hub, format, stream, &[], &[], change).await
        }
    }
}

/// One event as a watch shows it: the changed object, and cells around its row that only the
/// event knows.
struct Change<K> {
    /// The event's type (`flotilla.v1.EventType`).
    event: i32,
    /// The object as it is now.
    object: K,
    /// Cells before the object's row.
    before: Vec<String>,
    /// Cells after the object's row.
    after: Vec<String>,
}

impl<K> Change<K> {
    /// A change shown as the object's row alone.
    fn of(event: i32, object: K) -> Self {
        Self {
            event,
            object,
            before: Vec::new(),
            after: Vec::new(),
        }
    }
}

/// Prints the events of `stream` until it ends: a header of EVENT, `before`, the kind's
/// columns and `after`, then a row per event; or each object in its OCM shape.
async fn follow<E, K: Kind>(
    hub: &Hub,
    format: Format,
    mut stream: Streaming<E>,
    before: &[&str],
    after: &[&str],
    change: impl Fn(E) -> Option<Change<K>>,
) -> Result<()> {
    if format.is_table() {
        let header = [&["EVENT"], before, K::COLUMNS, after].concat();
        print!("{}", output::table(&header, &[]));
    }
    while let Some(event) = stream.message().await.map_err(|e| hub.error(e))? {
        let Some(change) = change(event) else {
            continue;
        };
        match format {
            Format::Table | Format::Wide => {
                let mut row = vec![event_type(change.event)];
                row.extend(change.before);
                row.extend(change.object.row());
                row.extend(change.after);
                println!("{}", row.join("   "));
            }
            f => {
                let text = output::structured(f, vec![change.object.to_ocm()], true)?;
                if f == Format::Yaml {
                    println!("---");
                }
                print!("{text}");
            }
        }
    }
    Ok(())
}

/// ADDED, MODIFIED, DELETED, ... ("" for a type this CLI does not know).
fn event_type(event: i32) -> String {
    EventType::try_from(event)
        .map(|t| {
            t.as_str_name()
                .trim_start_matches("EVENT_TYPE_")
                .to_string()
        })
        .unwrap_or_default()
}
