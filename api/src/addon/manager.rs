//! Who manages an add-on: whether the hub renders its agent (an AddOnTemplate add-on) or
//! someone else deploys it, and whether the hub creates its ManagedClusterAddOns from the
//! install strategy (OCM's `addon.open-cluster-management.io/lifecycle`). Shared by the hub's
//! add-on actors and the CLI's MANAGED BY column.

use super::{GROUP, LIFECYCLE_ANNOTATION, LIFECYCLE_SELF, TEMPLATES};
use crate::v1::ClusterManagementAddOn;

/// What kind of add-on a ClusterManagementAddOn is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOnKind {
    /// Its agent is an AddOnTemplate the hub renders into a work per cluster.
    Template,
    /// Its agent is deployed by someone else (its own manager, a GitOps tool…).
    External,
}

/// [`AddOnKind::Template`] iff `spec.supportedConfigs` lists
/// `addon.open-cluster-management.io/addontemplates`, as OCM tells template add-ons.
pub fn kind_of(cma: &ClusterManagementAddOn) -> AddOnKind {
    let template = cma.spec.as_ref().is_some_and(|s| {
        s.supported_configs
            .iter()
            .any(|c| c.group == GROUP && c.resource == TEMPLATES)
    });
    if template {
        AddOnKind::Template
    } else {
        AddOnKind::External
    }
}

/// Who installs and upgrades an add-on (OCM's `addon.open-cluster-management.io/lifecycle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// `addon-manager`, or no annotation: the hub creates and removes ManagedClusterAddOns as
    /// the install strategy says.
    AddOnManager,
    /// `self`: the add-on's own manager does; the hub creates none from the install strategy
    /// and removes none. A template add-on is still rendered by the hub wherever a
    /// ManagedClusterAddOn exists (no one else can render it).
    SelfManaged,
}

/// The add-on's [`Lifecycle`]. Values other than `self` and `addon-manager` are refused on
/// input ([`super::validate`]).
pub fn lifecycle_of(cma: &ClusterManagementAddOn) -> Lifecycle {
    let annotation = cma
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.get(LIFECYCLE_ANNOTATION));
    match annotation.map(String::as_str) {
        Some(LIFECYCLE_SELF) => Lifecycle::SelfManaged,
        _ => Lifecycle::AddOnManager,
    }
}

/// One word for who manages the add-on, as `flotilla get addons` shows it: `self` (its own
/// manager decides where it is installed), else `hub` (the hub installs and renders it) or
/// `external` (the hub installs it, someone else deploys its agent).
pub fn managed_by(cma: &ClusterManagementAddOn) -> &'static str {
    match (lifecycle_of(cma), kind_of(cma)) {
        (Lifecycle::SelfManaged, _) => "self",
        (Lifecycle::AddOnManager, AddOnKind::Template) => "hub",
        (Lifecycle::AddOnManager, AddOnKind::External) => "external",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{ClusterManagementAddOnSpec, ConfigMeta, ObjectMeta};

    fn cma(configs: &[&str], lifecycle: Option<&str>) -> ClusterManagementAddOn {
        ClusterManagementAddOn {
            metadata: Some(ObjectMeta {
                name: "hello".into(),
                annotations: lifecycle
                    .map(|v| (LIFECYCLE_ANNOTATION.to_string(), v.to_string()))
                    .into_iter()
                    .collect(),
                ..Default::default()
            }),
            spec: Some(ClusterManagementAddOnSpec {
                supported_configs: configs
                    .iter()
                    .map(|r| ConfigMeta {
                        group: GROUP.into(),
                        resource: (*r).into(),
                        default_config: None,
                    })
                    .collect(),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn the_column_says_who_manages_the_add_on() {
        assert_eq!(managed_by(&cma(&[TEMPLATES], None)), "hub");
        assert_eq!(managed_by(&cma(&[TEMPLATES], Some("addon-manager"))), "hub");
        assert_eq!(managed_by(&cma(&[TEMPLATES], Some("self"))), "self");
        assert_eq!(
            managed_by(&cma(&["addondeploymentconfigs"], None)),
            "external"
        );
        assert_eq!(managed_by(&cma(&[], Some("self"))), "self");
    }
}
