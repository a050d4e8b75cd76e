//! ManifestWork executors on the agent's Kubernetes backend: SubjectAccessReviews before each
//! manifest, OCM's escalation check for Roles and bindings (same fixture as `kube.rs`).

use crate::common;
use crate::kube_fixture;

use common::work::{cond, wait_work, work};
use kube_fixture::*;
use serde_json::{Value, json};
use std::time::Duration;

/// The manifest condition `ty` of manifest `ordinal`: (status, reason, message).
fn manifest_condition(
    w: &flotilla_api::v1::ManifestWork,
    ordinal: usize,
    ty: &str,
) -> Option<(String, String, String)> {
    common::work::manifests(w)
        .get(ordinal)?
        .conditions
        .iter()
        .find(|c| c.r#type == ty)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

impl Cluster {
    /// Lets ServiceAccount `ns/sa` do everything with `resources` of `group` in `ns`: a rule on
    /// the fake, a Role and RoleBinding on a real cluster.
    async fn grant(&self, ns: &str, sa: &str, group: &str, resources: &[&str]) {
        self.grant_verbs(ns, sa, group, resources, &["*"]).await;
    }

    /// Lets ServiceAccount `ns/sa` do `verbs` with `resources` of `group` in `ns`.
    async fn grant_verbs(
        &self,
        ns: &str,
        sa: &str,
        group: &str,
        resources: &[&str],
        verbs: &[&str],
    ) {
        match self {
            Self::Fake(fake) => fake.allow(
                flotilla_testkit::kube::AccessRule::service_account(ns, sa)
                    .verbs(verbs)
                    .resources(group, resources)
                    .in_namespace(ns),
            ),
            Self::Real(_) => {
                let name = format!("{sa}-{}", resources.join("-"));
                self.take_fields(
                    &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                        "metadata": {"name": name, "namespace": ns},
                        "rules": [{"apiGroups": [group], "resources": resources, "verbs": verbs}]}),
                    "flotilla-test",
                )
                .await;
                self.take_fields(
                    &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                        "metadata": {"name": name, "namespace": ns},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]}),
                    "flotilla-test",
                )
                .await;
            }
        }
    }
}

/// OCM's executor on Kubernetes: before applying each manifest the agent asks a
/// SubjectAccessReview whether the work's ServiceAccount may; a denied manifest is not created
/// and says why in its Applied condition while the others apply; allowed answers are cached, and
/// a right granted later takes effect without a new generation.
#[tokio::test]
async fn an_executor_applies_only_what_its_service_account_may() {
    let Setup {
        nats: _nats,
        cluster,
        hub,
        agent,
        mut works,
    } = setup().await;
    let ns = unique("exec");
    cluster
        .take_fields(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            "flotilla-test",
        )
        .await;
    cluster.grant(&ns, "deployer", "", &["configmaps"]).await;
    let doc = format!(
        r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {{namespace: edge-1, name: executed}}
spec:
  executor:
    subject:
      type: ServiceAccount
      serviceAccount: {{namespace: {ns}, name: deployer}}
  workload:
    manifests:
      - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings, namespace: {ns}}}, data: {{a: b}}}}
      - apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: web, namespace: {ns}}}
        spec:
          replicas: 1
          selector: {{matchLabels: {{app: web}}}}
          template:
            metadata: {{labels: {{app: web}}}}
            spec: {{containers: [{{name: web, image: nginx:1.27}}]}}
