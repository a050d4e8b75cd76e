//! MirrorPeers: NAME, PEERS, PHASE, EXCHANGES (applied/total), and `describe` with every
//! exchange and the conditions.

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::mirrorpeer::exchange;
use flotilla_api::ocm::mirrorpeer as shapes;
use flotilla_api::v1::{MirrorPeer, ObjectMeta};
use std::fmt::Write;

impl Kind for MirrorPeer {
    type Ocm = shapes::MirrorPeer;
    const COLUMNS: &'static [&'static str] = &["NAME", "PEERS", "PHASE", "EXCHANGES"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let o = self.to_ocm();
        let status = o.status.clone().unwrap_or_default();
        let peers: Vec<&str> = o
            .spec
            .items
            .iter()
            .map(|i| i.cluster_name.as_str())
            .collect();
        let applied = status
            .exchanges
            .iter()
            .filter(|e| e.phase == exchange::APPLIED)
            .count();
        vec![
            o.metadata.name,
            peers.join(","),
            if status.phase.is_empty() {
                "Unknown".into()
            } else {
                status.phase.clone()
            },
            format!("{applied}/{}", status.exchanges.len()),
        ]
    }

    fn to_ocm(&self) -> shapes::MirrorPeer {
        shapes::MirrorPeer::from(self)
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No MirrorPeers found.".into())
    }

    /// The MirrorPeers, only the named ones when the query names some.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = flotilla_api::v1::ListMirrorPeersRequest {};
        let items = hub
            .idempotent(async || hub.mirror_peers().list_mirror_peers(r).await)
            .await?
            .items;
        super::named(items, &query.names, "MirrorPeer")
    }
}

/// `describe mirrorpeer`: peers, phase, every exchange, conditions.
pub fn describe(p: &MirrorPeer) -> String {
    let o = p.to_ocm();
    let status = o.status.clone().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "Name:        {}", o.metadata.name);
    let _ = writeln!(out, "Generation:  {}", o.metadata.generation);
    let _ = writeln!(out, "Type:        {}", o.spec.type_);
    let _ = writeln!(
        out,
        "Intervals:   {}",
        o.spec.scheduling_intervals.join(", ")
    );
    let _ = writeln!(out, "Phase:       {}", status.phase);
    let _ = writeln!(out, "Peers:");
    for i in &o.spec.items {
        let sc = i.storage_cluster_ref.clone().unwrap_or_default();
        let secret = if i.secret_name.is_empty() {
            format!("{}-peer-secret", sc.name)
        } else {
            i.secret_name.clone()
        };
        let _ = writeln!(
            out,
            "  {:<20} {}/{}{}",
            i.cluster_name,
            sc.namespace,
            secret,
            if i.generate {
                " (generated if absent)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(out, "Exchanges:");
    if status.exchanges.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for e in &status.exchanges {
        let _ = writeln!(
            out,
            "  {:<16} → {:<16} {:<10} rev {:<4} {}",
            e.from, e.to, e.phase, e.revision, e.message
        );
    }
    let _ = writeln!(out, "Conditions:");
    if status.conditions.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for c in &status.conditions {
        let _ = writeln!(
            out,
            "  {:<16} {:<6} {:<16} {}",
            c.type_, c.status, c.reason, c.message
        );
    }
    out
}

impl Delete for MirrorPeer {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::GetMirrorPeerRequest { name: target.name };
        let d = hub
            .delete(async || hub.mirror_peers().delete_mirror_peer(r.clone()).await)
            .await?;
        Ok(Gone::new(
            d,
            format!(
                "mirrorpeer/{} deleted (its peers remove their GREEN Secrets)",
                r.name
            ),
        ))
    }
}
