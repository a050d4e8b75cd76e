//! An installation's effective configs resolved to the stored AddOnTemplate and
//! AddOnDeploymentConfigs, with their spec hashes (cached by resource version).

use super::Actor;
use crate::addon::dirty::Read;
use crate::addon::rules::Resolved;
use crate::keys::ObjectRef;
use flotilla_api::addon::{self, configs};
use flotilla_api::ocm;
use flotilla_api::v1::{AddOnConfig, AddOnDeploymentConfig, AddOnTemplate, ManagedClusterAddOn};
use std::sync::Arc;

impl Actor {
    /// A config's spec hash (cached by revision), or `None` when it does not exist.
    pub(super) fn resolve(&mut self, c: &AddOnConfig) -> Option<(String, i64)> {
        let (rev, generation, value) = match (c.group.as_str(), c.resource.as_str()) {
            (addon::GROUP, addon::TEMPLATES) => {
                let t = self.store.template_views.get(&c.name)?;
                let m = t.metadata.clone().unwrap_or_default();
                (m.resource_version, m.generation, Value::Template(t))
            }
            (addon::GROUP, addon::DEPLOYMENT_CONFIGS) => {
                let x = self
                    .store
                    .config_views
                    .get(&ObjectRef::new(&c.namespace, &c.name).inventory_key())?;
                let m = x.metadata.clone().unwrap_or_default();
                (m.resource_version, m.generation, Value::Config(x))
            }
            _ => return None,
        };
        let key = (
            c.resource.clone(),
            ObjectRef::new(&c.namespace, &c.name).inventory_key(),
        );
        if let Some((r, h)) = self.hashes.get(&key)
            && *r == rev
        {
            return Some((h.clone(), generation));
        }
        let json = match value {
            Value::Template(t) => serde_json::to_value(ocm::AddOnTemplate::from(&*t)),
            Value::Config(x) => serde_json::to_value(ocm::AddOnDeploymentConfig::from(&*x)),
        }
        .ok()?;
        let hash = addon::hash::spec_hash(&json);
        self.hashes.insert(key, (rev, hash.clone()));
        Some((hash, generation))
    }

    /// The effective configs of one installed add-on, resolved.
    pub(super) fn resolved(
        &mut self,
        mca: &ManagedClusterAddOn,
        placement: Option<usize>,
    ) -> Result<Vec<Resolved>, Vec<String>> {
        self.resolved_reading(mca, placement, &mut Vec::new())
    }

    /// [`Self::resolved`], adding to `reads` every config it looked for, found or not.
    pub(super) fn resolved_reading(
        &mut self,
        mca: &ManagedClusterAddOn,
        placement: Option<usize>,
        reads: &mut Vec<Read>,
    ) -> Result<Vec<Resolved>, Vec<String>> {
        let strategy = placement.and_then(|i| {
            self.cma
                .spec
                .as_ref()
                .and_then(|s| s.install_strategy.as_ref())
                .and_then(|s| s.placements.get(i))
        });
        let effective = configs::effective(&self.cma, strategy, mca)?;
        reads.extend(effective.iter().filter_map(Read::of));
        let mut errors = Vec::new();
        let mut out = Vec::new();
        for c in effective {
            match self.resolve(&c) {
                Some((hash, generation)) => out.push(Resolved {
                    config: c,
                    hash,
                    generation,
                }),
                None => errors.push(format!(
                    "config {}/{} {}: not found",
                    c.resource,
                    c.group,
                    ObjectRef::new(&c.namespace, &c.name)
                )),
            }
        }
        let templates = out
            .iter()
            .filter(|r| r.config.group == addon::GROUP && r.config.resource == addon::TEMPLATES)
            .count();
        if templates == 0 && errors.is_empty() {
            errors.push(format!(
                "no AddOnTemplate among the configs: give {}/{} a defaultConfig in spec.supportedConfigs, or a config per placement or cluster",
                addon::GROUP,
                addon::TEMPLATES
            ));
        } else if templates > 1 {
            errors.push("more than one AddOnTemplate among the configs".into());
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }

    pub(super) fn template_of(&self, resolved: &[Resolved]) -> Option<Arc<AddOnTemplate>> {
        resolved
            .iter()
            .find(|r| r.config.group == addon::GROUP && r.config.resource == addon::TEMPLATES)
            .and_then(|r| self.store.template_views.get(&r.config.name))
    }

    pub(super) fn deployment_config_of(
        &self,
        resolved: &[Resolved],
    ) -> Option<Arc<AddOnDeploymentConfig>> {
        // OCM renders with the first config of a group/resource (`GetAddOnConfigRef`).
        resolved
            .iter()
            .find(|r| {
                r.config.group == addon::GROUP && r.config.resource == addon::DEPLOYMENT_CONFIGS
            })
            .and_then(|r| {
                self.store
                    .config_views
                    .get(&ObjectRef::new(&r.config.namespace, &r.config.name).inventory_key())
            })
    }

    /// A config's spec hash as last resolved (empty when not known).
    pub(super) fn config_hash(&self, resource: &str, namespace: &str, name: &str) -> String {
        self.hashes
            .get(&(
                resource.to_string(),
                ObjectRef::new(namespace, name).inventory_key(),
            ))
            .map(|(_, h)| h.clone())
            .unwrap_or_default()
    }
}

enum Value {
    Template(Arc<AddOnTemplate>),
    Config(Arc<AddOnDeploymentConfig>),
}
