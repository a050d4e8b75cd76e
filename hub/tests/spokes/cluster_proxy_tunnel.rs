//! The cluster proxy's tunnel layer on a real nats-server, against scripted spokes speaking raw
//! frames: a hostile spoke (a skipped sequence number, ignored credit, another cluster's frames
//! for the same stream) breaks only its own call, a call whose client gives up is cancelled on
//! the spoke, and a flood for a cluster with no open call is dropped before decoding.

use crate::common;

use common::*;
use flotilla_testkit::NatsServer;
use std::time::Duration;

/// What a scripted spoke does with the call it receives.
enum Script {
    /// Skips a sequence number.
    SkipsASequenceNumber,
    /// Sends more data than its credit allows.
    IgnoresItsCredit,
    /// Answers properly, while another cluster's credentials answer first for the same stream.
    AnswersWhileAnotherClusterMeddles,
    /// Takes the call, never answers, and waits for the hub's cancel.
    NeverAnswers,
    /// Floods edge-2's subject (which has no call) with undecodable frames, then answers.
    FloodsAClusterWithoutCalls,
}

/// Frames `Script::FloodsAClusterWithoutCalls` sends for edge-2.
const FLOOD: u64 = 200;

/// A spoke for edge-1 speaking raw frames, following `script` for the first call.
async fn scripted_spoke(nats: &NatsServer, script: Script) -> tokio::task::JoinHandle<()> {
    use flotilla_bus::tunnel::{self, Frame};
    let client = async_nats::connect(nats.url()).await.unwrap();
    let mut calls = client
        .subscribe(flotilla_bus::subjects::kubeapi("edge-1"))
        .await
        .unwrap();
    // A flush does not wait for the server: a probe that comes back does (same connection,
    // in order), so the hub's call cannot pass the subscription.
    client
        .publish(flotilla_bus::subjects::kubeapi("edge-1"), "probe".into())
        .await
        .unwrap();
    let probe = tokio::time::timeout(SOON, futures::StreamExt::next(&mut calls))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&probe.payload[..], b"probe");
    tokio::spawn(async move {
        let msg = futures::StreamExt::next(&mut calls).await.unwrap();
        let got = tunnel::decode(
            &msg.payload,
            1 << 20,
            &tunnel::down_type(),
            "edge-1",
            1 << 20,
        )
        .unwrap();
        let Frame::Request(request) = got.frame else {
            panic!("the first frame is the request")
        };
        let send = |cluster: &'static str, seq: u64, frame: Frame| {
            let client = client.clone();
            let stream = got.stream.clone();
            let hub = request.hub.clone();
            async move {
                let ev = tunnel::encode(tunnel::up_type(), "spoke", cluster, &stream, seq, frame);
                client
                    .publish(
                        flotilla_bus::subjects::kubeapi_back(cluster, &hub),
                        ev.encode(1 << 20).unwrap(),
                    )
                    .await
                    .unwrap();
            }
        };
        let head = |status| {
            Frame::Response(flotilla_api::v1::TunnelResponse {
                status,
                headers: vec![],
            })
        };
        send("edge-1", 0, Frame::Credit(8)).await;
        match script {
            Script::SkipsASequenceNumber => send("edge-1", 2, head(200)).await,
            Script::IgnoresItsCredit => {
                send("edge-1", 1, head(200)).await;
                for seq in 2..2 + u64::from(request.window) + 1 {
                    send("edge-1", seq, Frame::Data(bytes::Bytes::from_static(b"x"))).await;
                }
            }
            Script::AnswersWhileAnotherClusterMeddles => {
                send("edge-2", 1, head(500)).await;
                send("edge-1", 1, head(200)).await;
                send("edge-1", 2, Frame::Data(bytes::Bytes::from_static(b"ok"))).await;
                send("edge-1", 3, Frame::End).await;
            }
            Script::FloodsAClusterWithoutCalls => {
                for _ in 0..FLOOD {
                    client
                        .publish(
                            flotilla_bus::subjects::kubeapi_back("edge-2", &request.hub),
                            bytes::Bytes::from(vec![b'x'; 64 * 1024]),
                        )
                        .await
                        .unwrap();
                }
                send("edge-1", 1, head(200)).await;
                send("edge-1", 2, Frame::End).await;
            }
            Script::NeverAnswers => loop {
                let msg = futures::StreamExt::next(&mut calls).await.unwrap();
                let frame = tunnel::decode(
                    &msg.payload,
                    1 << 20,
                    &tunnel::down_type(),
                    "edge-1",
                    1 << 20,
                )
                .unwrap();
                if let Frame::Cancel(reason) = frame.frame {
                    assert!(reason.contains("went away"), "{reason}");
                    break;
                }
            },
        }
        client.flush().await.unwrap();
    })
}

