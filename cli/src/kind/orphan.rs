//! Orphans: works a spoke holds that a restored store lacks (kind `Work`), holds at an older
//! generation (kind `Ahead`) or at a newer one or deleting (kind `Behind`), seen in a recovery
//! window (`flotilla get orphans`): CLUSTER, NAME,
//! KIND, RESOURCE ID, AGENT GEN, STORE GEN, DECISION, FIRST SEEN.
//! `-o json|yaml` print the record as the hub keeps it.

use super::Kind;
use flotilla_api::meta;
use flotilla_api::v1::{ObjectMeta, Orphan, OrphanDecision, OrphanKind};
use serde::Serialize;

/// An orphan as `-o json|yaml` print it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrphanDoc {
    cluster: String,
    name: String,
    kind: &'static str,
    resource_id: String,
    agent_generation: i64,
    #[serde(skip_serializing_if = "is_zero")]
    store_generation: i64,
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
        OrphanDecision::Revert => "Revert",
    }
}

/// How a kind is written in tables and documents.
pub fn kind(k: OrphanKind) -> &'static str {
    match k {
        OrphanKind::Work => "Work",
        OrphanKind::Ahead => "Ahead",
        OrphanKind::Behind => "Behind",
        OrphanKind::Incarnation => "Incarnation",
    }
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn first_seen(o: &Orphan) -> String {
    o.first_seen.as_ref().map(meta::rfc3339).unwrap_or_default()
}

impl Kind for Orphan {
    type Ocm = OrphanDoc;
    const COLUMNS: &'static [&'static str] = &[
        "CLUSTER",
        "NAME",
        "KIND",
        "RESOURCE ID",
        "AGENT GEN",
        "STORE GEN",
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
            kind(self.kind()).into(),
            self.resource_id.clone(),
            self.agent_generation.to_string(),
            match self.kind() {
                OrphanKind::Work => "-".into(),
                OrphanKind::Ahead | OrphanKind::Behind | OrphanKind::Incarnation => {
                    self.store_generation.to_string()
                }
            },
            decision(self.decision()).into(),
            first_seen(self),
        ]
    }

    fn to_ocm(&self) -> OrphanDoc {
        OrphanDoc {
            cluster: self.cluster.clone(),
            name: self.name.clone(),
            kind: kind(self.kind()),
            resource_id: self.resource_id.clone(),
            agent_generation: self.agent_generation,
            store_generation: self.store_generation,
            decision: decision(self.decision()),
            decided_by: self.decided_by.clone(),
            first_seen: first_seen(self),
        }
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No orphans: no spoke holds a work the store lacks or holds older.".into())
    }

    /// The orphans of the query's cluster (`-c`), or of every cluster, page by page (a
    /// restored fleet can have more than one answer holds), sorted by cluster and name.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let mut r = flotilla_api::v1::ListOrphansRequest {
            cluster: query.namespace.clone().unwrap_or_default(),
            ..Default::default()
        };
        let mut items = Vec::new();
        loop {
            let page = hub
                .idempotent(async || hub.recovery().list_orphans(r.clone()).await)
                .await?;
            items.extend(page.items);
            if page.next_page_token.is_empty() || page.next_page_token == r.page_token {
                break;
            }
            r.page_token = page.next_page_token;
        }
        items.sort_by(|a: &Orphan, b: &Orphan| {
            (&a.cluster, &a.name, &a.resource_id).cmp(&(&b.cluster, &b.name, &b.resource_id))
        });
        Ok(items)
    }
}
