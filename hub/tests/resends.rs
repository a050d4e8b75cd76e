//! Re-sends of work specs (issue 45), against a real nats-server, an in-process hub and agents:
//! a spec is re-sent only to a cluster heard from since it was sent; an agent that acknowledges
//! receiving a spec is not re-sent to while it applies slowly; an agent of the wire before
//! receipts is re-sent to as before.

mod common;

use common::raw_agent::RawAgent;
use common::work::*;
use common::*;
use flotilla_api::v1::{ManifestWork, WorkStatusReport};
use flotilla_bus::envelope::Event;
use flotilla_bus::works;
use flotilla_testkit::{LinkProxy, NatsServer};
use std::time::Duration;

/// The hub's count of re-sends (all reasons).
async fn resends(hub: &flotilla_hub::Hub) -> u64 {
    metric(hub, "flotilla_hub_work_resends_total ").await
}

/// The value of the metric line starting with `prefix` (0 when absent).
async fn metric(hub: &flotilla_hub::Hub, prefix: &str) -> u64 {
    metrics_text(hub)
        .await
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map_or(0, |v| v.trim().parse::<f64>().expect("a number") as u64)
}

/// A fake agent on a raw NATS connection that sends only what a test step says: as an agent of
/// the wire before receipts, or acknowledging a receipt by hand.
struct Spoke {
    name: String,
    raw: RawAgent,
}

impl Spoke {
    async fn register(nats: &NatsServer, name: &str) -> Self {
        Self {
            name: name.into(),
            raw: RawAgent::register(nats, name).await,
        }
    }

    async fn renew(&mut self) {
        self.raw.renew(&self.name).await;
    }

    /// A work status report, as an agent of the previous wire sends it when `received` is 0.
    async fn work_status(&mut self, work: &str, observed: i64, received: i64) {
        let rid = works::resource_id(&self.name, work);
        let report = WorkStatusReport {
            cluster_name: self.name.clone(),
            work_name: work.into(),
            resource_id: rid.clone(),
            observed_generation: observed,
            status: None,
            deleted: false,
            received_generation: received,
        };
        let ev = Event::new(works::status_type(), "raw", &self.name, &report)
            .with_resource_id(rid.clone());
        self.raw
            .publish_on(works::status_subject(&self.name, &rid), ev)
            .await;
    }

    /// The next work spec pushed to this spoke within `within`, if any.
    async fn next_spec(&mut self, within: Duration) -> Option<ManifestWork> {
        self.raw.next_work(within).await
    }
}

/// A hub whose re-sends are quick (`resend_after`) and whose leases are long, so a cluster stays
/// Available through a short silence: only hearing from it decides a re-send.
fn quick_resends(nats_url: &str, resend_after: Duration) -> flotilla_hub::Config {
    let mut config = hub_config(nats_url);
    config.cluster.default_lease_duration_seconds = 30;
    config.cluster.work_resend_after = resend_after;
    config
}

/// A hub re-sending after 1 s, an accepted and Available raw spoke `name`, and work `w` applied
/// for it, whose spec the spoke has received once (returned).
async fn spoke_sent_a_work(
    nats: &NatsServer,
    name: &str,
) -> (flotilla_hub::Hub, Spoke, ManifestWork) {
    let hub = start_hub(quick_resends(&nats.url(), Duration::from_secs(1))).await;
    let mut api = clusters_client(&hub).await;
    let mut spoke = Spoke::register(nats, name).await;
    accept(&mut api, name).await;
    spoke.renew().await;
    wait_available(&mut api, name).await;
    works_client(&hub)
        .await
        .apply_work(config_map_work(name, "w"))
        .await
        .expect("applied");
    let sent = spoke.next_spec(SOON).await.expect("the spec is sent");
    (hub, spoke, sent)
}

/// The raw spoke is sent the spec once, and not again while it is silent however long that
/// lasts; the first renewal after the send makes it due again. A work status of the wire before
/// receipts (no `received_generation`) leaves the spec unconfirmed and re-sent as before.
#[tokio::test]
async fn a_spec_is_re_sent_only_after_the_cluster_is_heard_from_and_old_agents_still_get_it() {
    let nats = NatsServer::start();
    let (hub, mut spoke, _) = spoke_sent_a_work(&nats, "quiet").await;
    // Silent for four back-offs: nothing is re-sent into the silence.
    assert!(
        spoke.next_spec(Duration::from_secs(4)).await.is_none(),
        "a spec was re-sent to a cluster not heard from since the send"
    );
    assert_eq!(resends(&hub).await, 0);

    spoke.renew().await;
    assert!(
        spoke.next_spec(Duration::from_secs(5)).await.is_some(),
        "heard from after the send: the spec is re-sent after the back-off"
    );
    assert_eq!(
        metric(
            &hub,
            "flotilla_hub_work_resends_by_reason_total{reason=\"unconfirmed\"} "
        )
        .await,
        1
    );

    // The previous wire: a status of the old generation, no receipt. Still unconfirmed.
    spoke.work_status("w", 0, 0).await;
    assert!(
        spoke.next_spec(Duration::from_secs(5)).await.is_some(),
        "an agent that does not acknowledge receipt is re-sent to as before"
    );
    assert_eq!(resends(&hub).await, 2);
    hub.stop().await;
}

