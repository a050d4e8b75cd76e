//! What a hub's actors do with writes they did not make to the shards it holds — what a new
//! holder meets when the previous holder's last writes reach its view after it took the shard.
//! The writes are made straight into the buckets here, as a previous holder would have made
//! them; the hub must take each one from the store, not lose it to a view that lagged.

use crate::common;

use common::work::*;
use common::*;
use flotilla_api::v1::ManagedCluster;
use flotilla_testkit::{NatsServer, eventually};
use prost::Message;

async fn buckets(
    nats: &NatsServer,
) -> (
    async_nats::jetstream::kv::Store,
    async_nats::jetstream::kv::Store,
) {
    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
    (
        js.get_key_value(flotilla_hub::store::CLUSTERS)
            .await
            .unwrap(),
        js.get_key_value(flotilla_hub::store::WORKS).await.unwrap(),
    )
}

fn renamed(mut c: ManagedCluster, name: &str) -> ManagedCluster {
    let m = c.metadata.as_mut().unwrap();
    m.name = name.into();
    m.resource_version = 0;
    m.uid = format!("uid-{name}");
    c
}

#[tokio::test]
async fn a_cluster_stored_behind_the_hubs_back_gets_an_actor_and_takes_works() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let _agent = accepted_cluster(&mut clusters, &nats.url(), "edge-1").await;
    let (kv_clusters, _) = buckets(&nats).await;

    let stored = renamed(get(&mut clusters, "edge-1").await.unwrap(), "late-1");
    kv_clusters
        .put("late-1", stored.encode_to_vec().into())
        .await
        .unwrap();
    eventually(SOON, "late-1 listed by the hub", || {
        let mut clusters = clusters.clone();
        async move { get(&mut clusters, "late-1").await }
    })
    .await;
    // Its actor runs: a work is accepted for it, not refused as for an unknown cluster.
    let applied = works_client(&hub)
        .await
        .apply_work(hello("late-1", 1))
        .await
        .expect("a work for a cluster the previous holder stored");
    assert_eq!(applied.into_inner().metadata.unwrap().generation, 1);

    // Deleted by the previous holder: gone here too, with its works.
    kv_clusters.purge("late-1").await.unwrap();
    eventually(SOON, "late-1 gone from the hub", || {
        let mut clusters = clusters.clone();
        async move { get(&mut clusters, "late-1").await.is_none().then_some(()) }
    })
    .await;
    hub.stop().await;
}

#[tokio::test]
async fn a_work_spec_stored_behind_the_hubs_back_reaches_the_agent() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let _agent = accepted_cluster(&mut clusters, &nats.url(), "edge-1").await;
    let (_, kv_works) = buckets(&nats).await;
    let mut api = works_client(&hub).await;
    api.apply_work(hello("edge-1", 1)).await.unwrap();
    let first = wait_work(&mut api, "edge-1", "hello-work-demo", "converged", |w| {
        converged_at(w, 1)
    })
    .await;

    // The previous holder stored generation 2 (two replicas) and died before sending it.
    let mut next = first.clone();
    next.spec = hello("edge-1", 2).spec;
    let m = next.metadata.as_mut().unwrap();
    m.generation = 2;
    m.resource_version = 0;
    kv_works
        .put("edge-1.hello-work-demo", next.encode_to_vec().into())
        .await
        .unwrap();
    let w = wait_work(
        &mut api,
        "edge-1",
        "hello-work-demo",
        "converged at generation 2",
        |w| converged_at(w, 2),
    )
    .await;
    assert_eq!(feedback(&w, "ReadyReplicas").unwrap().integer, Some(2));

    // A work the previous holder deleted is dropped here too.
    kv_works.purge("edge-1.hello-work-demo").await.unwrap();
    wait_gone(&mut api, "edge-1", "hello-work-demo").await;
    hub.stop().await;
}
