//! `/placements` and `/placements/<ns>/<name>`: what each placement decided, in which decision
//! groups, and why — per candidate cluster the filter verdicts and prioritizer scores, from the
//! hub's own explanation ([`crate::placement::Placements::debug`], what `flotilla describe
//! placement` shows), and the distribution of the totals.

use super::html::{U, badge, conditions};
use crate::placement::PlacementView;
use flotilla_api::v1::PlacementDebug;
use maud::{Markup, html};
use std::collections::BTreeMap;
use std::sync::Arc;

fn ns_name(v: &PlacementView) -> (String, String) {
    v.placement
        .metadata
        .as_ref()
        .map(|m| (m.namespace.clone(), m.name.clone()))
        .unwrap_or_default()
}

/// The list's body.
pub fn render_list(views: &[Arc<PlacementView>]) -> Markup {
    html! {
        h1 data-follow="placement:*" { "Placements" }
        @if views.is_empty() {
            p.muted { "No placement. Apply one with " code { "flotilla apply -f placement.yaml" } "." }
        } @else {
            table #placements {
                thead { tr {
                    th { "Namespace" } th { "Name" } th { "Selected" } th { "Groups" }
                    th { "Satisfied" } th { "Message" }
                } }
                tbody { @for v in views { (list_row(v)) } }
            }
        }
    }
}

/// One placement in the list.
fn list_row(v: &PlacementView) -> Markup {
    let (ns, name) = ns_name(v);
    let st = v.placement.status.clone().unwrap_or_default();
    let satisfied = st
        .conditions
        .iter()
        .find(|c| c.r#type == "PlacementSatisfied");
    let groups = st
        .decision_groups
        .len()
        .max(usize::from(!v.decisions.is_empty()));
    html! {
        tr {
            td { (ns) }
            td { a href={ "/placements/" (U(&ns)) "/" (U(&name)) } { (name) } }
            td { (v.clusters().len()) }
            td { (groups) }
            td { (badge(satisfied.map_or("-", |c| c.status.as_str()))) }
            td { (satisfied.map_or("", |c| c.message.as_str())) }
        }
    }
}

/// The distribution of the feasible clusters' totals, and of each prioritizer's scores (its
/// raw score, before the weight), as histograms.
pub fn distributions(debug: &PlacementDebug) -> Markup {
    let totals: Vec<i64> = debug.clusters.iter().filter_map(|c| c.total).collect();
    if totals.is_empty() {
        return html! {};
    }
    let per_prioritizer = debug.prioritizers.iter().filter_map(|p| {
        let scores: Vec<i64> = debug
            .clusters
            .iter()
            .filter(|c| c.total.is_some())
            .filter_map(|c| c.scores.iter().find(|s| s.prioritizer == p.prioritizer))
            .map(|s| s.score)
            .collect();
        (!scores.is_empty()).then_some((p, scores))
    });
    html! {
        h3 { "Score distributions (feasible clusters)" }
        div.hists #distributions {
            figure data-prioritizer="" {
                figcaption { "Total (" (totals.len()) " clusters)" }
                (super::plot::histogram(&totals, 20))
            }
            @for (p, scores) in per_prioritizer {
                figure data-prioritizer=(p.prioritizer) {
                    figcaption { (p.prioritizer) " (weight " (p.weight) ")" }
                    (super::plot::histogram(&scores, 20))
                }
            }
        }
    }
}

/// One placement's body: its decisions by group, and the scheduler's reasons (`debug`; its
/// error when it could not be explained).
pub fn render(view: &PlacementView, debug: Result<&PlacementDebug, &str>) -> Markup {
    let (ns, name) = ns_name(view);
    let st = view.placement.status.clone().unwrap_or_default();
    html! {
        p.crumbs { a href="/placements" { "Placements" } " / " (ns) }
        h1 data-follow={ "placement:" (ns) "/" (name) } { (name) }
        p { (st.number_of_selected_clusters) " clusters selected." }
        h2 { "Conditions" }
        (conditions(&st.conditions))
        h2 { "Decisions" }
        (decisions(view))
        h2 { "Why: filters and scores" }
        @match debug {
            Ok(debug) => (reasons(debug)),
            Err(e) => p.error { (e) },
        }
    }
}

/// The decided clusters, by decision group.
fn decisions(view: &PlacementView) -> Markup {
    let mut groups: BTreeMap<(u32, String), Vec<String>> = BTreeMap::new();
    for (cluster, g) in view.decided_by_group() {
        groups.entry((g.index, g.name)).or_default().push(cluster);
    }
    html! {
        @if groups.is_empty() { p.muted #decisions { "No cluster decided." } }
        div #decisions {
            @for ((index, gname), clusters) in &groups {
                h3 {
                    "Group " (index) @if !gname.is_empty() { ": " } (gname)
                    " (" (clusters.len()) " clusters)"
                }
                ul.decided {
                    @for c in clusters {
                        li data-cluster=(c) { a href={ "/clusters/" (U(c)) } { (c) } }
                    }
                }
            }
        }
    }
}

/// The scheduler's explanation: eligible sets, distributions, and per cluster the filters'
/// verdicts, the scores, the total and the rank.
fn reasons(debug: &PlacementDebug) -> Markup {
    html! {
        @if !debug.error.is_empty() { p.error { (debug.error) } }
        @if !debug.eligible_sets.is_empty() {
            p { "Eligible cluster sets: " (debug.eligible_sets.join(", ")) }
        }
        (distributions(debug))
        table #reasons {
            thead { tr {
                th { "Cluster" } th { "Filters" }
                @for p in &debug.prioritizers { th { (p.prioritizer) " (×" (p.weight) ")" } }
                th { "Total" } th { "Rank" } th { "Selected" }
            } }
            tbody { @for c in &debug.clusters { (reason_row(debug, c)) } }
        }
    }
}

/// One candidate cluster's verdicts and scores.
fn reason_row(debug: &PlacementDebug, c: &flotilla_api::v1::ClusterDebug) -> Markup {
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    html! {
        tr data-cluster=(c.name) {
            td { a href={ "/clusters/" (U(&c.name)) } { (c.name) } }
            td {
                @for (i, f) in c.filters.iter().enumerate() {
                    @if i > 0 { br; }
                    (f.filter) " " (badge(if f.passed { "passed" } else { "failed" }))
                    @if !f.reason.is_empty() { ": " (f.reason) }
                }
            }
            @for p in &debug.prioritizers {
                td {
                    (or_dash(c.scores.iter().find(|s| s.prioritizer == p.prioritizer).map(|s| s.score.to_string())))
                }
            }
            td {
                (or_dash(c.total.map(|t| t.to_string())))
                @if c.prefer_no_select_penalty { " (PreferNoSelect)" }
            }
            td { (or_dash(c.rank.map(|r| (r + 1).to_string()))) }
            td {
                @if c.selected { (badge("selected")) }
                @else if c.not_selected_reason.is_empty() { "-" }
                @else { (c.not_selected_reason) }
            }
        }
    }
}
