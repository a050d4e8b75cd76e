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
