//! Hub templates on the Kubernetes backend: the hub resolves a policy's hub templates for the
//! cluster (a hub ConfigMap value, the cluster's name, a hub Secret value sealed to the agent,
//! as stored: base64)
//! and the agent with `KubeBackend` enforces the result through the testkit's API server (or a
//! real cluster); a changed hub ConfigMap is re-enforced within seconds.

use crate::common;
use crate::kube_fixture;

use common::policy::*;
use kube_fixture::*;
use serde_json::json;
use std::time::Duration;

const POLICY: &str = r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: site-values, namespace: default}
spec:
  remediationAction: enforce
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {name: site-values}
        spec:
          remediationAction: enforce
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: NAME, namespace: default}
                data:
                  vlan: '{{hub fromConfigMap "" "site" (printf "%s-vlan" .ManagedClusterName) hub}}'
                  cluster: '{{hub .ManagedClusterName hub}}'
                  password: '{{hub fromSecret "" "creds" "password" hub}}'
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: all, namespace: default}
spec:
  clusterSets: [default]
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: binding-site-values, namespace: default}
placementRef: {name: all, kind: Placement, apiGroup: cluster.open-cluster-management.io}
subjects:
  - {name: site-values, kind: Policy, apiGroup: policy.open-cluster-management.io}
"#;

fn site(vlan: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: site, namespace: default}}\n\
         data: {{edge-1-vlan: '{vlan}'}}\n"
    )
}

#[tokio::test]
async fn hub_templates_are_enforced_through_the_kubernetes_api_and_follow_their_input() {
    let s = setup().await;
    bind_default_set(&s.hub).await;
    let name = unique("site-values");
    apply(&s.hub, &site("3620")).await;
    apply(
        &s.hub,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: default}\n\
         stringData: {password: hunter2}\n",
    )
    .await;
    apply(&s.hub, &POLICY.replace("NAME", &name)).await;
    let mut policies = api(&s.hub).await;
    wait_policy(&mut policies, "site-values", "compliant", |p| {
        compliant(p) == "Compliant"
    })
    .await;
    let object = config_map("default", &name);
    let created = s.cluster.get(&object).await.expect("created");
    assert_eq!(
        created["data"],
        json!({"vlan": "3620", "cluster": "edge-1", "password": "aHVudGVyMg=="})
    );
    // The value changed on the hub: the cluster's object follows within seconds.
    let changed = tokio::time::Instant::now();
    apply(&s.hub, &site("3700")).await;
    loop {
        let o = s.cluster.get(&object).await.expect("still there");
        if o["data"]["vlan"] == "3700" {
            break;
        }
        assert!(
            changed.elapsed() < Duration::from_secs(5),
            "not re-enforced: {o}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.cluster.remove(&object).await;
    drop(s.agent);
}
