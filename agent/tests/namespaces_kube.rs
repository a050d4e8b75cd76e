//! Managed namespaces on the Kubernetes backend, against the testkit's Kubernetes API server:
//! real Namespace objects with OCM's hub label, applied server-side so other managers' labels
//! stay, and kept (relabelled "false") when the hub stops managing them.

use flotilla_agent::backend::kube::KubeBackend;
use flotilla_agent::backend::{Backend, Strategy};
use flotilla_agent::namespaces::{FIELD_MANAGER, ManagedNamespaces};
use flotilla_api::meta::{COND_NAMESPACE_AVAILABLE, condition_status};
use flotilla_api::v1::ClusterSetManagedNamespaceConfig;
use flotilla_api::work::manifest_id;
use flotilla_testkit::kube::FakeKube;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn entry(set: &str, name: &str) -> ClusterSetManagedNamespaceConfig {
    ClusterSetManagedNamespaceConfig {
        name: name.into(),
        cluster_set: set.into(),
        conditions: Vec::new(),
    }
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

async fn get(kube: &KubeBackend, name: &str) -> Option<Value> {
    kube.get(&manifest_id(&namespace(name)).unwrap())
        .await
        .expect("get namespace")
}

#[tokio::test]
async fn kubernetes_namespaces_get_the_hub_label_and_are_kept_when_unmanaged() {
    let fake = FakeKube::start().await;
    let kubeconfig = fake.kubeconfig();
    let connect = KubeBackend::connect(Some(&kubeconfig));
    let kube = Arc::new(
        tokio::time::timeout(Duration::from_secs(20), connect)
            .await
            .expect("connected in time")
            .expect("connect to the fake API server"),
    );
    // A namespace that exists already, with a label of its own owner.
    let team = json!({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "app-frontend", "labels": {"team": "web"}}});
    kube.apply(
        &manifest_id(&team).unwrap(),
        &team,
        &Strategy::ServerSideApply {
            force: false,
            field_manager: "platform-team".into(),
        },
    )
    .await
    .expect("pre-existing namespace");

    let managed = ManagedNamespaces::new(kube.clone(), "0123abcd");
    let label = managed.label().to_string();
    assert_eq!(label, "clusterset.open-cluster-management.io/0123abcd");
    let wanted = [
        entry("app-team", "app-backend"),
        entry("app-team", "app-frontend"),
    ];
    let status = tokio::time::timeout(
        Duration::from_secs(20),
        managed.reconcile(&wanted, &[], true),
    )
    .await
    .expect("reconciled in time");
    assert!(!status.unmanage_pending);
    let status = status.namespaces;
    for e in &status {
        assert_eq!(
            condition_status(&e.conditions, COND_NAMESPACE_AVAILABLE),
            Some("True"),
            "{e:?}"
        );
    }
    let frontend = get(&kube, "app-frontend")
        .await
        .expect("app-frontend exists");
    assert_eq!(frontend["metadata"]["labels"][label.as_str()], "true");
    assert_eq!(
        frontend["metadata"]["labels"]["team"], "web",
        "another manager's label stays"
    );
    let managers: Vec<&str> = frontend["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["manager"].as_str())
        .collect();
    assert!(managers.contains(&FIELD_MANAGER), "{managers:?}");
    let backend = get(&kube, "app-backend")
        .await
        .expect("app-backend created");
    assert_eq!(backend["metadata"]["labels"][label.as_str()], "true");

    // The hub drops app-backend: still there, labelled "false".
    tokio::time::timeout(
        Duration::from_secs(20),
        managed.reconcile(&wanted[1..], &status, true),
    )
    .await
    .expect("reconciled in time");
    let backend = get(&kube, "app-backend").await.expect("app-backend kept");
    assert_eq!(backend["metadata"]["labels"][label.as_str()], "false");
    let frontend = get(&kube, "app-frontend").await.unwrap();
    assert_eq!(frontend["metadata"]["labels"][label.as_str()], "true");
}
