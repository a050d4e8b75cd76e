//! The publisher against a real nats-server: acknowledged JetStream publishes (de-duplicated
//! on retry), core publishes with headers, typed requests, and each failure as its variant.

use async_nats::jetstream::{self, stream};
use flotilla_api::v1::LeaseRenewal;
use flotilla_bus::envelope::{CONTENT_TYPE, Event, types};
use flotilla_bus::publish::{PublishError, Publisher};
use flotilla_testkit::NatsServer;
use futures::StreamExt;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

fn lease(cluster: &str) -> Event {
    Event::new(
        types::lease_renewal(),
        "flotilla-agent/test",
        cluster,
        &LeaseRenewal {
            cluster_name: cluster.into(),
            renew_time: Some(flotilla_api::meta::now()),
        },
    )
}

async fn publisher(server: &NatsServer, timeout: Duration) -> Publisher {
    let client = async_nats::connect(server.url()).await.unwrap();
    Publisher::new(client, 64 * 1024, timeout)
}

#[tokio::test]
async fn an_acked_publish_is_stored_once_even_when_retried() {
    let server = NatsServer::start();
    let p = publisher(&server, T).await;
    let js = jetstream::new(p.client().clone());
    js.create_stream(stream::Config {
        name: "EVENTS".into(),
        subjects: vec!["ev.>".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let ev = lease("c1");
    let first = p.publish_acked("ev.c1".into(), &ev).await.unwrap();
    assert_eq!((first.stream.as_str(), first.sequence), ("EVENTS", 1));
    assert!(!first.duplicate);
    let again = p.publish_acked("ev.c1".into(), &ev).await.unwrap();
    assert!(again.duplicate, "the event id de-duplicates a retry");
    assert_eq!(again.sequence, 1);

    let stored = js
        .get_stream("EVENTS")
        .await
        .unwrap()
        .get_raw_message(1)
        .await
        .unwrap();
    let decoded = Event::decode(&stored.payload, 64 * 1024).unwrap();
    assert_eq!(decoded.id, ev.id);
}

#[tokio::test]
async fn an_acked_publish_without_a_stream_is_an_ack_error() {
    let server = NatsServer::start();
    let p = publisher(&server, T).await;
    let e = p
        .publish_acked("nostream.c1".into(), &lease("c1"))
        .await
        .unwrap_err();
    assert!(matches!(e, PublishError::Ack { .. }), "{e:?}");
    assert_eq!(e.subject(), "nostream.c1");
    assert!(!e.is_permanent());
    assert!(std::error::Error::source(&e).is_some(), "the cause is kept");
}

#[tokio::test]
async fn a_too_large_event_is_refused_before_sending() {
    let server = NatsServer::start();
    let client = async_nats::connect(server.url()).await.unwrap();
    let p = Publisher::new(client, 64, T);
    let mut sub = p.client().subscribe("big").await.unwrap();
    let e = p.publish("big".into(), &lease("c1")).await.unwrap_err();
    let PublishError::TooLarge { size, max, .. } = &e else {
        panic!("{e:?}");
    };
    assert!(*size > 64 && *max == 64, "{e}");
    assert!(e.is_permanent());
    assert!(e.to_string().starts_with("big: the event is"), "{e}");
    let e = p
        .publish_acked("big".into(), &lease("c1"))
        .await
        .unwrap_err();
    assert!(matches!(e, PublishError::TooLarge { .. }), "{e:?}");
    p.client().flush().await.unwrap();
    let nothing = tokio::time::timeout(Duration::from_millis(100), sub.next()).await;
    assert!(nothing.is_err(), "nothing was sent");
}

#[tokio::test]
async fn a_core_publish_carries_the_event_and_its_headers() {
    let server = NatsServer::start();
    let p = publisher(&server, T).await;
    let mut sub = p.client().subscribe("note.>").await.unwrap();
    p.client().flush().await.unwrap();
    let ev = lease("c1");
    p.publish("note.c1".into(), &ev).await.unwrap();
    let msg = tokio::time::timeout(T, sub.next()).await.unwrap().unwrap();
    let headers = msg.headers.expect("headers");
    assert_eq!(headers.get("Content-Type").unwrap().as_str(), CONTENT_TYPE);
    assert_eq!(headers.get("Nats-Msg-Id").unwrap().as_str(), ev.id);
    assert_eq!(Event::decode(&msg.payload, 1 << 20).unwrap().id, ev.id);
}

/// Answers every request on `subject` with `answer(request payload)`.
async fn responder(
    client: async_nats::Client,
    subject: &str,
    answer: impl Fn(&[u8]) -> Option<bytes::Bytes> + Send + 'static,
) {
    let mut sub = client.subscribe(subject.to_string()).await.unwrap();
    client.flush().await.unwrap();
    tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            if let (Some(reply), Some(bytes)) = (msg.reply, answer(&msg.payload)) {
                client.publish(reply, bytes).await.unwrap();
            }
        }
    });
}

#[tokio::test]
async fn a_request_decodes_the_typed_answer_or_says_why_not() {
    let server = NatsServer::start();
    let p = publisher(&server, Duration::from_millis(500)).await;
    // The responders share the requester's connection: the server then sees each SUB before
    // the requests (a flush does not wait for the server across connections).
    let other = p.client().clone();
    responder(other.clone(), "ask.echo", |payload| {
        let asked = Event::decode(payload, 1 << 20).ok()?;
        let renewal: LeaseRenewal = asked.decode_data("LeaseRenewal").ok()?;
        let answer = Event::new(
            types::lease_renewal(),
            "hub",
            &renewal.cluster_name,
            &renewal,
        );
        answer.encode(1 << 20).ok()
    })
    .await;
    responder(other.clone(), "ask.garbage", |_| {
        Some(bytes::Bytes::from_static(b"\xff\xff"))
    })
    .await;
    responder(other, "ask.silent", |_| None).await;

    let got: LeaseRenewal = p
        .request("ask.echo".into(), &lease("c7"), "LeaseRenewal")
        .await
        .unwrap();
    assert_eq!(got.cluster_name, "c7");

    let e = p
        .request::<LeaseRenewal>("ask.garbage".into(), &lease("c7"), "LeaseRenewal")
        .await
        .unwrap_err();
    assert!(matches!(e, PublishError::Decode { .. }), "{e:?}");

    let e = p
        .request::<LeaseRenewal>("ask.silent".into(), &lease("c7"), "LeaseRenewal")
        .await
        .unwrap_err();
    assert!(
        matches!(e, PublishError::Timeout { timeout, .. } if timeout == Duration::from_millis(500)),
        "{e:?}"
    );

    let e = p
        .request::<LeaseRenewal>("ask.nobody".into(), &lease("c7"), "LeaseRenewal")
        .await
        .unwrap_err();
    assert!(
        matches!(e, PublishError::Publish { .. }),
        "no responders: {e:?}"
    );
    assert!(e.to_string().contains("ask.nobody"), "{e}");
}
