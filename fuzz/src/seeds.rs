//! Valid inputs for each target: what mutation starts from.

use bytes::Bytes;
use flotilla_api::v1;
use flotilla_bus::envelope::{DEFAULT_MAX_EVENT_BYTES, Event, EventType, types};
use prost::Message;

/// OCM's hello-work-demo as the README ships it.
pub const HELLO_WORK: &str = include_str!("../../examples/hello-work.yaml");

/// Multi-document OCM YAML of every kind `flotilla apply -f` takes.
pub const DOCUMENTS: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: edge}
spec: {clusterSelector: {selectorType: LabelSelector, labelSelector: {matchLabels: {env: prod}}}}
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: edge, namespace: apps}
spec: {clusterSet: edge}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: canary, namespace: apps}
spec:
  numberOfClusters: 3
  clusterSets: [edge]
  predicates:
    - requiredClusterSelector:
        labelSelector: {matchExpressions: [{key: region, operator: In, values: [eu, us]}]}
        claimSelector: {matchExpressions: [{key: platform.open-cluster-management.io, operator: Exists}]}
  prioritizerPolicy:
    mode: Additive
    configurations:
      - scoreCoordinate: {builtIn: ResourceAllocatableCPU}
        weight: 2
  tolerations: [{key: cluster.open-cluster-management.io/unreachable, operator: Exists, tolerationSeconds: 300}]
  decisionStrategy: {groupStrategy: {clustersPerDecisionGroup: "25%"}}
---
apiVersion: cluster.open-cluster-management.io/v1alpha1
kind: AddOnPlacementScore
metadata: {name: usage, namespace: edge-1}
status: {scores: [{name: cpu, value: 40}]}
"#;

fn event(ty: EventType, cluster: &str, payload: &impl Message) -> Vec<u8> {
    Event::new(ty, "flotilla-fuzz", cluster, payload)
        .with_sequence(1)
        .encode(DEFAULT_MAX_EVENT_BYTES)
        .map(|b: Bytes| b.to_vec())
        .unwrap_or_default()
}

/// The hello-work-demo as the protobuf the API takes.
pub fn hello_work() -> v1::ManifestWork {
    match flotilla_api::ocm::parse_documents(&HELLO_WORK.replace("CLUSTER", "edge-1")).remove(0) {
        Ok(flotilla_api::ocm::Document::Work(w)) => w,
        _ => v1::ManifestWork::default(),
    }
}

/// Encoded CloudEvents of every type that crosses NATS.
pub fn events() -> Vec<Vec<u8>> {
    let registration = v1::RegistrationRequest {
        cluster_name: "edge-1".into(),
        agent_public_key: "UAXYZ".into(),
        labels: [("region".to_string(), "eu".to_string())].into(),
        claims: vec![v1::ClusterClaim {
            name: "platform.open-cluster-management.io".into(),
            value: "k3s".into(),
        }],
        ..Default::default()
    };
    let status = v1::ClusterStatusReport {
        cluster_name: "edge-1".into(),
        healthy: true,
        kubernetes_version: "v1.30.2+k3s1".into(),
        capacity: [("cpu".to_string(), "8".to_string())].into(),
        ..Default::default()
    };
    let score = v1::AddOnPlacementScoreReport {
        cluster_name: "edge-1".into(),
        resource_name: "resource-usage-score".into(),
        scores: vec![v1::AddOnPlacementScoreItem {
            name: "cpuAvailable".into(),
            value: 40,
        }],
        valid_until: None,
    };
    let work_status = v1::WorkStatusReport {
        cluster_name: "edge-1".into(),
        work_name: "hello-work-demo".into(),
        observed_generation: 1,
        ..Default::default()
    };
    let resync = v1::SpecResyncRequest {
        cluster_name: "edge-1".into(),
        versions: [("id".to_string(), 3)].into(),
        digest: String::new(),
        takes_specs: true,
        takes_busy: true,
        uids: [(
            "id".to_string(),
            "6f1c2a4e-0000-4000-8000-000000000001".to_string(),
        )]
        .into(),
    };
    vec![
        event(types::registration_request(), "edge-1", &registration),
        event(
            types::lease_renewal(),
            "edge-1",
            &v1::LeaseRenewal::default(),
        ),
        event(types::cluster_status(), "edge-1", &status),
        event(flotilla_bus::scores::report_type(), "edge-1", &score),
        event(flotilla_bus::works::status_type(), "edge-1", &work_status),
        event(
            flotilla_bus::works::resync_request_type(),
            "edge-1",
            &resync,
        ),
        event(
            flotilla_bus::works::spec_type(flotilla_bus::envelope::Action::CreateRequest),
            "edge-1",
            &hello_work(),
        ),
        event(
            types::proxy_request(),
            "edge-1",
            &v1::ProxyRequest {
                cluster_name: "edge-1".into(),
                kind: "deployments".into(),
                ..Default::default()
            },
        ),
    ]
}

/// Label selector strings.
pub const SELECTORS: &[&str] = &[
    "env=prod,tier!=db,gpu,!legacy,region in (eu, us),zone notin (z1)",
    "example.com/tier==gold",
];

/// Claim selector strings (claim values are freer than label values).
pub const CLAIM_SELECTORS: &[&str] = &[
    "kubeversion.open-cluster-management.io=v1.28.3+k3s1",
    "platform.open-cluster-management.io in (k3s, MicroShift)",
];

/// Feedback rule paths in the kubectl JSONPath dialect.
pub const JSONPATHS: &[&str] = &[
    r#".status.conditions[?(@.type=="Available")].status"#,
    "{.spec.template.spec.containers[0].image}",
    "$..name",
    ".metadata.labels['app.kubernetes.io/name']",
    ".items[-1:]",
    ".items[0:4:2].metadata.name",
    r"{.metadata.labels.kubernetes\.io/hostname}",
    r#".status.conditions[?(@.lastTransitionTime>="2024")].reason"#,
];

/// The object JSONPath seeds are evaluated on: a Deployment with status.
pub fn deployment_json() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app.kubernetes.io/name": "web"}},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
        "status": {
            "replicas": 3,
            "readyReplicas": 2,
            "conditions": [
                {"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
            ]
        }
    })
}

/// Kubernetes quantities.
pub const QUANTITIES: &[&str] = &[
    "8",
    "500m",
    "32Gi",
    "1.5e3",
    "0.25Ki",
    "12345678901234567890",
];

/// Manifests (the `manifest-id` target): namespaced and cluster-scoped, escapes, extra fields.
pub const MANIFESTS: &[&str] = &[
    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"x"},"data":{"k":"v"}}"#,
    r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}}}"#,
    r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}"#,
    r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r\u0031"},"rules":[]}"#,
];
