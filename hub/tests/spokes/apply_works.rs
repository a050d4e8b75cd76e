//! `ApplyWorks`: many works over one stream on the real hub (token file, real nats-server) —
//! each answered once by its position, refusals named without stopping the stream, what was
//! written kept, the caller's executor grants checked per work as `ApplyWork` checks them.

use crate::common;

use common::tokens::*;
use common::work::work;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    ApplyWorkResult, GetWorkRequest, ManagedCluster, ManagedClusterSpec, ManifestWork, ObjectMeta,
};
use flotilla_testkit::NatsServer;
use std::collections::BTreeMap;
use tonic::Code;

/// A one-ConfigMap work `name` on `cluster`, optionally run as `executor` (`namespace/name`).
fn config_work(cluster: &str, name: &str, executor: Option<&str>) -> ManifestWork {
    let executor = executor
        .and_then(|e| e.split_once('/'))
        .map(|(ns, n)| {
            format!(
                "  executor:\n    subject:\n      type: ServiceAccount\n      serviceAccount:\n        namespace: {ns}\n        name: {n}\n"
            )
        })
        .unwrap_or_default();
    work(&format!(
        "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\n\
         metadata:\n  namespace: {cluster}\n  name: {name}\nspec:\n{executor}  workload:\n    manifests:\n\
         \x20     - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}, namespace: default}}, data: {{a: b}}}}\n"
    ))
}

