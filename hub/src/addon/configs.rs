//! AddOnDeploymentConfigs through the handle (I/O): apply, read, and delete one that no add-on
//! uses (the refusal names only the users the caller may see).

use super::error::AddOnError;
use super::handle::AddOns;
use super::in_use::in_use_by;
use super::meta::{check_version, ns_key, stamp, with_rev};
use crate::keys::ObjectRef;
use flotilla_api::addon::validate;
use flotilla_api::v1::AddOnDeploymentConfig;
use std::sync::Arc;

impl AddOns {
    /// Creates or updates a deployment config; add-ons using it roll the change out.
    pub async fn apply_config(
        &self,
        mut c: AddOnDeploymentConfig,
    ) -> Result<AddOnDeploymentConfig, AddOnError> {
        let errors = validate::addon_deployment_config(&c);
        if !errors.is_empty() {
            return Err(AddOnError::Invalid(errors));
        }
        let key = ns_key(&c.metadata);
        let what = format!("AddOnDeploymentConfig {key}");
        let stored = self.inner.store.configs.get(&key.store_key()).await?;
        check_version(&c.metadata, stored.as_ref().map(|s| s.1), &what)?;
        let spec_changed = stored.as_ref().is_none_or(|(s, _)| s.spec != c.spec);
        stamp(&mut c, stored.as_ref().map(|s| &s.0), spec_changed);
        let rev = self.inner.store.configs.put(&key.store_key(), &c).await?;
        let c = with_rev(c, rev);
        self.inner
            .store
            .config_views
            .upsert(&key.inventory_key(), c.clone());
        Ok(c)
    }

    /// One deployment config.
    pub fn get_config(&self, namespace: &str, name: &str) -> Option<Arc<AddOnDeploymentConfig>> {
        self.inner
            .store
            .config_views
            .get(&ObjectRef::new(namespace, name).inventory_key())
    }

    /// Deployment configs of a namespace (every namespace when empty).
    pub fn list_configs(&self, namespace: &str) -> Vec<Arc<AddOnDeploymentConfig>> {
        let views = &self.inner.store.config_views;
        let mut v: Vec<_> = if namespace.is_empty() {
            views.snapshot()
        } else {
            views
                .with_prefix(&ObjectRef::prefix(namespace))
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        };
        v.sort_by_key(|c| ns_key(&c.metadata));
        v
    }

    /// Deletes a deployment config that no add-on uses; the refusal names only the installed
    /// add-ons on clusters the caller `sees` (others are counted: issue 48 review r1 §10).
    pub async fn delete_config(
        &self,
        namespace: &str,
        name: &str,
        sees: impl Fn(&str) -> bool,
    ) -> Result<(), AddOnError> {
        let key = ObjectRef::new(namespace, name);
        if self.get_config(namespace, name).is_none() {
            return Err(AddOnError::NotFound(format!("AddOnDeploymentConfig {key}")));
        }
        let users = self.users_of(flotilla_api::addon::DEPLOYMENT_CONFIGS, namespace, name);
        if !users.is_empty() {
            return Err(AddOnError::Invalid(vec![format!(
                "AddOnDeploymentConfig {key} is in use by {}: change their configs first",
                in_use_by(&users, sees)
            )]));
        }
        self.inner.store.configs.purge(&key.store_key()).await?;
        self.inner.store.config_views.remove(&key.inventory_key());
        Ok(())
    }
}
