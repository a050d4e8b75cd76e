//! The agent's one subscription against a real nats-server: calls that time out in a row with
//! nothing reaching the subscription make it again (a deaf subscription: interest lost on the
//! way), once, and the spoke keeps working after; calls answered in between do not.

use async_nats::HeaderMap;
use bytes::Bytes;
use flotilla_bus::spoke::{Capacities, DEAF_AFTER, Spoke};
use flotilla_bus::subjects;
use flotilla_testkit::{NatsOptions, NatsServer};
use futures::StreamExt;
use std::time::Duration;

const SHORT: Duration = Duration::from_millis(100);

/// A server with its monitoring endpoint on; the endpoint's `host:port`.
fn monitored_nats() -> (NatsServer, String) {
    let port = flotilla_testkit::free_port();
    let nats = NatsServer::start_with(NatsOptions {
        jetstream: false,
        extra: format!("http: 127.0.0.1:{port}\n"),
        ..NatsOptions::default()
    });
    (nats, format!("127.0.0.1:{port}"))
}

/// The server's subscription ids on `subject`, over every connection.
async fn sids_on(monitor: &str, subject: &str) -> Vec<String> {
    let (status, body) = flotilla_testkit::http_get(monitor, "/connz?subs=detail&limit=1024")
        .await
        .expect("the monitoring endpoint answers");
    assert_eq!(status, 200, "{body}");
    let connz: serde_json::Value = serde_json::from_str(&body).expect("connz is JSON");
    connz["connections"]
        .as_array()
        .expect("a list of connections")
        .iter()
        .flat_map(|c| {
            c["subscriptions_list_detail"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|s| s["subject"] == subject)
        .filter_map(|s| s["sid"].as_str().map(str::to_string))
        .collect()
}

/// Waits up to 10 s for `subject`'s subscription ids to satisfy `done`.
async fn wait_for_sids(
    monitor: &str,
    subject: &str,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    for _ in 0..100 {
        let sids = sids_on(monitor, subject).await;
        if done(&sids) {
            return sids;
        }
        tokio::time::sleep(SHORT).await;
    }
    sids_on(monitor, subject).await
}

async fn ask(
    spoke: &Spoke,
    subject: &str,
) -> Result<async_nats::Message, async_nats::RequestError> {
    spoke
        .request(
            subject.into(),
            HeaderMap::new(),
            Bytes::from_static(b"?"),
            SHORT,
        )
        .await
}

#[tokio::test]
async fn a_subscription_that_hears_nothing_while_calls_time_out_is_made_again() {
    let (nats, monitor) = monitored_nats();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let (spoke, mut feeds, demux) = Spoke::start(&client, "edge-1", false, Capacities::default())
        .await
        .unwrap();
    let all = subjects::to_all("edge-1");
    let before = wait_for_sids(&monitor, &all, |s| s.len() == 1).await;
    assert_eq!(before.len(), 1, "{before:?}");
    // Someone takes the requests and never answers: each call times out. On the spoke's own
    // connection, so the server has the subscriptions before the requests (a flush does not
    // wait for the server).
    let other = client.clone();
    let _silent = other.subscribe("hub.silent").await.unwrap();
    other.flush().await.unwrap();
    for _ in 0..DEAF_AFTER {
        let err = ask(&spoke, "hub.silent").await.expect_err("nobody answers");
        assert_eq!(err.kind(), async_nats::RequestErrorKind::TimedOut);
    }
    let after = wait_for_sids(&monitor, &all, |s| s.len() == 1 && s != before).await;
    assert!(
        after.len() == 1 && after != before,
        "one subscription, made again: {before:?} → {after:?}"
    );
    // It works: a spec sent now arrives, a call is answered.
    other
        .publish(subjects::to_spec("edge-1"), Bytes::from_static(b"spec"))
        .await
        .unwrap();
    let spec = tokio::time::timeout(Duration::from_secs(5), feeds.spec.next())
        .await
        .expect("the spec arrives on the new subscription");
    assert_eq!(spec.payload, Bytes::from_static(b"spec"));
    answer_ok(&other, "hub.answers").await;
    other.flush().await.unwrap();
    let answer = ask_within(&spoke, "hub.answers", Duration::from_secs(5)).await;
    assert_eq!(answer.payload, Bytes::from_static(b"ok"));
    // At most once per spacing: another run of timeouts leaves the new subscription alone.
    for _ in 0..DEAF_AFTER {
        let _ = ask(&spoke, "hub.silent").await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sids_on(&monitor, &all).await, after);
    demux.stop().await;
}

/// Answers every request on `subject` with `ok`, from a task of its own.
async fn answer_ok(client: &async_nats::Client, subject: &str) {
    let mut answering = client.subscribe(subject.to_string()).await.unwrap();
    let responder = client.clone();
    tokio::spawn(async move {
        while let Some(m) = answering.next().await {
            if let Some(reply) = m.reply {
                let _ = responder.publish(reply, Bytes::from_static(b"ok")).await;
            }
        }
    });
}

async fn ask_within(spoke: &Spoke, subject: &str, timeout: Duration) -> async_nats::Message {
    spoke
        .request(
            subject.into(),
            HeaderMap::new(),
            Bytes::from_static(b"?"),
            timeout,
        )
        .await
        .expect("answered")
}

#[tokio::test]
async fn timeouts_with_answers_in_between_leave_the_subscription_alone() {
    let (nats, monitor) = monitored_nats();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let (spoke, _feeds, demux) = Spoke::start(&client, "edge-2", false, Capacities::default())
        .await
        .unwrap();
    let all = subjects::to_all("edge-2");
    let before = wait_for_sids(&monitor, &all, |s| s.len() == 1).await;
    let other = client.clone();
    let _silent = other.subscribe("hub.silent").await.unwrap();
    answer_ok(&other, "hub.answers").await;
    other.flush().await.unwrap();
    // A slow hub: most calls time out, but something gets through now and then.
    for _ in 0..3 {
        for _ in 0..DEAF_AFTER - 1 {
            let _ = ask(&spoke, "hub.silent").await;
        }
        ask_within(&spoke, "hub.answers", Duration::from_secs(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sids_on(&monitor, &all).await, before);
    demux.stop().await;
}
