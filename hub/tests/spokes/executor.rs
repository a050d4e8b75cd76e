//! ManifestWork `executor` on the real hub with a token file and an agent on the simulated
//! cluster, with OCM's documented example (`examples/executor-work.yaml`): who may name which
//! executor (OCM's `execute-as`), and the executor reaching the agent.

use crate::common;

use common::tokens::*;
use common::work::{cond, get_work, work};
use common::*;
use flotilla_api::ocm::ManifestWork as OcmWork;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    ClusterNamesRequest, DeleteWorkRequest, GetClusterRequest, ManifestWork, ProxyGetRequest,
};
use flotilla_testkit::{NatsServer, eventually};
use tonic::Code;

const EXAMPLE: &str = include_str!("../../../examples/executor-work.yaml");
/// OCM's example on `cluster` with the executor `namespace/name` (and work `name`).
fn example(cluster: &str, work_name: &str, executor: Option<(&str, &str)>) -> ManifestWork {
    let mut yaml = EXAMPLE
        .replace("CLUSTER", cluster)
        .replace("name: example-manifestwork", &format!("name: {work_name}"));
    match executor {
        Some((ns, name)) => {
            yaml = yaml.replace(
                "namespace: default\n        name: executor1",
                &format!("namespace: {ns}\n        name: {name}"),
            );
        }
        None => {
            let start = yaml.find("  executor:").unwrap();
            let end = yaml.find("  workload:").unwrap();
            yaml.replace_range(start..end, "");
        }
    }
    work(&yaml)
}

fn executor_of(w: &ManifestWork) -> Option<String> {
    flotilla_api::work::Executor::of_work(w).map(|e| e.username())
}

async fn get_as(api: &mut WorkServiceClient<Authed>, name: &str) -> Option<ManifestWork> {
    api.get_work(flotilla_api::v1::GetWorkRequest {
        cluster: "cluster1".into(),
        name: name.into(),
    })
    .await
    .ok()
    .map(|r| r.into_inner())
}

