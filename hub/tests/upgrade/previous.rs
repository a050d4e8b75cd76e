//! The previous release against this build's hub (issue 49 §6.3, §6.4, §6.6).
//!
//! - An agent of the previous release, replayed byte for byte from its recorded wire
//!   (`testkit/fixtures/wire/v0.1/`, recorded by `hub/examples/record_wire.rs`), registers, is
//!   accepted, resyncs (its full map: an agent holding few works sends no digest), takes
//!   works — one pushed, one in a resync answer — and reports them,
//!   and today's hub shows the cluster Available and both works converged.
//! - A store whose format marker asks for a newer hub stops this one with what to do.
//! - A live hub of a version more than one minor away is shown on `/debug/shards` and as
//!   `flotilla_hub_version_skew`.

use crate::common::work::*;
use crate::common::*;
use bytes::Bytes;
use flotilla_api::v1::{
    ManifestWork, RegistrationRequest, RegistrationResponse, RegistrationState, SpecResyncRequest,
    SpecResyncResponse,
};
use flotilla_bus::envelope::Event;
use flotilla_bus::subjects::{StatusSubject, Wire};
use flotilla_testkit::NatsServer;
use flotilla_testkit::wire::{Message, Recording};
use futures::StreamExt;

/// The release whose recorded wire is replayed.
const RELEASE: &str = "0.1";
/// The cluster the recording's agent was.
const CLUSTER: &str = "fixture-c1";
const MAX: usize = 1 << 20;

/// Plays the recorded agent: publishes its messages as they were, reads what the hub sends.
struct Replayer {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    specs: async_nats::Subscriber,
}

fn headers(m: &Message) -> async_nats::HeaderMap {
    let mut h = async_nats::HeaderMap::new();
    for (n, v) in &m.headers {
        h.append(n.as_str(), v.as_str());
    }
    h
}

impl Replayer {
    async fn new(nats: &NatsServer, wire: Wire) -> Self {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let specs = client.subscribe(wire.spec(CLUSTER)).await.unwrap();
        Self {
            js: async_nats::jetstream::new(client.clone()),
            client,
            specs,
        }
    }

    /// Sends a recorded request on its recorded subject and reply subject; the answer's payload.
    async fn request(&self, m: &Message) -> Bytes {
        let reply = m
            .reply
            .clone()
            .expect("a recorded request has a reply subject");
        let mut answers = self.client.subscribe(reply.clone()).await.unwrap();
        self.client
            .publish_with_reply_and_headers(m.subject.clone(), reply, headers(m), m.payload.clone())
            .await
            .unwrap();
        tokio::time::timeout(SOON, answers.next())
            .await
            .unwrap_or_else(|_| panic!("no answer to the recorded {:?} in time", m.name))
            .expect("answer subscription open")
            .payload
    }

    async fn resync(&self, m: &Message) -> SpecResyncResponse {
        let answer = self.request(m).await;
        let answer: SpecResyncResponse = Event::decode(&answer, MAX)
            .unwrap()
            .decode_data("SpecResyncResponse")
            .unwrap();
        assert_eq!(answer.error, "", "{}: {answer:?}", m.name);
        assert!(answer.deleted.is_empty(), "{}: {answer:?}", m.name);
        answer
    }

    /// Publishes a recorded status into the status stream as the agent did (JetStream, with
    /// its headers), waiting for the stream's ack.
    async fn status(&self, m: &Message) {
        self.js
            .publish_with_headers(m.subject.clone(), headers(m), m.payload.clone())
            .await
            .unwrap()
            .await
            .unwrap_or_else(|e| panic!("the status stream took the recorded {:?}: {e}", m.name));
    }

    /// The next event on the cluster's spec subject.
    async fn next_spec(&mut self) -> Event {
        let m = tokio::time::timeout(SOON, self.specs.next())
            .await
            .expect("a spec event in time")
            .expect("spec subscription open");
        Event::decode(&m.payload, MAX).unwrap()
    }
}

impl Replayer {
    /// The next work spec on the cluster's spec subject (registration notices skipped).
    async fn next_work(&mut self) -> Event {
        loop {
            let ev = self.next_spec().await;
            if flotilla_bus::works::is_work(&ev.event_type) {
                return ev;
            }
        }
    }
}

