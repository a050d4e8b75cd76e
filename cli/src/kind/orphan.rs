//! Orphans: works a spoke holds that a restored store lacks, seen in a recovery window
//! (`flotilla get orphans`): CLUSTER, NAME, RESOURCE ID, AGENT GEN, DECISION, FIRST SEEN.
//! `-o json|yaml` print the record as the hub keeps it.

use super::Kind;
use flotilla_api::meta;
use flotilla_api::v1::{ObjectMeta, Orphan, OrphanDecision};
use serde::Serialize;

/// An orphan as `-o json|yaml` print it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrphanDoc {
    cluster: String,
    name: String,
    resource_id: String,
    agent_generation: i64,
    decision: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    decided_by: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    first_seen: String,
}

/// How a decision is written in tables and documents.
pub fn decision(d: OrphanDecision) -> &'static str {
    match d {
        OrphanDecision::Undecided => "Undecided",
        OrphanDecision::Delete => "Delete",
        OrphanDecision::Keep => "Keep",
    }
}

fn first_seen(o: &Orphan) -> String {
    o.first_seen.as_ref().map(meta::rfc3339).unwrap_or_default()
}

impl Kind for Orphan {
    type Ocm = OrphanDoc;
    const COLUMNS: &'static [&'static str] = &[
        "CLUSTER",
        "NAME",
        "RESOURCE ID",
        "AGENT GEN",
        "DECISION",
        "FIRST SEEN",
    ];

    fn metadata(&self) -> Option<&ObjectMeta> {
        None
    }

    fn row(&self) -> Vec<String> {
        vec![
            self.cluster.clone(),
            if self.name.is_empty() {
                "<no status yet>".into()
            } else {
                self.name.clone()
            },
            self.resource_id.clone(),
            self.agent_generation.to_string(),
            decision(self.decision()).into(),
            first_seen(self),
        ]
    }

    fn to_ocm(&self) -> OrphanDoc {
        OrphanDoc {
            cluster: self.cluster.clone(),
            name: self.name.clone(),
            resource_id: self.resource_id.clone(),
            agent_generation: self.agent_generation,
            decision: decision(self.decision()),
            decided_by: self.decided_by.clone(),
            first_seen: first_seen(self),
        }
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No orphans: no spoke holds a work the store lacks.".into())
    }

    /// The orphans of the query's cluster (`-c`), or of every cluster.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = flotilla_api::v1::ListOrphansRequest {
            cluster: query.namespace.clone().unwrap_or_default(),
        };
        Ok(hub
            .idempotent(async || hub.recovery().list_orphans(r.clone()).await)
            .await?
            .items)
    }
}
