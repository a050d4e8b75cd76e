//! `/policies`: compliance per policy and per cluster, from the policies' status.

use super::html::{U, badge};
use flotilla_api::v1::Policy;
use maud::{Markup, html};
use std::sync::Arc;

/// The page's body.
pub fn render(policies: &[Arc<Policy>]) -> Markup {
    html! {
        h1 data-follow="policy:*" { "Policies" }
        @if policies.is_empty() {
            p.muted { "No policy." }
        } @else {
            table #policies {
                thead { tr { th { "Namespace" } th { "Policy" } th { "Compliance" } th { "Clusters" } } }
                tbody { @for p in policies { (row(p)) } }
            }
        }
    }
}

/// One policy: its compliance, and each cluster's.
fn row(p: &Policy) -> Markup {
    let m = p.metadata.clone().unwrap_or_default();
    let st = p.status.clone().unwrap_or_default();
    let disabled = p.spec.as_ref().is_some_and(|s| s.disabled);
    let or = |s: &'_ str, none: &'static str| {
        if s.is_empty() {
            none.to_string()
        } else {
            s.to_string()
        }
    };
    html! {
        tr {
            td { (m.namespace) }
            td { (m.name) @if disabled { " (disabled)" } }
            td { (badge(&or(&st.compliant, "-"))) }
            td {
                @for (i, c) in st.status.iter().enumerate() {
                    @if i > 0 { br; }
                    a href={ "/clusters/" (U(&c.cluster_name)) } { (c.cluster_name) } " "
                    (badge(&or(&c.compliant, "no report")))
                }
            }
        }
    }
}
