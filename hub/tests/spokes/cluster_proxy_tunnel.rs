//! The cluster proxy's tunnel layer on a real nats-server, against scripted spokes speaking raw
//! frames: a hostile spoke (a skipped sequence number, ignored credit, another cluster's frames
//! for the same stream) breaks only its own call, a call whose client gives up is cancelled on
//! the spoke, and a flood for a cluster with no open call is dropped before decoding.
//!
//! Sessions (exec, attach, port-forward) likewise: a spoke that echoes carries stdin to stdout
//! and its exit back, counted and given back when it ends; a spoke that writes on stdin, past
//! its credit or a channel's close, exits twice or with a Status kubectl cannot read gets its
//! session failed and cancelled; a refusal comes back as an answer; an identity's share of
//! sessions and of reserved bytes is refused past its bound.

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
    tunnels_with(
        nats,
        flotilla_hub::kubeproxy::tunnel::TunnelConfig::default(),
    )
    .await
}

async fn tunnels_with(
    nats: &NatsServer,
    config: flotilla_hub::kubeproxy::tunnel::TunnelConfig,
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
        config,
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

/// What a scripted spoke does with the session it receives.
#[derive(Clone, Copy, Debug)]
enum SessionScript {
    /// Echoes stdin on stdout; at stdin's close it closes stdout, exits 0 and ends.
    Echoes,
    /// Refuses the session (403), as an API server refusing the upgrade.
    Refuses,
    /// Writes on stdin, the client's channel.
    WritesOnStdin,
    /// Writes more chunks than its credit allows.
    IgnoresItsCredit,
    /// Closes stdout, then writes on it.
    WritesAfterClose,
    /// Exits twice.
    ExitsTwice,
    /// Exits with something that is no Status.
    ExitsWithGarbage,
    /// Takes the session and pings, but never answers it.
    NeverAnswers,
}

/// A spoke's end of one call, speaking raw frames.
struct RawSpoke {
    client: async_nats::Client,
    calls: async_nats::Subscriber,
    stream: flotilla_bus::tunnel::StreamId,
    hub: String,
    seq: u64,
}

impl RawSpoke {
    async fn send(&mut self, frame: flotilla_bus::tunnel::Frame) {
        use flotilla_bus::tunnel;
        let ev = tunnel::encode(
            tunnel::up_type(),
            "spoke",
            "edge-1",
            &self.stream,
            self.seq,
            frame,
        );
        self.seq += 1;
        self.client
            .publish(
                flotilla_bus::subjects::kubeapi_back("edge-1", &self.hub),
                ev.encode(1 << 20).unwrap(),
            )
            .await
            .unwrap();
    }

    /// The hub's next frame but pings.
    async fn next(&mut self) -> flotilla_bus::tunnel::Frame {
        use flotilla_bus::tunnel::{self, Frame};
        loop {
            let msg = tokio::time::timeout(SOON, futures::StreamExt::next(&mut self.calls))
                .await
                .expect("a frame from the hub")
                .unwrap();
            let got = tunnel::decode(
                &msg.payload,
                1 << 20,
                &tunnel::down_type(),
                "edge-1",
                1 << 20,
            )
            .unwrap();
            if !matches!(got.frame, Frame::Ping) {
                return got.frame;
            }
        }
    }

    /// Waits for the hub's cancel, skipping what comes before it; its reason.
    async fn cancelled(&mut self) -> String {
        loop {
            if let flotilla_bus::tunnel::Frame::Cancel(reason) = self.next().await {
                return reason;
            }
        }
    }
}

/// A spoke for edge-1 following `script` for the first session it receives.
async fn session_spoke(nats: &NatsServer, script: SessionScript) -> tokio::task::JoinHandle<()> {
    use bytes::Bytes;
    use flotilla_bus::tunnel::{self, Frame};
    let client = async_nats::connect(nats.url()).await.unwrap();
    let mut calls = client
        .subscribe(flotilla_bus::subjects::kubeapi("edge-1"))
        .await
        .unwrap();
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
        assert!(request.session.is_some(), "a session");
        let window = u64::from(request.window);
        let mut spoke = RawSpoke {
            client,
            calls,
            stream: got.stream,
            hub: request.hub.clone(),
            seq: 0,
        };
        let head = |status| {
            Frame::Response(flotilla_api::v1::TunnelResponse {
                status,
                headers: vec![],
            })
        };
        let out = |data: &'static [u8]| Frame::Chunk {
            channel: 1,
            data: Bytes::from_static(data),
        };
        let success = Bytes::from_static(br#"{"metadata":{},"status":"Success"}"#);
        spoke.send(Frame::Credit(8)).await;
        if let SessionScript::NeverAnswers = script {
            loop {
                let heard = tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(500)) => None,
                    msg = futures::StreamExt::next(&mut spoke.calls) => msg,
                };
                let Some(msg) = heard else {
                    spoke.send(Frame::Ping).await;
                    continue;
                };
                let got = tunnel::decode(
                    &msg.payload,
                    1 << 20,
                    &tunnel::down_type(),
                    "edge-1",
                    1 << 20,
                )
                .unwrap();
                if let Frame::Cancel(_) = got.frame {
                    return;
                }
            }
        }
        if let SessionScript::Refuses = script {
            spoke.send(head(403)).await;
            spoke
                .send(Frame::Data(Bytes::from_static(b"{\"kind\":\"Status\"}")))
                .await;
            spoke.send(Frame::End).await;
            spoke.client.flush().await.unwrap();
            return;
        }
        spoke.send(head(101)).await;
        match script {
            SessionScript::Echoes => loop {
                match spoke.next().await {
                    Frame::Chunk { channel: 0, data } => {
                        spoke.send(Frame::Chunk { channel: 1, data }).await;
                    }
                    Frame::Close(0) => {
                        spoke.send(Frame::Close(1)).await;
                        spoke.send(Frame::Exit(success.clone())).await;
                        spoke.send(Frame::End).await;
                        break;
                    }
                    Frame::Credit(_) => {}
                    // The client went away.
                    Frame::Cancel(_) => break,
                    other => panic!("unexpected {} from the hub", other.name()),
                }
            },
            SessionScript::WritesOnStdin => {
                spoke
                    .send(Frame::Chunk {
                        channel: 0,
                        data: Bytes::from_static(b"x"),
                    })
                    .await;
                spoke.cancelled().await;
            }
            SessionScript::IgnoresItsCredit => {
                for _ in 0..=window {
                    spoke.send(out(b"x")).await;
                }
                spoke.cancelled().await;
            }
            SessionScript::WritesAfterClose => {
                spoke.send(Frame::Close(1)).await;
                spoke.send(out(b"late")).await;
                spoke.cancelled().await;
            }
            SessionScript::ExitsTwice => {
                spoke.send(Frame::Exit(success.clone())).await;
                spoke.send(Frame::Exit(success.clone())).await;
                spoke.cancelled().await;
            }
            SessionScript::ExitsWithGarbage => {
                spoke.send(Frame::Exit(Bytes::from_static(b"[1, 2]"))).await;
                spoke.cancelled().await;
            }
            SessionScript::Refuses | SessionScript::NeverAnswers => unreachable!(),
        }
        spoke.client.flush().await.unwrap();
    })
}

