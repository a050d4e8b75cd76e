//! `/clusters`: the clusters, filtered (label selector — the API's own syntax and matching —,
//! name search, availability), sorted and paged on the server, from the inventory's snapshot
//! (no store read per page view). Only the page shown is rendered, so 10,000 clusters cost a
//! filter and a sort of references.

use super::history::Availability;
use super::html::{U, badge};
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::{LabelSelector, ManagedCluster};
use maud::{Markup, html};
use std::sync::Arc;

/// Rows per page unless the query says otherwise.
pub const DEFAULT_PER_PAGE: usize = 50;
/// The most rows a page shows.
pub const MAX_PER_PAGE: usize = 500;

/// What the list is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Name (default).
    Name,
    /// Availability, then name.
    Availability,
    /// Cluster set, then name.
    Set,
    /// Kubernetes version, then name.
    Version,
}

impl Sort {
    const ALL: [Sort; 4] = [Sort::Name, Sort::Availability, Sort::Set, Sort::Version];

    fn as_str(self) -> &'static str {
        match self {
            Sort::Name => "name",
            Sort::Availability => "availability",
            Sort::Set => "set",
            Sort::Version => "version",
        }
    }
}

/// The list's query string, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct ListQuery {
    /// `selector`: a label selector as the API takes it (`env=prod,tier in (a,b)`).
    pub selector: String,
    /// The parsed selector.
    pub parsed: LabelSelector,
    /// `q`: a substring of the name.
    pub search: String,
    /// `availability`: only clusters in this state.
    pub availability: Option<Availability>,
    /// `sort`.
    pub sort: Sort,
    /// `order=desc`.
    pub descending: bool,
    /// `page`, from 1.
    pub page: usize,
    /// `per`: rows per page.
    pub per_page: usize,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            selector: String::new(),
            parsed: LabelSelector::default(),
            search: String::new(),
            availability: None,
            sort: Sort::Name,
            descending: false,
            page: 1,
            per_page: DEFAULT_PER_PAGE,
        }
    }
}

impl ListQuery {
    /// Parses the query's pairs; every mistake is reported (the page shows them and lists
    /// with what could be understood).
    pub fn parse(pairs: &[(String, String)]) -> (Self, Vec<String>) {
        let mut q = Self::default();
        let mut errors = Vec::new();
        let get = |k: &str| {
            super::route::param(pairs, k)
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        if let Some(s) = get("selector") {
            q.selector = s.to_string();
            match flotilla_api::selector::parse(s) {
                Ok(sel) => q.parsed = sel,
                Err(e) => errors.push(format!("label selector: {e}")),
            }
        }
        q.search = get("q").unwrap_or_default().to_string();
        if let Some(a) = get("availability") {
            match Availability::parse(a) {
                Some(a) => q.availability = Some(a),
                None => errors.push(format!("availability {a:?} is not one of Available, Unavailable, Unknown, Pending, Denied")),
            }
        }
        if let Some(s) = get("sort") {
            match Sort::ALL.into_iter().find(|x| x.as_str() == s) {
                Some(s) => q.sort = s,
                None => errors.push(format!(
                    "sort {s:?} is not one of name, availability, set, version"
                )),
            }
        }
        q.descending = get("order") == Some("desc");
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

    /// This query's URL with some parameters replaced.
    pub fn url(&self, page: usize, sort: Sort, descending: bool) -> String {
        let mut s = form_urlencoded::Serializer::new(String::new());
        if !self.selector.is_empty() {
            s.append_pair("selector", &self.selector);
        }
        if !self.search.is_empty() {
            s.append_pair("q", &self.search);
        }
        if let Some(a) = self.availability {
            s.append_pair("availability", a.as_str());
        }
        if sort != Sort::Name {
            s.append_pair("sort", sort.as_str());
        }
        if descending {
            s.append_pair("order", "desc");
        }
        if self.per_page != DEFAULT_PER_PAGE {
            s.append_pair("per", &self.per_page.to_string());
        }
        if page > 1 {
            s.append_pair("page", &page.to_string());
        }
        let q = s.finish();
        if q.is_empty() {
            "/clusters".into()
        } else {
            format!("/clusters?{q}")
        }
    }
}

/// One row of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The cluster's name.
    pub name: String,
    /// Its state.
    pub availability: Availability,
    /// Its set (the `clusterset` label).
    pub set: String,
    /// Its Kubernetes version.
    pub version: String,
    /// CPU capacity.
    pub cpu: String,
    /// Memory capacity.
    pub memory: String,
    /// Taint keys.
    pub taints: Vec<String>,
}

impl Row {
    fn of(c: &ManagedCluster) -> Self {
        let m = c.metadata.as_ref();
        let st = c.status.as_ref();
        Self {
            name: m.map(|m| m.name.clone()).unwrap_or_default(),
            availability: Availability::of(c),
            set: set_of(c).to_string(),
            version: st
                .and_then(|s| s.version.as_ref())
                .map(|v| v.kubernetes.clone())
                .unwrap_or_default(),
            cpu: st
                .and_then(|s| s.capacity.get("cpu").cloned())
                .unwrap_or_default(),
            memory: st
                .and_then(|s| s.capacity.get("memory").cloned())
                .unwrap_or_default(),
            taints: c
                .spec
                .as_ref()
                .map(|s| s.taints.iter().map(|t| t.key.clone()).collect())
                .unwrap_or_default(),
        }
    }
}

fn set_of(c: &ManagedCluster) -> &str {
    c.metadata
        .as_ref()
        .and_then(|m| m.labels.get(CLUSTERSET_LABEL))
        .map_or("", String::as_str)
}

fn name_of(c: &ManagedCluster) -> &str {
    crate::inventory::name(c)
}

/// One page of the list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// The rows shown.
    pub rows: Vec<Row>,
    /// Clusters matching the query.
    pub matching: usize,
    /// Clusters in the fleet.
    pub fleet: usize,
    /// This page (clamped to the last).
    pub page: usize,
    /// Pages.
    pub pages: usize,
}

