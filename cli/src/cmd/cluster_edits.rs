//! `accept`, `deny`, `label` and `taint`: the hub's edits of clusters, each confirmed with one
//! line per cluster.

use crate::edits;
use crate::hub::Hub;
use anyhow::{Result, anyhow};
use flotilla_api::v1::{ClusterNamesRequest, LabelClusterRequest, TaintClusterRequest};

/// Accepts clusters: the hub side of the double opt-in. With `key` (a fingerprint from
/// `get clusters -o wide`, or the whole public key), only that agent key of the one cluster
/// named: the hub refuses when the key waiting under the name is another.
pub async fn accept(hub: &Hub, clusters: Vec<String>, key: Option<String>) -> Result<()> {
    if key.is_some() && clusters.len() != 1 {
        return Err(anyhow!(
            "--key names the agent key of one cluster; accept one cluster with it"
        ));
    }
    let r = ClusterNamesRequest {
        names: clusters,
        key: key.unwrap_or_default(),
    };
    hub.call(hub.clusters().accept_clusters(r.clone())).await?;
    confirm(&r.names, "accepted")
}

/// Prints a join credential for `cluster` (a NATS credentials file) on stdout.
pub async fn join_token(
    hub: &Hub,
    cluster: String,
    ttl: std::time::Duration,
    accept: bool,
) -> Result<()> {
    match crate::cmd::join::request_join_token(hub, &cluster, ttl, accept).await? {
        crate::cmd::join::Issued::Token(token) => {
            eprintln!(
                "join credential for {cluster}: {}; store it as a Secret, it is shown once",
                crate::cmd::join::token_summary(&token, accept)
            );
            print!("{}", token.creds);
            Ok(())
        }
        crate::cmd::join::Issued::NotSecure(why) => {
            Err(anyhow!("the hub gives no join credentials: {why}"))
        }
    }
}

/// Denies clusters: they can no longer join or report.
pub async fn deny(hub: &Hub, clusters: Vec<String>) -> Result<()> {
    let r = ClusterNamesRequest {
        names: clusters,
        ..ClusterNamesRequest::default()
    };
    hub.call(hub.clusters().deny_clusters(r.clone())).await?;
    confirm(&r.names, "denied")
}

/// Sets (`key=value`) and removes (`key-`) labels of a cluster.
pub async fn label(hub: &Hub, cluster: String, labels: Vec<String>) -> Result<()> {
    let e = edits::parse_labels(&labels).map_err(|e| anyhow!(e))?;
    let (name, set, remove) = (cluster, e.set, e.remove);
    let r = LabelClusterRequest { name, set, remove };
    hub.call(hub.clusters().label_cluster(r.clone())).await?;
    confirm(&[r.name], "labeled")
}

/// Adds (`key=value:Effect`) and removes (`key:Effect-`, `key-`) taints of a cluster.
pub async fn taint(hub: &Hub, cluster: String, taints: Vec<String>) -> Result<()> {
    let e = edits::parse_taints(&taints).map_err(|e| anyhow!(e))?;
    let (name, add, remove) = (cluster, e.add, e.remove);
    let r = TaintClusterRequest { name, add, remove };
    hub.call(hub.clusters().taint_cluster(r.clone())).await?;
    confirm(&[r.name], "tainted")
}

/// Prints `managedcluster/NAME <done>` for every cluster edited.
fn confirm(clusters: &[String], done: &str) -> Result<()> {
    for c in clusters {
        println!("managedcluster/{c} {done}");
    }
    Ok(())
}
