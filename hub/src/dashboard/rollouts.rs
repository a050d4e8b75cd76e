//! `/rollouts`, `/rollouts/<ns>/<name>` and `/addons/<name>`: ManifestWorkReplicaSets rolling
//! a template out over their placements' decision groups, and add-ons rolled out by their
//! install strategy's placements (ClusterManagementAddOn `installStrategy: Placements`) — per
//! placement and decision group the progress (as bars, and over time as the dashboard saw it
//! change), and why a rollout stopped. A replica set has pause / resume / undo for identities
//! the API would let call `Rollout`; the API has no such operation for add-ons (their rollout
//! is changed by applying the add-on), so an add-on's page is read-only and says so.

use super::html::{E, U, badge, conditions};
use super::plot::{GroupBar, groups, over_time, progress};
use super::progress::Point;
use flotilla_api::v1::{
    ClusterManagementAddOn, DecisionGroupSummary, ManagedClusterAddOn, ManifestWorkReplicaSet,
    RolloutStrategy,
};
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
    let mut out =
        String::from("<h1 data-follow=\"rollout:* addon:*\">Rollouts</h1><h2>Replica sets</h2>");
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
    out.push_str(
        "<table id=\"addons\"><thead><tr><th>Add-on</th><th>Install strategy</th>\
         <th>Rolled out</th><th>Installed on</th><th>Available</th><th>Stopped</th></tr></thead><tbody>",
    );
    for (cma, installed) in addons {
        let name = addon_name(cma);
        let available = installed.iter().filter(|a| addon_available(a)).count();
        let (done, failed, total) = super::progress::of_addon(cma);
        let strategy = cma
            .spec
            .as_ref()
            .and_then(|s| s.install_strategy.as_ref())
            .map_or("Manual", |s| {
                if s.r#type.is_empty() {
                    "Manual"
                } else {
                    s.r#type.as_str()
                }
            });
        let stopped: Vec<String> = progressions(cma)
            .iter()
            .filter(|p| !p.stopped_reason.is_empty())
            .map(|p| {
                format!(
                    "{}/{}: {}",
                    E(&p.namespace),
                    E(&p.name),
                    E(&p.stopped_reason)
                )
            })
            .collect();
        let _ = write!(
            out,
            "<tr data-addon=\"{}\"><td><a href=\"/addons/{}\">{}</a></td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td class=\"error\">{}</td></tr>",
            E(name),
            U(name),
            E(name),
            E(strategy),
            if total == 0 && progressions(cma).is_empty() {
                "-".to_string()
            } else {
                progress(done, failed, total)
            },
            installed.len(),
            progress(available as i64, 0, installed.len() as i64),
            stopped.join("<br>")
        );
    }
    out.push_str("</tbody></table>");
    out
}

fn addon_name(cma: &ClusterManagementAddOn) -> &str {
    cma.metadata
        .as_ref()
        .map(|m| m.name.as_str())
        .unwrap_or_default()
}

fn addon_available(a: &ManagedClusterAddOn) -> bool {
    a.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.r#type == "Available" && c.status == "True")
    })
}

fn progressions(cma: &ClusterManagementAddOn) -> &[flotilla_api::v1::InstallProgression] {
    cma.status
        .as_ref()
        .map(|s| s.install_progressions.as_slice())
        .unwrap_or_default()
}

/// A rollout strategy in a few words (`Progressive, maxConcurrency 1`).
fn strategy_text(s: Option<&RolloutStrategy>) -> String {
    let Some(s) = s else {
        return "All".into();
    };
    let ty = if s.r#type.is_empty() {
        "All"
    } else {
        s.r#type.as_str()
    };
    let config = match ty {
        "Progressive" => s.progressive.as_ref(),
        "ProgressivePerGroup" => s.progressive_per_group.as_ref(),
        _ => s.all.as_ref(),
    };
    let mut words = vec![ty.to_string()];
    if let Some(c) = config {
        for (k, v) in [
            ("maxConcurrency", &c.max_concurrency),
            ("maxFailures", &c.max_failures),
            ("minSuccessTime", &c.min_success_time),
            ("progressDeadline", &c.progress_deadline),
        ] {
            if !v.is_empty() {
                words.push(format!("{k} {v}"));
            }
        }
        if !c.mandatory_decision_groups.is_empty() {
            let g: Vec<String> = c
                .mandatory_decision_groups
                .iter()
                .map(|g| {
                    if g.group_name.is_empty() {
                        g.group_index.to_string()
                    } else {
                        g.group_name.clone()
                    }
                })
                .collect();
            words.push(format!("mandatory groups {}", g.join(" ")));
        }
    }
    words.join(", ")
}

