//! Teams (issue 48) and governance on a real hub (a nats-server, the hub in process, simulated
//! agents, the API over gRPC): a namespace's editor reaches only the clusters of the sets bound
//! in its namespace, through a PlacementRule as through a Placement (review r1 §1).

use crate::common;

use common::tokens::*;
use common::*;
use flotilla_api::meta::{CLUSTERSET_LABEL, COND_AVAILABLE};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::policy_service_client::PolicyServiceClient;
use flotilla_api::v1::{
    ClusterNamesRequest, DeleteBindingRequest, GetClusterRequest, GetPolicyRequest,
    LabelClusterRequest, ListPoliciesRequest, ManagedCluster, ManagedClusterSet,
    ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ObjectMeta, Policy,
};
use flotilla_testkit::NatsServer;
use std::sync::Arc;
use std::time::Duration;

/// dana edits team-a-apps and holds no role on any cluster set.
const DANA: &str = "team-a-dev-token-000004";

const GRANTS: &str = "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nclusterSets:\n  \
    team-b:\n    admin: { groups: [team-b-sre] }\nnamespaces:\n  team-a-apps:\n    \
    edit: { groups: [team-a-dev] }\n";

/// A PlacementRule that selects every available cluster, an enforced policy and the binding of
/// the two, in team-a-apps.
const EVERYWHERE: &str = "\
apiVersion: apps.open-cluster-management.io/v1
kind: PlacementRule
metadata: {name: all, namespace: team-a-apps}
spec: {}
---
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: marker, namespace: team-a-apps}
spec:
  remediationAction: enforce
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {name: marker}
        spec:
          remediationAction: enforce
          severity: high
          object-templates:
            - complianceType: musthave
              objectDefinition: {apiVersion: v1, kind: Namespace, metadata: {name: team-a-was-here}}
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: all, namespace: team-a-apps}
placementRef: {name: all, kind: PlacementRule, apiGroup: apps.open-cluster-management.io}
subjects:
- {name: marker, kind: Policy, apiGroup: policy.open-cluster-management.io}
";

fn set(name: &str) -> ManagedClusterSet {
    ManagedClusterSet {
        metadata: Some(ObjectMeta {
            name: name.into(),
            ..Default::default()
        }),
        spec: Some(Default::default()),
        status: None,
    }
}

fn binding(namespace: &str, set: &str) -> ManagedClusterSetBinding {
    ManagedClusterSetBinding {
        metadata: Some(ObjectMeta {
            name: set.into(),
            namespace: namespace.into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSetBindingSpec {
            cluster_set: set.into(),
        }),
        status: None,
    }
}

/// Polls `check` every 50 ms until it gives a value, for [`SOON`].
async fn eventually<T, F: Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "never {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn available(c: &ManagedCluster) -> bool {
    c.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|k| k.r#type == COND_AVAILABLE && k.status == "True")
    })
}

/// Starts an agent for `name`, accepts its cluster as the admin, puts it into `set` and waits
/// until it is Available.
async fn join(
    admin: &mut ClusterServiceClient<Authed>,
    nats_url: &str,
    name: &str,
    set: &str,
) -> TestAgent {
    let agent = start_agent(agent_config(name, nats_url));
    let get = GetClusterRequest { name: name.into() };
    eventually(&format!("{name} registered"), || {
        let (mut admin, get) = (admin.clone(), get.clone());
        async move { admin.get_cluster(get).await.ok() }
    })
    .await;
    admin
        .accept_clusters(ClusterNamesRequest {
            names: vec![name.into()],
            key: String::new(),
        })
        .await
        .expect("accept");
    admin
        .label_cluster(LabelClusterRequest {
            name: name.into(),
            set: [(CLUSTERSET_LABEL.to_string(), set.to_string())].into(),
            remove: Vec::new(),
        })
        .await
        .expect("label");
    eventually(&format!("{name} available"), || {
        let (mut admin, get) = (admin.clone(), get.clone());
        async move {
            let c = admin.get_cluster(get).await.ok()?.into_inner();
            available(&c).then_some(())
        }
    })
    .await;
    agent
}

