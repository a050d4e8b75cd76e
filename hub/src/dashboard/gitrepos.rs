//! `/gitrepos` and `/gitrepos/<ns>/<name>` (pure): which commit each GitRepo follows and has
//! delivered — the head fetched with its subject and author, the last good commit the bundles
//! carry, a pin or a pause — its conditions, each bundle's rollout, and per cluster the state
//! and commit its work carries (Fleet's states: what `flotilla get gitrepos NAME --clusters`
//! shows), filtered by state.

use super::html::{U, badge, conditions, timestamp};
use flotilla_api::v1::{ClusterStates, GitRepo, GitRepoClusterRow};
use maud::{Markup, html};

/// The most cluster rows a page shows; the counts above them cover every cluster.
pub const PAGE_ROWS: usize = 500;

/// The states in Fleet's ranking (worst first), as the rows and the counts name them.
const STATES: [&str; 7] = [
    "ErrApplied",
    "WaitApplied",
    "Modified",
    "OutOfSync",
    "Pending",
    "NotReady",
    "Ready",
];

fn ns_name(r: &GitRepo) -> (String, String) {
    r.metadata
        .as_ref()
        .map(|m| (m.namespace.clone(), m.name.clone()))
        .unwrap_or_default()
}

/// A commit id as people read it (its first 12 hex digits), `-` when none.
fn short(sha: &str) -> &str {
    match sha {
        "" => "-",
        s => s.get(..12).unwrap_or(s),
    }
}

/// The badge class of a Fleet state (the stylesheet's classes, chosen from a fixed list).
fn state_badge(state: &str) -> Markup {
    let class = match state {
        "Ready" => "ok",
        "ErrApplied" | "Modified" => "bad",
        "WaitApplied" | "OutOfSync" | "Pending" | "NotReady" => "pending",
        _ => "neutral",
    };
    html! { span class={ "badge " (class) } { (state) } }
}

/// The count of `state` in `s`.
fn count(s: &ClusterStates, state: &str) -> i32 {
    match state {
        "Ready" => s.ready,
        "NotReady" => s.not_ready,
        "WaitApplied" => s.wait_applied,
        "ErrApplied" => s.err_applied,
        "OutOfSync" => s.out_of_sync,
        "Modified" => s.modified,
        "Pending" => s.pending,
        _ => 0,
    }
}

/// The non-zero states of `s`, worst first, as "3 Ready, 1 Modified".
fn states_line(s: Option<&ClusterStates>) -> String {
    let Some(s) = s else {
        return "-".into();
    };
    let parts: Vec<String> = STATES
        .iter()
        .filter_map(|st| Some((count(s, st), st)).filter(|(n, _)| *n > 0))
        .map(|(n, st)| format!("{n} {st}"))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// The list's body.
pub fn render_list(repos: &[GitRepo]) -> Markup {
    html! {
        h1 { "Git repositories" }
        @if repos.is_empty() {
            p.muted { "No GitRepo. Apply one with " code { "flotilla apply -f gitrepo.yaml" } "." }
        } @else {
            table #gitrepos {
                thead { tr {
                    th { "Namespace" } th { "Name" } th { "Repository" } th { "Commit" }
                    th { "Message" } th { "Bundles ready" } th { "State" } th { "Clusters" }
                } }
                tbody { @for r in repos { (list_row(r)) } }
            }
        }
    }
}

/// One GitRepo in the list.
fn list_row(r: &GitRepo) -> Markup {
    let (ns, name) = ns_name(r);
    let spec = r.spec.clone().unwrap_or_default();
    let st = r.status.clone().unwrap_or_default();
    let head = st.head.clone().unwrap_or_default();
    // The subject is the head's when the head is what the bundles carry.
    let subject = (head.sha == st.commit).then_some(head.subject.as_str());
    html! {
        tr data-gitrepo={ (ns) "/" (name) } {
            td { (ns) }
            td { a href={ "/gitrepos/" (U(&ns)) "/" (U(&name)) } { (name) } }
            td { code { (spec.repo) } }
            td { code.commit { (short(&st.commit)) } }
            td { (subject.unwrap_or("")) }
            td { (if st.ready_bundles.is_empty() { "-" } else { &st.ready_bundles }) }
            td { @if st.display_state.is_empty() { "-" } @else { (state_badge(&st.display_state)) } }
            td { (states_line(st.states.as_ref())) }
        }
    }
}