/// Clusters created ahead of their agents (accepted, none ever connects).
async fn create_clusters(channel: &tonic::transport::Channel, names: &[&str]) {
    let mut clusters = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    for name in names {
        clusters
            .apply_cluster(ManagedCluster {
                metadata: Some(ObjectMeta {
                    name: name.to_string(),
                    ..Default::default()
                }),
                spec: Some(ManagedClusterSpec {
                    hub_accepts_client: true,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap();
    }
}

/// Streams `works` as `token` and gathers the answers by index, checking each index is
/// answered exactly once.
async fn stream(
    channel: &tonic::transport::Channel,
    token: &'static str,
    works: Vec<ManifestWork>,
) -> BTreeMap<u64, ApplyWorkResult> {
    let total = works.len();
    let mut api = WorkServiceClient::with_interceptor(channel.clone(), Bearer(token));
    let mut answers = api
        .apply_works(futures::stream::iter(works))
        .await
        .unwrap()
        .into_inner();
    let mut by_index = BTreeMap::new();
    while let Some(a) = answers.message().await.unwrap() {
        let index = a.index;
        assert!(
            by_index.insert(index, a).is_none(),
            "work {index} answered twice"
        );
    }
    assert_eq!(by_index.len(), total, "every work answered");
    by_index
}

#[tokio::test]
async fn a_stream_of_works_is_written_and_each_refusal_is_named_without_stopping_the_rest() {
    let nats = NatsServer::start();
    let (_hub, channel) = hub_with_tokens(&nats).await;
    create_clusters(&channel, &["edge-1", "edge-2", "edge-3"]).await;

    // 1,500 works: more than the hub writes at once from one stream, 500 per cluster actor.
    let mut works: Vec<ManifestWork> = (0..1500)
        .map(|i| config_work(&format!("edge-{}", i % 3 + 1), &format!("w-{i}"), None))
        .collect();
    // Three bad ones among them.
    works[10] = config_work("nowhere", "w-10", None);
    works[700].metadata.as_mut().unwrap().name = "Not_A_Name".into();
    works[1400]
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .insert(flotilla_api::addon::ADDON_NAME_LABEL.into(), "x".into());

    let answers = stream(&channel, ADMIN, works.clone()).await;
    let refused: BTreeMap<u64, (Code, String)> = answers
        .iter()
        .filter(|(_, a)| a.code != 0)
        .map(|(i, a)| (*i, (Code::from(a.code), a.message.clone())))
        .collect();
    assert_eq!(
        refused.keys().copied().collect::<Vec<_>>(),
        vec![10, 700, 1400],
        "{refused:?}"
    );
    assert_eq!(refused[&10].0, Code::NotFound);
    assert!(refused[&10].1.contains("nowhere"), "{:?}", refused[&10]);
    assert_eq!(refused[&700].0, Code::InvalidArgument);
    assert!(
        refused[&700].1.contains("Not_A_Name"),
        "{:?}",
        refused[&700]
    );
    assert_eq!(refused[&1400].0, Code::InvalidArgument);
    assert!(
        refused[&1400]
            .1
            .contains(flotilla_api::addon::ADDON_NAME_LABEL),
        "{:?}",
        refused[&1400]
    );

    // Every other work is stored, answered with its stored metadata.
    let mut api = WorkServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    for (i, a) in answers.iter().filter(|(_, a)| a.code == 0) {
        let m = a.metadata.as_ref().expect("metadata of a written work");
        assert_eq!(m.name, format!("w-{i}"));
        assert_eq!(m.generation, 1);
        assert!(!m.uid.is_empty() && m.resource_version > 0);
    }
    for i in [0u64, 499, 1499] {
        let stored = api
            .get_work(GetWorkRequest {
                cluster: format!("edge-{}", i % 3 + 1),
                name: format!("w-{i}"),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            stored.metadata.unwrap().uid,
            answers[&i].metadata.as_ref().unwrap().uid
        );
    }

    // The same stream again changes nothing: every good work answered at its generation.
    let again = stream(&channel, ADMIN, works).await;
    for (i, a) in &again {
        if refused.contains_key(i) {
            assert_ne!(a.code, 0);
        } else {
            assert_eq!(a.code, 0, "{a:?}");
            assert_eq!(a.metadata.as_ref().unwrap().generation, 1);
        }
    }
}

#[tokio::test]
async fn a_stream_checks_the_callers_executor_grants_for_every_work() {
    let nats = NatsServer::start();
    let (_hub, channel) = hub_with_tokens(&nats).await;
    create_clusters(&channel, &["edge-1"]).await;

    // The deployer may run works as default/executor1 and anything in team-a, nothing else.
    let works = vec![
        config_work("edge-1", "granted", Some("default/executor1")),
        config_work("edge-1", "team", Some("team-a/builder")),
        config_work("edge-1", "other", Some("kube-system/admin")),
        config_work("edge-1", "agent", None),
    ];
    let answers = stream(&channel, DEPLOYER, works).await;
    assert_eq!(answers[&0].code, 0, "{:?}", answers[&0]);
    assert_eq!(answers[&1].code, 0, "{:?}", answers[&1]);
    for i in [2, 3] {
        assert_eq!(Code::from(answers[&i].code), Code::PermissionDenied);
        assert!(
            answers[&i].message.contains("ci (deployer)"),
            "the refusal names the caller: {:?}",
            answers[&i]
        );
    }

    // A read-only caller's stream is refused whole, before any work is read.
    let mut viewer = WorkServiceClient::with_interceptor(channel.clone(), Bearer(VIEWER));
    let e = viewer
        .apply_works(futures::stream::iter(vec![config_work(
            "edge-1", "viewer", None,
        )]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let mut admin = WorkServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    assert_eq!(
        admin
            .get_work(GetWorkRequest {
                cluster: "edge-1".into(),
                name: "viewer".into(),
            })
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
}

/// Every page of `ListWorks` at `page_size` for `cluster` (empty: all), as a client pages.
async fn list_pages(
    channel: &tonic::transport::Channel,
    cluster: &str,
    selector: &str,
    page_size: u32,
) -> Vec<Vec<(String, String)>> {
    let mut api = WorkServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let page = api
            .list_works(flotilla_api::v1::ListWorksRequest {
                cluster: cluster.into(),
                label_selector: selector.into(),
                page_size,
                page_token: token.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        pages.push(
            page.items
                .iter()
                .map(|w| {
                    let m = w.metadata.as_ref().unwrap();
                    (m.namespace.clone(), m.name.clone())
                })
                .collect(),
        );
        if page.next_page_token.is_empty() {
            return pages;
        }
        token = page.next_page_token;
    }
}

#[tokio::test]
async fn list_works_pages_every_work_once_in_cluster_then_name_order() {
    let nats = NatsServer::start();
    let (_hub, channel) = hub_with_tokens(&nats).await;
    // `edge-1/…` sorts before `edge/…` as bytes; pages go by cluster, then name.
    let clusters = ["edge", "edge-1", "c2"];
    create_clusters(&channel, &clusters).await;
    let mut works: Vec<ManifestWork> = (0..40)
        .map(|i| config_work(clusters[i % 3], &format!("w-{i:02}"), None))
        .collect();
    for w in works.iter_mut().step_by(4) {
        w.metadata
            .as_mut()
            .unwrap()
            .labels
            .insert("tier".into(), "gold".into());
    }
    let answers = stream(&channel, ADMIN, works.clone()).await;
    assert!(answers.values().all(|a| a.code == 0), "{answers:?}");

    let mut expected: Vec<(String, String)> = works
        .iter()
        .map(|w| {
            let m = w.metadata.as_ref().unwrap();
            (m.namespace.clone(), m.name.clone())
        })
        .collect();
    expected.sort();
    let one = list_pages(&channel, "", "", 0).await;
    assert_eq!(one, [expected.clone()], "no page size: one page, in order");
    for size in [1, 7, 40] {
        let pages = list_pages(&channel, "", "", size).await;
        assert!(pages.iter().all(|p| p.len() <= size as usize));
        assert_eq!(pages.concat(), expected, "pages of {size}");
    }
    let edge: Vec<_> = expected
        .iter()
        .filter(|(c, _)| c == "edge")
        .cloned()
        .collect();
    assert_eq!(list_pages(&channel, "edge", "", 3).await.concat(), edge);
    let gold = list_pages(&channel, "", "tier=gold", 4).await.concat();
    assert_eq!(gold.len(), 10, "{gold:?}");
    assert!(gold.windows(2).all(|w| w[0] < w[1]));

    let mut api = WorkServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let refused = api
        .list_works(flotilla_api::v1::ListWorksRequest {
            page_token: "no-slash".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("page_token"), "{refused:?}");
}
