use super::*;
use crate::backend::sim::SimBackend;
use flotilla_testkit::NatsServer;

#[tokio::test]
async fn a_call_over_the_agents_cap_is_answered_with_a_retryable_503() {
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let hub = uuid::Uuid::new_v4().simple().to_string();
    let mut back = client
        .subscribe(subjects::kubeapi_back("edge-1", &hub))
        .await
        .unwrap();
    client.flush().await.unwrap();
    let shared = Arc::new(Shared {
        publisher: Publisher::new(client.clone(), 1 << 20, Duration::from_secs(5)),
        cluster: "edge-1".into(),
        source: "flotilla-agent/edge-1".into(),
        backend: Arc::new(SimBackend::new(8, 32, "v1.30.2")),
        budget: Arc::new(Semaphore::new(DEFAULT_BODY_BYTES)),
        body_bytes: DEFAULT_BODY_BYTES,
        metrics: Arc::default(),
    });
    let request = TunnelRequest {
        method: "GET".into(),
        path: "/api/v1/pods".into(),
        hub,
        ..Default::default()
    };
    let call = Call::new(shared, StreamId::random(), &request);
    call.refuse(Refusal::busy(format!(
        "the agent already serves {MAX_CALLS} calls; try again later"
    )))
    .await;
    client.flush().await.unwrap();
    let mut frames = Vec::new();
    while frames.len() < 3 {
        let msg = tokio::time::timeout(Duration::from_secs(5), back.next())
            .await
            .unwrap()
            .unwrap();
        let got =
            tunnel::decode(&msg.payload, 1 << 20, &tunnel::up_type(), "edge-1", 1 << 20).unwrap();
        frames.push(got.frame);
    }
    let Frame::Response(head) = &frames[0] else {
        panic!(
            "a response head first, not a cancel: {:?}",
            frames[0].name()
        )
    };
    assert_eq!(head.status, 503);
    let Frame::Data(body) = &frames[1] else {
        panic!("a Status body")
    };
    let status: serde_json::Value = serde_json::from_slice(body).unwrap();
    assert_eq!(status["reason"], "ServiceUnavailable");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("try again later"),
        "{status}"
    );
    assert!(matches!(frames[2], Frame::End));
}

/// Frames the agent sends back on `back` until (and with) the call's `End`, within 5 s each.
async fn frames_until_end(back: &mut async_nats::Subscriber) -> Vec<Frame> {
    let mut frames = Vec::new();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), back.next())
            .await
            .expect("a frame within 5 s")
            .expect("the subscription is open");
        let got =
            tunnel::decode(&msg.payload, 1 << 20, &tunnel::up_type(), "edge-1", 1 << 20).unwrap();
        let end = matches!(got.frame, Frame::End);
        frames.push(got.frame);
        if end {
            return frames;
        }
    }
}

/// The `Status` the agent answered with: its code and message.
fn answered(frames: &[Frame]) -> (u32, String) {
    let head = frames.iter().find_map(|f| match f {
        Frame::Response(head) => Some(head.status),
        _ => None,
    });
    let body = frames.iter().find_map(|f| match f {
        Frame::Data(body) => Some(body.clone()),
        _ => None,
    });
    let status: serde_json::Value = serde_json::from_slice(&body.expect("a Status body")).unwrap();
    (
        head.expect("a response head"),
        status["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn a_read_with_a_body_is_refused_unasked_and_bodies_past_the_agents_budget_are_answered_429()
{
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let hub = uuid::Uuid::new_v4().simple().to_string();
    let mut back = client
        .subscribe(subjects::kubeapi_back("edge-1", &hub))
        .await
        .unwrap();
    let metrics: Arc<crate::metrics::AgentMetrics> = Arc::default();
    let server = Server::new(
        &js,
        "edge-1",
        Arc::new(SimBackend::new(8, 32, "v1.30.2")),
        1 << 20,
    )
    .with_limits(
        Limits {
            calls_per_caller: 64,
            body_bytes: 64 * 1024,
        },
        metrics.clone(),
    );
    let serving = tokio::spawn(server.run());
    let send = |stream: &StreamId, seq: u64, frame: Frame| {
        let event = tunnel::encode(
            tunnel::down_type(),
            "flotilla-hub",
            "edge-1",
            stream,
            seq,
            frame,
        );
        let bytes = event.encode(1 << 20).unwrap();
        let client = client.clone();
        async move {
            client
                .publish(subjects::kubeapi("edge-1"), bytes)
                .await
                .unwrap();
            client.flush().await.unwrap();
        }
    };
    let request = |method: &str| TunnelRequest {
        method: method.into(),
        path: "/api/v1/namespaces/default/configmaps".into(),
        hub: hub.clone(),
        has_body: true,
        window: 8,
        max_chunk: 64 * 1024,
        ..Default::default()
    };

    // A GET with a body: answered 400 before any credit (the agent's subscription may not be
    // up yet: ask again until it answers).
    let frames = loop {
        let stream = StreamId::random();
        send(&stream, 0, Frame::Request(Box::new(request("GET")))).await;
        if let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(500), back.next()).await {
            let first =
                tunnel::decode(&msg.payload, 1 << 20, &tunnel::up_type(), "edge-1", 1 << 20)
                    .unwrap();
            let mut frames = vec![first.frame];
            if !matches!(frames[0], Frame::End) {
                frames.extend(frames_until_end(&mut back).await);
            }
            break frames;
        }
    };
    assert!(
        matches!(frames[0], Frame::Response(_)),
        "the answer first, no credit: {:?}",
        frames.iter().map(Frame::name).collect::<Vec<_>>()
    );
    let (code, message) = answered(&frames);
    assert_eq!(code, 400, "{message}");
    assert!(
        message.contains("GET") && message.contains("body"),
        "{message}"
    );

    // A POST whose body goes past the 64 KiB the agent may hold: 429 naming the flag.
    let stream = StreamId::random();
    send(&stream, 0, Frame::Request(Box::new(request("POST")))).await;
    for seq in 1..=3 {
        send(
            &stream,
            seq,
            Frame::Data(Bytes::from(vec![b' '; 40 * 1024])),
        )
        .await;
    }
    let frames = frames_until_end(&mut back).await;
    let (code, message) = answered(&frames);
    assert_eq!(code, 429, "{message}");
    assert!(message.contains("--cluster-proxy-body-bytes"), "{message}");
    let text = metrics.render();
    assert!(
        text.contains("proxy_refusals_total{reason=\"body_bytes\"} 1")
            && text.contains("proxy_refusals_total{reason=\"body_on_read\"} 1"),
        "{text}"
    );
    // What the refused call held is given back as its task ends.
    let given_back = tokio::time::timeout(Duration::from_secs(5), async {
        while metrics.proxy_body_bytes.get() != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        given_back.is_ok(),
        "{} bytes still held",
        metrics.proxy_body_bytes.get()
    );
    serving.abort();
}
