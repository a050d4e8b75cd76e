//! `accept`, `deny`, `label` and `taint`: the hub's edits of clusters, each confirmed with one
//! line per cluster.

use crate::edits;
use crate::hub::Hub;
use anyhow::{Result, anyhow};
use flotilla_api::v1::{ClusterNamesRequest, LabelClusterRequest, TaintClusterRequest};

/// Accepts clusters: the hub side of the double opt-in.
pub async fn accept(hub: &Hub, clusters: Vec<String>) -> Result<()> {
    let r = ClusterNamesRequest {
        names: clusters.clone(),
    };
    hub.call(hub.clusters().accept_clusters(r)).await?;
    confirm(&clusters, "accepted");
    Ok(())
}

/// Denies clusters: they can no longer join or report.
pub async fn deny(hub: &Hub, clusters: Vec<String>) -> Result<()> {
    let r = ClusterNamesRequest {
        names: clusters.clone(),
    };
    hub.call(hub.clusters().deny_clusters(r)).await?;
    confirm(&clusters, "denied");
    Ok(())
}

/// Sets (`key=value`) and removes (`key-`) labels of a cluster.
pub async fn label(hub: &Hub, cluster: String, labels: Vec<String>) -> Result<()> {
    let e = edits::parse_labels(&labels).map_err(|e| anyhow!(e))?;
    let r = LabelClusterRequest {
        name: cluster.clone(),
        set: e.set,
        remove: e.remove,
    };
    hub.call(hub.clusters().label_cluster(r)).await?;
    confirm(&[cluster], "labeled");
    Ok(())
}

/// Adds (`key=value:Effect`) and removes (`key:Effect-`, `key-`) taints of a cluster.
pub async fn taint(hub: &Hub, cluster: String, taints: Vec<String>) -> Result<()> {
    let e = edits::parse_taints(&taints).map_err(|e| anyhow!(e))?;
    let r = TaintClusterRequest {
        name: cluster.clone(),
        add: e.add,
        remove: e.remove,
    };
    hub.call(hub.clusters().taint_cluster(r)).await?;
    confirm(&[cluster], "tainted");
    Ok(())
}

/// `managedcluster/NAME <done>` for every cluster edited.
fn confirm(clusters: &[String], done: &str) {
    for c in clusters {
        println!("managedcluster/{c} {done}");
    }
}