#[tokio::test]
async fn only_callers_granted_an_executor_may_name_it_and_the_agent_applies_as_it() {
    let nats = NatsServer::start();
    let (hub, channel) = hub_with_tokens(&nats).await;
    let mut clusters = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let agent = start_agent(agent_config("cluster1", &nats.url()));
    eventually(SOON, "cluster1 registered", || {
        let mut c = clusters.clone();
        async move {
            c.get_cluster(GetClusterRequest {
                name: "cluster1".into(),
            })
            .await
            .ok()
        }
    })
    .await;
    clusters
        .accept_clusters(ClusterNamesRequest {
            names: vec!["cluster1".into()],
            key: String::new(),
        })
        .await
        .unwrap();
    eventually(SOON, "cluster1 available", || {
        let mut c = clusters.clone();
        async move {
            let got = c
                .get_cluster(GetClusterRequest {
                    name: "cluster1".into(),
                })
                .await
                .ok()?
                .into_inner();
            (available(&got).as_deref() == Some("True")).then_some(())
        }
    })
    .await;

    let mut deployer = works_as(&channel, DEPLOYER);
    let mut admin = works_as(&channel, ADMIN);
    let mut viewer = works_as(&channel, VIEWER);

    // The deployer applies OCM's example, naming the executor it is granted: the work becomes
    // Available on the simulated cluster, which treats the executor as allowed.
    let applied = deployer
        .apply_work(example("cluster1", "example-manifestwork", None))
        .await;
    let nil = applied.unwrap_err();
    assert_eq!(nil.code(), Code::PermissionDenied);
    assert!(nil.message().contains("spec.executor"), "{}", nil.message());
    let ocm_example = {
        let yaml = EXAMPLE.replace("CLUSTER", "cluster1");
        work(&yaml)
    };
    deployer
        .apply_work(ocm_example.clone())
        .await
        .expect("a deployer applies with an executor it is granted");
    let done = eventually(SOON, "the example Available", || {
        let mut api = admin.clone();
        async move {
            let w = get_as(&mut api, "example-manifestwork").await?;
            (cond(&w, "Applied").as_deref() == Some("True")
                && cond(&w, "Available").as_deref() == Some("True"))
            .then_some(w)
        }
    })
    .await;
    // The hub keeps the executor and shows it in the OCM shape (`flotilla get work -o yaml`).
    let yaml = serde_yaml::to_string(&OcmWork::from(&done)).unwrap();
    assert!(
        yaml.contains("executor:\n    subject:\n      type: ServiceAccount\n      serviceAccount:\n        namespace: default\n        name: executor1"),
        "{yaml}"
    );
    // The spec event carried it to the agent: the simulated cluster shows which identity the
    // ConfigMap was applied as.
    let listed = admin
        .proxy(ProxyGetRequest {
            cluster: "cluster1".into(),
            kind: "configmaps".into(),
            namespace: "default".into(),
            name: "test".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .objects;
    let cm: serde_json::Value = serde_json::from_str(&listed[0]).unwrap();
    assert_eq!(cm["data"]["a"], "b");
    assert_eq!(
        cm["metadata"]["annotations"][flotilla_agent::backend::sim::ANNOTATION_EXECUTOR],
        "system:serviceaccount:default:executor1"
    );

    // An update naming an executor the deployer is not granted: PERMISSION_DENIED naming the
    // field and the identity, and nothing stored changes.
    let generation = done.metadata.as_ref().unwrap().generation;
    let err = deployer
        .apply_work(example(
            "cluster1",
            "example-manifestwork",
            Some(("kube-system", "root")),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    for needle in [
        "spec.executor",
        "ci (deployer)",
        "system:serviceaccount:kube-system:root",
    ] {
        assert!(
            err.message().contains(needle),
            "{needle}: {}",
            err.message()
        );
    }
    let held = get_as(&mut admin, "example-manifestwork").await.unwrap();
    assert_eq!(held.metadata.as_ref().unwrap().generation, generation);
    assert_eq!(
        executor_of(&held).as_deref(),
        Some("system:serviceaccount:default:executor1")
    );
    // A namespace grant covers every ServiceAccount in it.
    deployer
        .apply_work(example(
            "cluster1",
            "team-work",
            Some(("team-a", "builder")),
        ))
        .await
        .expect("team-a/* covers team-a/builder");
    // A read-only identity may not write works at all.
    let err = viewer.apply_work(ocm_example.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    // An admin may name any executor, or none.
    admin
        .apply_work(example(
            "cluster1",
            "ops-work",
            Some(("kube-system", "root")),
        ))
        .await
        .expect("an admin acts as any executor");
    assert!(get_as(&mut admin, "ops-work").await.is_some());
    // A deployer deletes only works whose executor it may act as.
    let err = deployer
        .delete_work(DeleteWorkRequest {
            cluster: "cluster1".into(),
            name: "ops-work".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(err.message().contains("spec.executor"), "{}", err.message());
    deployer
        .delete_work(DeleteWorkRequest {
            cluster: "cluster1".into(),
            name: "team-work".into(),
        })
        .await
        .expect("a deployer deletes its own work");
    eventually(SOON, "team-work gone", || {
        let mut api = admin.clone();
        async move { get_as(&mut api, "team-work").await.is_none().then_some(()) }
    })
    .await;
    agent.stop().await;
    hub.stop().await;
}

/// Without a token file the API is open: every caller may name any executor.
#[tokio::test]
async fn an_open_api_lets_every_caller_name_any_executor() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut clusters, &nats.url(), "cluster1").await;
    let mut works = common::work::works_client(&hub).await;
    works
        .apply_work(example(
            "cluster1",
            "example-manifestwork",
            Some(("kube-system", "root")),
        ))
        .await
        .expect("an open API checks no executor");
    let w = common::work::wait_work(
        &mut works,
        "cluster1",
        "example-manifestwork",
        "Applied",
        |w| cond(w, "Applied").as_deref() == Some("True"),
    )
    .await;
    assert_eq!(
        executor_of(&w).as_deref(),
        Some("system:serviceaccount:kube-system:root")
    );
    assert!(
        get_work(&mut works, "cluster1", "example-manifestwork")
            .await
            .is_some()
    );
    agent.stop().await;
    hub.stop().await;
}
