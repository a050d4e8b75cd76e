//! `/rollouts`, `/rollouts/<ns>/<name>` and `/addons/<name>`: ManifestWorkReplicaSets rolling
//! a template out over their placements' decision groups, and add-ons rolled out by their
//! install strategy's placements (ClusterManagementAddOn `installStrategy: Placements`) — per
//! placement and decision group the progress (as bars, and over time as the dashboard saw it
//! change), and why a rollout stopped. A replica set has pause / resume / undo for identities
//! the API would let call `Rollout`; the API has no such operation for add-ons (their rollout
//! is changed by applying the add-on), so an add-on's page is read-only and says so.

use super::html::{U, badge, conditions};
use super::plot::{GroupBar, groups, over_time, progress};
use super::progress::Point;
use flotilla_api::v1::{
    ClusterManagementAddOn, DecisionGroupSummary, ManagedClusterAddOn, ManifestWorkReplicaSet,
    RolloutStrategy,
};
use maud::{Markup, html};
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
) -> Markup {
    html! {
        h1 data-follow="rollout:* addon:*" { "Rollouts" }
        h2 { "Replica sets" }
        @if sets.is_empty() {
            p.muted { "No ManifestWorkReplicaSet." }
        } @else {
            table #replicasets {
                thead { tr { th { "Namespace" } th { "Name" } th { "Available" } th { "Degraded" } th { "State" } } }
                tbody { @for rs in sets { (set_row(rs)) } }
            }
        }
        h2 { "Add-ons" }
        @if addons.is_empty() {
            p.muted { "No ClusterManagementAddOn." }
        } @else {
            table #addons {
                thead { tr {
                    th { "Add-on" } th { "Install strategy" } th { "Rolled out" } th { "Installed on" }
                    th { "Available" } th { "Stopped" }
                } }
                tbody { @for (cma, installed) in addons { (addon_row(cma, installed)) } }
            }
        }
    }
}

/// One replica set in the list.
fn set_row(rs: &ManifestWorkReplicaSet) -> Markup {
    let (ns, name) = ns_name(rs);
    let s = rs
        .status
        .as_ref()
        .and_then(|s| s.summary)
        .unwrap_or_default();
    html! {
        tr {
            td { (ns) }
            td { a href={ "/rollouts/" (U(&ns)) "/" (U(&name)) } { (name) } }
            td { (progress(s.available.into(), s.degraded.into(), s.total.into())) }
            td { (s.degraded) }
            td { @if paused(rs) { (badge("Paused")) } }
        }
    }
}

/// One add-on in the list: its strategy, its rollout and where it stopped.
fn addon_row(cma: &ClusterManagementAddOn, installed: &[Arc<ManagedClusterAddOn>]) -> Markup {
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
    let stopped = progressions(cma)
        .iter()
        .filter(|p| !p.stopped_reason.is_empty());
    html! {
        tr data-addon=(name) {
            td { a href={ "/addons/" (U(name)) } { (name) } }
            td { (strategy) }
            td {
                @if total == 0 && progressions(cma).is_empty() { "-" }
                @else { (progress(done, failed, total)) }
            }
            td { (installed.len()) }
            td { (progress(available as i64, 0, installed.len() as i64)) }
            td.error {
                @for (i, p) in stopped.enumerate() {
                    @if i > 0 { br; }
                    (p.namespace) "/" (p.name) ": " (p.stopped_reason)
                }
            }
        }
    }
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

/// `cma` as a viewer who sees only the namespaces `sees` admits may read it (issue 48): the
/// API's rule ([`crate::addon::fence`]).
pub use crate::addon::fence::fenced as fenced_addon;

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
fn group_bars(gs: &[DecisionGroupSummary]) -> Markup {
    if gs.is_empty() {
        return html! {};
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
) -> Markup {
    let name = addon_name(cma);
    let spec = cma.spec.clone().unwrap_or_default();
    let meta = spec.add_on_meta.clone().unwrap_or_default();
    let (done, failed, total) = super::progress::of_addon(cma);
    let strategy = spec.install_strategy.clone().unwrap_or_default();
    let kind = if strategy.r#type.is_empty() {
        "Manual"
    } else {
        strategy.r#type.as_str()
    };
    html! {
        p.crumbs { a href="/rollouts" { "Rollouts" } " / add-ons" }
        h1 data-follow={ "addon:" (name) } { (name) }
        @if !meta.display_name.is_empty() || !meta.description.is_empty() {
            p {
                (meta.display_name)
                @if !meta.display_name.is_empty() && !meta.description.is_empty() { " — " }
                (meta.description)
            }
        }
        p #addon-summary {
            "Install strategy " b { (kind) } " · rolled out " (progress(done, failed, total))
            " · failed " (failed)
        }
        p.muted #read-only {
            "Read-only: the API has no pause, resume or undo for add-ons; change the rollout by \
             applying the ClusterManagementAddOn (" code { "flotilla apply -f" } ") with another "
            code { "installStrategy" } "."
        }
        h2 { "Progress over time" }
        (over_time(history))
        h2 { "Placements" }
        @if strategy.placements.is_empty() {
            p.muted {
                "No placement: installed only where a ManagedClusterAddOn is made by hand ("
                code { "flotilla addon enable" } ")."
            }
        }
        div #progressions {
            @for ps in &strategy.placements { (addon_placement(cma, ps)) }
        }
        (addon_installed(installed))
    }
}

