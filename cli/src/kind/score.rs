//! AddOnPlacementScores: the scores a provider reports for one cluster (its namespace).

use super::Kind;
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
}
