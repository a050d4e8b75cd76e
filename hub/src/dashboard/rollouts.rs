//! `/rollouts` and `/rollouts/<ns>/<name>`: ManifestWorkReplicaSets rolling a template out
//! over their placements' decision groups (progress per placement and group, why a rollout
//! stopped), with pause / resume / undo for identities the API would let call `Rollout`;
//! and the add-ons with how many clusters run each.

use super::html::{E, U, badge, conditions};
use super::plot::progress;
use flotilla_api::v1::{ClusterManagementAddOn, ManagedClusterAddOn, ManifestWorkReplicaSet};
use std::fmt::Write;
use std::sync::Arc;

/// The API method a rollout action is (the access table decides who may).
pub const ROLLOUT_METHOD: &str = "/flotilla.v1.ReplicaSetService/Rollout";

/// The actions the page offers.
pub const ACTIONS: [&str; 3] = ["pause", "resume", "undo"];

fn ns_name(rs: &ManifestWorkReplicaSet) -> (String, String) {
    rs.metadata
        .as_ref()
        .map(|m| (m.namespace.clone(), m.name.clone()))
        .unwrap_or_default()
}

fn paused(rs: &ManifestWorkReplicaSet) -> bool {
    rs.hub.as_ref().is_some_and(|h| h.paused)
}

/// The list's body.
pub fn render_list(
    sets: &[Arc<ManifestWorkReplicaSet>],
    addons: &[(Arc<ClusterManagementAddOn>, Vec<Arc<ManagedClusterAddOn>>)],
) -> String {
    let mut out = String::from("<h1>Rollouts</h1><h2>Replica sets</h2>");
    if sets.is_empty() {
        out.push_str("<p class=\"muted\">No ManifestWorkReplicaSet.</p>");
    } else {
        out.push_str("<table id=\"replicasets\"><thead><tr><th>Namespace</th><th>Name</th><th>Available</th><th>Degraded</th><th>State</th></tr></thead><tbody>");
        for rs in sets {
            let (ns, name) = ns_name(rs);
            let s = rs
                .status
                .as_ref()
                .and_then(|s| s.summary)
                .unwrap_or_default();
            let state = if paused(rs) { "Paused" } else { "" };
            let _ = write!(
                out,
                "<tr><td>{}</td><td><a href=\"/rollouts/{}/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                E(&ns),
                U(&ns),
                U(&name),
                E(&name),
                progress(s.available.into(), s.degraded.into(), s.total.into()),
                s.degraded,
                if state.is_empty() {
                    String::new()
                } else {
                    badge(state)
                }
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("<h2>Add-ons</h2>");
    if addons.is_empty() {
        out.push_str("<p class=\"muted\">No ClusterManagementAddOn.</p>");
        return out;
    }
    out.push_str("<table id=\"addons\"><thead><tr><th>Add-on</th><th>Installed on</th><th>Available</th></tr></thead><tbody>");
    for (cma, installed) in addons {
        let name = cma
            .metadata
            .as_ref()
            .map(|m| m.name.as_str())
            .unwrap_or_default();
        let available = installed
            .iter()
            .filter(|a| {
                a.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.r#type == "Available" && c.status == "True")
                })
            })
            .count();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            E(name),
            installed.len(),
            progress(available as i64, 0, installed.len() as i64)
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// A replica set's body. `may_act` is `Err(why)` when the viewer may not pause, resume or
/// undo (the buttons show, disabled, with why); `notice` is the outcome of an action just
/// taken.
pub fn render(
    rs: &ManifestWorkReplicaSet,
    may_act: Result<(), String>,
    csrf: &str,
    notice: Option<&str>,
) -> String {
    let (ns, name) = ns_name(rs);
    let st = rs.status.clone().unwrap_or_default();
    let s = st.summary.unwrap_or_default();
    let mut out = format!(
        "<p class=\"crumbs\"><a href=\"/rollouts\">Rollouts</a> / {}</p><h1>{} {}</h1>",
        E(&ns),
        E(&name),
        if paused(rs) {
            "<span id=\"state\">".to_string() + &badge("Paused") + "</span>"
        } else {
            "<span id=\"state\"></span>".to_string()
        }
    );
    if let Some(n) = notice {
        let _ = write!(out, "<p class=\"notice\" id=\"notice\">{}</p>", E(n));
    }
    let _ = write!(
        out,
        "<p>Available {} · applied {} · progressing {} · degraded {}</p>",
        progress(s.available.into(), s.degraded.into(), s.total.into()),
        s.applied,
        s.progressing,
        s.degraded
    );
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/rollouts/{}/{}\" class=\"actions\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        U(&ns),
        U(&name),
        E(csrf)
    );
    let disabled = if may_act.is_err() { " disabled" } else { "" };
    for a in ACTIONS {
        let _ = write!(
            out,
            "<button type=\"submit\" name=\"action\" value=\"{a}\" id=\"action-{a}\"{disabled}>{}</button> ",
            match a {
                "pause" => "Pause",
                "resume" => "Resume",
                _ => "Undo",
            }
        );
    }
    if let Err(why) = &may_act {
        let _ = write!(
            out,
            "<span class=\"muted\" id=\"may-not\">{}</span>",
            E(why)
        );
    }
    out.push_str("</form><h2>Conditions</h2>");
    out.push_str(&conditions(&st.conditions));
    out.push_str("<h2>Placements</h2>");
    for p in &st.placement_summaries {
        let ps = p.summary.unwrap_or_default();
        let _ = write!(
            out,
            "<h3>{}</h3><p>{} · waiting {}</p>",
            E(&p.name),
            progress(ps.available.into(), ps.degraded.into(), ps.total.into()),
            p.waiting
        );
        if !p.stopped_reason.is_empty() {
            let _ = write!(
                out,
                "<p class=\"error\">Stopped: {}</p>",
                E(&p.stopped_reason)
            );
        }
        for n in &p.notes {
            let _ = write!(out, "<p class=\"muted\">{}</p>", E(n));
        }
        if !p.decision_groups.is_empty() {
            out.push_str("<table class=\"groups\"><thead><tr><th>Group</th><th>Available</th></tr></thead><tbody>");
            for g in &p.decision_groups {
                let _ = write!(
                    out,
                    "<tr><td>{}{}{}</td><td>{}</td></tr>",
                    g.index,
                    if g.name.is_empty() { "" } else { ": " },
                    E(&g.name),
                    progress(g.available.into(), 0, g.total.into())
                );
            }
            out.push_str("</tbody></table>");
        }
    }
    if st.placement_summaries.is_empty() {
        out.push_str("<p class=\"muted\">No placement has decided yet.</p>");
    }
    out
}
