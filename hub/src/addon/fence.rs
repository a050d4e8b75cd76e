//! What a caller who sees only some namespaces is shown of a ClusterManagementAddOn (issue 48,
//! review r4 §2; pure): the placements of its install strategy, and their install
//! progressions, in those namespaces only — its counts are over the caller's own placements,
//! never the fleet's, and other teams' placements are not named. The API's get and list and the
//! dashboard's add-on pages show the same.

use flotilla_api::v1::ClusterManagementAddOn;

/// `cma` as a viewer whose namespaces `sees` admits may read it.
pub fn fenced(cma: &ClusterManagementAddOn, sees: impl Fn(&str) -> bool) -> ClusterManagementAddOn {
    let mut cma = cma.clone();
    if let Some(strategy) = cma.spec.as_mut().and_then(|s| s.install_strategy.as_mut()) {
        strategy.placements.retain(|p| sees(&p.namespace));
    }
    if let Some(status) = cma.status.as_mut() {
        status.install_progressions.retain(|p| sees(&p.namespace));
    }
    cma
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{
        ClusterManagementAddOnSpec, ClusterManagementAddOnStatus, InstallProgression,
        InstallStrategy, PlacementStrategy,
    };

    fn addon() -> ClusterManagementAddOn {
        let placement = |ns: &str| PlacementStrategy {
            namespace: ns.into(),
            name: "edge".into(),
            ..Default::default()
        };
        let progression = |ns: &str, total| InstallProgression {
            namespace: ns.into(),
            name: "edge".into(),
            total,
            updated: total,
            ..Default::default()
        };
        ClusterManagementAddOn {
            spec: Some(ClusterManagementAddOnSpec {
                install_strategy: Some(InstallStrategy {
                    r#type: "Placements".into(),
                    placements: vec![placement("team-a-apps"), placement("team-b-apps")],
                }),
                ..Default::default()
            }),
            status: Some(ClusterManagementAddOnStatus {
                install_progressions: vec![
                    progression("team-a-apps", 2),
                    progression("team-b-apps", 9_000),
                ],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_team_is_shown_only_its_namespaces_placements_and_their_progress() {
        let shown = fenced(&addon(), |ns| ns == "team-a-apps");
        let placements = &shown
            .spec
            .as_ref()
            .unwrap()
            .install_strategy
            .as_ref()
            .unwrap()
            .placements;
        assert_eq!(placements.len(), 1);
        assert_eq!(placements[0].namespace, "team-a-apps");
        let progressions = &shown.status.as_ref().unwrap().install_progressions;
        assert_eq!(progressions.len(), 1);
        assert_eq!(
            (progressions[0].namespace.as_str(), progressions[0].total),
            ("team-a-apps", 2)
        );
        // Everything else is as stored; a viewer of no namespace gets the add-on itself.
        let none = fenced(&addon(), |_| false);
        assert_eq!(
            none.spec.unwrap().install_strategy.unwrap().r#type,
            "Placements"
        );
        assert!(none.status.unwrap().install_progressions.is_empty());
        assert_eq!(fenced(&addon(), |_| true), addon());
    }
}
