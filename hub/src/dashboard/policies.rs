//! `/policies`: compliance per policy and per cluster, from the policies' status.

use super::html::{E, U, badge};
use flotilla_api::v1::Policy;
use std::fmt::Write;
use std::sync::Arc;

/// The page's body.
pub fn render(policies: &[Arc<Policy>]) -> String {
    let mut out = String::from("<h1 data-follow=\"policy:*\">Policies</h1>");
    if policies.is_empty() {
        out.push_str("<p class=\"muted\">No policy.</p>");
        return out;
    }
    out.push_str("<table id=\"policies\"><thead><tr><th>Namespace</th><th>Policy</th><th>Compliance</th><th>Clusters</th></tr></thead><tbody>");
    for p in policies {
        let m = p.metadata.clone().unwrap_or_default();
        let st = p.status.clone().unwrap_or_default();
        let disabled = p.spec.as_ref().is_some_and(|s| s.disabled);
        let clusters: Vec<String> = st
            .status
            .iter()
            .map(|c| {
                format!(
                    "<a href=\"/clusters/{}\">{}</a> {}",
                    U(&c.cluster_name),
                    E(&c.cluster_name),
                    badge(if c.compliant.is_empty() {
                        "no report"
                    } else {
                        &c.compliant
                    })
                )
            })
            .collect();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td></tr>",
            E(&m.namespace),
            E(&m.name),
            if disabled { " (disabled)" } else { "" },
            badge(if st.compliant.is_empty() {
                "-"
            } else {
                &st.compliant
            }),
            clusters.join("<br>")
        );
    }
    out.push_str("</tbody></table>");
    out
}
