//! The taints the hub maintains on every ManagedCluster ([`TAINT_UNAVAILABLE`],
//! [`TAINT_UNREACHABLE`]) and how a ManagedCluster document that lists them is read.
//!
//! OCM's API accepts a document listing them (`kubectl get managedcluster -o yaml` prints them,
//! so a document saved from a live cluster does) and its hub then sets and clears them from the
//! lease whatever the document said. Flotilla does the same and says so: each one is dropped
//! from the document with a warning naming its field path. An explicit edit (`flotilla taint`)
//! of one is still refused: that is a request to change a field only the hub owns.

use crate::meta::{TAINT_UNAVAILABLE, TAINT_UNREACHABLE};
use crate::v1::Taint;

/// Whether `key` names one of the taints the hub maintains from the lease.
pub fn is_hub_taint(key: &str) -> bool {
    key == TAINT_UNAVAILABLE || key == TAINT_UNREACHABLE
}

/// A ManagedCluster document's `spec.taints` split into the admin's taints (what the document
/// applies, in order) and one warning per hub taint it listed
/// (`spec.taints[1]: cluster.open-cluster-management.io/unreachable is maintained by the hub;
/// ignored (the hub sets and clears it from the lease)`).
pub fn split_hub_taints(taints: &[Taint]) -> (Vec<Taint>, Vec<String>) {
    let mut admin = Vec::with_capacity(taints.len());
    let mut warnings = Vec::new();
    for (i, t) in taints.iter().enumerate() {
        if is_hub_taint(&t.key) {
            warnings.push(format!(
                "spec.taints[{i}]: {} is maintained by the hub; ignored (the hub sets and clears \
                 it from the lease)",
                t.key
            ));
        } else {
            admin.push(t.clone());
        }
    }
    (admin, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str) -> Taint {
        Taint {
            key: key.into(),
            value: String::new(),
            effect: "NoSelect".into(),
            time_added: None,
        }
    }

    #[test]
    fn hub_taints_are_dropped_with_a_warning_naming_their_index() {
        let (admin, warnings) = split_hub_taints(&[
            taint("gpu"),
            taint(TAINT_UNREACHABLE),
            taint("maintenance"),
            taint(TAINT_UNAVAILABLE),
        ]);
        let keys: Vec<_> = admin.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(
            keys,
            ["gpu", "maintenance"],
            "admin taints keep their order"
        );
        assert_eq!(warnings.len(), 2);
        assert_eq!(
            warnings[0],
            "spec.taints[1]: cluster.open-cluster-management.io/unreachable is maintained by the \
             hub; ignored (the hub sets and clears it from the lease)"
        );
        assert!(
            warnings[1]
                .starts_with("spec.taints[3]: cluster.open-cluster-management.io/unavailable"),
            "{}",
            warnings[1]
        );
    }

    #[test]
    fn a_document_without_hub_taints_has_no_warning() {
        let (admin, warnings) = split_hub_taints(&[taint("gpu")]);
        assert_eq!(admin.len(), 1);
        assert!(warnings.is_empty());
        assert!(!is_hub_taint("gpu"));
        assert!(is_hub_taint(TAINT_UNAVAILABLE));
    }
}