/// The page `q` asks for, from the inventory's snapshot (sorted by name).
pub fn build(snapshot: &[Arc<ManagedCluster>], q: &ListQuery) -> ListPage {
    let search = q.search.to_lowercase();
    let mut matching: Vec<&ManagedCluster> = snapshot
        .iter()
        .map(|c| &**c)
        .filter(|c| search.is_empty() || name_of(c).to_lowercase().contains(&search))
        .filter(|c| q.availability.is_none_or(|a| Availability::of(c) == a))
        .filter(|c| crate::grpc::selects(&q.parsed, c.metadata.as_ref()))
        .collect();
    match q.sort {
        // The snapshot is sorted by name already.
        Sort::Name => {}
        Sort::Availability => matching.sort_by_cached_key(|c| Availability::of(c)),
        Sort::Set => matching.sort_by(|a, b| set_of(a).cmp(set_of(b))),
        Sort::Version => matching.sort_by_cached_key(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.version.as_ref())
                .map(|v| v.kubernetes.clone())
                .unwrap_or_default()
        }),
    }
    if q.descending {
        matching.reverse();
    }
    let pages = matching.len().div_ceil(q.per_page).max(1);
    let page = q.page.min(pages);
    let rows = matching
        .iter()
        .skip((page - 1) * q.per_page)
        .take(q.per_page)
        .map(|c| Row::of(c))
        .collect();
    ListPage {
        rows,
        matching: matching.len(),
        fleet: snapshot.len(),
        page,
        pages,
    }
}

/// The page's body.
pub fn render(list: &ListPage, q: &ListQuery, errors: &[String]) -> Markup {
    html! {
        h1 { "Clusters" }
        @for e in errors { p.error { (e) } }
        (filters(q))
        p.count #count {
            (list.matching) " of " (list.fleet) " clusters · page " (list.page) " of " (list.pages)
        }
        table #clusters {
            thead { tr { (sort_headers(q)) } }
            tbody { @for r in &list.rows { (row(r)) } }
        }
        @if list.rows.is_empty() { p.muted { "No cluster matches." } }
        nav.pages {
            @if list.page > 1 {
                a href=(q.url(list.page - 1, q.sort, q.descending)) rel="prev" { "← Previous" } " "
            }
            @if list.page < list.pages {
                a href=(q.url(list.page + 1, q.sort, q.descending)) rel="next" { "Next →" }
            }
        }
    }
}

/// The filter form: name search, label selector, availability (sort and order kept).
fn filters(q: &ListQuery) -> Markup {
    html! {
        form method="get" action="/clusters" class="filters" {
            label { "Name " input type="search" name="q" value=(q.search) placeholder="part of a name"; }
            label {
                "Label selector "
                input type="text" name="selector" value=(q.selector)
                    placeholder="env=prod,tier in (a,b)" size="32";
            }
            label {
                "Availability "
                select name="availability" {
                    option value="" { "any" }
                    @for a in Availability::ALL {
                        option selected[q.availability == Some(a)] { (a.as_str()) }
                    }
                }
            }
            @if q.sort != Sort::Name {
                input type="hidden" name="sort" value=(q.sort.as_str());
            }
            @if q.descending { input type="hidden" name="order" value="desc"; }
            button type="submit" { "Filter" }
        }
    }
}

/// The column headers, sortable ones as links that sort by them (again: the other way).
fn sort_headers(q: &ListQuery) -> Markup {
    let columns = [
        ("Name", Some(Sort::Name)),
        ("Availability", Some(Sort::Availability)),
        ("Set", Some(Sort::Set)),
        ("Kubernetes", Some(Sort::Version)),
        ("CPU", None),
        ("Memory", None),
        ("Taints", None),
    ];
    html! {
        @for (label, sort) in columns {
            @match sort {
                Some(s) => {
                    @let arrow = match (q.sort == s, q.descending) {
                        (true, false) => " ▲",
                        (true, true) => " ▼",
                        _ => "",
                    };
                    th { a href=(q.url(1, s, q.sort == s && !q.descending)) { (label) (arrow) } }
                }
                None => th { (label) },
            }
        }
    }
}

/// One cluster's row.
fn row(r: &Row) -> Markup {
    html! {
        tr data-cluster=(r.name) {
            td { a href={ "/clusters/" (U(&r.name)) } { (r.name) } }
            td data-field="availability" { (badge(r.availability.as_str())) }
            td { (r.set) }
            td { (r.version) }
            td { (r.cpu) }
            td { (r.memory) }
            td { (r.taints.join(", ")) }
        }
    }
}
