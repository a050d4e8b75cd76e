//! Managed namespaces (ManagedClusterSet `spec.managedNamespaces`), the agent's side, as OCM's
//! registration agent (`managed_namespace_reconcile.go`) does it:
//!
//! - every namespace the hub lists is applied (server-side apply, field manager
//!   [`FIELD_MANAGER`]) with the label `clusterset.open-cluster-management.io/<hub hash>: "true"`,
//!   and its entry gets `NamespaceAvailable` (`NamespaceApplied`, or `NamespaceApplyFailed`
//!   with the error);
//! - a namespace carrying that label with `"true"` that the hub no longer lists is **kept** and
//!   relabelled `"false"` (no longer managed): OCM never deletes a managed namespace, which may
//!   hold workloads of other owners.
//!
//! Only the label is owned, so labels and annotations of other managers are left alone.

use crate::backend::{Backend, BackendError, Strategy};
use flotilla_api::clusterset::hub_namespace_label;
use flotilla_api::meta::{
    self, COND_NAMESPACE_AVAILABLE, REASON_NAMESPACE_APPLIED, REASON_NAMESPACE_APPLY_FAILED, status,
};
use flotilla_api::v1::ClusterSetManagedNamespaceConfig;
use flotilla_api::work::ManifestId;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The field manager of the agent's namespace applies.
pub const FIELD_MANAGER: &str = "flotilla-registration-agent";

/// The agent's hub hash: hex of a hash of the hub address it was given (its NATS URL), as OCM's
/// agent hashes its hub's API server address. Agents of one hub share it; an agent attached to
/// two hubs would label their namespaces apart.
pub fn hub_hash(nats_url: &str) -> String {
    flotilla_bus::ids::status_hash(nats_url.as_bytes())
}

/// What a reconciliation did.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciled {
    /// The wanted entries, each with its `NamespaceAvailable` condition.
    pub namespaces: Vec<ClusterSetManagedNamespaceConfig>,
    /// Relabelling the namespaces no longer managed failed (the cluster could not be listed or
    /// written): the caller asks again.
    pub unmanage_pending: bool,
}

/// Applies the managed namespaces on the local cluster.
pub struct ManagedNamespaces {
    backend: Arc<dyn Backend>,
    label: String,
}

fn namespace_id(name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "Namespace".into(),
        namespace: String::new(),
        name: name.to_string(),
    }
}

impl ManagedNamespaces {
    /// Namespaces labelled for the hub with this hash.
    pub fn new(backend: Arc<dyn Backend>, hub_hash: &str) -> Self {
        Self {
            backend,
            label: hub_namespace_label(hub_hash),
        }
    }

    /// The label key put on managed namespaces.
    pub fn label(&self) -> &str {
        &self.label
    }

