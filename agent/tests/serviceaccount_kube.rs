//! ManagedServiceAccounts on the Kubernetes backend, against the testkit's Kubernetes API
//! server speaking the real wire format: the ServiceAccount (and its namespace) created, a
//! token from the TokenRequest API whose answered expiry — capped like a cloud's — is the one
//! the agent keeps, proxied calls made with that token as the ServiceAccount, and the
//! ServiceAccount deleted.

use flotilla_agent::backend::Backend;
use flotilla_agent::backend::api::{ApiRequest, Bearer, RequestBody};
use flotilla_agent::backend::kube::KubeBackend;
use flotilla_testkit::kube::{FakeKube, FakeOptions, ObjectKey};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const NS: &str = "open-cluster-management-agent-addon";

async fn backend(fake: &FakeKube) -> Arc<KubeBackend> {
    let kubeconfig = fake.kubeconfig();
    Arc::new(
        tokio::time::timeout(
            Duration::from_secs(20),
            KubeBackend::connect(Some(&kubeconfig)),
        )
        .await
        .expect("connected in time")
        .expect("connected"),
    )
}

fn get(path: &str, bearer: Option<&str>) -> ApiRequest {
    ApiRequest {
        method: http::Method::GET,
        path: path.into(),
        query: String::new(),
        headers: http::HeaderMap::new(),
        impersonate: None,
        bearer: bearer.map(|t| Bearer(t.into())),
        body: RequestBody::empty(),
    }
}

#[tokio::test]
async fn the_token_request_api_issues_a_token_with_the_expiry_the_cluster_caps() {
    let fake = FakeKube::start_with(FakeOptions {
        token_max_seconds: Some(3600),
        ..FakeOptions::default()
    })
    .await;
    let kube = backend(&fake).await;
    kube.ensure_service_account(NS, "viewer").await.unwrap();
    // Twice: it exists already.
    kube.ensure_service_account(NS, "viewer").await.unwrap();
    assert!(
        fake.get(&ObjectKey::new("", "namespaces", "", NS))
            .is_some()
    );
    assert!(
        fake.get(&ObjectKey::new("", "serviceaccounts", NS, "viewer"))
            .is_some()
    );
    let asked = Duration::from_secs(8640 * 3600);
    let before = SystemTime::now();
    let issued = kube.request_token(NS, "viewer", asked).await.unwrap();
    let tokens = fake.tokens();
    assert_eq!(tokens.len(), 1);
    assert_eq!(
        tokens[0].asked_seconds,
        asked.as_secs() as i64,
        "expirationSeconds = validity"
    );
    assert_eq!(issued.token, tokens[0].token);
    let lifetime = issued.expires.duration_since(before).unwrap();
    assert!(
        lifetime <= Duration::from_secs(3601) && lifetime >= Duration::from_secs(3595),
        "the expiry is the API server's answer (capped), not the validity asked: {lifetime:?}"
    );
    // A shorter validity than Kubernetes allows is the API server's 422, verbatim.
    let e = kube
        .request_token(NS, "viewer", Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("10 minutes"), "{e}");

    // Proxied calls with the token go as the ServiceAccount (not the agent), so the cluster's
    // RBAC decides; an unknown token is the API server's 401.
    let as_sa = kube
        .clone()
        .serve_api(get("/api/v1/namespaces", Some(&issued.token)))
        .await;
    assert_eq!(
        as_sa.status,
        http::StatusCode::FORBIDDEN,
        "a ServiceAccount with no rights"
    );
    let unknown = kube
        .clone()
        .serve_api(get("/api/v1/namespaces", Some("forged")))
        .await;
    assert_eq!(unknown.status, http::StatusCode::UNAUTHORIZED);
    let as_agent = kube
        .clone()
        .serve_api(get("/api/v1/namespaces", None))
        .await;
    assert_eq!(as_agent.status, http::StatusCode::OK);

    assert!(kube.delete_service_account(NS, "viewer").await.unwrap());
    assert!(!kube.delete_service_account(NS, "viewer").await.unwrap());
    assert!(
        fake.get(&ObjectKey::new("", "serviceaccounts", NS, "viewer"))
            .is_none()
    );
    let gone = kube
        .clone()
        .serve_api(get("/api/v1/namespaces", Some(&issued.token)))
        .await;
    assert_eq!(
        gone.status,
        http::StatusCode::UNAUTHORIZED,
        "its tokens died with it"
    );
}

/// A ServiceAccount someone else made (an add-on's own, with its rights) is never adopted: no
/// token of it reaches the hub, and deleting the ManagedServiceAccount leaves it alone.
#[tokio::test]
async fn a_service_account_the_agent_did_not_create_is_neither_adopted_nor_deleted() {
    use flotilla_agent::backend::Strategy;
    let fake = FakeKube::start().await;
    let kube = backend(&fake).await;
    for object in [
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "addon-agent", "namespace": NS}}),
    ] {
        let id = flotilla_api::work::manifest_id(&object).unwrap();
        kube.apply(&id, &object, &Strategy::Update).await.unwrap();
    }
    let e = kube
        .ensure_service_account(NS, "addon-agent")
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("not created by flotilla-agent"),
        "{e}"
    );
    let e = kube
        .request_token(NS, "addon-agent", Duration::from_secs(3600))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("not created by flotilla-agent"),
        "{e}"
    );
    assert!(fake.tokens().is_empty(), "no token was requested");
    assert!(
        !kube
            .delete_service_account(NS, "addon-agent")
            .await
            .unwrap()
    );
    assert!(
        fake.get(&ObjectKey::new("", "serviceaccounts", NS, "addon-agent"))
            .is_some()
    );
}
