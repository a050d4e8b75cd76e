//! The metadata every add-on kind's write goes through (pure): the stored resourceVersion put
//! back on a loaded object, a stale one refused, identity kept and generation bumped.

use super::error::AddOnError;
use crate::keys::ObjectRef;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn, ObjectMeta,
};

pub(super) trait Meta {
    fn meta_mut(&mut self) -> &mut Option<ObjectMeta>;
}

macro_rules! meta_of {
    ($($t:ty),*) => {$(
        impl Meta for $t {
            fn meta_mut(&mut self) -> &mut Option<ObjectMeta> {
                &mut self.metadata
            }
        }
    )*};
}
meta_of!(
    ClusterManagementAddOn,
    ManagedClusterAddOn,
    AddOnTemplate,
    AddOnDeploymentConfig
);

pub(super) fn with_rev<T: Meta>(mut x: T, rev: u64) -> T {
    if let Some(m) = x.meta_mut().as_mut() {
        m.resource_version = rev;
    }
    x
}

/// Whether an object is marked deleted (it waits for something before it goes).
pub(super) fn is_deleted(m: &Option<ObjectMeta>) -> bool {
    m.as_ref().is_some_and(|m| m.deletion_timestamp.is_some())
}

pub(super) fn name_of(m: &Option<ObjectMeta>) -> String {
    m.as_ref().map(|m| m.name.clone()).unwrap_or_default()
}

pub(super) fn ns_key(m: &Option<ObjectMeta>) -> ObjectRef {
    let m = m.clone().unwrap_or_default();
    ObjectRef::new(m.namespace, m.name)
}

/// Refuses an update that names a resourceVersion other than the stored one.
pub(super) fn check_version(
    given: &Option<ObjectMeta>,
    stored: Option<u64>,
    what: &str,
) -> Result<(), AddOnError> {
    let given = given.as_ref().map(|m| m.resource_version).unwrap_or(0);
    match stored {
        Some(rev) if given != 0 && given != rev => Err(AddOnError::Conflict(format!(
            "{what}: metadata.resourceVersion {given} is not the stored {rev} (changed meanwhile; read it again)"
        ))),
        None if given != 0 => Err(AddOnError::NotFound(format!(
            "{what} (metadata.resourceVersion {given} given)"
        ))),
        _ => Ok(()),
    }
}

/// Prepares `x` for storing over `stored`: identity kept, generation bumped on spec change.
pub(super) fn stamp<T: Meta + Clone>(x: &mut T, stored: Option<&T>, spec_changed: bool) {
    let stored_meta = stored.and_then(|s| s.clone().meta_mut().clone());
    let m = x.meta_mut().get_or_insert_with(Default::default);
    match stored_meta {
        Some(om) => crate::identity::keep(m, &om, spec_changed),
        None => crate::identity::create(m),
    }
    m.resource_version = 0;
}