/// Decision groups as bars (`done` per group: available, or updated for add-ons).
fn group_bars(gs: &[DecisionGroupSummary]) -> String {
    if gs.is_empty() {
        return String::new();
    }
    let labels: Vec<String> = gs
        .iter()
        .map(|g| {
            if g.name.is_empty() {
                format!("group {}", g.index)
            } else {
                format!("{}: {}", g.index, g.name)
            }
        })
        .collect();
    let bars: Vec<GroupBar<'_>> = gs
        .iter()
        .zip(&labels)
        .map(|(g, label)| GroupBar {
            label,
            done: g.available.into(),
            failed: 0,
            total: g.total.into(),
        })
        .collect();
    groups(&bars)
}

/// An add-on's rollout: per placement of its install strategy the progress (updated of total,
/// failed), the decision groups as bars, why it stopped, its notes and conditions; the
/// progress over time; where it is installed. Read-only: the API has no pause, resume or undo
/// for add-ons. `installed` is every ManagedClusterAddOn of its name (the first
/// [`ADDON_CLUSTERS_SHOWN`] listed).
pub fn render_addon(
    cma: &ClusterManagementAddOn,
    installed: &[std::sync::Arc<ManagedClusterAddOn>],
    history: &[Point],
) -> String {
    let name = addon_name(cma);
    let spec = cma.spec.clone().unwrap_or_default();
    let meta = spec.add_on_meta.clone().unwrap_or_default();
    let mut out = format!(
        "<p class=\"crumbs\"><a href=\"/rollouts\">Rollouts</a> / add-ons</p>\
         <h1 data-follow=\"addon:{}\">{}</h1>",
        E(name),
        E(name)
    );
    if !meta.display_name.is_empty() || !meta.description.is_empty() {
        let _ = write!(
            out,
            "<p>{}{}{}</p>",
            E(&meta.display_name),
            if meta.display_name.is_empty() || meta.description.is_empty() {
                ""
            } else {
                " — "
            },
            E(&meta.description)
        );
    }
    let (done, failed, total) = super::progress::of_addon(cma);
    let strategy = spec.install_strategy.clone().unwrap_or_default();
    let _ = write!(
        out,
        "<p id=\"addon-summary\">Install strategy <b>{}</b> · rolled out {} · failed {failed}</p>\
         <p class=\"muted\" id=\"read-only\">Read-only: the API has no pause, resume or undo for \
         add-ons; change the rollout by applying the ClusterManagementAddOn \
         (<code>flotilla apply -f</code>) with another <code>installStrategy</code>.</p>",
        E(if strategy.r#type.is_empty() {
            "Manual"
        } else {
            strategy.r#type.as_str()
        }),
        progress(done, failed, total)
    );
    out.push_str("<h2>Progress over time</h2>");
    out.push_str(&over_time(history));
    out.push_str("<h2>Placements</h2>");
    if strategy.placements.is_empty() {
        out.push_str(
            "<p class=\"muted\">No placement: installed only where a ManagedClusterAddOn is \
             made by hand (<code>flotilla addon enable</code>).</p>",
        );
    }
    out.push_str("<div id=\"progressions\">");
    for ps in &strategy.placements {
        let p = progressions(cma)
            .iter()
            .find(|p| p.namespace == ps.namespace && p.name == ps.name);
        let _ = write!(
            out,
            "<section class=\"progression\" data-placement=\"{}/{}\"><h3>\
             <a href=\"/placements/{}/{}\">{}/{}</a></h3><p class=\"strategy\">{}</p>",
            E(&ps.namespace),
            E(&ps.name),
            U(&ps.namespace),
            U(&ps.name),
            E(&ps.namespace),
            E(&ps.name),
            E(&strategy_text(ps.rollout_strategy.as_ref()))
        );
        let Some(p) = p else {
            out.push_str("<p class=\"muted\">Not rolled out yet.</p></section>");
            continue;
        };
        let _ = write!(
            out,
            "<p>Updated {} · failed {}</p>",
            progress(p.updated.into(), p.failed.into(), p.total.into()),
            p.failed
        );
        if !p.stopped_reason.is_empty() {
            let _ = write!(
                out,
                "<p class=\"error stopped\">Stopped: {}</p>",
                E(&p.stopped_reason)
            );
        }
        for n in &p.notes {
            let _ = write!(out, "<p class=\"muted\">{}</p>", E(n));
        }
        out.push_str(&group_bars(&p.decision_groups));
        if !p.conditions.is_empty() {
            out.push_str(&conditions(&p.conditions));
        }
        for c in &p.config_references {
            let hash = |h: &Option<flotilla_api::v1::ConfigSpecHash>| {
                h.as_ref().map_or("-".to_string(), |h| {
                    let short: String = h.spec_hash.chars().take(12).collect();
                    format!("{}/{} {short}", h.namespace, h.name)
                })
            };
            let _ = write!(
                out,
                "<p class=\"strategy\">{}.{}: desired {} · last known good {} · last applied {}</p>",
                E(&c.resource),
                E(&c.group),
                E(&hash(&c.desired_config)),
                E(&hash(&c.last_known_good_config)),
                E(&hash(&c.last_applied_config))
            );
        }
        out.push_str("</section>");
    }
    out.push_str("</div>");
    let available = installed.iter().filter(|a| addon_available(a)).count();
    let _ = write!(
        out,
        "<h2>Installed on ({})</h2><p>Available {}</p>",
        installed.len(),
        progress(available as i64, 0, installed.len() as i64)
    );
    if !installed.is_empty() {
        out.push_str("<table id=\"installed\"><thead><tr><th>Cluster</th><th>Available</th><th>Placement</th></tr></thead><tbody>");
        for a in installed.iter().take(ADDON_CLUSTERS_SHOWN) {
            let cluster = a
                .metadata
                .as_ref()
                .map(|m| m.namespace.as_str())
                .unwrap_or_default();
            let status = a
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.r#type == "Available"))
                .map_or("-", |c| c.status.as_str());
            let _ = write!(
                out,
                "<tr data-cluster=\"{}\"><td><a href=\"/clusters/{}\">{}</a></td><td>{}</td><td>{}</td></tr>",
                E(cluster),
                U(cluster),
                E(cluster),
                badge(status),
                E(a.hub.as_ref().map_or("", |h| h.placement.as_str()))
            );
        }
        out.push_str("</tbody></table>");
        if installed.len() > ADDON_CLUSTERS_SHOWN {
            let _ = write!(
                out,
                "<p class=\"muted\">The first {ADDON_CLUSTERS_SHOWN} of {} clusters.</p>",
                installed.len()
            );
        }
    }
    out
}

