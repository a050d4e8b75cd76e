//! `/clusters/<name>`: one cluster — its state, conditions, labels, claims, capacity, taints,
//! and what the hub runs on it: works, add-ons, policies, the placements that chose it.

use super::history::Availability;
use super::html::{E, U, badge, condition_badge, conditions, pairs, timestamp};
use flotilla_api::meta;
use flotilla_api::v1::{ManagedCluster, ManagedClusterAddOn, ManifestWork};
use std::fmt::Write;
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
) -> String {
    let m = c.metadata.clone().unwrap_or_default();
    let spec = c.spec.clone().unwrap_or_default();
    let st = c.status.clone().unwrap_or_default();
    let a = Availability::of(c);
    let mut out = format!(
        "<p class=\"crumbs\"><a href=\"/clusters\">Clusters</a> /</p>\
         <h1 data-cluster=\"{}\">{} <span data-field=\"availability\">{}</span></h1>",
        E(&m.name),
        E(&m.name),
        badge(a.as_str())
    );
    let _ = write!(
        out,
        "<table class=\"pairs\"><tbody>\
         <tr><th>Accepted</th><td>{}</td></tr>\
         <tr><th>Lease</th><td>{}</td></tr>\
         <tr><th>Kubernetes</th><td>{}</td></tr>\
         <tr><th>Created</th><td>{}</td></tr>\
         <tr><th>UID</th><td>{}</td></tr></tbody></table>",
        spec.hub_accepts_client,
        if spec.lease_duration_seconds == 0 {
            "hub default".to_string()
        } else {
            format!("{} s", spec.lease_duration_seconds)
        },
        E(&st
            .version
            .as_ref()
            .map(|v| v.kubernetes.clone())
            .unwrap_or_default()),
        E(&timestamp(m.creation_timestamp.as_ref())),
        E(&m.uid)
    );
    out.push_str("<h2>Conditions</h2>");
    out.push_str(&conditions(&st.conditions));
    out.push_str("<div class=\"columns\"><section><h2>Labels</h2>");
    out.push_str(&pairs(&m.labels));
    out.push_str("</section><section><h2>Claims</h2>");
    let claims: Vec<(String, String)> = st
        .cluster_claims
        .iter()
        .map(|c| (c.name.clone(), c.value.clone()))
        .collect();
    out.push_str(&pairs(claims.iter().map(|(k, v)| (k, v))));
    out.push_str("</section></div><div class=\"columns\"><section><h2>Capacity</h2>");
    out.push_str(&pairs(&st.capacity));
    out.push_str("</section><section><h2>Allocatable</h2>");
    out.push_str(&pairs(&st.allocatable));
    out.push_str("</section></div><h2>Taints</h2>");
    if spec.taints.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>");
    } else {
        out.push_str("<table><thead><tr><th>Key</th><th>Value</th><th>Effect</th><th>Added</th></tr></thead><tbody>");
        for t in &spec.taints {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                E(&t.key),
                E(&t.value),
                E(&t.effect),
                E(&timestamp(t.time_added.as_ref()))
            );
        }
        out.push_str("</tbody></table>");
    }
    let _ = write!(out, "<h2>Works ({})</h2>", works.len());
    if works.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>");
    } else {
        out.push_str("<table id=\"works\"><thead><tr><th>Work</th><th>Manifests</th><th>Applied</th><th>Available</th><th>Degraded</th><th>Message</th></tr></thead><tbody>");
        for w in works {
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
                .map(|c| c.message.clone())
                .unwrap_or_default();
            let _ = write!(
                out,
                "<tr><td><a href=\"/clusters/{}/works/{}\">{}</a></td><td>{manifests}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td></tr>",
                U(&m.name),
                U(name),
                E(name),
                badge(&status("Applied")),
                badge(&status("Available")),
                condition_badge("Degraded", &status("Degraded")),
                E(&message)
            );
        }
        out.push_str("</tbody></table>");
    }
    let Some(ctl) = controlled else {
        out.push_str(
            "<p class=\"muted\">Add-ons, policies and placements are shown by the hub holding \
             the controllers.</p>",
        );
        return out;
    };
    let _ = write!(out, "<h2>Add-ons ({})</h2>", ctl.addons.len());
    if ctl.addons.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>");
    } else {
        out.push_str("<table><thead><tr><th>Add-on</th><th>Available</th><th>Message</th></tr></thead><tbody>");
        for a in &ctl.addons {
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
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                E(name),
                badge(available.map_or("-", |c| c.status.as_str())),
                E(available.map_or("", |c| c.message.as_str()))
            );
        }
        out.push_str("</tbody></table>");
    }
    let _ = write!(out, "<h2>Policies ({})</h2>", ctl.policies.len());
    if ctl.policies.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>");
    } else {
        out.push_str("<table><thead><tr><th>Policy</th><th>Compliance</th></tr></thead><tbody>");
        for (ns, name, compliant) in &ctl.policies {
            let _ = write!(
                out,
                "<tr><td>{}/{}</td><td>{}</td></tr>",
                E(ns),
                E(name),
                badge(if compliant.is_empty() {
                    "no report"
                } else {
                    compliant
                })
            );
        }
        out.push_str("</tbody></table>");
    }
    let _ = write!(
        out,
        "<h2>Chosen by placements ({})</h2><ul>",
        ctl.placements.len()
    );
    for (ns, name) in &ctl.placements {
        let _ = write!(
            out,
            "<li><a href=\"/placements/{}/{}\">{}/{}</a></li>",
            U(ns),
            U(name),
            E(ns),
            E(name)
        );
    }
    out.push_str("</ul>");
    out
}
