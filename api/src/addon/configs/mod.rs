//! The effective configs of one installed add-on: per cluster over per placement over the
//! add-on's defaults, per group/resource.
//!
//! OCM (`pkg/addon/controllers/addonconfiguration/graph.go`) builds, for each (group, resource):
//!
//! 1. the ClusterManagementAddOn's default, `spec.supportedConfigs[].defaultConfig` (skipped when
//!    its name is empty or OCM's reserved `__reserved_no_default__`);
//! 2. replaced, when the cluster's placement lists configs of that group/resource, by *all* of
//!    that placement's configs of it (`overrideConfigMapByInstallConfigRef`);
//! 3. replaced, when the ManagedClusterAddOn's `spec.configs` lists configs of that
//!    group/resource, by all of those (`overrideConfigMapByAddOnConfigs`).
//!
//! A level replaces a whole group/resource: several configs of one group/resource given at one
//! level are all kept (a list; a repeated namespace/name is kept once), and a group/resource the
//! level does not mention keeps the lower level's configs. Which placement a cluster belongs to
//! (the last listed one that decides it) is the caller's; it passes that placement.
//!
//! The result is sorted by (group, resource) as OCM's `orderedKeys`, keeping within one
//! group/resource the order the winning level gave. That order matters: OCM's template agent
//! renders with the *first* config of a group/resource (`GetAddOnConfigRef`); [`first`] picks it.
//!
//! Deviations from OCM:
//! - OCM's graph takes every configured group/resource (a TODO there says unsupported ones
//!   should be filtered out) and its progressing controller then reports
//!   `ConfigurationUnsupported`. [`effective`] refuses them up front: each placement or
//!   ManagedClusterAddOn config whose group/resource is not among the add-on's
//!   `supportedConfigs` is an error naming its field.
//! - OCM reads a placement's configs from the ClusterManagementAddOn's status
//!   (`installProgressions[].configReferences`, already hashed); they are copied there from
//!   `spec.installStrategy.placements[].configs`, which is what is read here.

use crate::v1;
use std::collections::BTreeMap;

/// OCM's reserved default-config name meaning "no default" (v1beta1 conversion).
pub const RESERVED_NO_DEFAULT: &str = "__reserved_no_default__";

/// Whether the add-on takes configs of `group`/`resource` (`spec.supportedConfigs`).
pub fn supported(cma: &v1::ClusterManagementAddOn, group: &str, resource: &str) -> bool {
    cma.spec.as_ref().is_some_and(|s| {
        s.supported_configs
            .iter()
            .any(|c| c.group == group && c.resource == resource)
    })
}

/// The effective configs of the add-on `mca` on its cluster, given the placement the cluster
/// belongs to (`None` for a hand-made add-on, or a cluster no listed placement decides): see
/// the module documentation. Sorted by (group, resource), in the winning level's order within a
/// group/resource. Errors name every placement or ManagedClusterAddOn config whose group/resource
/// the add-on does not support, e.g. `spec.configs[1]: group/resource
/// addon.open-cluster-management.io/foos is not among the add-on's supportedConfigs`.
pub fn effective(
    cma: &v1::ClusterManagementAddOn,
    placement: Option<&v1::PlacementStrategy>,
    mca: &v1::ManagedClusterAddOn,
) -> Result<Vec<v1::AddOnConfig>, Vec<String>> {
    let mut errors = Vec::new();
    let mut by_gr: BTreeMap<(String, String), Vec<v1::AddOnConfig>> = BTreeMap::new();

    // 1. The add-on's defaults.
    if let Some(spec) = &cma.spec {
        for sc in &spec.supported_configs {
            let Some(d) = &sc.default_config else {
                continue;
            };
            if d.name.is_empty() || d.name == RESERVED_NO_DEFAULT {
                continue;
            }
            add_unique(
                by_gr
                    .entry((sc.group.clone(), sc.resource.clone()))
                    .or_default(),
                v1::AddOnConfig {
                    group: sc.group.clone(),
                    resource: sc.resource.clone(),
                    namespace: d.namespace.clone(),
                    name: d.name.clone(),
                },
            );
        }
    }

    // 2. The placement's configs.
    if let Some(p) = placement {
        let at = placement_field(cma, p);
        override_level(cma, &at, &p.configs, &mut by_gr, &mut errors);
    }

    // 3. The cluster's own configs.
    if let Some(spec) = &mca.spec {
        override_level(cma, "spec.configs", &spec.configs, &mut by_gr, &mut errors);
    }

    if errors.is_empty() {
        Ok(by_gr.into_values().flatten().collect())
    } else {
        Err(errors)
    }
}

/// The first config of `group`/`resource` among `configs`: the one OCM's template agent uses
/// (the template, the AddOnDeploymentConfig).
pub fn first<'a>(
    configs: &'a [v1::AddOnConfig],
    group: &str,
    resource: &str,
) -> Option<&'a v1::AddOnConfig> {
    configs
        .iter()
        .find(|c| c.group == group && c.resource == resource)
}

/// Replaces, per group/resource, the lower level's configs by this level's (unsupported ones
/// reported, not applied).
fn override_level(
    cma: &v1::ClusterManagementAddOn,
    field: &str,
    configs: &[v1::AddOnConfig],
    by_gr: &mut BTreeMap<(String, String), Vec<v1::AddOnConfig>>,
    errors: &mut Vec<String>,
) {
    let mut level: BTreeMap<(String, String), Vec<v1::AddOnConfig>> = BTreeMap::new();
    for (i, c) in configs.iter().enumerate() {
        if !supported(cma, &c.group, &c.resource) {
            errors.push(format!(
                "{field}[{i}]: group/resource {}/{} is not among the add-on's supportedConfigs{}",
                c.group,
                c.resource,
                supported_list(cma)
            ));
            continue;
        }
        add_unique(
            level
                .entry((c.group.clone(), c.resource.clone()))
                .or_default(),
            c.clone(),
        );
    }
    by_gr.extend(level);
}

fn add_unique(list: &mut Vec<v1::AddOnConfig>, c: v1::AddOnConfig) {
    if !list
        .iter()
        .any(|e| e.namespace == c.namespace && e.name == c.name)
    {
        list.push(c);
    }
}

/// ` (supported: g/r, g/r)`, or ` (it supports none)`.
fn supported_list(cma: &v1::ClusterManagementAddOn) -> String {
    let list: Vec<String> = cma
        .spec
        .iter()
        .flat_map(|s| &s.supported_configs)
        .map(|c| format!("{}/{}", c.group, c.resource))
        .collect();
    if list.is_empty() {
        " (it supports none)".into()
    } else {
        format!(" (supported: {})", list.join(", "))
    }
}

/// `spec.installStrategy.placements[<i>].configs` for the placement (found by identity, else by
/// namespace/name); `spec.installStrategy.placements[<ns>/<name>].configs` when the add-on does
/// not list it.
fn placement_field(cma: &v1::ClusterManagementAddOn, p: &v1::PlacementStrategy) -> String {
    let placements = cma
        .spec
        .as_ref()
        .and_then(|s| s.install_strategy.as_ref())
        .map(|s| s.placements.as_slice())
        .unwrap_or_default();
    let index = placements
        .iter()
        .position(|q| std::ptr::eq(q, p))
        .or_else(|| {
            placements
                .iter()
                .rposition(|q| q.namespace == p.namespace && q.name == p.name)
        });
    match index {
        Some(i) => format!("spec.installStrategy.placements[{i}].configs"),
        None => format!(
            "spec.installStrategy.placements[{}/{}].configs",
            p.namespace, p.name
        ),
    }
}

#[cfg(test)]
mod tests;
