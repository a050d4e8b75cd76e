//! `/works`: every ManifestWork of the fleet, filtered on the server by cluster (`cluster`,
//! part of its name), work name (`q`, part of it) and state (`state`), paged, with how many of
//! the matching works are in each state; each links to its work page. Read from the work
//! inventory's snapshot, like `/clusters`: a filter of references, only the page rendered.

use super::html::{U, badge, condition_badge};
use flotilla_api::meta;
use flotilla_api::v1::ManifestWork;
use maud::{Markup, html};
use std::sync::Arc;

/// Rows per page unless the query says otherwise.
pub const DEFAULT_PER_PAGE: usize = 50;
/// The most rows a page shows.
pub const MAX_PER_PAGE: usize = 500;

/// A work's state, from its conditions: the worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkState {
    /// `Degraded=True`.
    Degraded,
    /// `Applied=False`: the agent could not apply it.
    Failed,
    /// No `Applied` condition yet: the agent has not reported.
    Pending,
    /// Applied, not (yet) `Available=True`.
    Applied,
    /// `Available=True`.
    Available,
}

impl WorkState {
    /// Every state, in the order the summary shows them.
    pub const ALL: [WorkState; 5] = [
        WorkState::Available,
        WorkState::Applied,
        WorkState::Pending,
        WorkState::Failed,
        WorkState::Degraded,
    ];

    /// Its name (what `state=` takes).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkState::Degraded => "Degraded",
            WorkState::Failed => "Failed",
            WorkState::Pending => "Pending",
            WorkState::Applied => "Applied",
            WorkState::Available => "Available",
        }
    }

    /// The state of `w`.
    pub fn of(w: &ManifestWork) -> Self {
        let conds = w
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        let status = |ty: &str| meta::condition_status(conds, ty);
        if status("Degraded") == Some("True") {
            WorkState::Degraded
        } else if status("Applied") == Some("False") {
            WorkState::Failed
        } else if status("Available") == Some("True") {
            WorkState::Available
        } else if status("Applied") == Some("True") {
            WorkState::Applied
        } else {
            WorkState::Pending
        }
    }

    /// Its badge (the stylesheet's colour classes).
    fn badge(self) -> Markup {
        let class = match self {
            WorkState::Available => "ok",
            WorkState::Applied => "neutral",
            WorkState::Pending => "pending",
            WorkState::Failed | WorkState::Degraded => "bad",
        };
        html! { span class={ "badge " (class) } { (self.as_str()) } }
    }
}

/// The list's query string, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorksQuery {
    /// `cluster`: part of the cluster's name.
    pub cluster: String,
    /// `q`: part of the work's name.
    pub search: String,
    /// `state`: only works in this state.
    pub state: Option<WorkState>,
    /// `page`, from 1.
    pub page: usize,
    /// `per`: rows per page.
    pub per_page: usize,
}

impl Default for WorksQuery {
    fn default() -> Self {
        Self {
            cluster: String::new(),
            search: String::new(),
            state: None,
            page: 1,
            per_page: DEFAULT_PER_PAGE,
        }
    }
}

impl WorksQuery {
    /// Parses the query's pairs; every mistake is reported.
    pub fn parse(pairs: &[(String, String)]) -> (Self, Vec<String>) {
        let mut q = Self::default();
        let mut errors = Vec::new();
        let get = |k: &str| {
            super::route::param(pairs, k)
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        q.cluster = get("cluster").unwrap_or_default().to_string();
        q.search = get("q").unwrap_or_default().to_string();
        if let Some(s) = get("state") {
            match WorkState::ALL.into_iter().find(|x| x.as_str() == s) {
                Some(s) => q.state = Some(s),
                None => errors.push(format!(
                    "state {s:?} is not one of Available, Applied, Pending, Failed, Degraded"
                )),
            }
        }
        if let Some(p) = get("page") {
            match p.parse::<usize>() {
                Ok(n) if n >= 1 => q.page = n,
                _ => errors.push(format!("page {p:?} is not a number from 1")),
            }
        }
        if let Some(p) = get("per") {
            match p.parse::<usize>() {
                Ok(n) if (1..=MAX_PER_PAGE).contains(&n) => q.per_page = n,
                _ => errors.push(format!(
                    "per {p:?} is not a number from 1 to {MAX_PER_PAGE}"
                )),
            }
        }
        (q, errors)
    }

    /// This query's URL on another page, or with another state (`Some(None)`: any).
    pub fn url(&self, page: usize, state: Option<Option<WorkState>>) -> String {
        let mut s = form_urlencoded::Serializer::new(String::new());
        if !self.cluster.is_empty() {
            s.append_pair("cluster", &self.cluster);
        }
        if !self.search.is_empty() {
            s.append_pair("q", &self.search);
        }
        if let Some(st) = state.unwrap_or(self.state) {
            s.append_pair("state", st.as_str());
        }
        if self.per_page != DEFAULT_PER_PAGE {
            s.append_pair("per", &self.per_page.to_string());
        }
        if page > 1 {
            s.append_pair("page", &page.to_string());
        }
        let q = s.finish();
        if q.is_empty() {
            "/works".into()
        } else {
            format!("/works?{q}")
        }
    }
}

/// One row of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The cluster the work is for.
    pub cluster: String,
    /// The work's name.
    pub name: String,
    /// Manifests in its spec.
    pub manifests: usize,
    /// Its state.
    pub state: WorkState,
    /// Applied, Available, Degraded (`-`: not reported).
    pub applied: String,
    /// See `applied`.
    pub available: String,
    /// See `applied`.
    pub degraded: String,
    /// The message of the first condition that is not as it should be.
    pub message: String,
}

