//! `/placements` and `/placements/<ns>/<name>`: what each placement decided, in which decision
//! groups, and why — per candidate cluster the filter verdicts and prioritizer scores, from the
//! hub's own explanation ([`crate::placement::Placements::debug`], what `flotilla describe
//! placement` shows), and the distribution of the totals.

use super::html::{E, U, badge, conditions};
use crate::placement::PlacementView;
use flotilla_api::v1::PlacementDebug;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

fn ns_name(v: &PlacementView) -> (String, String) {
    v.placement
        .metadata
        .as_ref()
        .map(|m| (m.namespace.clone(), m.name.clone()))
        .unwrap_or_default()
}

/// The list's body.
pub fn render_list(views: &[Arc<PlacementView>]) -> String {
    let mut out = String::from("<h1 data-follow=\"placement:*\">Placements</h1>");
    if views.is_empty() {
        out.push_str("<p class=\"muted\">No placement. Apply one with <code>flotilla apply -f placement.yaml</code>.</p>");
        return out;
    }
    out.push_str("<table id=\"placements\"><thead><tr><th>Namespace</th><th>Name</th><th>Selected</th><th>Groups</th><th>Satisfied</th><th>Message</th></tr></thead><tbody>");
    for v in views {
        let (ns, name) = ns_name(v);
        let st = v.placement.status.clone().unwrap_or_default();
        let satisfied = st
            .conditions
            .iter()
            .find(|c| c.r#type == "PlacementSatisfied");
        let _ = write!(
            out,
            "<tr><td>{}</td><td><a href=\"/placements/{}/{}\">{}</a></td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            E(&ns),
            U(&ns),
            U(&name),
            E(&name),
            v.clusters().len(),
            st.decision_groups
                .len()
                .max(usize::from(!v.decisions.is_empty())),
            badge(satisfied.map_or("-", |c| c.status.as_str())),
            E(satisfied.map_or("", |c| c.message.as_str()))
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// The distribution of the feasible clusters' totals, and of each prioritizer's scores (its
/// raw score, before the weight), as histograms.
pub fn distributions(debug: &PlacementDebug) -> String {
    let totals: Vec<i64> = debug.clusters.iter().filter_map(|c| c.total).collect();
    if totals.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h3>Score distributions (feasible clusters)</h3><div class=\"hists\" id=\"distributions\">",
    );
    let _ = write!(
        out,
        "<figure data-prioritizer=\"\"><figcaption>Total ({} clusters)</figcaption>{}</figure>",
        totals.len(),
        super::plot::histogram(&totals, 20)
    );
    for p in &debug.prioritizers {
        let scores: Vec<i64> = debug
            .clusters
            .iter()
            .filter(|c| c.total.is_some())
            .filter_map(|c| c.scores.iter().find(|s| s.prioritizer == p.prioritizer))
            .map(|s| s.score)
            .collect();
        if scores.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<figure data-prioritizer=\"{}\"><figcaption>{} (weight {})</figcaption>{}</figure>",
            E(&p.prioritizer),
            E(&p.prioritizer),
            p.weight,
            super::plot::histogram(&scores, 20)
        );
    }
    out.push_str("</div>");
    out
}

/// One placement's body: its decisions by group, and the scheduler's reasons (`debug`; its
/// error when it could not be explained).
pub fn render(view: &PlacementView, debug: Result<&PlacementDebug, &str>) -> String {
    let (ns, name) = ns_name(view);
    let st = view.placement.status.clone().unwrap_or_default();
    let mut out = format!(
        "<p class=\"crumbs\"><a href=\"/placements\">Placements</a> / {}</p>\
         <h1 data-follow=\"placement:{}/{}\">{}</h1>",
        E(&ns),
        E(&ns),
        E(&name),
        E(&name)
    );
    let _ = write!(
        out,
        "<p>{} clusters selected.</p><h2>Conditions</h2>",
        st.number_of_selected_clusters
    );
    out.push_str(&conditions(&st.conditions));
    let mut groups: BTreeMap<(u32, String), Vec<String>> = BTreeMap::new();
    for (cluster, g) in view.decided_by_group() {
        groups.entry((g.index, g.name)).or_default().push(cluster);
    }
    out.push_str("<h2>Decisions</h2>");
    if groups.is_empty() {
        out.push_str("<p class=\"muted\" id=\"decisions\">No cluster decided.</p>");
    }
    out.push_str("<div id=\"decisions\">");
    for ((index, gname), clusters) in &groups {
        let _ = write!(
            out,
            "<h3>Group {index}{}{} ({} clusters)</h3><ul class=\"decided\">",
            if gname.is_empty() { "" } else { ": " },
            E(gname),
            clusters.len()
        );
        for c in clusters {
            let _ = write!(
                out,
                "<li data-cluster=\"{}\"><a href=\"/clusters/{}\">{}</a></li>",
                E(c),
                U(c),
                E(c)
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("</div><h2>Why: filters and scores</h2>");
    let debug = match debug {
        Ok(d) => d,
        Err(e) => {
            let _ = write!(out, "<p class=\"error\">{}</p>", E(e));
            return out;
        }
    };
    if !debug.error.is_empty() {
        let _ = write!(out, "<p class=\"error\">{}</p>", E(&debug.error));
    }
    if !debug.eligible_sets.is_empty() {
        let _ = write!(
            out,
            "<p>Eligible cluster sets: {}</p>",
            E(&debug.eligible_sets.join(", "))
        );
    }
    out.push_str(&distributions(debug));
    out.push_str("<table id=\"reasons\"><thead><tr><th>Cluster</th><th>Filters</th>");
    for p in &debug.prioritizers {
        let _ = write!(out, "<th>{} (×{})</th>", E(&p.prioritizer), p.weight);
    }
    out.push_str("<th>Total</th><th>Rank</th><th>Selected</th></tr></thead><tbody>");
    for c in &debug.clusters {
        let filters: Vec<String> = c
            .filters
            .iter()
            .map(|f| {
                let verdict = if f.passed { "passed" } else { "failed" };
                if f.reason.is_empty() {
                    format!("{} {}", E(&f.filter), badge(verdict))
                } else {
                    format!("{} {}: {}", E(&f.filter), badge(verdict), E(&f.reason))
                }
            })
            .collect();
        let _ = write!(
            out,
            "<tr data-cluster=\"{}\"><td><a href=\"/clusters/{}\">{}</a></td><td>{}</td>",
            E(&c.name),
            U(&c.name),
            E(&c.name),
            filters.join("<br>")
        );
        for p in &debug.prioritizers {
            let score = c.scores.iter().find(|s| s.prioritizer == p.prioritizer);
            let _ = write!(
                out,
                "<td>{}</td>",
                score.map_or("-".to_string(), |s| s.score.to_string())
            );
        }
        let selected = if c.selected {
            badge("selected")
        } else if c.not_selected_reason.is_empty() {
            "-".to_string()
        } else {
            E(&c.not_selected_reason).to_string()
        };
        let _ = write!(
            out,
            "<td>{}{}</td><td>{}</td><td>{selected}</td></tr>",
            c.total.map_or("-".to_string(), |t| t.to_string()),
            if c.prefer_no_select_penalty {
                " (PreferNoSelect)"
            } else {
                ""
            },
            c.rank.map_or("-".to_string(), |r| (r + 1).to_string())
        );
    }
    out.push_str("</tbody></table>");
    out
}