/// A receipt (`received_generation` of the current spec, the old status unchanged) stops the
/// re-sends while the agent applies, though it keeps being heard from.
#[tokio::test]
async fn a_spec_the_agent_acknowledged_is_not_re_sent_while_it_is_applied() {
    let nats = NatsServer::start();
    let (hub, mut spoke, sent) = spoke_sent_a_work(&nats, "busy").await;
    let generation = sent.metadata.map_or(0, |m| m.generation);
    spoke.work_status("w", 0, generation).await;
    for _ in 0..5 {
        spoke.renew().await;
        assert!(
            spoke.next_spec(Duration::from_secs(1)).await.is_none(),
            "a spec the agent acknowledged was re-sent within the longest bound"
        );
    }
    assert_eq!(resends(&hub).await, 0);
    hub.stop().await;
}

/// A receipt carrying an older status than the one stored (an agent that lost its state
/// acknowledges a spec with none) is only a receipt: the stored status is not replaced by it.
#[tokio::test]
async fn a_receipt_with_an_older_status_does_not_replace_the_stored_one() {
    let nats = NatsServer::start();
    let (hub, mut spoke, sent) = spoke_sent_a_work(&nats, "reborn").await;
    let first = sent.metadata.map_or(0, |m| m.generation);
    spoke.work_status("w", first, 0).await;
    let mut api = works_client(&hub).await;
    let stored = |w: &ManifestWork| w.hub.as_ref().map_or(0, |h| h.observed_generation);
    wait_work(
        &mut api,
        "reborn",
        "w",
        "the status of the first generation",
        |w| stored(w) == first,
    )
    .await;
    api.apply_work(config_map_work_with("reborn", "w", "v2"))
        .await
        .expect("applied again");
    let second = spoke
        .next_spec(SOON)
        .await
        .and_then(|w| w.metadata.map(|m| m.generation))
        .expect("the new generation is sent");
    assert!(second > first);
    // A receipt of the new generation with no status (observed generation 0), then a renewal
    // whose processing comes after the receipt's.
    spoke.work_status("w", 0, second).await;
    spoke.renew().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let w = wait_work(&mut api, "reborn", "w", "the work", |_| true).await;
    assert_eq!(
        stored(&w),
        first,
        "a receipt's older (empty) status replaced the stored one"
    );
    hub.stop().await;
}

/// A real agent whose connection is cut while a spec is sent gets no re-sends while cut (its
/// cluster stays Available: the cut is shorter than the lease grace), and gets the spec once the
/// link is back.
#[tokio::test]
async fn a_cut_agent_is_not_re_sent_to_and_gets_the_spec_when_back() {
    let nats = NatsServer::start();
    let link = LinkProxy::start(nats.port()).await;
    let hub = start_hub(quick_resends(&nats.url(), Duration::from_secs(1))).await;
    let mut api = clusters_client(&hub).await;
    let mut works_api = works_client(&hub).await;
    let agent = accepted_cluster(&mut api, &link.url(), "cut").await;

    link.cut();
    works_api
        .apply_work(config_map_work("cut", "missed"))
        .await
        .expect("a work for a cut cluster is accepted");
    tokio::time::sleep(Duration::from_secs(6)).await;
    let c = get(&mut api, "cut").await.expect("the cluster");
    assert_eq!(
        available(&c).as_deref(),
        Some("True"),
        "the cut outlasted the grace; the test proves nothing"
    );
    assert_eq!(
        resends(&hub).await,
        0,
        "specs were re-sent to a cluster that could not hear them"
    );

    link.restore();
    wait_work(&mut works_api, "cut", "missed", "applied", |w| {
        converged_at(w, 1)
    })
    .await;
    agent.stop().await;
    hub.stop().await;
}

/// A real agent applying slowly (the simulated API server takes 8 s per apply) acknowledges the
/// spec on receipt, and the hub — re-sending after 3 s otherwise — waits for the status.
#[tokio::test]
async fn an_agent_applying_slowly_is_not_re_sent_to() {
    let nats = NatsServer::start();
    let hub = start_hub(quick_resends(&nats.url(), Duration::from_secs(3))).await;
    let mut api = clusters_client(&hub).await;
    let mut works_api = works_client(&hub).await;
    let agent = accepted_cluster(&mut api, &nats.url(), "slow").await;

    let slow = work(&format!(
        r#"
apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {{namespace: slow, name: slow}}
spec:
  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: slow
          namespace: default
          annotations: {{"{}": "8"}}
        data: {{k: v}}
"#,
        flotilla_agent::backend::sim::ANNOTATION_APPLY_DELAY
    ));
    let applied = tokio::time::Instant::now();
    works_api.apply_work(slow).await.expect("applied");
    wait_work(&mut works_api, "slow", "slow", "applied", |w| {
        converged_at(w, 1)
    })
    .await;
    assert!(
        applied.elapsed() >= Duration::from_secs(8),
        "the apply was not slow; the test proves nothing"
    );
    assert_eq!(
        resends(&hub).await,
        0,
        "a spec the agent had received was re-sent while it applied"
    );
    agent.stop().await;
    hub.stop().await;
}
