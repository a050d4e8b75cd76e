//! Typed keys of namespaced hub objects (kube-runtime's `ObjectRef` is the model).
//!
//! One object, one key type, spelled in two places:
//! - the in-memory inventories key by `<namespace>/<name>`, so that a namespace's objects are one
//!   sorted range (`prefix`) and list pages can resume after a key;
//! - the JetStream KV buckets key by `<namespace>.<name>` (KV keys are subject tokens; namespaces
//!   and cluster names are DNS labels without dots, so the first dot splits the two).
//!
//! Works live in their cluster's namespace (`<cluster>/<work>`), AddOnPlacementScores too
//! (`<cluster>/<resourceName>`), placements and set bindings in theirs.

use std::fmt;

/// The key of one namespaced object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// Namespace (for works and scores: the cluster name).
    pub namespace: String,
    /// Object name.
    pub name: String,
}

impl ObjectRef {
    /// The key of `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The inventory key: `<namespace>/<name>`.
    pub fn inventory_key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The KV key: `<namespace>.<name>`.
    pub fn store_key(&self) -> String {
        format!("{}.{}", self.namespace, self.name)
    }

    /// Parses an inventory key (`<namespace>/<name>`).
    pub fn from_inventory_key(key: &str) -> Option<Self> {
        let (namespace, name) = key.split_once('/')?;
        (!namespace.is_empty() && !name.is_empty()).then(|| Self::new(namespace, name))
    }

    /// Parses a KV key (`<namespace>.<name>`: the first dot splits).
    pub fn from_store_key(key: &str) -> Option<Self> {
        let (namespace, name) = key.split_once('.')?;
        (!namespace.is_empty() && !name.is_empty()).then(|| Self::new(namespace, name))
    }

    /// The KV key of page `n` of something the object owns (PlacementDecision pages):
    /// `<namespace>.<name>.<n>`.
    pub fn page_store_key(&self, n: usize) -> String {
        format!("{}.{}.{n}", self.namespace, self.name)
    }

    /// The inventory-key prefix of every object in `namespace`; every namespace when empty.
    pub fn prefix(namespace: &str) -> String {
        if namespace.is_empty() {
            String::new()
        } else {
            format!("{namespace}/")
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_object_has_one_inventory_key_one_store_key_and_lies_under_its_prefix() {
        let r = ObjectRef::new("edge-1", "hello");
        assert_eq!(r.inventory_key(), "edge-1/hello");
        assert_eq!(r.store_key(), "edge-1.hello");
        assert_eq!(r.page_store_key(3), "edge-1.hello.3");
        assert_eq!(r.to_string(), "edge-1/hello");
        assert!(r.inventory_key().starts_with(&ObjectRef::prefix("edge-1")));
        // A namespace's prefix never matches a namespace that merely starts the same way.
        assert!(
            !ObjectRef::new("edge-10", "hello")
                .inventory_key()
                .starts_with(&ObjectRef::prefix("edge-1"))
        );
        assert_eq!(ObjectRef::prefix(""), "");
    }
}
