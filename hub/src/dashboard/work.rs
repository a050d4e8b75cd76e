//! `/clusters/<cluster>/works/<name>`: one ManifestWork — its conditions, and per manifest
//! the resource, its conditions and the status feedback the agent reported (what `flotilla
//! describe work` shows).

use super::html::{U, condition_badge, conditions};
use flotilla_api::v1::{FieldValue, ManifestWork};
use maud::{Markup, html};

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
pub fn render(cluster: &str, w: &ManifestWork) -> Markup {
    let name = w
        .metadata
        .as_ref()
        .map(|m| m.name.as_str())
        .unwrap_or_default();
    let st = w.status.clone().unwrap_or_default();
    let manifests = st.resource_status.map(|r| r.manifests).unwrap_or_default();
    html! {
        p.crumbs {
            a href="/clusters" { "Clusters" } " / "
            a href={ "/clusters/" (U(cluster)) } { (cluster) } " / works"
        }
        h1 { (name) }
        h2 { "Conditions" }
        (conditions(&st.conditions))
        h2 { "Manifests (" (manifests.len()) ")" }
        @if manifests.is_empty() { p.muted { "No manifest status reported yet." } }
        @for m in &manifests { (manifest(m)) }
    }
}

/// One manifest: its resource, conditions and feedback.
fn manifest(m: &flotilla_api::v1::ManifestCondition) -> Markup {
    let r = m.resource_meta.clone().unwrap_or_default();
    let gv = if r.group.is_empty() {
        r.version.clone()
    } else {
        format!("{}/{}", r.group, r.version)
    };
    let values = m
        .status_feedback
        .as_ref()
        .map(|f| f.values.as_slice())
        .unwrap_or_default();
    html! {
        h3 {
            (r.ordinal) " · " (gv) " " (r.kind) " " (r.namespace)
            @if !r.namespace.is_empty() { "/" } (r.name)
        }
        p {
            @for (i, c) in m.conditions.iter().enumerate() {
                @if i > 0 { " · " }
                (c.r#type) " " (condition_badge(&c.r#type, &c.status))
            }
        }
        @if !values.is_empty() {
            table.pairs { tbody {
                @for v in values { tr { th { (v.name) } td { (value(v.field_value.as_ref())) } } }
            } }
        }
    }
}
