//! AddOnTemplates through the handle (I/O): apply, read, and delete one that no add-on uses.

use super::error::AddOnError;
use super::handle::AddOns;
use super::in_use::in_use_by;
use super::meta::{check_version, name_of, stamp, with_rev};
use flotilla_api::addon::validate;
use flotilla_api::v1::AddOnTemplate;
use std::sync::Arc;

impl AddOns {
    /// Creates or updates a template; add-ons using it roll the change out.
    pub async fn apply_template(&self, mut t: AddOnTemplate) -> Result<AddOnTemplate, AddOnError> {
        let errors = validate::addon_template(&t);
        if !errors.is_empty() {
            return Err(AddOnError::Invalid(errors));
        }
        let name = name_of(&t.metadata);
        let what = format!("AddOnTemplate {name}");
        let stored = self.inner.store.templates.get(&name).await?;
        check_version(&t.metadata, stored.as_ref().map(|s| s.1), &what)?;
        let spec_changed = stored.as_ref().is_none_or(|(s, _)| s.spec != t.spec);
        stamp(&mut t, stored.as_ref().map(|s| &s.0), spec_changed);
        let rev = self.inner.store.templates.put(&name, &t).await?;
        let t = with_rev(t, rev);
        self.inner.store.template_views.upsert(&name, t.clone());
        Ok(t)
    }

    /// One template.
    pub fn get_template(&self, name: &str) -> Option<Arc<AddOnTemplate>> {
        self.inner.store.template_views.get(name)
    }

    /// Every template.
    pub fn list_templates(&self) -> Vec<Arc<AddOnTemplate>> {
        let mut v = self.inner.store.template_views.snapshot();
        v.sort_by_key(|t| name_of(&t.metadata));
        v
    }

    /// Deletes a template that no add-on uses.
    pub async fn delete_template(&self, name: &str) -> Result<(), AddOnError> {
        if self.get_template(name).is_none() {
            return Err(AddOnError::NotFound(format!("AddOnTemplate {name}")));
        }
        let users = self.users_of(flotilla_api::addon::TEMPLATES, "", name);
        if !users.is_empty() {
            return Err(AddOnError::Invalid(vec![format!(
                "AddOnTemplate {name} is in use by {}: change their configs first",
                in_use_by(&users, |_| true)
            )]));
        }
        self.inner.store.templates.purge(name).await?;
        self.inner.store.template_views.remove(name);
        Ok(())
    }
}