/// The clusters a policy's status lists (those it was delivered to that reported).
fn reported(p: &Policy) -> Vec<String> {
    p.status
        .as_ref()
        .map(|s| s.status.iter().map(|c| c.cluster_name.clone()).collect())
        .unwrap_or_default()
}

/// The clusters team-a-apps' PlacementRules decide, as `client` lists them.
async fn decided(client: &mut PolicyServiceClient<Authed>) -> Vec<String> {
    let list = client
        .list_placement_rules(ListPoliciesRequest {
            namespace: "team-a-apps".into(),
        })
        .await
        .unwrap()
        .into_inner();
    list.items
        .iter()
        .flat_map(|r| r.status.iter().flat_map(|s| s.decisions.iter()))
        .map(|d| d.cluster_name.clone())
        .collect()
}

#[tokio::test]
async fn a_namespace_editor_s_placement_rule_reaches_only_the_clusters_of_sets_bound_there() {
    let nats = NatsServer::start();
    let tokens = flotilla_hub::grpc::auth::Tokens::parse(
        "tokens.csv",
        &format!("{TOKENS}{DANA},dana,member,team-a-dev\n"),
    )
    .unwrap()
    .with_grants(Arc::new(
        flotilla_hub::grants::file::parse("grants.yaml", GRANTS.as_bytes()).unwrap(),
    ));
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(tokens);
    let hub = start_hub(config).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut admin = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let mut admin_sets = ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    for name in ["team-a", "team-b"] {
        eventually(&format!("set {name} applied"), || {
            let mut sets = admin_sets.clone();
            async move { sets.apply_cluster_set(set(name)).await.ok() }
        })
        .await;
    }
    admin_sets
        .apply_binding(binding("team-a-apps", "team-a"))
        .await
        .expect("the admin binds team-a into team-a-apps");
    let _a1 = join(&mut admin, &nats.url(), "a1", "team-a").await;
    let _b1 = join(&mut admin, &nats.url(), "b1", "team-b").await;

    // dana, an editor of team-a-apps with no set role, writes a rule that selects everything,
    // an enforced policy and their binding: all three are hers to write.
    let mut dana = PolicyServiceClient::with_interceptor(channel.clone(), Bearer(DANA));
    for doc in parse_documents(EVERYWHERE) {
        match doc.expect("the fixture parses") {
            Document::PlacementRule(r) => {
                dana.apply_placement_rule(r).await.unwrap();
            }
            Document::Policy(p) => {
                dana.apply_policy(p).await.unwrap();
            }
            Document::PlacementBinding(b) => {
                dana.apply_placement_binding(b).await.unwrap();
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    // The policy reaches a1, the only cluster of the set bound in team-a-apps ...
    let get = GetPolicyRequest {
        namespace: "team-a-apps".into(),
        name: "marker".into(),
        ..Default::default()
    };
    eventually("reported by a1", || {
        let (mut dana, get) = (dana.clone(), get.clone());
        async move {
            let p = dana.get_policy(get).await.ok()?.into_inner();
            (reported(&p) == ["a1"]).then_some(())
        }
    })
    .await;
    // ... and the rule decides a1 alone: never b1, team-b's cluster.
    assert_eq!(decided(&mut dana).await, ["a1"]);
    let mut admin_policies = PolicyServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let p = admin_policies
        .get_policy(get.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reported(&p), ["a1"], "the admin sees only a1 report too");

    // The binding goes: the rule decides nothing and the policy leaves a1.
    admin_sets
        .delete_binding(DeleteBindingRequest {
            namespace: "team-a-apps".into(),
            name: "team-a".into(),
        })
        .await
        .unwrap();
    assert!(decided(&mut dana).await.is_empty());
    eventually("the policy left a1", || {
        let (mut admin, get) = (admin_policies.clone(), get.clone());
        async move {
            let p = admin.get_policy(get).await.ok()?.into_inner();
            reported(&p).is_empty().then_some(())
        }
    })
    .await;
    hub.stop().await;
}
