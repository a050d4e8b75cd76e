//! The 3-node cluster fixture against both nats-server versions: it forms, takes an R3 stream,
//! keeps taking writes when the stream's leader is killed, and takes the node back.

use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use flotilla_testkit::{NatsCluster, NatsClusterOptions, eventually, nats_server_binaries};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

async fn client(urls: &str) -> async_nats::Client {
    let addrs: Vec<&str> = urls.split(',').collect();
    async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connect(addrs)
        .await
        .expect("connect to the cluster")
}

/// Publishes `subject` with an ack, retrying while the stream elects a leader.
async fn write(js: &jetstream::Context, subject: &str, what: &str) -> u64 {
    eventually(T, what, || async {
        let ack = js
            .publish(subject.to_string(), Bytes::from_static(b"x"))
            .await
            .ok()?;
        tokio::time::timeout(Duration::from_secs(2), ack)
            .await
            .ok()?
            .ok()
            .map(|a| a.sequence)
    })
    .await
}

async fn a_cluster_forms_takes_an_r3_stream_and_survives_a_node_loss(
    label: &str,
    cluster: &mut NatsCluster,
) {
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.urls().split(',').count(), 3);
    assert!(
        cluster.meta_leader().is_some(),
        "{label}: formed but no meta leader"
    );
    let js = jetstream::new(client(&cluster.urls()).await);
    let config = stream::Config {
        name: "R3TEST".into(),
        subjects: vec!["r3.>".into()],
        num_replicas: 3,
        ..Default::default()
    };
    let info = eventually(T, "an R3 stream is created", || async {
        js.create_stream(config.clone())
            .await
            .ok()?
            .info()
            .await
            .ok()
            .cloned()
    })
    .await;
    assert_eq!(info.config.num_replicas, 3, "{label}");
    assert_eq!(write(&js, "r3.a", "a first write").await, 1, "{label}");

    let leader = eventually(T, "the stream has a leader", || async {
        cluster.leader_of("R3TEST")
    })
    .await;
    let pid = cluster.node(leader).pid().expect("the leader runs");
    cluster.stop(leader);
    assert!(
        !cluster.node_mut(leader).is_running(),
        "{label}: pid {pid} still runs"
    );
    assert_eq!(
        write(&js, "r3.b", "a write after the stream leader was killed").await,
        2,
        "{label}"
    );
    let new_leader = eventually(T, "a new stream leader", || async {
        cluster.leader_of("R3TEST").filter(|l| *l != leader)
    })
    .await;
    assert_ne!(new_leader, leader);

    cluster.start_again(leader);
    assert!(cluster.node_mut(leader).is_running(), "{label}");
    assert_ne!(
        cluster.node(leader).pid(),
        Some(pid),
        "{label}: a new process"
    );
    assert_eq!(
        write(&js, "r3.c", "a write after the restart").await,
        3,
        "{label}"
    );
    // The restarted node catches up: its own /jsz shows all three messages.
    eventually(T, "the restarted node has caught up", || async {
        let jsz = cluster.node(leader).monitor("/jsz?streams=true")?;
        let messages = jsz
            .pointer("/account_details/0/stream_detail/0/state/messages")?
            .as_u64()?;
        (messages == 3).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_of_the_debian_server() {
    let (label, binary) = nats_server_binaries().remove(0);
    let mut cluster = NatsCluster::start(binary, NatsClusterOptions::default());
    a_cluster_forms_takes_an_r3_stream_and_survives_a_node_loss(label, &mut cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_of_the_current_server() {
    let (label, binary) = nats_server_binaries().remove(1);
    let mut cluster = NatsCluster::start(binary, NatsClusterOptions::default());
    a_cluster_forms_takes_an_r3_stream_and_survives_a_node_loss(label, &mut cluster).await;
}

#[tokio::test]
async fn no_advertise_keeps_other_nodes_from_clients() {
    for (label, binary) in nats_server_binaries() {
        for no_advertise in [false, true] {
            let cluster = NatsCluster::start(
                binary.clone(),
                NatsClusterOptions {
                    no_advertise,
                    ..Default::default()
                },
            );
            let client = client(&cluster.node(0).url()).await;
            let info = eventually(T, "the server's INFO", || async {
                client.flush().await.ok()?;
                Some(client.server_info())
            })
            .await;
            let advertised = info.connect_urls.len();
            if no_advertise {
                assert_eq!(advertised, 0, "{label}: {:?}", info.connect_urls);
            } else {
                assert!(advertised >= 2, "{label}: {:?}", info.connect_urls);
            }
        }
    }
}
