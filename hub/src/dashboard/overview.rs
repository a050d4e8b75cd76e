//! `/`: the fleet at a glance — clusters by availability and by cluster set, registrations
//! waiting for an admin (with Accept and Deny for identities the API would let call
//! `AcceptClusters` / `DenyClusters`), the latest transitions, availability over time.

use super::history::{Availability, Counts, History, Sample, Transition};
use super::html::{E, U, badge, system_time, timestamp};
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::ManagedCluster;
use std::collections::BTreeMap;
use std::fmt::Write;
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

/// Labels as `key=value`, sorted.
fn pairs<'a>(labels: impl Iterator<Item = (&'a String, &'a String)>) -> Vec<String> {
    let mut out: Vec<String> = labels.map(|(k, v)| format!("{k}={v}")).collect();
    out.sort();
    out
}

/// One transition as a list item (the live script adds the same shape).
pub fn transition_item(t: &Transition) -> String {
    let word =
        |a: Option<Availability>, none: &str| a.map_or(none.to_string(), |a| badge(a.as_str()));
    format!(
        "<li><time>{}</time> <a href=\"/clusters/{}\">{}</a> {} → {}</li>",
        E(&system_time(t.at)),
        U(&t.cluster),
        E(&t.cluster),
        word(t.from, "new"),
        word(t.to, "deleted")
    )
}

/// The page's body; `notice` is the outcome of an accept or deny just made.
pub fn render(o: &Overview, may: &Registrations<'_>, notice: Option<&str>) -> String {
    let mut out = String::from("<h1>Fleet overview</h1>");
    if let Some(n) = notice {
        let _ = write!(out, "<p class=\"notice\" id=\"notice\">{}</p>", E(n));
    }
    out.push_str("<section class=\"cards\">");
    let _ = write!(
        out,
        "<a class=\"card\" href=\"/clusters\"><span class=\"n\" data-count=\"total\">{}</span>\
         <span>clusters</span></a>",
        o.counts.total()
    );
    for a in Availability::ALL {
        let _ = write!(
            out,
            "<a class=\"card {}\" href=\"/clusters?availability={}\"><span class=\"n\" \
             data-count=\"{}\">{}</span><span>{}</span></a>",
            super::html::badge_class(a.as_str()),
            a.as_str(),
            a.as_str(),
            o.counts.get(a),
            a.as_str()
        );
    }
    out.push_str("</section><h2>Availability over time</h2>");
    out.push_str(&super::plot::availability(&o.samples));
    out.push_str("<div class=\"columns\"><section><h2>By cluster set</h2>");
    out.push_str("<table><thead><tr><th>Set</th><th>Clusters</th>");
    for a in Availability::ALL {
        let _ = write!(out, "<th>{}</th>", a.as_str());
    }
    out.push_str("</tr></thead><tbody>");
    for (set, c) in &o.by_set {
        let link = if set.is_empty() {
            "<span class=\"muted\">(no set)</span>".to_string()
        } else {
            format!(
                "<a href=\"/clusters?selector={}\">{}</a>",
                U(&format!("{CLUSTERSET_LABEL}={set}")),
                E(set)
            )
        };
        let _ = write!(out, "<tr><td>{link}</td><td>{}</td>", c.total());
        for a in Availability::ALL {
            let _ = write!(out, "<td>{}</td>", c.get(a));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></section><section><h2>Pending registrations</h2>");
    if o.pending.is_empty() {
        out.push_str(
            "<p class=\"muted\">None: every registered cluster is accepted or denied.</p>",
        );
    } else {
        let acts = may.accept.is_ok() || may.deny.is_ok();
        out.push_str(
            "<table id=\"pending\"><thead><tr><th>Cluster</th><th>Registered</th><th>Agent key</th>\
             <th>Cluster set</th><th>Labels</th>",
        );
        if acts {
            out.push_str("<th></th>");
        }
        out.push_str("</tr></thead><tbody>");
        for p in &o.pending {
            let _ = write!(
                out,
                "<tr data-pending=\"{}\"><td><a href=\"/clusters/{}\">{}</a></td><td>{}</td><td><code>{}</code></td>",
                E(&p.name),
                U(&p.name),
                E(&p.name),
                E(&p.since),
                E(if p.key.is_empty() {
                    "-"
                } else {
                    p.key.as_str()
                })
            );
            let _ = write!(
                out,
                "<td class=\"set\">{}</td><td class=\"labels\">{}",
                if p.set.is_empty() {
                    "<span class=\"muted\">(none)</span>".to_string()
                } else {
                    E(&p.set).to_string()
                },
                if p.labels.is_empty() {
                    "<span class=\"muted\">none</span>".to_string()
                } else {
                    E(&p.labels.join(", ")).to_string()
                }
            );
            if !p.dropped.is_empty() {
                let _ = write!(
                    out,
                    "<br><span class=\"muted dropped\">dropped (reserved for the hub): {}</span>",
                    E(&p.dropped.join(", "))
                );
            }
            out.push_str("</td>");
            if acts {
                let _ = write!(
                    out,
                    "<td><form method=\"post\" action=\"/clusters/{}/registration\" class=\"inline actions\">\
                     <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                     <input type=\"hidden\" name=\"key\" value=\"{}\">",
                    U(&p.name),
                    E(may.csrf),
                    E(&p.key)
                );
                if may.accept.is_ok() {
                    out.push_str("<button type=\"submit\" name=\"action\" value=\"accept\" class=\"accept\">Accept</button>");
                }
                if may.deny.is_ok() {
                    out.push_str("<button type=\"submit\" name=\"action\" value=\"deny\" class=\"deny\">Deny</button>");
                }
                out.push_str("</form></td>");
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>");
        let total = o.counts.get(Availability::Pending);
        if total > o.pending.len() {
            let _ = write!(
                out,
                "<p><a href=\"/clusters?availability=Pending\">All {total} pending</a></p>"
            );
        }
        if let Err(why) = &may.accept {
            let _ = write!(
                out,
                "<p class=\"muted\" id=\"may-not-accept\">{}; an admin accepts here or with \
                 <code>flotilla accept NAME --key …</code>.</p>",
                E(why)
            );
        } else {
            out.push_str("<p class=\"muted\">Accept sends the key fingerprint shown: a key that registered after this page was drawn is not accepted. It accepts the cluster into the set and with the labels shown; a registrant never chooses its set.</p>");
        }
    }
    out.push_str(
        "</section></div><h2>Recent transitions</h2><ul id=\"transitions\" class=\"transitions\">",
    );
    for t in &o.transitions {
        out.push_str(&transition_item(t));
    }
    out.push_str("</ul>");
    if o.transitions.is_empty() {
        out.push_str("<p class=\"muted\" id=\"no-transitions\">No cluster has changed state since this hub started.</p>");
    }
    out
}
