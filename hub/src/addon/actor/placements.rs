//! Following the placements of an add-on installed by `installStrategy: Placements`: a
//! ManagedClusterAddOn for every decided cluster, none elsewhere.

use super::Actor;
use super::removal::is_deleting;
use crate::addon::rules::{self, Lifecycle};
use crate::keys::ObjectRef;
use flotilla_api::v1::{AddOnHubState, ManagedClusterAddOn, ObjectMeta};
use flotilla_rollout::GroupKey;
use std::collections::BTreeMap;

impl Actor {
    fn by_placements(&self) -> bool {
        self.spec()
            .install_strategy
            .is_some_and(|s| s.r#type == "Placements")
    }

    pub(super) fn placement_refs(&self) -> impl Iterator<Item = String> {
        self.spec()
            .install_strategy
            .map(|s| s.placements)
            .unwrap_or_default()
            .into_iter()
            .map(|p| ObjectRef::new(p.namespace, p.name).inventory_key())
    }

    /// Creates and removes ManagedClusterAddOns as the placements decide; returns each decided
    /// cluster's placement index and decision group. Nothing for a `Manual` add-on, nor for
    /// one whose lifecycle is `self` (its own manager makes the ManagedClusterAddOns).
    pub(super) async fn follow_placements(&mut self) -> BTreeMap<String, (usize, GroupKey)> {
        let mut owner = BTreeMap::new();
        if !self.by_placements() || rules::lifecycle_of(&self.cma) == Lifecycle::SelfManaged {
            return owner;
        }
        let strategy = self.spec().install_strategy.unwrap_or_default();
        let mut complete = true;
        for (i, p) in strategy.placements.iter().enumerate() {
            match self.deps.placements.get(&p.namespace, &p.name) {
                Some(view) => {
                    for (c, group) in view.decided_by_group() {
                        owner.insert(c, (i, group));
                    }
                }
                None => complete = false,
            }
        }
        for (cluster, (i, _)) in &owner {
            if self.deps.inventory.get(cluster).is_none() {
                continue;
            }
            let key = ObjectRef::new(cluster, &self.name);
            if self
                .store
                .cluster_addon_views
                .get(&key.inventory_key())
                .is_some()
            {
                continue;
            }
            let p = &strategy.placements[*i];
            let mut mca = ManagedClusterAddOn {
                metadata: Some(ObjectMeta {
                    name: self.name.clone(),
                    namespace: cluster.clone(),
                    ..Default::default()
                }),
                spec: Some(Default::default()),
                status: None,
                hub: Some(AddOnHubState {
                    placement: ObjectRef::new(&p.namespace, &p.name).to_string(),
                    ..Default::default()
                }),
            };
            if let Some(m) = mca.metadata.as_mut() {
                crate::identity::create(m);
            }
            match self
                .store
                .cluster_addons
                .write(&key.store_key(), &mca, 0)
                .await
            {
                Ok(rev) => {
                    if let Some(m) = mca.metadata.as_mut() {
                        m.resource_version = rev;
                    }
                    tracing::info!(cluster = %cluster, "installing the add-on (selected by {}/{})", p.namespace, p.name);
                    self.store
                        .cluster_addon_views
                        .upsert(&key.inventory_key(), mca);
                }
                Err(e) => {
                    tracing::warn!(cluster = %cluster, error = %e, "creating the ManagedClusterAddOn failed; retrying")
                }
            }
        }
        if complete {
            for mca in self.store.installed(&self.name) {
                let (cluster, _) = rules::key_of(&mca);
                if !owner.contains_key(&cluster) && !is_deleting(&mca) {
                    tracing::info!(cluster = %cluster, "no placement selects the cluster; removing the add-on");
                    if let Err(e) = self.uninstall(&cluster).await {
                        tracing::warn!(cluster = %cluster, error = %e, "removing the add-on failed");
                    }
                }
            }
        }
        owner
    }
}
