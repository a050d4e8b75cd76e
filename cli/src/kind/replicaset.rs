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
}
