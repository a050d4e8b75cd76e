//! Listing one API group's kind on the Kubernetes backend (what a ClusterImportPolicy's object
//! source asks through the proxy): two CRDs of the same kind and plural in different groups,
//! against the testkit's Kubernetes API server, are never confused.

use flotilla_agent::backend::kube::KubeBackend;
use flotilla_agent::backend::{Backend, Strategy};
use flotilla_api::work::manifest_id;
use flotilla_testkit::kube::FakeKube;
use serde_json::{Value, json};
use std::time::Duration;

fn crd(group: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("clusters.{group}")},
        "spec": {"group": group,
            "names": {"kind": "Cluster", "plural": "clusters", "singular": "cluster",
                      "listKind": "ClusterList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

fn cluster(group: &str, name: &str) -> Value {
    json!({"apiVersion": format!("{group}/v1beta1"), "kind": "Cluster",
        "metadata": {"name": name, "namespace": "default"}})
}

fn names(listed: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = listed
        .iter()
        .map(|o| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn kubernetes_list_in_group_never_confuses_two_groups_kinds_of_one_name() {
    let fake = FakeKube::start().await;
    let kubeconfig = fake.kubeconfig();
    let kube = tokio::time::timeout(
        Duration::from_secs(20),
        KubeBackend::connect(Some(&kubeconfig)),
    )
    .await
    .expect("connected in time")
    .expect("connect to the fake API server");
    for (group, name) in [("example.com", "other"), ("cluster.x-k8s.io", "capi-1")] {
        let c = crd(group);
        kube.apply(&manifest_id(&c).unwrap(), &c, &Strategy::Update)
            .await
            .expect("the CRD is created");
        let o = cluster(group, name);
        kube.apply(&manifest_id(&o).unwrap(), &o, &Strategy::Update)
            .await
            .expect("a Cluster is created");
    }
    let capi = kube
        .list_in_group("cluster.x-k8s.io", "clusters", None)
        .await
        .expect("list CAPI clusters");
    assert_eq!(names(&capi), ["capi-1"]);
    assert_eq!(capi[0]["apiVersion"], "cluster.x-k8s.io/v1beta1");
    let other = kube
        .list_in_group("example.com", "Cluster", Some("default"))
        .await
        .expect("list the other group's clusters");
    assert_eq!(names(&other), ["other"]);
    let none = kube
        .list_in_group("nowhere.io", "clusters", None)
        .await
        .expect_err("no such group");
    assert!(none.to_string().contains("nowhere.io"), "{none}");
    // The core group is a group too: Namespaces, not a CRD's.
    let core = kube
        .list_in_group("", "namespaces", None)
        .await
        .expect("list namespaces");
    assert!(names(&core).contains(&"default".to_string()), "{core:?}");
}
