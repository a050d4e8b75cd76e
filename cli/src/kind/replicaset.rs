//! ManifestWorkReplicaSets: a template rolled out over placements.

use super::Kind;
use flotilla_api::meta;
use flotilla_api::ocm;
use flotilla_api::v1::{ManifestWorkReplicaSet, ObjectMeta};

impl Kind for ManifestWorkReplicaSet {
    type Ocm = ocm::ManifestWorkReplicaSet;
    const COLUMNS: &'static [&'static str] = &[
        "NAME",
        "PLACEMENTS",
        "FOUND",
        "MANIFESTWORKS",
        "APPLIED",
        "AVAILABLE",
        "ROLLED OUT",
    ];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    /// FOUND: the placements exist; ROLLED OUT: True, or the reason it is not (Progressing,
    /// Stopped).
    fn row(&self) -> Vec<String> {
        let st = self.status.clone().unwrap_or_default();
        let s = st.summary.unwrap_or_default();
        let cond = |t: &str| {
            st.conditions
                .iter()
                .find(|c| c.r#type == t)
                .map(|c| {
                    if c.status == meta::status::TRUE {
                        "True".to_string()
                    } else {
                        c.reason.clone()
                    }
                })
                .unwrap_or_else(|| "-".into())
        };
        vec![
            self.name(),
            self.spec
                .as_ref()
                .map(|s| {
                    s.placement_refs
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
            cond("PlacementVerified"),
            s.total.to_string(),
            s.applied.to_string(),
            s.available.to_string(),
            cond("PlacementRolledOut"),
        ]
    }

    fn to_ocm(&self) -> ocm::ManifestWorkReplicaSet {
        ocm::ManifestWorkReplicaSet::from(self)
    }

    const ACROSS_NAMESPACES: bool = true;

    /// The replica sets (of the namespace when given), only the named ones when it names some
    /// (an error when none of them is there).
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let names = &query.names;
        let r = flotilla_api::v1::ListReplicaSetsRequest {
            namespace: query.namespace.clone().unwrap_or_default(),
        };
        let mut items = hub
            .idempotent(async || hub.replica_sets().list_replica_sets(r.clone()).await)
            .await?
            .items;
        if !names.is_empty() {
            items.retain(|i| {
                names
                    .iter()
                    .any(|n| i.metadata.as_ref().is_some_and(|m| &m.name == n))
            });
            if items.is_empty() {
                anyhow::bail!("ManifestWorkReplicaSet {} not found", names.join(", "));
            }
        }
        Ok(items)
    }
}