/// One GitRepo's body: its commits, conditions, bundles and the clusters' rows (`rows`, those
/// the viewer may see in `state` when one is asked; `truncated` when the hub left rows out).
pub fn render(repo: &GitRepo, rows: &[GitRepoClusterRow], state: &str, truncated: bool) -> Markup {
    let (ns, name) = ns_name(repo);
    let spec = repo.spec.clone().unwrap_or_default();
    let st = repo.status.clone().unwrap_or_default();
    let follows = match (spec.branch.as_str(), spec.revision.as_str()) {
        ("", rev) => format!("revision {rev}"),
        (branch, _) => format!("branch {branch}"),
    };
    html! {
        p.crumbs { a href="/gitrepos" { "Git repositories" } " / " (ns) }
        h1 { (name) }
        p { code { (spec.repo) } " · " (follows) @if !spec.paths.is_empty() { " · paths " (spec.paths.join(", ")) } }
        (commits(&st))
        h2 { "Conditions" }
        (conditions(&st.conditions))
        h2 { "Bundles" }
        (bundles(&ns, &st))
        h2 { "Clusters" }
        (cluster_rows(&ns, &name, rows, state, truncated))
    }
}

/// The head fetched, the commit delivered, and what holds the rollout.
fn commits(st: &flotilla_api::v1::GitRepoStatus) -> Markup {
    let head = st.head.clone().unwrap_or_default();
    html! {
        table.pairs #commits { tbody {
            tr { th { "Head" } td {
                code.commit { (short(&head.sha)) } " " (head.subject)
                @if !head.author.is_empty() { " — " (head.author) }
                @if head.time.is_some() { ", " (timestamp(head.time.as_ref())) }
            } }
            tr { th { "Delivered" } td {
                code.commit { (short(&st.commit)) }
                @if !head.sha.is_empty() && head.sha != st.commit { " " (badge("Pending")) " the head is not delivered (see the conditions)" }
            } }
            @if !st.pinned_commit.is_empty() {
                tr { th { "Pinned" } td { code.commit { (short(&st.pinned_commit)) } " until " code { "flotilla rollout resume gitrepo" } } }
            }
            @if st.rollout_paused { tr { th { "Rollout" } td { (badge("Paused")) } } }
            tr { th { "Last fetch" } td { (timestamp(st.last_fetch_time.as_ref())) } }
            tr { th { "Next fetch" } td { (timestamp(st.next_fetch_time.as_ref())) } }
            @if st.failures > 0 { tr { th { "Failed fetches in a row" } td { (st.failures) } } }
        } }
    }
}

/// Each bundle: its path, replica set (a link to its rollout), commit, counts and states.
fn bundles(ns: &str, st: &flotilla_api::v1::GitRepoStatus) -> Markup {
    html! {
        @if st.bundles.is_empty() { p.muted { "No bundle rendered yet." } }
        @else {
            table #bundles {
                thead { tr {
                    th { "Bundle" } th { "Path" } th { "Rollout" } th { "Commit" }
                    th { "Available" } th { "Clusters" }
                } }
                tbody { @for b in &st.bundles {
                    @let sum = b.summary.unwrap_or_default();
                    tr data-bundle=(b.name) {
                        td { (b.name) }
                        td { code { (if b.path.is_empty() { "/" } else { &b.path }) } }
                        td { a href={ "/rollouts/" (U(ns)) "/" (U(&b.replica_set)) } { (b.replica_set) } }
                        td { code.commit { (short(&b.content_commit)) } }
                        td { (sum.available) "/" (sum.total) }
                        td { (states_line(b.states.as_ref())) }
                    }
                } }
            }
        }
    }
}

/// The per-cluster rows, with the state filter's links.
fn cluster_rows(
    ns: &str,
    name: &str,
    rows: &[GitRepoClusterRow],
    state: &str,
    truncated: bool,
) -> Markup {
    let here = format!("/gitrepos/{}/{}", U(ns), U(name));
    html! {
        p.filters {
            "Show: "
            a href=(here) class=[state.is_empty().then_some("active")] { "all" }
            @for s in STATES {
                " · " a href={ (here) "?state=" (s) } class=[(state == s).then_some("active")] { (s) }
            }
        }
        @if rows.is_empty() {
            p.muted #clusters { "No cluster" @if !state.is_empty() { " in " (state) } "." }
        } @else {
            table #clusters {
                thead { tr { th { "Cluster" } th { "Bundle" } th { "State" } th { "Commit" } th { "Message" } } }
                tbody { @for r in rows.iter().take(PAGE_ROWS) {
                    tr data-cluster=(r.cluster) data-state=(r.state) {
                        td { a href={ "/clusters/" (U(&r.cluster)) } { (r.cluster) } }
                        td { (r.bundle) }
                        td { (state_badge(&r.state)) }
                        td { code.commit { (short(&r.commit)) } }
                        td { (r.message) }
                    }
                } }
            }
            @if truncated || rows.len() > PAGE_ROWS {
                p.muted #more { "The first " (PAGE_ROWS.min(rows.len())) " rows; filter by state, or "
                    code { "flotilla get gitrepos " (name) " -n " (ns) " --clusters" } " for every one." }
            }
        }
    }
}

#[cfg(test)]
mod tests;