/// Clusters an add-on's page lists (all are counted).
pub const ADDON_CLUSTERS_SHOWN: usize = 200;

/// A replica set's body. `may_act` is `Err(why)` when the viewer may not pause, resume or
/// undo (the buttons show, disabled, with why); `notice` is the outcome of an action just
/// taken.
pub fn render(
    rs: &ManifestWorkReplicaSet,
    may_act: Result<(), String>,
    csrf: &str,
    notice: Option<&str>,
    history: &[Point],
) -> String {
    let (ns, name) = ns_name(rs);
    let st = rs.status.clone().unwrap_or_default();
    let s = st.summary.unwrap_or_default();
    let mut out = format!(
        "<p class=\"crumbs\"><a href=\"/rollouts\">Rollouts</a> / {}</p>\
         <h1 data-follow=\"rollout:{}/{}\">{} {}</h1>",
        E(&ns),
        E(&ns),
        E(&name),
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
    out.push_str("</form><h2>Progress over time</h2>");
    out.push_str(&over_time(history));
    out.push_str("<h2>Conditions</h2>");
    out.push_str(&conditions(&st.conditions));
    out.push_str("<h2>Placements</h2><div id=\"placement-summaries\">");
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
        out.push_str(&group_bars(&p.decision_groups));
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
    out.push_str("</div>");
    if st.placement_summaries.is_empty() {
        out.push_str("<p class=\"muted\">No placement has decided yet.</p>");
    }
    out
}
