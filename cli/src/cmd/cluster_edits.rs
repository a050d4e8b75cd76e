//! `accept`, `deny`, `label` and `taint`: the hub's edits of clusters, each confirmed with one
//! line per cluster.

use crate::edits;
use crate::hub::Hub;
use anyhow::{Result, anyhow};
use flotilla_api::fingerprint;
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::{
    ClusterNamesRequest, GetClusterSetRequest, LabelClusterRequest, ManagedCluster,
    TaintClusterRequest,
};

/// Accepts clusters: the hub side of the double opt-in. With `key` (a fingerprint from
/// `get clusters -o wide`, or the whole public key), only that agent key of the one cluster
/// named: the hub refuses when the key waiting under the name is another. Prints what was
/// accepted: each cluster's set and labels, and the agent key.
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
    let accepted = hub
        .idempotent(async || hub.clusters().accept_clusters(r.clone()).await)
        .await?;
    for c in &accepted.items {
        println!("{}", accepted_line(c));
    }
    if accepted.items.is_empty() {
        confirm(&r.names, "accepted")?;
    }
    Ok(())
}

/// `managedcluster/NAME accepted into set SET (labels k=v, …; key FINGERPRINT)`: what the admin
/// just let in, so an accept never admits a set or labels unseen.
pub fn accepted_line(c: &ManagedCluster) -> String {
    let m = c.metadata.clone().unwrap_or_default();
    let set = m
        .labels
        .get(CLUSTERSET_LABEL)
        .map_or("(none)", String::as_str);
    let mut labels: Vec<String> = m
        .labels
        .iter()
        .filter(|(k, _)| k.as_str() != CLUSTERSET_LABEL)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    labels.sort();
    let key = c
        .hub
        .as_ref()
        .map(|h| fingerprint::of(&h.agent_public_key))
        .filter(|f| !f.is_empty())
        .map_or_else(String::new, |f| format!("; key {f}"));
    format!(
        "managedcluster/{} accepted into set {set} (labels {}{key})",
        m.name,
        if labels.is_empty() {
            "none".to_string()
        } else {
            labels.join(", ")
        }
    )
}

/// Prints a join credential for `cluster` (a NATS credentials file) on stdout; with
/// `cluster_set`, the cluster joins that set when an agent registers with it (a set that does
/// not exist yet is named in a note: the cluster joins it once it is created).
pub async fn join_token(
    hub: &Hub,
    cluster: String,
    ttl: std::time::Duration,
    accept: bool,
    cluster_set: Option<String>,
) -> Result<()> {
    let issued =
        crate::cmd::join::request_join_token(hub, &cluster, ttl, accept, cluster_set.as_deref())
            .await?;
    match issued {
        crate::cmd::join::Issued::Token(token) => {
            eprintln!(
                "join credential for {cluster}: {}; store it as a Secret, it is shown once",
                crate::cmd::join::token_summary(&token, accept)
            );
            if let Some(set) = &cluster_set {
                let request = GetClusterSetRequest { name: set.clone() };
                if let Err(status) = hub.sets().get_cluster_set(request).await
                    && status.code() == tonic::Code::NotFound
                {
                    eprintln!(
                        "note: cluster set {set:?} does not exist yet; {cluster} joins it once it \
                         is created (flotilla apply -f a ManagedClusterSet named {set})"
                    );
                }
            }
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
    hub.idempotent(async || hub.clusters().deny_clusters(r.clone()).await)
        .await?;
    confirm(&r.names, "denied")
}

/// Sets (`key=value`) and removes (`key-`) labels of a cluster.
pub async fn label(hub: &Hub, cluster: String, labels: Vec<String>) -> Result<()> {
    let e = edits::parse_labels(&labels)?;
    let (name, set, remove) = (cluster, e.set, e.remove);
    let r = LabelClusterRequest { name, set, remove };
    hub.idempotent(async || hub.clusters().label_cluster(r.clone()).await)
        .await?;
    confirm(&[r.name], "labeled")
}

/// Adds (`key=value:Effect`) and removes (`key:Effect-`, `key-`) taints of a cluster.
pub async fn taint(hub: &Hub, cluster: String, taints: Vec<String>) -> Result<()> {
    let e = edits::parse_taints(&taints)?;
    let (name, add, remove) = (cluster, e.add, e.remove);
    let r = TaintClusterRequest { name, add, remove };
    hub.idempotent(async || hub.clusters().taint_cluster(r.clone()).await)
        .await?;
    confirm(&[r.name], "tainted")
}

/// Prints `managedcluster/NAME <done>` for every cluster edited.
fn confirm(clusters: &[String], done: &str) -> Result<()> {
    for c in clusters {
        println!("managedcluster/{c} {done}");
    }
    Ok(())
}
