//! `/clusters/<cluster>/works/<name>`: one ManifestWork — its conditions, and per manifest
//! the resource, its conditions and the status feedback the agent reported (what `flotilla
//! describe work` shows).

use super::html::{E, U, condition_badge, conditions};
use flotilla_api::v1::{FieldValue, ManifestWork};
use std::fmt::Write;

/// A feedback value as text.
fn value(v: Option<&FieldValue>) -> String {
    let Some(v) = v else {
        return "-".into();
    };
    if let Some(i) = v.integer {
        i.to_string()
    } else if let Some(s) = &v.string {
        s.clone()
    } else if let Some(b) = v.boolean {
        b.to_string()
    } else if let Some(j) = &v.json_raw {
        j.clone()
    } else {
        "-".into()
    }
}

/// The page's body.
pub fn render(cluster: &str, w: &ManifestWork) -> String {
    let name = w
        .metadata
        .as_ref()
        .map(|m| m.name.as_str())
        .unwrap_or_default();
    let st = w.status.clone().unwrap_or_default();
    let mut out = format!(
        "<p class=\"crumbs\"><a href=\"/clusters\">Clusters</a> / \
         <a href=\"/clusters/{}\">{}</a> / works</p><h1>{}</h1><h2>Conditions</h2>",
        U(cluster),
        E(cluster),
        E(name)
    );
    out.push_str(&conditions(&st.conditions));
    let manifests = st.resource_status.map(|r| r.manifests).unwrap_or_default();
    let _ = write!(out, "<h2>Manifests ({})</h2>", manifests.len());
    if manifests.is_empty() {
        out.push_str("<p class=\"muted\">No manifest status reported yet.</p>");
    }
    for m in &manifests {
        let r = m.resource_meta.clone().unwrap_or_default();
        let gv = if r.group.is_empty() {
            r.version.clone()
        } else {
            format!("{}/{}", r.group, r.version)
        };
        let _ = write!(
            out,
            "<h3>{} · {} {} {}{}</h3>",
            r.ordinal,
            E(&gv),
            E(&r.kind),
            E(&r.namespace),
            if r.namespace.is_empty() {
                E(&r.name).to_string()
            } else {
                format!("/{}", E(&r.name))
            }
        );
        let states: Vec<String> = m
            .conditions
            .iter()
            .map(|c| format!("{} {}", E(&c.r#type), condition_badge(&c.r#type, &c.status)))
            .collect();
        let _ = write!(out, "<p>{}</p>", states.join(" · "));
        let values = m
            .status_feedback
            .as_ref()
            .map(|f| f.values.as_slice())
            .unwrap_or_default();
        if !values.is_empty() {
            out.push_str("<table class=\"pairs\"><tbody>");
            for v in values {
                let _ = write!(
                    out,
                    "<tr><th>{}</th><td>{}</td></tr>",
                    E(&v.name),
                    E(&value(v.field_value.as_ref()))
                );
            }
            out.push_str("</tbody></table>");
        }
    }
    out
}