/// One placement of an add-on's install strategy and how far the rollout got on it.
fn addon_placement(
    cma: &ClusterManagementAddOn,
    ps: &flotilla_api::v1::PlacementStrategy,
) -> Markup {
    let p = progressions(cma)
        .iter()
        .find(|p| p.namespace == ps.namespace && p.name == ps.name);
    html! {
        section.progression data-placement={ (ps.namespace) "/" (ps.name) } {
            h3 { a href={ "/placements/" (U(&ps.namespace)) "/" (U(&ps.name)) } { (ps.namespace) "/" (ps.name) } }
            p.strategy { (strategy_text(ps.rollout_strategy.as_ref())) }
            @match p {
                None => p.muted { "Not rolled out yet." },
                Some(p) => (addon_progression(p)),
            }
        }
    }
}

/// What an add-on's rollout did on one placement: progress, why it stopped, notes, groups,
/// conditions, and the configurations it rolls.
fn addon_progression(p: &flotilla_api::v1::InstallProgression) -> Markup {
    let hash = |h: &Option<flotilla_api::v1::ConfigSpecHash>| {
        h.as_ref().map_or("-".to_string(), |h| {
            let short: String = h.spec_hash.chars().take(12).collect();
            format!("{}/{} {short}", h.namespace, h.name)
        })
    };
    html! {
        p { "Updated " (progress(p.updated.into(), p.failed.into(), p.total.into())) " · failed " (p.failed) }
        @if !p.stopped_reason.is_empty() { p class="error stopped" { "Stopped: " (p.stopped_reason) } }
        @for n in &p.notes { p.muted { (n) } }
        (group_bars(&p.decision_groups))
        @if !p.conditions.is_empty() { (conditions(&p.conditions)) }
        @for c in &p.config_references {
            p.strategy {
                (c.resource) "." (c.group) ": desired " (hash(&c.desired_config))
                " · last known good " (hash(&c.last_known_good_config))
                " · last applied " (hash(&c.last_applied_config))
            }
        }
    }
}

/// Where an add-on is installed (the first [`ADDON_CLUSTERS_SHOWN`]) and whether available.
fn addon_installed(installed: &[Arc<ManagedClusterAddOn>]) -> Markup {
    let available = installed.iter().filter(|a| addon_available(a)).count();
    html! {
        h2 { "Installed on (" (installed.len()) ")" }
        p { "Available " (progress(available as i64, 0, installed.len() as i64)) }
        @if !installed.is_empty() {
            table #installed {
                thead { tr { th { "Cluster" } th { "Available" } th { "Placement" } } }
                tbody { @for a in installed.iter().take(ADDON_CLUSTERS_SHOWN) { (installed_row(a)) } }
            }
            @if installed.len() > ADDON_CLUSTERS_SHOWN {
                p.muted { "The first " (ADDON_CLUSTERS_SHOWN) " of " (installed.len()) " clusters." }
            }
        }
    }
}

/// One cluster an add-on is installed on.
fn installed_row(a: &ManagedClusterAddOn) -> Markup {
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
    html! {
        tr data-cluster=(cluster) {
            td { a href={ "/clusters/" (U(cluster)) } { (cluster) } }
            td { (badge(status)) }
            td { (a.hub.as_ref().map_or("", |h| h.placement.as_str())) }
        }
    }
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
) -> Markup {
    let (ns, name) = ns_name(rs);
    let st = rs.status.clone().unwrap_or_default();
    let s = st.summary.unwrap_or_default();
    html! {
        p.crumbs { a href="/rollouts" { "Rollouts" } " / " (ns) }
        h1 data-follow={ "rollout:" (ns) "/" (name) } {
            (name) " " span #state { @if paused(rs) { (badge("Paused")) } }
        }
        @if let Some(n) = notice { p.notice #notice { (n) } }
        p {
            "Available " (progress(s.available.into(), s.degraded.into(), s.total.into()))
            " · applied " (s.applied) " · progressing " (s.progressing) " · degraded " (s.degraded)
        }
        (actions(&ns, &name, &may_act, csrf))
        h2 { "Progress over time" }
        (over_time(history))
        h2 { "Conditions" }
        (conditions(&st.conditions))
        h2 { "Placements" }
        div #placement-summaries {
            @for p in &st.placement_summaries { (placement_summary(p)) }
        }
        @if st.placement_summaries.is_empty() { p.muted { "No placement has decided yet." } }
    }
}

/// Pause, resume and undo (disabled, with why, for a viewer who may not).
fn actions(ns: &str, name: &str, may_act: &Result<(), String>, csrf: &str) -> Markup {
    html! {
        form method="post" action={ "/rollouts/" (U(ns)) "/" (U(name)) } class="actions" {
            input type="hidden" name="csrf" value=(csrf);
            @for a in ACTIONS {
                button type="submit" name="action" value=(a) id={ "action-" (a) } disabled[may_act.is_err()] {
                    (match a { "pause" => "Pause", "resume" => "Resume", _ => "Undo" })
                }
                " "
            }
            @if let Err(why) = may_act { span.muted #may-not { (why) } }
        }
    }
}

/// One placement of a replica set: its progress, why it stopped, its groups.
fn placement_summary(p: &flotilla_api::v1::PlacementSummary) -> Markup {
    let ps = p.summary.unwrap_or_default();
    html! {
        h3 { (p.name) }
        p { (progress(ps.available.into(), ps.degraded.into(), ps.total.into())) " · waiting " (p.waiting) }
        @if !p.stopped_reason.is_empty() { p.error { "Stopped: " (p.stopped_reason) } }
        @for n in &p.notes { p.muted { (n) } }
        (group_bars(&p.decision_groups))
        @if !p.decision_groups.is_empty() {
            table.groups {
                thead { tr { th { "Group" } th { "Available" } } }
                tbody {
                    @for g in &p.decision_groups {
                        tr {
                            td { (g.index) @if !g.name.is_empty() { ": " } (g.name) }
                            td { (progress(g.available.into(), 0, g.total.into())) }
                        }
                    }
                }
            }
        }
    }
}
