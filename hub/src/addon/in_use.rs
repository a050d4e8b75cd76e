//! Who names a template or deployment config, so that a delete can refuse while it is in use:
//! the add-ons' and installations' views read ([`AddOns::users_of`]), and the refusal's words
//! (pure).

use super::handle::AddOns;
use super::meta::{name_of, ns_key};

impl AddOns {
    /// Who names a config: add-ons (defaults, placements) and installed add-ons (with their
    /// cluster).
    pub(super) fn users_of(&self, resource: &str, namespace: &str, name: &str) -> Vec<User> {
        let matches = |g: &str, r: &str, ns: &str, n: &str| {
            g == flotilla_api::addon::GROUP && r == resource && ns == namespace && n == name
        };
        let mut users = Vec::new();
        for cma in self.list_addons() {
            let spec = cma.spec.clone().unwrap_or_default();
            let defaults = spec.supported_configs.iter().any(|c| {
                c.default_config
                    .as_ref()
                    .is_some_and(|d| matches(&c.group, &c.resource, &d.namespace, &d.name))
            });
            let placements = spec.install_strategy.iter().any(|s| {
                s.placements.iter().any(|p| {
                    p.configs
                        .iter()
                        .any(|c| matches(&c.group, &c.resource, &c.namespace, &c.name))
                })
            });
            if defaults || placements {
                let text = format!("ClusterManagementAddOn {}", name_of(&cma.metadata));
                users.push(User {
                    text,
                    cluster: None,
                });
            }
        }
        for mca in self.inner.store.cluster_addon_views.snapshot() {
            let spec = mca.spec.clone().unwrap_or_default();
            if spec
                .configs
                .iter()
                .any(|c| matches(&c.group, &c.resource, &c.namespace, &c.name))
            {
                let key = ns_key(&mca.metadata);
                users.push(User {
                    text: format!("ManagedClusterAddOn {key}"),
                    cluster: Some(key.namespace),
                });
            }
        }
        users
    }
}

/// Something that names a config: its words, and the cluster of an installed add-on.
pub(super) struct User {
    text: String,
    cluster: Option<String>,
}

/// `users` in a refusal: those of clusters `sees` admits by name, the others counted only.
pub(super) fn in_use_by(users: &[User], sees: impl Fn(&str) -> bool) -> String {
    let (shown, hidden): (Vec<&User>, Vec<&User>) = users
        .iter()
        .partition(|u| u.cluster.as_deref().is_none_or(&sees));
    let mut words: Vec<String> = shown.iter().map(|u| u.text.clone()).collect();
    match hidden.len() {
        0 => {}
        1 => words.push("1 ManagedClusterAddOn of a cluster you do not see".into()),
        n => words.push(format!(
            "{n} ManagedClusterAddOns of clusters you do not see"
        )),
    }
    words.join(", ")
}