/// An exec session of `cat` with stdin and stdout on pod `default/p` of `cluster`.
fn exec_session(cluster: &str) -> flotilla_hub::kubeproxy::tunnel::session::SessionOutgoing {
    use flotilla_bus::tunnel::session::{Kind, Spec, Streams};
    let spec = Spec {
        kind: Kind::Exec,
        container: None,
        command: vec!["cat".into()],
        streams: Streams {
            stdin: true,
            stdout: true,
            ..Streams::default()
        },
        port: 0,
    };
    flotilla_hub::kubeproxy::tunnel::session::SessionOutgoing {
        cluster: cluster.into(),
        request: flotilla_api::v1::TunnelRequest {
            method: "GET".into(),
            path: "/api/v1/namespaces/default/pods/p/exec".into(),
            caller: Some(flotilla_api::v1::TunnelCaller {
                name: "alice".into(),
                role: "admin".into(),
            }),
            session: Some(spec.to_wire()),
            ..Default::default()
        },
        protocol: "v5.channel.k8s.io",
    }
}

/// Opens `exec_session` against a spoke following `script`: the session's io.
async fn open_against(
    nats: &NatsServer,
    tunnels: &flotilla_hub::kubeproxy::tunnel::Tunnels,
    script: SessionScript,
) -> (
    flotilla_hub::kubeproxy::tunnel::session::SessionIo,
    tokio::task::JoinHandle<()>,
) {
    use flotilla_hub::kubeproxy::tunnel::session::Opened;
    let spoke = session_spoke(nats, script).await;
    let opened = tokio::time::timeout(SOON, tunnels.open_session(exec_session("edge-1")))
        .await
        .unwrap()
        .unwrap();
    let Opened::Session(io) = opened else {
        panic!("the session opened ({script:?})")
    };
    (io, spoke)
}