/// The recorded work status `name`'s resource id (from its subject).
fn status_resource_id(m: &Message) -> String {
    StatusSubject::parse(&m.subject)
        .unwrap()
        .resource_id
        .expect("a work status subject names its work")
        .to_string()
}

fn work_named(ev: &Event, name: &str, resource_id: &str) -> ManifestWork {
    assert!(flotilla_bus::works::is_work(&ev.event_type), "{ev:?}");
    assert_eq!(ev.resource_id.as_deref(), Some(resource_id));
    let w: ManifestWork = ev.decode_data("ManifestWork").unwrap();
    let meta = w.metadata.clone().unwrap();
    assert_eq!((meta.name.as_str(), meta.generation), (name, 1));
    let manifests = w.spec.as_ref().and_then(|s| s.workload.as_ref());
    assert_eq!(
        manifests.map(|m| m.manifests.len()),
        Some(1),
        "the ConfigMap the release's agent applies"
    );
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_of_the_previous_release_registers_resyncs_takes_works_and_reports_on_this_hub() {
    let rec = Recording::load(RELEASE);
    let register: RegistrationRequest = Event::decode(&rec.get("register").payload, MAX)
        .unwrap()
        .decode_data("RegistrationRequest")
        .unwrap();
    assert_eq!(register.cluster_name, CLUSTER);
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let mut works = works_client(&hub).await;
    let mut agent = Replayer::new(&nats, Wire::announced(register.listens_under_prefix)).await;

    // Registers: Pending, answered to its own request id; accepted, told so on its spec subject.
    let answer = agent.request(rec.get("register")).await;
    let answer: RegistrationResponse = Event::decode(&answer, MAX)
        .unwrap()
        .decode_data("RegistrationResponse")
        .unwrap();
    assert_eq!(answer.state(), RegistrationState::Pending, "{answer:?}");
    assert_eq!(answer.in_reply_to, register.request_id);
    accept(&mut clusters, CLUSTER).await;
    let told: RegistrationResponse = agent
        .next_spec()
        .await
        .decode_data("RegistrationResponse")
        .unwrap();
    assert_eq!(told.state(), RegistrationState::Accepted, "{told:?}");

    // Its first resync (no works) is in sync; its lease and cluster status make it Available.
    let first = agent.resync(rec.get("resync-empty")).await;
    assert!(!first.send_versions && first.resent == 0, "{first:?}");
    agent.status(rec.get("lease")).await;
    agent.status(rec.get("cluster-status")).await;
    let c = wait_cluster(&mut clusters, CLUSTER, "Available", |c| {
        available(c).as_deref() == Some("True")
    })
    .await;
    let version = c.status.and_then(|s| s.version).unwrap_or_default();
    assert_eq!(version.agent, register.agent_version);
    assert_eq!(version.kubernetes, register.kubernetes_version);

    // A work applied now is pushed to it on the subjects it listens on, and its status lands.
    let w1_status = rec.get("work-status-w1");
    works
        .apply_work(config_map_work(CLUSTER, "fixture-w1"))
        .await
        .unwrap();
    let pushed = agent.next_work().await;
    work_named(&pushed, "fixture-w1", &status_resource_id(w1_status));
    agent.status(w1_status).await;
    wait_work(&mut works, CLUSTER, "fixture-w1", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    // Its map {fixture-w1: 1} is the hub's.
    let in_sync = agent.resync(rec.get("resync-w1")).await;
    assert!(!in_sync.send_versions && in_sync.resent == 0, "{in_sync:?}");

    // Away while fixture-w2 was applied: the same map now lacks it, and the answer carries it.
    works
        .apply_work(config_map_work(CLUSTER, "fixture-w2"))
        .await
        .unwrap();
    let full = rec.get("resync-w1-back");
    let full_request: SpecResyncRequest = Event::decode(&full.payload, MAX)
        .unwrap()
        .decode_data("SpecResyncRequest")
        .unwrap();
    let answer = agent.resync(full).await;
    assert_eq!(answer.resent, 1, "{answer:?}");
    let w2_status = rec.get("work-status-w2");
    let w2_id = status_resource_id(w2_status);
    let resent = if full_request.takes_specs {
        assert_eq!(answer.specs.len(), 1, "{answer:?}");
        Event::decode(&answer.specs[0], MAX).unwrap()
    } else {
        loop {
            let ev = agent.next_work().await;
            if ev.resource_id.as_deref() == Some(w2_id.as_str()) {
                break ev;
            }
        }
    };
    work_named(&resent, "fixture-w2", &w2_id);
    agent.status(w2_status).await;
    wait_work(&mut works, CLUSTER, "fixture-w2", "converged", |w| {
        converged_at(w, 1)
    })
    .await;
    wait_work(&mut works, CLUSTER, "fixture-w1", "still converged", |w| {
        converged_at(w, 1)
    })
    .await;
    let metrics = metrics_text(&hub).await;
    assert!(
        metrics.lines().any(|l| l
            == format!(
                "flotilla_hub_agent_versions{{version=\"{}\"}} 1",
                register.agent_version
            )),
        "{metrics}"
    );
    hub.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_older_than_the_stores_format_marker_refuses_to_start_saying_what_to_do() {
    use flotilla_hub_core::recovery::format::{FORMAT, FORMAT_KEY, MIN_HUB};
    use prost::Message as _;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    hub.stop().await;
    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
    let meta = js
        .get_key_value(flotilla_hub_core::recovery::HUBMETA)
        .await
        .unwrap();
    let written = flotilla_api::v1::StoreFormat::decode(
        meta.get(FORMAT_KEY)
            .await
            .unwrap()
            .expect("the first hub marks the store")
            .as_ref(),
    )
    .unwrap();
    assert_eq!(
        (
            written.format,
            written.min_hub.as_str(),
            written.written_by.as_str()
        ),
        (FORMAT, MIN_HUB, flotilla_api::version::VERSION)
    );

    // A newer fleet migrated the store (or it was restored from one).
    let newer = flotilla_api::v1::StoreFormat {
        format: FORMAT + 1,
        min_hub: "99.0.0".into(),
        written_by: "99.1.0".into(),
    };
    meta.put(FORMAT_KEY, newer.encode_to_vec().into())
        .await
        .unwrap();
    let refused = tokio::time::timeout(SOON, flotilla_hub::start(hub_config(&nats.url())))
        .await
        .expect("the hub answered in time");
    let Err(e) = refused else {
        panic!("a hub started on a store marked for hubs >= 99.0.0");
    };
    assert_eq!(
        e.to_string(),
        format!(
            "the store is in format {}, written by flotilla-hub 99.1.0, and needs a hub >= \
             99.0.0; this hub is {}: upgrade this hub (docs/operations.md#versions), or run it \
             on a store restored from a backup its own version took",
            FORMAT + 1,
            flotilla_api::version::VERSION
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_hub_more_than_one_minor_away_is_shown_and_counted_as_skew() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    // A heartbeat of a far newer hub that is leaving (draining: it takes no units from this one).
    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
    let members = js
        .get_key_value(flotilla_hub_core::ha::lease::MEMBERS)
        .await
        .unwrap();
    let far = serde_json::json!({
        "hub": "far-1", "incarnation": "far-1-a", "grpc": "", "metrics": "",
        "draining": true, "version": "9.4.0",
    });
    members.put("far-1", far.to_string().into()).await.unwrap();
    wait_metric(
        &hub,
        "flotilla_hub_version_skew{hub=\"far-1\",version=\"9.4.0\"} 1",
    )
    .await;
    let (_, body) = flotilla_testkit::http_get(&hub.metrics_addr.to_string(), "/debug/shards")
        .await
        .expect("/debug/shards");
    let shards: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        shards["skew"],
        serde_json::json!([{"hub": "far-1", "version": "9.4.0"}]),
        "{body}"
    );
    assert_eq!(shards["version"], flotilla_api::version::VERSION, "{body}");
    assert_eq!(shards["versions"]["far-1"], "9.4.0", "{body}");
    hub.stop().await;
}