    async fn label_namespace(&self, name: &str, value: &str) -> Result<(), BackendError> {
        let object = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {self.label.as_str(): value}},
        });
        let strategy = Strategy::ServerSideApply {
            force: true,
            field_manager: FIELD_MANAGER.into(),
        };
        self.backend
            .apply(&namespace_id(name), &object, &strategy)
            .await
            .map(|_| ())
    }

    /// Applies the label unless the namespace already carries it with this value (the periodic
    /// repair then costs one read per namespace).
    async fn ensure_label(&self, name: &str, value: &str) -> Result<(), BackendError> {
        if let Some(ns) = self.backend.get(&namespace_id(name)).await?
            && ns["metadata"]["labels"][self.label.as_str()] == value
        {
            return Ok(());
        }
        self.label_namespace(name, value).await
    }

    /// Applies every namespace of `wanted` and, with `unmanage`, marks the ones this hub managed
    /// before and no longer lists (a list of every namespace: done when the hub's list changes,
    /// not at every periodic repair). Returns `wanted` with each entry's `NamespaceAvailable`
    /// condition; the conditions of `previous` (the last result) keep their transition times.
    pub async fn reconcile(
        &self,
        wanted: &[ClusterSetManagedNamespaceConfig],
        previous: &[ClusterSetManagedNamespaceConfig],
        unmanage: bool,
    ) -> Reconciled {
        let mut out = Vec::with_capacity(wanted.len());
        let mut applied: Vec<(String, Result<(), String>)> = Vec::new();
        for entry in wanted {
            // A namespace listed by two sets is applied once.
            let result = match applied.iter().find(|(n, _)| *n == entry.name) {
                Some((_, r)) => r.clone(),
                None => {
                    let r = self
                        .ensure_label(&entry.name, "true")
                        .await
                        .map_err(|e| e.to_string());
                    if let Err(e) = &r {
                        tracing::warn!(namespace = %entry.name, error = %e, "managed namespace not applied");
                    }
                    applied.push((entry.name.clone(), r.clone()));
                    r
                }
            };
            let mut conditions = previous
                .iter()
                .find(|p| p.cluster_set == entry.cluster_set && p.name == entry.name)
                .map(|p| p.conditions.clone())
                .unwrap_or_default();
            match result {
                Ok(()) => meta::set_condition(
                    &mut conditions,
                    COND_NAMESPACE_AVAILABLE,
                    status::TRUE,
                    REASON_NAMESPACE_APPLIED,
                    "Namespace successfully applied and managed",
                ),
                Err(e) => meta::set_condition(
                    &mut conditions,
                    COND_NAMESPACE_AVAILABLE,
                    status::FALSE,
                    REASON_NAMESPACE_APPLY_FAILED,
                    &format!("Failed to apply namespace: {e}"),
                ),
            };
            out.push(ClusterSetManagedNamespaceConfig {
                name: entry.name.clone(),
                cluster_set: entry.cluster_set.clone(),
                conditions,
            });
        }
        let keep: BTreeSet<&str> = wanted.iter().map(|n| n.name.as_str()).collect();
        let mut unmanage_pending = false;
        if unmanage && let Err(e) = self.unmanage_all_but(&keep).await {
            tracing::warn!(error = %e, "previously managed namespaces not relabelled; retrying later");
            unmanage_pending = true;
        }
        Reconciled {
            namespaces: out,
            unmanage_pending,
        }
    }

    /// Relabels `"false"` every namespace labelled `"true"` for this hub that is not in `keep`.
    async fn unmanage_all_but(&self, keep: &BTreeSet<&str>) -> Result<(), BackendError> {
        let namespaces = self.backend.list("Namespace", None).await?;
        for ns in namespaces {
            let name = ns["metadata"]["name"].as_str().unwrap_or_default();
            let managed = ns["metadata"]["labels"][self.label.as_str()] == "true";
            if managed && !keep.contains(name) {
                self.label_namespace(name, "false").await?;
                tracing::info!(namespace = %name, "namespace no longer managed by the hub");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::SimBackend;

    fn entry(set: &str, name: &str) -> ClusterSetManagedNamespaceConfig {
        ClusterSetManagedNamespaceConfig {
            name: name.into(),
            cluster_set: set.into(),
            conditions: Vec::new(),
        }
    }

    async fn label_of(sim: &SimBackend, name: &str, key: &str) -> Option<String> {
        let ns = sim.get(&namespace_id(name)).await.unwrap()?;
        Some(ns["metadata"]["labels"][key].as_str()?.to_string())
    }

    #[tokio::test]
    async fn namespaces_are_created_labelled_and_unmanaged_but_kept_when_dropped() {
        let sim = Arc::new(SimBackend::new(4, 8, "v1.30.0"));
        let ns = ManagedNamespaces::new(sim.clone(), "hub-1");
        let key = "clusterset.open-cluster-management.io/hub-1";
        assert_eq!(ns.label(), key);
        // A namespace another tool labelled keeps its label.
        sim.apply(
            &namespace_id("app-a"),
            &json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "app-a", "labels": {"team": "a"}}}),
            &Strategy::Update,
        )
        .await
        .unwrap();

        let wanted = [
            entry("s1", "app-a"),
            entry("s1", "app-b"),
            entry("s2", "app-a"),
        ];
        let first = ns.reconcile(&wanted, &[], true).await.namespaces;
        assert_eq!(first.len(), 3);
        for e in &first {
            let c = meta::find_condition(&e.conditions, COND_NAMESPACE_AVAILABLE).unwrap();
            assert_eq!(
                (c.status.as_str(), c.reason.as_str()),
                ("True", "NamespaceApplied")
            );
        }
        assert_eq!(label_of(&sim, "app-a", key).await.as_deref(), Some("true"));
        assert_eq!(label_of(&sim, "app-a", "team").await.as_deref(), Some("a"));
        assert_eq!(label_of(&sim, "app-b", key).await.as_deref(), Some("true"));

        // The set drops app-b: it stays on the cluster, labelled "false".
        let again = ns.reconcile(&wanted[..1], &first, true).await.namespaces;
        assert_eq!(again.len(), 1);
        assert_eq!(
            again[0].conditions[0].last_transition_time,
            first[0].conditions[0].last_transition_time,
            "an unchanged condition keeps its transition time"
        );
        assert_eq!(label_of(&sim, "app-b", key).await.as_deref(), Some("false"));
        assert_eq!(label_of(&sim, "app-a", key).await.as_deref(), Some("true"));

        // Nothing wanted: every namespace of this hub is unmanaged, none deleted.
        assert!(ns.reconcile(&[], &again, true).await.namespaces.is_empty());
        assert_eq!(label_of(&sim, "app-a", key).await.as_deref(), Some("false"));
        assert!(sim.get(&namespace_id("app-b")).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_namespace_that_cannot_be_applied_is_reported_false_with_the_error() {
        let sim = Arc::new(SimBackend::new(4, 8, "v1.30.0"));
        sim.inject_apply_error("Namespace", "locked", Some("admission webhook said no"));
        let ns = ManagedNamespaces::new(sim.clone(), "h");
        let got = ns
            .reconcile(&[entry("s", "locked")], &[], false)
            .await
            .namespaces;
        let c = meta::find_condition(&got[0].conditions, COND_NAMESPACE_AVAILABLE).unwrap();
        assert_eq!(c.status, "False");
        assert_eq!(c.reason, "NamespaceApplyFailed");
        assert!(
            c.message.contains("admission webhook said no"),
            "{}",
            c.message
        );
    }
}
