//! `/`: the fleet at a glance — clusters by availability and by cluster set, registrations
//! waiting for an admin (with Accept and Deny for identities the API would let call
//! `AcceptClusters` / `DenyClusters`), the latest transitions, availability over time.

use super::history::{Availability, Counts, History, Sample, Transition};
use super::html::{U, badge, badge_class, system_time, timestamp};
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::ManagedCluster;
use maud::{Markup, html};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Pending registrations listed on the page (all are counted).
pub const PENDING_SHOWN: usize = 50;
/// Transitions listed on the page.
pub const TRANSITIONS_SHOWN: usize = 20;

/// The API method accepting a registration is (the access table decides who may).
pub const ACCEPT_METHOD: &str = "/flotilla.v1.ClusterService/AcceptClusters";
/// The API method denying one is.
pub const DENY_METHOD: &str = "/flotilla.v1.ClusterService/DenyClusters";

/// What the viewer may do with a pending registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registrations<'a> {
    /// `Err(why)` when the viewer may not accept.
    pub accept: Result<(), String>,
    /// `Err(why)` when the viewer may not deny.
    pub deny: Result<(), String>,
    /// The pending clusters the viewer may not act on although it may accept or deny some
    /// (issue 48: another team's cluster); their rows have no buttons.
    pub refused: std::collections::HashSet<String>,
    /// The CSRF token of the viewer's forms.
    pub csrf: &'a str,
}

/// A registration waiting for an admin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The cluster's name.
    pub name: String,
    /// When it registered.
    pub since: String,
    /// The fingerprint of the agent key waiting (`""`: none, an agent without keys) — what
    /// the Accept form sends, so that the admin accepts the key they saw and not one that
    /// registered after the page was drawn.
    pub key: String,
    /// The cluster set it would be accepted into (`""`: none).
    pub set: String,
    /// Its other labels, `key=value`, sorted — what accepting it admits along with the set.
    pub labels: Vec<String>,
    /// The reserved labels its registrant asked for and the hub dropped, `key=value`, sorted.
    pub dropped: Vec<String>,
}

/// What the overview shows.
#[derive(Debug, Clone)]
pub struct Overview {
    /// Clusters by state.
    pub counts: Counts,
    /// Clusters by set (the `clusterset` label; `""` for none) and state.
    pub by_set: Vec<(String, Counts)>,
    /// Registrations waiting (the first [`PENDING_SHOWN`], by name).
    pub pending: Vec<Pending>,
    /// The latest transitions, newest first.
    pub transitions: Vec<Transition>,
    /// The counts over time.
    pub samples: Vec<Sample>,
}

/// The overview of `clusters` (the inventory's snapshot) with what `history` remembers.
pub fn build(clusters: &[Arc<ManagedCluster>], history: &History) -> Overview {
    let mut counts = Counts::default();
    let mut by_set: BTreeMap<String, Counts> = BTreeMap::new();
    let mut pending = Vec::new();
    for c in clusters {
        let a = Availability::of(c);
        counts.0[a as usize] += 1;
        let set = c
            .metadata
            .as_ref()
            .and_then(|m| m.labels.get(CLUSTERSET_LABEL))
            .cloned()
            .unwrap_or_default();
        by_set.entry(set.clone()).or_default().0[a as usize] += 1;
        if a == Availability::Pending && pending.len() < PENDING_SHOWN {
            let m = c.metadata.clone().unwrap_or_default();
            let key = c.hub.as_ref().map_or("", |h| {
                if h.requested_public_key.is_empty() {
                    h.agent_public_key.as_str()
                } else {
                    h.requested_public_key.as_str()
                }
            });
            let labels = pairs(m.labels.iter().filter(|(k, _)| *k != CLUSTERSET_LABEL));
            let dropped = pairs(c.hub.iter().flat_map(|h| h.dropped_labels.iter()));
            pending.push(Pending {
                since: timestamp(m.creation_timestamp.as_ref()),
                key: flotilla_api::fingerprint::of(key),
                set,
                labels,
                dropped,
                name: m.name,
            });
        }
    }
    Overview {
        counts,
        by_set: by_set.into_iter().collect(),
        pending,
        transitions: history.recent(TRANSITIONS_SHOWN),
        samples: history.samples(),
    }
}

/// [`build`] for a viewer who sees only some clusters (a team, issue 48): `clusters` are the
/// ones it sees, the transitions only theirs (`sees`), and no counts over time — the samples
/// are the fleet's, whose size and health a team is not told.
pub fn build_seen(
    clusters: &[Arc<ManagedCluster>],
    history: &History,
    sees: impl Fn(&str) -> bool,
) -> Overview {
    Overview {
        transitions: history.recent_where(TRANSITIONS_SHOWN, |t| sees(&t.cluster)),
        samples: Vec::new(),
        ..build(clusters, history)
    }
}

/// Labels as `key=value`, sorted.
fn pairs<'a>(labels: impl Iterator<Item = (&'a String, &'a String)>) -> Vec<String> {
    let mut out: Vec<String> = labels.map(|(k, v)| format!("{k}={v}")).collect();
    out.sort();
    out
}

