//! `/clusters`: the clusters, filtered (label selector — the API's own syntax and matching —,
//! name search, availability), sorted and paged on the server, from the inventory's snapshot
//! (no store read per page view). Only the page shown is rendered, so 10,000 clusters cost a
//! filter and a sort of references.

use super::history::Availability;
use super::html::{E, U, badge};
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::{LabelSelector, ManagedCluster};
use std::fmt::Write;
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
pub fn render(list: &ListPage, q: &ListQuery, errors: &[String]) -> String {
    let mut out = String::from("<h1>Clusters</h1>");
    for e in errors {
        let _ = write!(out, "<p class=\"error\">{}</p>", E(e));
    }
    let _ = write!(
        out,
        "<form method=\"get\" action=\"/clusters\" class=\"filters\">\
         <label>Name <input type=\"search\" name=\"q\" value=\"{}\" placeholder=\"part of a name\"></label>\
         <label>Label selector <input type=\"text\" name=\"selector\" value=\"{}\" \
         placeholder=\"env=prod,tier in (a,b)\" size=\"32\"></label>\
         <label>Availability <select name=\"availability\"><option value=\"\">any</option>",
        E(&q.search),
        E(&q.selector)
    );
    for a in Availability::ALL {
        let selected = if q.availability == Some(a) {
            " selected"
        } else {
            ""
        };
        let _ = write!(out, "<option{selected}>{}</option>", a.as_str());
    }
    out.push_str("</select></label>");
    if q.sort != Sort::Name {
        let _ = write!(
            out,
            "<input type=\"hidden\" name=\"sort\" value=\"{}\">",
            q.sort.as_str()
        );
    }
    if q.descending {
        out.push_str("<input type=\"hidden\" name=\"order\" value=\"desc\">");
    }
    out.push_str("<button type=\"submit\">Filter</button></form>");
    let _ = write!(
        out,
        "<p class=\"count\" id=\"count\">{} of {} clusters · page {} of {}</p>",
        list.matching, list.fleet, list.page, list.pages
    );
    out.push_str("<table id=\"clusters\"><thead><tr>");
    for (label, sort) in [
        ("Name", Some(Sort::Name)),
        ("Availability", Some(Sort::Availability)),
        ("Set", Some(Sort::Set)),
        ("Kubernetes", Some(Sort::Version)),
        ("CPU", None),
        ("Memory", None),
        ("Taints", None),
    ] {
        match sort {
            Some(s) => {
                let desc = q.sort == s && !q.descending;
                let arrow = match (q.sort == s, q.descending) {
                    (true, false) => " ▲",
                    (true, true) => " ▼",
                    _ => "",
                };
                let _ = write!(
                    out,
                    "<th><a href=\"{}\">{label}{arrow}</a></th>",
                    E(&q.url(1, s, desc))
                );
            }
            None => {
                let _ = write!(out, "<th>{label}</th>");
            }
        }
    }
    out.push_str("</tr></thead><tbody>");
    for r in &list.rows {
        let _ = write!(
            out,
            "<tr data-cluster=\"{}\"><td><a href=\"/clusters/{}\">{}</a></td>\
             <td data-field=\"availability\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td></tr>",
            E(&r.name),
            U(&r.name),
            E(&r.name),
            badge(r.availability.as_str()),
            E(&r.set),
            E(&r.version),
            E(&r.cpu),
            E(&r.memory),
            E(&r.taints.join(", "))
        );
    }
    out.push_str("</tbody></table>");
    if list.rows.is_empty() {
        out.push_str("<p class=\"muted\">No cluster matches.</p>");
    }
    out.push_str("<nav class=\"pages\">");
    if list.page > 1 {
        let _ = write!(
            out,
            "<a href=\"{}\" rel=\"prev\">← Previous</a> ",
            E(&q.url(list.page - 1, q.sort, q.descending))
        );
    }
    if list.page < list.pages {
        let _ = write!(
            out,
            "<a href=\"{}\" rel=\"next\">Next →</a>",
            E(&q.url(list.page + 1, q.sort, q.descending))
        );
    }
    out.push_str("</nav>");
    out
}