async fn tunnels(
    nats: &NatsServer,
) -> (
    flotilla_hub::kubeproxy::tunnel::Tunnels,
    tokio::sync::watch::Sender<bool>,
) {
    let (tunnels, stop, _) = tunnels_counted(nats).await;
    (tunnels, stop)
}

async fn tunnels_counted(
    nats: &NatsServer,
) -> (
    flotilla_hub::kubeproxy::tunnel::Tunnels,
    tokio::sync::watch::Sender<bool>,
    flotilla_hub::kubeproxy::metrics::ProxyMetrics,
) {
    let client = async_nats::connect(nats.url()).await.unwrap();
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let metrics = flotilla_hub::kubeproxy::metrics::ProxyMetrics::default();
    let (tunnels, _task) = flotilla_hub::kubeproxy::tunnel::Tunnels::start(
        &client,
        flotilla_hub::inventory::ClusterInventory::new(16),
        flotilla_hub::kubeproxy::tunnel::TunnelConfig::default(),
        metrics.clone(),
        shutdown,
    )
    .await
    .unwrap();
    client.flush().await.unwrap();
    (tunnels, stop, metrics)
}

fn call(cluster: &str) -> flotilla_hub::kubeproxy::tunnel::Outgoing {
    flotilla_hub::kubeproxy::tunnel::Outgoing {
        cluster: cluster.into(),
        request: flotilla_api::v1::TunnelRequest {
            method: "GET".into(),
            path: "/api/v1/pods".into(),
            ..Default::default()
        },
        body: None,
    }
}

#[tokio::test]
async fn a_hostile_spoke_gets_its_calls_cancelled_and_reaches_no_other_call() {
    use flotilla_hub::kubeproxy::tunnel::CallError;
    use futures::StreamExt;
    let nats = NatsServer::start();
    let (tunnels, _stop) = tunnels(&nats).await;

    let spoke = scripted_spoke(&nats, Script::SkipsASequenceNumber).await;
    let err = tokio::time::timeout(SOON, tunnels.call(call("edge-1")))
        .await
        .unwrap()
        .err()
        .expect("the call fails");
    assert!(matches!(err, CallError::Protocol { .. }), "{err}");
    spoke.await.unwrap();

    let spoke = scripted_spoke(&nats, Script::IgnoresItsCredit).await;
    let answer = tokio::time::timeout(SOON, tunnels.call(call("edge-1")))
        .await
        .unwrap()
        .unwrap();
    spoke.await.unwrap();
    let items: Vec<_> = tokio::time::timeout(SOON, answer.body.collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(
        items.last().is_some_and(Result::is_err),
        "the body broke off"
    );
    assert!(
        items.iter().filter(|i| i.is_ok()).count() <= 8,
        "no more than the window"
    );

    let spoke = scripted_spoke(&nats, Script::AnswersWhileAnotherClusterMeddles).await;
    let answer = tokio::time::timeout(SOON, tunnels.call(call("edge-1")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.head.status, 200, "edge-2's frame was not taken");
    let body: Vec<_> = answer.body.collect().await;
    assert_eq!(body.len(), 1);
    assert_eq!(body[0].as_ref().unwrap().as_ref(), b"ok");
    spoke.await.unwrap();
    assert_eq!(tunnels.open_calls(), 0);

    // A client that gives up before the spoke answers: the spoke is told at once.
    let spoke = scripted_spoke(&nats, Script::NeverAnswers).await;
    let gave_up =
        tokio::time::timeout(Duration::from_millis(500), tunnels.call(call("edge-1"))).await;
    assert!(gave_up.is_err(), "the spoke never answers");
    tokio::time::timeout(Duration::from_secs(3), spoke)
        .await
        .expect("the spoke got the hub's cancel before any keepalive")
        .unwrap();
}

#[tokio::test]
async fn frames_for_a_cluster_without_calls_are_dropped_before_decoding() {
    use flotilla_hub::kubeproxy::metrics::DropLabels;
    use futures::StreamExt;
    let nats = NatsServer::start();
    let (tunnels, _stop, metrics) = tunnels_counted(&nats).await;
    let spoke = scripted_spoke(&nats, Script::FloodsAClusterWithoutCalls).await;
    let answer = tokio::time::timeout(SOON, tunnels.call(call("edge-1")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.head.status, 200);
    let body: Vec<_> = answer.body.collect().await;
    assert!(body.is_empty());
    spoke.await.unwrap();
    let dropped = |reason| {
        metrics
            .frames_dropped
            .get_or_create(&DropLabels { reason })
            .get()
    };
    // Edge-2's frames came before edge-1's answer on one connection: all were dropped by
    // the subject alone, none reached the decoder.
    assert_eq!(dropped("no_call"), FLOOD);
    assert_eq!(dropped("decode"), 0);
    assert_eq!(tunnels.open_calls(), 0);
}
