//! Spec resync admission (issue 45): past its bound of resyncs in flight the hub answers an
//! agent that reads busy answers with a time to ask again, and keeps serving agents of the
//! previous wire (no `takes_busy`) as before — never busy, which they would read as "in sync".

mod common;

use common::*;
use flotilla_api::v1::{SpecResyncRequest, SpecResyncResponse};
use flotilla_bus::envelope::Event;
use flotilla_testkit::NatsServer;
use std::time::Duration;

const CLUSTER: &str = "edge-r1";

/// Sends one resync request of `CLUSTER` and reads the answer (None: not answered in time).
async fn ask(client: &async_nats::Client, takes_busy: bool) -> Option<SpecResyncResponse> {
    let request = SpecResyncRequest {
        cluster_name: CLUSTER.into(),
        takes_specs: true,
        takes_busy,
        ..Default::default()
    };
    let ev = Event::new(
        flotilla_bus::works::resync_request_type(),
        "test",
        CLUSTER,
        &request,
    );
    let sent = client.request(
        flotilla_bus::subjects::sync(CLUSTER),
        ev.encode(1 << 20).unwrap(),
    );
    let reply = tokio::time::timeout(Duration::from_secs(30), sent)
        .await
        .ok()?
        .ok()?;
    Some(
        Event::decode(&reply.payload, 1 << 20)
            .unwrap()
            .decode_data::<SpecResyncResponse>("SpecResyncResponse")
            .unwrap(),
    )
}

/// The value of the `resync_requests` counter for `request` and `outcome`.
fn resync_requests(text: &str, request: &str, outcome: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with("flotilla_hub_resync_requests_total{"))
        .filter(|l| {
            l.contains(&format!("request=\"{request}\""))
                && l.contains(&format!("outcome=\"{outcome}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// 3,000 resyncs of one cluster at once (a site's fleet reconnecting, all at one actor) against
/// a bound of one in flight: the ones past the bound that read busy answers are told when to
/// ask again, with times spread from a second on; those of the previous wire are all answered,
/// none busy.
#[tokio::test]
async fn a_resync_burst_past_the_bound_is_answered_busy_only_to_agents_that_read_it() {
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    // Room for the whole burst in the cluster's mailbox: the admission bound decides. A bound
    // of one: a quick actor may otherwise answer a burst as fast as it comes.
    config.cluster.mailbox_capacity = 10_000;
    config.router.resyncs_in_flight = 1;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), CLUSTER).await;

    let client = async_nats::connect(nats.url()).await.unwrap();
    let answers = futures::future::join_all((0..3_000).map(|i| {
        let client = client.clone();
        async move { (i % 3 != 0, ask(&client, i % 3 != 0).await) }
    }))
    .await;

    let (mut busy, mut answered_new, mut answered_old, mut unanswered_new) = (vec![], 0, 0, 0);
    for (takes_busy, answer) in &answers {
        match (takes_busy, answer) {
            (false, Some(r)) => {
                assert_eq!(r.retry_after_ms, 0, "an old agent answered busy: {r:?}");
                assert!(r.error.is_empty(), "{r:?}");
                answered_old += 1;
            }
            (false, None) => panic!("an old agent's resync went unanswered"),
            (true, Some(r)) if r.retry_after_ms > 0 => busy.push(r.retry_after_ms),
            (true, Some(_)) => answered_new += 1,
            (true, None) => unanswered_new += 1,
        }
    }
    assert_eq!(answered_old, 1_000);
    assert_eq!(unanswered_new, 0, "every request is answered");
    assert!(!busy.is_empty(), "no busy answer in a burst of 3,000");
    assert!(answered_new > 0, "no request admitted");
    // Slots of a queue: a second at least, spread (not all the same time).
    assert!(busy.iter().all(|&ms| ms >= 1_000), "{busy:?}");
    busy.sort_unstable();
    assert!(
        busy.last() > busy.first(),
        "busy answers not spread: {busy:?}"
    );

    let text = metrics_text(&hub).await;
    // The agent's own resyncs (every 2 s here) may be among them.
    let counted_busy = resync_requests(&text, "full", "busy");
    assert!(counted_busy >= busy.len() as u64, "{text}");
    assert!(resync_requests(&text, "full", "admitted") >= 1_000 + answered_new as u64);
    assert_eq!(resync_requests(&text, "full", "dropped"), 0);
    agent.stop().await;
    hub.stop().await;
}

/// At a full mailbox an agent that reads busy answers is told when to ask again instead of
/// being left to time out; one of the previous wire is dropped as before (counted).
#[tokio::test]
async fn a_full_mailbox_answers_busy_instead_of_dropping_silently() {
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    // A mailbox of one message (a quick actor may otherwise answer a burst as fast as it
    // comes); the admission bound past any burst.
    config.cluster.mailbox_capacity = 1;
    config.router.resyncs_in_flight = 100_000;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), CLUSTER).await;

    let client = async_nats::connect(nats.url()).await.unwrap();
    let answers = futures::future::join_all((0..1_000).map(|_| ask(&client, true))).await;
    let busy = answers
        .iter()
        .flatten()
        .filter(|r| r.retry_after_ms >= 1_000)
        .count();
    assert!(busy > 0, "no busy answer at a full mailbox");
    assert!(
        answers.iter().all(Option::is_some),
        "a request left unanswered"
    );
    let text = metrics_text(&hub).await;
    assert!(
        resync_requests(&text, "full", "busy") >= busy as u64,
        "{text}"
    );
    agent.stop().await;
    hub.stop().await;
}

/// Every answer that is not busy asks the agent for the period of its periodic resyncs: the
/// fleet's size over the hub's budget (issue 45) — two clusters at one a second, two seconds.
#[tokio::test]
async fn a_resync_answer_asks_the_fleets_size_over_the_budget_as_the_period() {
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.cluster.periodic_resyncs_per_second = 1;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), CLUSTER).await;
    let other = accepted_cluster(&mut api, &nats.url(), "edge-r2").await;

    let client = async_nats::connect(nats.url()).await.unwrap();
    let answer = ask(&client, true).await.expect("answered");
    assert_eq!(answer.retry_after_ms, 0, "{answer:?}");
    assert_eq!(answer.resync_period_seconds, 2, "{answer:?}");
    other.stop().await;
    agent.stop().await;
    hub.stop().await;
}
