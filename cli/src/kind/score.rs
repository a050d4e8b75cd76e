//! AddOnPlacementScores: the scores a provider reports for one cluster (its namespace).

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::ocm;
use flotilla_api::v1::{AddOnPlacementScore, ObjectMeta};

impl Kind for AddOnPlacementScore {
    type Ocm = ocm::AddOnPlacementScore;
    const COLUMNS: &'static [&'static str] = &["CLUSTER", "NAME", "SCORES", "VALID UNTIL"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    /// SCORES as `name=value,...`; VALID UNTIL says `never expires` when unset.
    fn row(&self) -> Vec<String> {
        let o = self.to_ocm();
        let scores: Vec<String> = o
            .status
            .scores
            .iter()
            .map(|i| format!("{}={}", i.name, i.value))
            .collect();
        vec![
            o.metadata.namespace,
            o.metadata.name,
            scores.join(","),
            if o.status.valid_until.is_empty() {
                "never expires".into()
            } else {
                o.status.valid_until
            },
        ]
    }

    fn to_ocm(&self) -> ocm::AddOnPlacementScore {
        ocm::AddOnPlacementScore::from(self)
    }

    /// The scores of the cluster (the namespace; of every cluster when none is given).
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = flotilla_api::v1::ListScoresRequest {
            cluster: query.namespace.clone().unwrap_or_default(),
        };
        Ok(hub
            .idempotent(async || hub.placements().list_scores(r.clone()).await)
            .await?
            .items)
    }
}

impl Delete for AddOnPlacementScore {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::ScoreRef {
            cluster: target.namespace,
            name: target.name,
        };
        let d = hub
            .delete(async || hub.placements().delete_score(r.clone()).await)
            .await?;
        Ok(Gone::new(
            d,
            format!(
                "addonplacementscore/{} deleted (cluster {})",
                r.name, r.cluster
            ),
        ))
    }
}