/// Waits (5 s at most) until the hub has no session open.
async fn no_sessions(tunnels: &flotilla_hub::kubeproxy::tunnel::Tunnels) {
    let gone = tokio::time::timeout(Duration::from_secs(5), async {
        while tunnels.open_sessions() + tunnels.open_calls() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "{} sessions still open",
        tunnels.open_sessions()
    );
}

#[tokio::test]
async fn a_session_carries_stdin_out_and_its_exit_back_and_is_counted_until_it_ends() {
    use flotilla_hub::kubeproxy::streams::{BytesLabels, EndLabels, KindLabels};
    use flotilla_hub::kubeproxy::tunnel::session::SessionOutput;
    use flotilla_kubestream::status::SessionStatus;
    let nats = NatsServer::start();
    let (tunnels, _stop, metrics) = tunnels_counted(&nats).await;
    let (mut io, spoke) = open_against(&nats, &tunnels, SessionScript::Echoes).await;
    assert_eq!(tunnels.open_sessions(), 1);
    let open = || {
        metrics
            .sessions
            .open
            .get_or_create(&KindLabels { kind: "exec" })
            .get()
    };
    assert_eq!(open(), 1);
    let mut echoed = Vec::new();
    for word in ["hello ", "world"] {
        io.send(bytes::Bytes::from_static(word.as_bytes()))
            .await
            .unwrap();
        let next = tokio::time::timeout(SOON, io.next()).await.unwrap();
        let Some(SessionOutput::Data { channel: 1, data }) = next else {
            panic!("stdout: {next:?}")
        };
        echoed.extend_from_slice(&data);
    }
    assert_eq!(echoed, b"hello world");
    io.close().await.unwrap();
    let mut rest = Vec::new();
    while let Some(item) = tokio::time::timeout(SOON, io.next()).await.unwrap() {
        rest.push(item);
    }
    assert!(
        matches!(
            &rest[..],
            [
                SessionOutput::Close(1),
                SessionOutput::Exit(SessionStatus::Success),
                SessionOutput::End
            ]
        ),
        "{rest:?}"
    );
    spoke.await.unwrap();
    no_sessions(&tunnels).await;
    assert_eq!(open(), 0);
    let bytes = |direction| {
        metrics
            .sessions
            .bytes
            .get_or_create(&BytesLabels {
                kind: "exec",
                direction,
            })
            .get()
    };
    assert_eq!((bytes("in"), bytes("out")), (11, 11));
    let ended = metrics
        .sessions
        .ended
        .get_or_create(&EndLabels {
            kind: "exec",
            why: "exited",
        })
        .get();
    assert_eq!(ended, 1);
}

#[tokio::test]
async fn a_hostile_spoke_fails_its_own_session_and_is_cancelled() {
    use flotilla_hub::kubeproxy::tunnel::session::{SessionError, SessionOutput};
    let nats = NatsServer::start();
    let (tunnels, _stop) = tunnels(&nats).await;
    for script in [
        SessionScript::WritesOnStdin,
        SessionScript::IgnoresItsCredit,
        SessionScript::WritesAfterClose,
        SessionScript::ExitsTwice,
        SessionScript::ExitsWithGarbage,
    ] {
        let (mut io, spoke) = open_against(&nats, &tunnels, script).await;
        // The client reads nothing until the spoke was cancelled: no credit comes meanwhile.
        tokio::time::timeout(SOON, spoke)
            .await
            .expect("the spoke was cancelled")
            .unwrap();
        let mut data = 0;
        let failure = loop {
            match tokio::time::timeout(SOON, io.next()).await.unwrap() {
                Some(SessionOutput::Failed(e)) => break e,
                Some(SessionOutput::Data { .. }) => data += 1,
                Some(_) => {}
                None => panic!("{script:?}: the session ended without its failure"),
            }
        };
        assert!(
            data <= 8,
            "{script:?}: no more than the window reached the client"
        );
        assert!(
            matches!(
                failure,
                SessionError::Call(flotilla_hub::kubeproxy::tunnel::CallError::Protocol { .. })
                    | SessionError::BadExit { .. }
            ),
            "{script:?}: {failure}"
        );
        assert!(
            tokio::time::timeout(SOON, io.next())
                .await
                .unwrap()
                .is_none()
        );
        no_sessions(&tunnels).await;
    }
}

#[tokio::test]
async fn a_refused_session_is_an_answer_and_sessions_past_an_identitys_share_are_refused() {
    use flotilla_hub::kubeproxy::streams::{Limits, Refusal};
    use flotilla_hub::kubeproxy::tunnel::session::{Opened, SessionError};
    use futures::StreamExt;
    let nats = NatsServer::start();
    let config = flotilla_hub::kubeproxy::tunnel::TunnelConfig {
        sessions: Limits {
            per_identity: 1,
            ..Limits::default()
        },
        ..Default::default()
    };
    let (tunnels, _stop, metrics) = tunnels_with(&nats, config).await;

    // The spoke refuses: its answer, as for any call.
    let spoke = session_spoke(&nats, SessionScript::Refuses).await;
    let opened = tokio::time::timeout(SOON, tunnels.open_session(exec_session("edge-1")))
        .await
        .unwrap()
        .unwrap();
    let Opened::Refused(answer) = opened else {
        panic!("a refusal")
    };
    assert_eq!(answer.head.status, 403);
    let body: Vec<_> = answer.body.collect().await;
    assert_eq!(body.len(), 1);
    assert!(body[0].is_ok());
    spoke.await.unwrap();
    no_sessions(&tunnels).await;

    // Alice's one session is open: her second is refused before any spoke hears of it.
    let (io, spoke) = open_against(&nats, &tunnels, SessionScript::Echoes).await;
    let refused = tokio::time::timeout(SOON, tunnels.open_session(exec_session("edge-1")))
        .await
        .unwrap()
        .err()
        .expect("refused");
    let SessionError::Refused(refusal) = refused else {
        panic!("refused at a session limit: {refused}")
    };
    assert!(
        matches!(refusal, Refusal::Identity { limit: 1, .. }),
        "{refusal}"
    );
    assert_eq!(refusal.status(), http::StatusCode::TOO_MANY_REQUESTS);
    let refusals = metrics
        .refusals
        .get_or_create(&flotilla_hub::kubeproxy::metrics::RefusalLabels {
            reason: "session_identity",
        })
        .get();
    assert_eq!(refusals, 1);
    // The client goes: the spoke hears of it, and alice's share is hers again.
    drop(io);
    tokio::time::timeout(SOON, spoke).await.unwrap().unwrap();
    no_sessions(&tunnels).await;

    // Each session reserves both its windows (2 MiB by default): a budget of 1 MiB holds none.
    let config = flotilla_hub::kubeproxy::tunnel::TunnelConfig {
        sessions: Limits {
            bytes_per_identity: 1 << 20,
            ..Limits::default()
        },
        ..Default::default()
    };
    let (tunnels, _stop2, _) = tunnels_with(&nats, config).await;
    let refused = tunnels
        .open_session(exec_session("edge-1"))
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(refused, SessionError::Refused(Refusal::Bytes { .. })),
        "{refused}"
    );
}

#[tokio::test]
async fn a_session_its_spoke_takes_but_never_answers_is_given_up_and_cancelled() {
    use flotilla_hub::kubeproxy::tunnel::CallError;
    use flotilla_hub::kubeproxy::tunnel::session::SessionError;
    let nats = NatsServer::start();
    let config = flotilla_hub::kubeproxy::tunnel::TunnelConfig {
        session_answer: Duration::from_secs(2),
        ..Default::default()
    };
    let (tunnels, _stop, _) = tunnels_with(&nats, config).await;
    // The spoke pings (so the idle rule never fires) and never answers 101 or a refusal.
    let spoke = session_spoke(&nats, SessionScript::NeverAnswers).await;
    let started = std::time::Instant::now();
    let failed = tokio::time::timeout(SOON, tunnels.open_session(exec_session("edge-1")))
        .await
        .expect("given up in time")
        .err()
        .expect("failed");
    assert!(
        matches!(
            failed,
            SessionError::Call(CallError::Timeout { after, .. }) if after == Duration::from_secs(2)
        ),
        "{failed}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // The spoke was told, and the caller's place is back.
    tokio::time::timeout(SOON, spoke).await.unwrap().unwrap();
    no_sessions(&tunnels).await;
}
