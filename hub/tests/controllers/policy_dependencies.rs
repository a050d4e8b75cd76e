//! Policy dependencies end to end: a real nats-server, the hub, a simulated agent. An enforce
//! policy that depends on policy-collection's namespace policy being Compliant waits, Pending,
//! while that policy only informs (NonCompliant), and is evaluated and enforced once the
//! namespace policy is enforced Compliant; a template with `ignorePending` counts as Compliant
//! while it waits.

use crate::common;

use common::policy::*;
use common::*;
use flotilla_api::v1::GetPolicyRequest;
use flotilla_api::work::ManifestId;
use flotilla_testkit::NatsServer;
use std::time::Duration;

const NAMESPACE_POLICY: &str =
    include_str!("../../../api/src/ocm/policy/testdata/policy-namespace.yaml");

/// Both policies bound to every cluster.
const PLACEMENT_AND_BINDING: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: all, namespace: default}
spec:
  clusterSets: [default]
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: binding-all, namespace: default}
placementRef: {name: all, kind: Placement, apiGroup: cluster.open-cluster-management.io}
subjects:
  - {name: policy-namespace, kind: Policy, apiGroup: policy.open-cluster-management.io}
  - {name: policy-app-config, kind: Policy, apiGroup: policy.open-cluster-management.io}
  - {name: policy-prod-check, kind: Policy, apiGroup: policy.open-cluster-management.io}
"#;

/// Enforces a ConfigMap in `prod` once policy-namespace (in the same namespace: no namespace
/// written) is Compliant on the cluster.
const APP_CONFIG_POLICY: &str = r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: policy-app-config}
spec:
  remediationAction: enforce
  dependencies:
    - apiVersion: policy.open-cluster-management.io/v1
      kind: Policy
      name: policy-namespace
      compliance: Compliant
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {name: app-config}
        spec:
          remediationAction: inform
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: app-config, namespace: prod}
                data: {mode: strict}
"#;

/// Informs on the namespace, waiting for the namespace policy's template, pending ignored.
const PROD_CHECK_POLICY: &str = r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: policy-prod-check}
spec:
  remediationAction: inform
  policy-templates:
    - extraDependencies:
        - apiVersion: policy.open-cluster-management.io/v1
          kind: ConfigurationPolicy
          name: policy-namespace-example
          compliance: Compliant
      ignorePending: true
      objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {name: prod-check}
        spec:
          object-templates:
            - complianceType: musthave
              objectDefinition: {apiVersion: v1, kind: Namespace, metadata: {name: prod}}
"#;

const PENDING: &str = "Dependencies were not satisfied: 1 is still pending";

fn config_map() -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "prod".into(),
        name: "app-config".into(),
    }
}

/// The history of the policy's first template on its first cluster, newest first.
async fn history(hub: &flotilla_hub::Hub, name: &str) -> Vec<String> {
    let details = api(hub)
        .await
        .get_policy_details(GetPolicyRequest {
            namespace: "default".into(),
            name: name.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    details
        .clusters
        .first()
        .and_then(|c| c.details.first())
        .map(|d| d.history.iter().map(|e| e.message.clone()).collect())
        .unwrap_or_default()
}

/// The newest message of that history.
async fn newest_message(hub: &flotilla_hub::Hub, name: &str) -> String {
    history(hub, name)
        .await
        .into_iter()
        .next()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_policy_waits_pending_for_its_dependency_and_is_enforced_once_that_is_compliant() {
    use flotilla_agent::backend::Backend;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["edge-1"]).await;
    bind_default_set(&hub).await;
    let mut api = api(&hub).await;

    apply(&hub, PLACEMENT_AND_BINDING).await;
    apply(&hub, NAMESPACE_POLICY).await;
    apply(&hub, APP_CONFIG_POLICY).await;
    apply(&hub, PROD_CHECK_POLICY).await;

    // The namespace policy informs: NonCompliant. The policy depending on it is Pending, at
    // the root too, and writes nothing.
    wait_policy(&mut api, "policy-namespace", "NonCompliant", |p| {
        compliant(p) == "NonCompliant"
    })
    .await;
    let p = wait_policy(&mut api, "policy-app-config", "Pending", |p| {
        compliant(p) == "Pending"
    })
    .await;
    assert_eq!(
        clusters_in(&p),
        [("edge-1".to_string(), "Pending".to_string())]
    );
    assert_eq!(
        newest_message(&hub, "policy-app-config").await,
        format!("Pending; {PENDING} (Policy default.policy-namespace)")
    );
    // The dependency is on another policy's template, pending ignored: Compliant meanwhile.
    wait_policy(
        &mut api,
        "policy-prod-check",
        "Compliant (pending ignored)",
        |p| compliant(p) == "Compliant",
    )
    .await;
    assert_eq!(
        newest_message(&hub, "policy-prod-check").await,
        format!(
            "Compliant; {PENDING} (ConfigurationPolicy policy-namespace-example) but \
             ignorePending is true"
        )
    );
    assert!(
        agents[0]
            .backend
            .get(&config_map())
            .await
            .unwrap()
            .is_none(),
        "a pending template is not enforced"
    );

    // Enforced, the namespace policy turns Compliant; the policy waiting for it is evaluated,
    // enforces its ConfigMap and turns Compliant without anything else changing.
    apply(
        &hub,
        &NAMESPACE_POLICY.replace(
            "spec:\n  remediationAction: inform",
            "spec:\n  remediationAction: enforce",
        ),
    )
    .await;
    wait_policy(&mut api, "policy-namespace", "Compliant", |p| {
        compliant(p) == "Compliant"
    })
    .await;
    wait_policy(&mut api, "policy-app-config", "Compliant", |p| {
        compliant(p) == "Compliant"
    })
    .await;
    let cm = agents[0]
        .backend
        .get(&config_map())
        .await
        .unwrap()
        .expect("enforced once its dependency was met");
    assert_eq!(cm["data"]["mode"], "strict");
    let events = history(&hub, "policy-app-config").await;
    assert!(
        events.iter().any(|m| m
            == "Compliant; notification - configmaps [app-config] in namespace prod was created \
                successfully"),
        "{events:#?}"
    );
    assert!(
        events.last().unwrap().starts_with("Pending; "),
        "the wait is in the history: {events:#?}"
    );
    // The ignorePending template is evaluated too, now that it may.
    let deadline = tokio::time::Instant::now() + SOON;
    while newest_message(&hub, "policy-prod-check").await
        != "Compliant; notification - namespaces [prod] found as specified"
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "policy-prod-check never evaluated: {}",
            newest_message(&hub, "policy-prod-check").await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(agents);
    hub.stop().await;
}