"#
    );
    works.apply_work(work(&doc)).await.unwrap();
    let w = wait_work(&mut works, "edge-1", "executed", "half applied", |w| {
        manifest_condition(w, 0, "Applied").is_some_and(|c| c.0 == "True")
            && manifest_condition(w, 1, "Applied").is_some_and(|c| c.0 == "False")
    })
    .await;
    let (_, reason, message) = manifest_condition(&w, 1, "Applied").unwrap();
    assert_eq!(reason, "AppliedManifestFailed");
    let expected = format!(
        "the executor system:serviceaccount:{ns}:deployer lacks permission to create deployments.apps \"web\" in namespace {ns}"
    );
    assert!(message.contains(&expected), "{message}");
    assert_eq!(cond(&w, "Applied").as_deref(), Some("False"));
    let settings = config_map(&ns, "settings");
    assert_eq!(cluster.get(&settings).await.unwrap()["data"]["a"], "b");
    assert!(
        cluster.get(&deployment(&ns)).await.is_none(),
        "a denied manifest was applied"
    );

    if let Some(fake) = cluster.fake() {
        // The reviews name the ServiceAccount as Kubernetes authenticates it and the verbs OCM
        // checks; the allowed ones are asked once, though the failing work re-applies on every
        // tick (200 ms here).
        let about = |resource: &str| -> Vec<Value> {
            fake.reviews()
                .into_iter()
                .filter(|r| r["spec"]["resourceAttributes"]["resource"] == resource)
                .collect()
        };
        let first = &about("configmaps")[0]["spec"];
        assert_eq!(
            first["user"],
            format!("system:serviceaccount:{ns}:deployer")
        );
        assert!(
            first["groups"]
                .as_array()
                .unwrap()
                .contains(&json!(format!("system:serviceaccounts:{ns}"))),
            "{first}"
        );
        assert_eq!(first["resourceAttributes"]["namespace"], ns.as_str());
        assert_eq!(first["resourceAttributes"]["name"], "settings");
        let before = about("deployments").len();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            about("deployments").len() > before,
            "the denial was not asked again"
        );
        let mut verbs: Vec<String> = about("configmaps")
            .iter()
            .map(|r| {
                r["spec"]["resourceAttributes"]["verb"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        verbs.sort();
        assert_eq!(verbs, ["create", "delete", "get", "patch", "update"]);
    }

    // Granted later: the next apply creates the Deployment, with no new generation.
    cluster
        .grant(&ns, "deployer", "apps", &["deployments"])
        .await;
    wait_applied(&mut works, "executed").await;
    assert!(cluster.get(&deployment(&ns)).await.is_some());
    delete_work_and_wait(&mut works, "executed").await;
    assert!(cluster.get(&settings).await.is_none());
    agent.stop().await;
    hub.stop().await;
}

/// OCM's escalation check: a SubjectAccessReview cannot tell whether a Role or binding grants
/// more than its writer holds, so the agent also creates it as a dry run impersonating the
/// executor; a binding to a role the executor does not hold is refused though the executor may
/// create bindings, while a Role granting only what it holds is applied.
#[tokio::test]
async fn an_executor_cannot_grant_itself_rights_through_roles_and_bindings() {
    let Setup {
        nats: _nats,
        cluster,
        hub,
        agent,
        mut works,
    } = setup().await;
    let ns = unique("rbac");
    cluster
        .take_fields(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            "flotilla-test",
        )
        .await;
    let everything = unique("everything");
    cluster
        .take_fields(
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": everything},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
            "flotilla-test",
        )
        .await;
    cluster.grant(&ns, "deployer", "", &["configmaps"]).await;
    cluster
        .grant_verbs(
            &ns,
            "deployer",
            "rbac.authorization.k8s.io",
            &["roles", "rolebindings"],
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        )
        .await;
    let doc = format!(
        r#"apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {{namespace: edge-1, name: rbac}}
spec:
  executor:
    subject:
      type: ServiceAccount
      serviceAccount: {{namespace: {ns}, name: deployer}}
  workload:
    manifests:
      - apiVersion: rbac.authorization.k8s.io/v1
        kind: Role
        metadata: {{name: reader, namespace: {ns}}}
        rules: [{{apiGroups: [""], resources: [configmaps], verbs: [get]}}]
      - apiVersion: rbac.authorization.k8s.io/v1
        kind: RoleBinding
        metadata: {{name: takeover, namespace: {ns}}}
        roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {everything}}}
        subjects: [{{kind: ServiceAccount, name: deployer, namespace: {ns}}}]
"#
    );
    works.apply_work(work(&doc)).await.unwrap();
    let w = wait_work(&mut works, "edge-1", "rbac", "judged", |w| {
        manifest_condition(w, 0, "Applied").is_some_and(|c| c.0 == "True")
            && manifest_condition(w, 1, "Applied").is_some_and(|c| c.0 == "False")
    })
    .await;
    let (_, reason, message) = manifest_condition(&w, 1, "Applied").unwrap();
    assert_eq!(reason, "AppliedManifestFailed");
    assert!(
        message.contains(&format!(
            "the executor system:serviceaccount:{ns}:deployer may not create rolebindings.rbac.authorization.k8s.io \"takeover\": permission escalation"
        )),
        "{message}"
    );
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "takeover", "namespace": ns}});
    assert!(
        cluster.get(&binding).await.is_none(),
        "the escalating binding was applied"
    );
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "reader", "namespace": ns}});
    assert!(cluster.get(&role).await.is_some());
    delete_work_and_wait(&mut works, "rbac").await;
    agent.stop().await;
    hub.stop().await;
}
