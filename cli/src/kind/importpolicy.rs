//! ClusterImportPolicies: NAME, SOURCE, IMPORTED, ADOPTED, READY, and `describe` with the
//! expressions, counts and evaluation errors.

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::importpolicy::CONDITION_READY;
use flotilla_api::ocm::importpolicy as shapes;
use flotilla_api::v1::{ClusterImportPolicy, ObjectMeta};
use std::fmt::Write;

impl Kind for ClusterImportPolicy {
    type Ocm = shapes::ClusterImportPolicy;
    const COLUMNS: &'static [&'static str] = &["NAME", "SOURCE", "IMPORTED", "ADOPTED", "READY"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let o = self.to_ocm();
        let status = o.status.clone().unwrap_or_default();
        let source = o
            .spec
            .source
            .as_ref()
            .map(|s| {
                if s.clusters.is_empty() {
                    format!("{}/{}", s.group, s.resource)
                } else {
                    format!("{}/{} on {}", s.group, s.resource, s.clusters.join(","))
                }
            })
            .unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_READY)
            .map_or_else(|| "Unknown".to_string(), |c| c.status.clone());
        vec![
            o.metadata.name,
            source,
            status.imported.to_string(),
            status.adopted.to_string(),
            ready,
        ]
    }

    fn to_ocm(&self) -> shapes::ClusterImportPolicy {
        shapes::ClusterImportPolicy::from(self)
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No ClusterImportPolicies found.".into())
    }

    /// The import policies, only the named ones when the query names some.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = flotilla_api::v1::ListImportPoliciesRequest {};
        let items = hub
            .idempotent(async || hub.import_policies().list_import_policies(r).await)
            .await?
            .items;
        super::named(items, &query.names, "ClusterImportPolicy")
    }
}

/// `describe importpolicy`: source, expressions, counts, conditions and errors.
pub fn describe(p: &ClusterImportPolicy) -> String {
    let o = p.to_ocm();
    let status = o.status.clone().unwrap_or_default();
    let source = o.spec.source.clone().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "Name:               {}", o.metadata.name);
    let _ = writeln!(out, "Generation:         {}", o.metadata.generation);
    let _ = writeln!(
        out,
        "Source:             {}/{}",
        source.group, source.resource
    );
    if !source.clusters.is_empty() {
        let versions = if source.versions.is_empty() {
            "any".to_string()
        } else {
            source.versions.join(", ")
        };
        let _ = writeln!(
            out,
            "Listed on:          {} (versions: {versions}; {} objects in the last lists)",
            source.clusters.join(", "),
            status.sources
        );
    }
    if !o.spec.name_template.is_empty() {
        let _ = writeln!(out, "Name template:      {}", o.spec.name_template);
    }
    for r in &o.spec.references {
        let group = if r.group.is_empty() { "core" } else { &r.group };
        let _ = writeln!(
            out,
            "Reference {}:       {group}/{} namespace {} name {}",
            r.key,
            r.resource,
            if r.namespace.is_empty() {
                "(none)"
            } else {
                &r.namespace
            },
            r.name
        );
    }
    let or_all = |s: &str| {
        if s.is_empty() {
            "(every one)".to_string()
        } else {
            s.to_string()
        }
    };
    let _ = writeln!(out, "Selector:           {}", or_all(&source.selector));
    let _ = writeln!(
        out,
        "Creation condition: {}",
        or_all(&o.spec.creation_condition)
    );
    let _ = writeln!(out, "Template:           {}", o.spec.template);
    let _ = writeln!(
        out,
        "Clusters:           {} imported, {} adopted (generation {})",
        status.imported, status.adopted, status.observed_generation
    );
    let _ = writeln!(out, "Conditions:");
    if status.conditions.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for c in &status.conditions {
        let _ = writeln!(
            out,
            "  {:<13} {:<6} {:<17} {}",
            c.type_, c.status, c.reason, c.message
        );
    }
    if !status.errors.is_empty() {
        let _ = writeln!(out, "Errors:");
        for e in &status.errors {
            let _ = writeln!(out, "  {e}");
        }
    }
    out
}

impl Delete for ClusterImportPolicy {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::GetImportPolicyRequest { name: target.name };
        let d = hub
            .delete(async || hub.import_policies().delete_import_policy(r.clone()).await)
            .await?;
        Ok(Gone::new(
            d,
            format!("clusterimportpolicy/{} deleted (its clusters stay)", r.name),
        ))
    }
}
