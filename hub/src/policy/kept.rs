//! Pure shape + thin I/O: the three governance kinds a hub keeps as they were applied
//! (PlacementBindings, PolicySets, PlacementRules), each in a bucket and an in-memory map by
//! `<namespace>/<name>`. One apply and one delete for all three; their statuses are derived,
//! never stored.

use super::{PolicyError, stamp};
use crate::keys::ObjectRef;
use crate::store::Bucket;
use flotilla_api::v1::{ObjectMeta, PlacementBinding, PlacementRule, PolicySet};
use std::collections::BTreeMap;
use std::sync::RwLock;

/// A kind kept as applied.
pub(super) trait Kept: Clone + prost::Message + Default {
    /// Its kind, as errors name it.
    const KIND: &'static str;
    fn meta(&self) -> Option<&ObjectMeta>;
    fn meta_mut(&mut self) -> &mut Option<ObjectMeta>;
    /// Whether `self`'s spec differs from `stored`'s (the generation moves when it does).
    fn spec_changed(&self, stored: &Self) -> bool;
    /// Drops the derived status before the object is stored.
    fn clear_status(&mut self);
}

impl Kept for PlacementBinding {
    const KIND: &'static str = "PlacementBinding";
    fn meta(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }
    fn meta_mut(&mut self) -> &mut Option<ObjectMeta> {
        &mut self.metadata
    }
    /// A binding has no spec: each apply is a new generation.
    fn spec_changed(&self, _: &Self) -> bool {
        true
    }
    fn clear_status(&mut self) {}
}

/// A kind with a spec (compared for the generation) and a derived status (never stored).
macro_rules! kept_with_spec {
    ($($ty:ident),*) => {$(
        impl Kept for $ty {
            const KIND: &'static str = stringify!($ty);
            fn meta(&self) -> Option<&ObjectMeta> {
                self.metadata.as_ref()
            }
            fn meta_mut(&mut self) -> &mut Option<ObjectMeta> {
                &mut self.metadata
            }
            fn spec_changed(&self, stored: &Self) -> bool {
                self.spec != stored.spec
            }
            fn clear_status(&mut self) {
                self.status = None;
            }
        }
    )*};
}

kept_with_spec!(PolicySet, PlacementRule);

/// Stores `object` (already checked) stamped against the kept copy of its key: in `bucket`,
/// then in `map`. The stored object, with its resourceVersion.
pub(super) async fn apply<T: Kept>(
    bucket: &Bucket<T>,
    map: &RwLock<BTreeMap<String, T>>,
    mut object: T,
) -> Result<T, PolicyError> {
    let key = super::key_of(object.meta());
    let old = map.read().expect("lock").get(&key.inventory_key()).cloned();
    let spec_changed = old.as_ref().is_none_or(|o| object.spec_changed(o));
    stamp(
        object.meta_mut().get_or_insert_with(Default::default),
        old.as_ref().and_then(|o| o.meta()),
        spec_changed,
    )?;
    object.clear_status();
    let rev = bucket.put(&key.store_key(), &object).await?;
    if let Some(m) = object.meta_mut().as_mut() {
        m.resource_version = rev;
    }
    map.write()
        .expect("lock")
        .insert(key.inventory_key(), object.clone());
    Ok(object)
}

/// Deletes the kept `namespace/name`: from `bucket`, then from `map`; not found when `map`
/// has none.
pub(super) async fn delete<T: Kept>(
    bucket: &Bucket<T>,
    map: &RwLock<BTreeMap<String, T>>,
    namespace: &str,
    name: &str,
) -> Result<(), PolicyError> {
    let key = ObjectRef::new(namespace, name);
    if !map.read().expect("lock").contains_key(&key.inventory_key()) {
        return Err(PolicyError::NotFound(format!(
            "{} {}",
            T::KIND,
            key.inventory_key()
        )));
    }
    bucket.purge(&key.store_key()).await?;
    map.write().expect("lock").remove(&key.inventory_key());
    Ok(())
}
