//! PlacementDecisions: the pages of clusters a placement selected, with their decision group.

use super::Kind;
use flotilla_api::ocm;
use flotilla_api::v1::{ObjectMeta, PlacementDecision};

/// Label of a PlacementDecision naming its decision group index.
const GROUP_INDEX_LABEL: &str = "cluster.open-cluster-management.io/decision-group-index";
/// Label of a PlacementDecision naming its decision group.
const GROUP_NAME_LABEL: &str = "cluster.open-cluster-management.io/decision-group-name";

impl Kind for PlacementDecision {
    type Ocm = ocm::PlacementDecision;
    const COLUMNS: &'static [&'static str] =
        &["NAME", "GROUP INDEX", "GROUP NAME", "COUNT", "CLUSTERS"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let m = self.metadata.clone().unwrap_or_default();
        let clusters = clusters(self);
        vec![
            m.name.clone(),
            m.labels.get(GROUP_INDEX_LABEL).cloned().unwrap_or_default(),
            m.labels.get(GROUP_NAME_LABEL).cloned().unwrap_or_default(),
            clusters.len().to_string(),
            clusters.join(","),
        ]
    }

    fn to_ocm(&self) -> ocm::PlacementDecision {
        ocm::PlacementDecision::from(self)
    }

    /// The decisions of one placement are a list, whatever it names.
    fn single(_: &super::Query) -> bool {
        false
    }

    /// The PlacementDecisions of the placement the query names, in its namespace.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = flotilla_api::v1::PlacementRef {
            namespace: query.namespace.clone().unwrap_or_default(),
            name: query.names.first().cloned().unwrap_or_default(),
        };
        Ok(hub
            .idempotent(async || hub.placements().list_decisions(r.clone()).await)
            .await?
            .items)
    }
}

/// The clusters a decision names, in its order.
pub fn clusters(d: &PlacementDecision) -> Vec<&str> {
    d.status
        .iter()
        .flat_map(|s| s.decisions.iter().map(|c| c.cluster_name.as_str()))
        .collect()
}
