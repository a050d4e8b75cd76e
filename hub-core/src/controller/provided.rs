//! What the families provide each other and the hub: one handle per type (pure).

use std::any::{Any, TypeId};
use std::collections::HashMap;

/// Handles by type: `Placements`, `ClusterSets`, … — each provided once, by one family.
#[derive(Default)]
pub struct Provided(HashMap<TypeId, (&'static str, Box<dyn Any + Send + Sync>)>);

impl std::fmt::Debug for Provided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.values().map(|(name, _)| name))
            .finish()
    }
}

impl Provided {
    /// Keeps `handle` (a second one of the same type replaces the first).
    pub fn insert<T: Clone + Send + Sync + 'static>(&mut self, handle: T) {
        self.0.insert(
            TypeId::of::<T>(),
            (std::any::type_name::<T>(), Box::new(handle)),
        );
    }

    /// A clone of the handle of type `T`, if one was provided.
    pub fn get<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.0
            .get(&TypeId::of::<T>())
            .and_then(|(_, h)| h.downcast_ref::<T>())
            .cloned()
    }
}