/// One transition as a list item (the live script adds the same shape).
pub fn transition_item(t: &Transition) -> Markup {
    let word = |a: Option<Availability>, none: &'static str| {
        html! { @match a { Some(a) => (badge(a.as_str())), None => (none) } }
    };
    html! {
        li {
            time { (system_time(t.at)) } " "
            a href={ "/clusters/" (U(&t.cluster)) } { (t.cluster) } " "
            (word(t.from, "new")) " → " (word(t.to, "deleted"))
        }
    }
}

/// The page's body; `notice` is the outcome of an accept or deny just made.
pub fn render(o: &Overview, may: &Registrations<'_>, notice: Option<&str>) -> Markup {
    html! {
        h1 { "Fleet overview" }
        @if let Some(n) = notice { p.notice #notice { (n) } }
        (cards(&o.counts))
        h2 { "Availability over time" }
        (super::plot::availability(&o.samples))
        div.columns {
            section { h2 { "By cluster set" } (by_set(&o.by_set)) }
            section { h2 { "Pending registrations" } (pending(o, may)) }
        }
        h2 { "Recent transitions" }
        ul #transitions .transitions { @for t in &o.transitions { (transition_item(t)) } }
        @if o.transitions.is_empty() {
            p.muted #no-transitions { "No cluster has changed state since this hub started." }
        }
    }
}

/// The counts as cards linking to the clusters in each state.
fn cards(counts: &Counts) -> Markup {
    html! {
        section.cards {
            a.card href="/clusters" { span.n data-count="total" { (counts.total()) } span { "clusters" } }
            @for a in Availability::ALL {
                a class={ "card " (badge_class(a.as_str())) } href={ "/clusters?availability=" (a.as_str()) } {
                    span.n data-count=(a.as_str()) { (counts.get(a)) }
                    span { (a.as_str()) }
                }
            }
        }
    }
}

/// The counts per cluster set.
fn by_set(sets: &[(String, Counts)]) -> Markup {
    html! {
        table {
            thead { tr {
                th { "Set" } th { "Clusters" }
                @for a in Availability::ALL { th { (a.as_str()) } }
            } }
            tbody {
                @for (set, c) in sets {
                    tr {
                        td {
                            @if set.is_empty() {
                                span.muted { "(no set)" }
                            } @else {
                                a href={ "/clusters?selector=" (U(&format!("{CLUSTERSET_LABEL}={set}"))) } { (set) }
                            }
                        }
                        td { (c.total()) }
                        @for a in Availability::ALL { td { (c.get(a)) } }
                    }
                }
            }
        }
    }
}

/// The registrations waiting, with the buttons the viewer may use.
fn pending(o: &Overview, may: &Registrations<'_>) -> Markup {
    if o.pending.is_empty() {
        return html! { p.muted { "None: every registered cluster is accepted or denied." } };
    }
    let acts = may.accept.is_ok() || may.deny.is_ok();
    let total = o.counts.get(Availability::Pending);
    html! {
        table #pending {
            thead { tr {
                th { "Cluster" } th { "Registered" } th { "Agent key" } th { "Cluster set" } th { "Labels" }
                @if acts { th {} }
            } }
            tbody { @for p in &o.pending { (pending_row(p, may, acts)) } }
        }
        @if total > o.pending.len() {
            p { a href="/clusters?availability=Pending" { "All " (total) " pending" } }
        }
        @match &may.accept {
            Err(why) => p.muted #may-not-accept {
                (why) "; an admin accepts here or with " code { "flotilla accept NAME --key …" } "."
            },
            Ok(()) => p.muted {
                "Accept sends the key fingerprint shown: a key that registered after this page was \
                 drawn is not accepted. It accepts the cluster into the set and with the labels \
                 shown; a registrant never chooses its set."
            },
        }
    }
}

/// One waiting registration; `acts`: whether the viewer may accept or deny.
fn pending_row(p: &Pending, may: &Registrations<'_>, acts: bool) -> Markup {
    html! {
        tr data-pending=(p.name) {
            td { a href={ "/clusters/" (U(&p.name)) } { (p.name) } }
            td { (p.since) }
            td { code { (if p.key.is_empty() { "-" } else { p.key.as_str() }) } }
            td.set { @if p.set.is_empty() { span.muted { "(none)" } } @else { (p.set) } }
            td.labels {
                @if p.labels.is_empty() { span.muted { "none" } } @else { (p.labels.join(", ")) }
                @if !p.dropped.is_empty() {
                    br;
                    span class="muted dropped" { "dropped (reserved for the hub): " (p.dropped.join(", ")) }
                }
            }
            @if acts && may.refused.contains(&p.name) {
                td.muted { "not yours" }
            } @else if acts {
                td {
                    form method="post" action={ "/clusters/" (U(&p.name)) "/registration" } class="inline actions" {
                        input type="hidden" name="csrf" value=(may.csrf);
                        input type="hidden" name="key" value=(p.key);
                        @if may.accept.is_ok() {
                            button type="submit" name="action" value="accept" class="accept" { "Accept" }
                        }
                        @if may.deny.is_ok() {
                            button type="submit" name="action" value="deny" class="deny" { "Deny" }
                        }
                    }
                }
            }
        }
    }
}