impl Row {
    fn of(cluster: &str, w: &ManifestWork) -> Self {
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
        Self {
            cluster: cluster.to_string(),
            name: name_of(w).to_string(),
            manifests: w
                .spec
                .as_ref()
                .and_then(|s| s.workload.as_ref())
                .map_or(0, |wl| wl.manifests.len()),
            state: WorkState::of(w),
            applied: status("Applied"),
            available: status("Available"),
            degraded: status("Degraded"),
            message,
        }
    }
}

fn name_of(w: &ManifestWork) -> &str {
    w.metadata.as_ref().map_or("", |m| m.name.as_str())
}

/// One page of the list.
#[derive(Debug, Clone)]
pub struct WorksPage {
    /// The rows shown.
    pub rows: Vec<Row>,
    /// Works matching the cluster and name filters, by state (in [`WorkState::ALL`]'s order).
    pub by_state: [usize; 5],
    /// Works matching the query (the state too).
    pub matching: usize,
    /// Works in the fleet.
    pub fleet: usize,
    /// This page (clamped to the last).
    pub page: usize,
    /// Pages.
    pub pages: usize,
}

/// The page `q` asks for, from the work inventory (`<cluster>/<name>` keys, sorted).
pub fn build(works: &[(Arc<str>, Arc<ManifestWork>)], q: &WorksQuery) -> WorksPage {
    let cluster = q.cluster.to_lowercase();
    let search = q.search.to_lowercase();
    let mut by_state = [0usize; 5];
    let mut matching = Vec::new();
    for (key, w) in works {
        let c = key.split_once('/').map_or("", |(c, _)| c);
        if !cluster.is_empty() && !c.to_lowercase().contains(&cluster) {
            continue;
        }
        if !search.is_empty() && !name_of(w).to_lowercase().contains(&search) {
            continue;
        }
        let state = WorkState::of(w);
        if let Some(i) = WorkState::ALL.iter().position(|s| *s == state) {
            by_state[i] += 1;
        }
        if q.state.is_none_or(|s| s == state) {
            matching.push((c, w));
        }
    }
    let pages = matching.len().div_ceil(q.per_page).max(1);
    let page = q.page.min(pages);
    let rows = matching
        .iter()
        .skip((page - 1) * q.per_page)
        .take(q.per_page)
        .map(|(c, w)| Row::of(c, w))
        .collect();
    WorksPage {
        rows,
        by_state,
        matching: matching.len(),
        fleet: works.len(),
        page,
        pages,
    }
}

/// The page's body.
pub fn render(list: &WorksPage, q: &WorksQuery, errors: &[String]) -> Markup {
    html! {
        h1 { "Works" }
        @for e in errors { p.error { (e) } }
        (filters(q))
        p.summary #by-state {
            @for (s, n) in WorkState::ALL.iter().zip(list.by_state) {
                a href=(q.url(1, Some(Some(*s)))) data-state=(s.as_str()) { (s.badge()) " " (n) } " "
            }
        }
        p.count #count {
            (list.matching) " of " (list.fleet) " works · page " (list.page) " of " (list.pages)
        }
        table #works {
            thead { tr {
                th { "Cluster" } th { "Work" } th { "Manifests" } th { "Applied" }
                th { "Available" } th { "Degraded" } th { "Message" }
            } }
            tbody { @for r in &list.rows { (row(r)) } }
        }
        @if list.rows.is_empty() { p.muted { "No work matches." } }
        nav.pages {
            @if list.page > 1 {
                a href=(q.url(list.page - 1, None)) rel="prev" { "← Previous" } " "
            }
            @if list.page < list.pages {
                a href=(q.url(list.page + 1, None)) rel="next" { "Next →" }
            }
        }
    }
}

/// The filter form: cluster and work name, state.
fn filters(q: &WorksQuery) -> Markup {
    html! {
        form method="get" action="/works" class="filters" {
            label { "Cluster " input type="search" name="cluster" value=(q.cluster) placeholder="part of a cluster name"; }
            label { "Work " input type="search" name="q" value=(q.search) placeholder="part of a work name"; }
            label {
                "State "
                select name="state" {
                    option value="" { "any" }
                    @for s in WorkState::ALL { option selected[q.state == Some(s)] { (s.as_str()) } }
                }
            }
            button type="submit" { "Filter" }
        }
    }
}

/// One work's row.
fn row(r: &Row) -> Markup {
    html! {
        tr data-work={ (r.cluster) "/" (r.name) } {
            td { a href={ "/clusters/" (U(&r.cluster)) } { (r.cluster) } }
            td { a href={ "/clusters/" (U(&r.cluster)) "/works/" (U(&r.name)) } { (r.name) } }
            td { (r.manifests) }
            td { (badge(&r.applied)) }
            td { (badge(&r.available)) }
            td { (condition_badge("Degraded", &r.degraded)) }
            td { (r.message) }
        }
    }
}
