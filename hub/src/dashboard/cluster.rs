//! `/clusters/<name>`: one cluster — its state, conditions, labels, claims, capacity, taints,
//! and what the hub runs on it: works, add-ons, policies, the placements that chose it.

use super::history::Availability;
use super::html::{U, badge, condition_badge, conditions, none, pairs, timestamp};
use flotilla_api::meta;
use flotilla_api::v1::{ManagedCluster, ManagedClusterAddOn, ManifestWork};
use maud::{Markup, html};
use std::sync::Arc;

/// What the controllers know of a cluster (absent on a hub that does not hold them).
#[derive(Debug, Clone, Default)]
pub struct Controlled {
    /// Installed add-ons.
    pub addons: Vec<Arc<ManagedClusterAddOn>>,
    /// Policies that name this cluster, with its compliance (`""`: no report yet).
    pub policies: Vec<(String, String, String)>,
    /// Placements that decided this cluster (`namespace`, `name`).
    pub placements: Vec<(String, String)>,
}

/// The page's body.
pub fn render(
    c: &ManagedCluster,
    works: &[Arc<ManifestWork>],
    controlled: Option<&Controlled>,
) -> Markup {
    let m = c.metadata.clone().unwrap_or_default();
    let spec = c.spec.clone().unwrap_or_default();
    let st = c.status.clone().unwrap_or_default();
    let claims: Vec<(String, String)> = st
        .cluster_claims
        .iter()
        .map(|c| (c.name.clone(), c.value.clone()))
        .collect();
    html! {
        p.crumbs { a href="/clusters" { "Clusters" } " /" }
        h1 data-cluster=(m.name) {
            (m.name) " " span data-field="availability" { (badge(Availability::of(c).as_str())) }
        }
        (facts(&m, &spec, &st))
        h2 { "Conditions" }
        (conditions(&st.conditions))
        div.columns {
            section { h2 { "Labels" } (pairs(&m.labels)) }
            section { h2 { "Claims" } (pairs(claims.iter().map(|(k, v)| (k, v)))) }
        }
        div.columns {
            section { h2 { "Capacity" } (pairs(&st.capacity)) }
            section { h2 { "Allocatable" } (pairs(&st.allocatable)) }
        }
        h2 { "Taints" }
        (taints(&spec.taints))
        h2 { "Works (" (works.len()) ")" }
        (work_table(&m.name, works))
        @match controlled {
            Some(ctl) => (controlled_by(ctl)),
            None => p.muted {
                "Add-ons, policies and placements are shown by the hub holding the controllers."
            },
        }
    }
}

/// Acceptance, lease, version, creation and UID.
fn facts(
    m: &flotilla_api::v1::ObjectMeta,
    spec: &flotilla_api::v1::ManagedClusterSpec,
    st: &flotilla_api::v1::ManagedClusterStatus,
) -> Markup {
    let lease = if spec.lease_duration_seconds == 0 {
        "hub default".to_string()
    } else {
        format!("{} s", spec.lease_duration_seconds)
    };
    let version = st.version.clone().unwrap_or_default();
    html! {
        table.pairs { tbody {
            tr { th { "Accepted" } td { (spec.hub_accepts_client) } }
            tr { th { "Lease" } td { (lease) } }
            tr { th { "Kubernetes" } td { (version.kubernetes) } }
            tr { th { "Agent" } td { (version.agent) } }
            tr { th { "Created" } td { (timestamp(m.creation_timestamp.as_ref())) } }
            tr { th { "UID" } td { (m.uid) } }
        } }
    }
}

/// The cluster's taints.
fn taints(taints: &[flotilla_api::v1::Taint]) -> Markup {
    if taints.is_empty() {
        return none();
    }
    html! {
        table {
            thead { tr { th { "Key" } th { "Value" } th { "Effect" } th { "Added" } } }
            tbody {
                @for t in taints {
                    tr {
                        td { (t.key) } td { (t.value) } td { (t.effect) }
                        td { (timestamp(t.time_added.as_ref())) }
                    }
                }
            }
        }
    }
}

/// The works on cluster `cluster`, one row each.
fn work_table(cluster: &str, works: &[Arc<ManifestWork>]) -> Markup {
    if works.is_empty() {
        return none();
    }
    html! {
        table #works {
            thead { tr {
                th { "Work" } th { "Manifests" } th { "Applied" } th { "Available" }
                th { "Degraded" } th { "Message" }
            } }
            tbody { @for w in works { (work_row(cluster, w)) } }
        }
    }
}

/// One work: its manifests, its conditions' states, and what is wrong with it.
fn work_row(cluster: &str, w: &ManifestWork) -> Markup {
    let name = w
        .metadata
        .as_ref()
        .map(|m| m.name.as_str())
        .unwrap_or_default();
    let manifests = w
        .spec
        .as_ref()
        .and_then(|s| s.workload.as_ref())
        .map_or(0, |wl| wl.manifests.len());
    let conds = w
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let status = |ty: &str| meta::condition_status(conds, ty).unwrap_or("-").to_string();
    let message = conds
        .iter()
        .find(|c| c.status != "True" && c.r#type != "Degraded")
        .or_else(|| {
            conds
                .iter()
                .find(|c| c.r#type == "Degraded" && c.status == "True")
        })
        .map(|c| c.message.as_str())
        .unwrap_or_default();
    html! {
        tr {
            td { a href={ "/clusters/" (U(cluster)) "/works/" (U(name)) } { (name) } }
            td { (manifests) }
            td { (badge(&status("Applied"))) }
            td { (badge(&status("Available"))) }
            td { (condition_badge("Degraded", &status("Degraded"))) }
            td { (message) }
        }
    }
}

/// Add-ons, policies and placements: what the controllers know of the cluster.
fn controlled_by(ctl: &Controlled) -> Markup {
    html! {
        h2 { "Add-ons (" (ctl.addons.len()) ")" }
        @if ctl.addons.is_empty() {
            (none())
        } @else {
            table {
                thead { tr { th { "Add-on" } th { "Available" } th { "Message" } } }
                tbody { @for a in &ctl.addons { (addon_row(a)) } }
            }
        }
        h2 { "Policies (" (ctl.policies.len()) ")" }
        @if ctl.policies.is_empty() {
            (none())
        } @else {
            table {
                thead { tr { th { "Policy" } th { "Compliance" } } }
                tbody {
                    @for (ns, name, compliant) in &ctl.policies {
                        tr {
                            td { (ns) "/" (name) }
                            td { (badge(if compliant.is_empty() { "no report" } else { compliant })) }
                        }
                    }
                }
            }
        }
        h2 { "Chosen by placements (" (ctl.placements.len()) ")" }
        ul {
            @for (ns, name) in &ctl.placements {
                li { a href={ "/placements/" (U(ns)) "/" (U(name)) } { (ns) "/" (name) } }
            }
        }
    }
}

/// One installed add-on and whether it is available.
fn addon_row(a: &ManagedClusterAddOn) -> Markup {
    let name = a
        .metadata
        .as_ref()
        .map(|m| m.name.as_str())
        .unwrap_or_default();
    let conds = a
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let available = conds.iter().find(|c| c.r#type == "Available");
    html! {
        tr {
            td { (name) }
            td { (badge(available.map_or("-", |c| c.status.as_str()))) }
            td { (available.map_or("", |c| c.message.as_str())) }
        }
    }
}
