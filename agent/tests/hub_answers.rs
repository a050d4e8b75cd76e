//! The agent against a hand-driven hub side on a real nats-server (issue 45): what it does while
//! the hub leaves a re-registration unanswered, how many requests a resync of a few works takes,
//! and that a busy answer to a resync is a place in a queue (asked again when it says), while a
//! hub that never answers busy is served as before.

mod common;

use flotilla_agent::AgentConfig;
use flotilla_agent::backend::Backend;
use flotilla_agent::backend::sim::SimBackend;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::{
    ManifestWork, RegistrationRequest, RegistrationResponse, RegistrationState, SpecResyncRequest,
    SpecResyncResponse,
};
use flotilla_bus::envelope::{Action, Event, types};
use flotilla_bus::{subjects, works};
use futures::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

const CLUSTER: &str = "edge-h";
const WORK: &str = "settings";
const MAX: usize = 1 << 20;

/// What the hand-driven hub does with the agent's requests.
#[derive(Clone, Copy)]
struct Script {
    /// The first resync is answered busy with this wait (ms); the others in sync.
    first_resync_busy_ms: Option<u32>,
    /// The period of periodic resyncs every answer that is not busy asks (0: none).
    resync_period_seconds: u32,
}

/// What the hand-driven hub saw.
#[derive(Default)]
struct Seen {
    registrations: Vec<Instant>,
    resyncs: Vec<(Instant, SpecResyncRequest)>,
}

/// A hub side driven by the test: answers (or not) `flotilla.register.<cluster>` and
/// `flotilla.sync.<cluster>` as its [`Script`] says, and publishes spec events.
struct HandHub {
    client: async_nats::Client,
    seen: Arc<Mutex<Seen>>,
    /// Whether registrations are answered (Accepted); when not, they are left unanswered.
    answering: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl HandHub {
    async fn start(url: &str, script: Script) -> Self {
        let client = async_nats::connect(url).await.expect("connect");
        let mut register = client
            .subscribe(subjects::register(CLUSTER))
            .await
            .expect("subscribe");
        let mut sync = client
            .subscribe(subjects::sync(CLUSTER))
            .await
            .expect("subscribe");
        client.flush().await.expect("flush");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let answering = Arc::new(AtomicBool::new(true));
        let (c, s, a) = (client.clone(), seen.clone(), answering.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    Some(msg) = register.next() => {
                        s.lock().unwrap().registrations.push(Instant::now());
                        if a.load(Ordering::SeqCst) {
                            answer_registration(&c, msg).await;
                        }
                    }
                    Some(msg) = sync.next() => {
                        let request: SpecResyncRequest = Event::decode(&msg.payload, MAX)
                            .and_then(|e| e.decode_data("SpecResyncRequest"))
                            .expect("a resync request");
                        let n = {
                            let mut seen = s.lock().unwrap();
                            seen.resyncs.push((Instant::now(), request));
                            seen.resyncs.len()
                        };
                        let busy = script.first_resync_busy_ms.filter(|_| n == 1);
                        let answer = SpecResyncResponse {
                            retry_after_ms: busy.unwrap_or(0),
                            resync_period_seconds: if busy.is_some() {
                                0
                            } else {
                                script.resync_period_seconds
                            },
                            ..Default::default()
                        };
                        reply(&c, &msg, works::resync_response_type(), &answer).await;
                    }
                    else => break,
                }
            }
        });
        Self {
            client,
            seen,
            answering,
            task,
        }
    }

    fn registrations(&self) -> usize {
        self.seen.lock().unwrap().registrations.len()
    }

    fn resyncs(&self) -> Vec<(Instant, SpecResyncRequest)> {
        self.seen.lock().unwrap().resyncs.clone()
    }

    /// Publishes the hub's spec event for generation `generation` of the work.
    async fn publish_spec(&self, generation: i64) {
        let event = Event::new(
            works::spec_type(Action::UpdateRequest),
            "flotilla-hub",
            CLUSTER,
            &work(generation),
        )
        .with_resource_id(works::resource_id(CLUSTER, WORK))
        .with_resource_version(generation);
        let bytes = event.encode(MAX).expect("encode");
        self.client
            .publish(subjects::to_spec(CLUSTER), bytes)
            .await
            .expect("publish");
        self.client.flush().await.expect("flush");
    }
}

impl Drop for HandHub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn reply(
    client: &async_nats::Client,
    msg: &async_nats::Message,
    ty: flotilla_bus::EventType,
    payload: &impl prost::Message,
) {
    let event = Event::new(ty, "flotilla-hub", CLUSTER, payload);
    let bytes = event.encode(MAX).expect("encode");
    let to = msg.reply.clone().expect("a reply subject");
    client.publish(to, bytes).await.expect("answer");
}

async fn answer_registration(client: &async_nats::Client, msg: async_nats::Message) {
    let request: RegistrationRequest = Event::decode(&msg.payload, MAX)
        .and_then(|e| e.decode_data("RegistrationRequest"))
        .expect("a registration request");
    let answer = RegistrationResponse {
        cluster_name: CLUSTER.into(),
        state: RegistrationState::Accepted as i32,
        lease_duration_seconds: 60,
        in_reply_to: request.request_id,
        ..Default::default()
    };
    reply(client, &msg, types::registration_response(), &answer).await;
}

/// The work at `generation`: one ConfigMap `settings` whose value is the generation.
fn work(generation: i64) -> ManifestWork {
    let doc = format!(
        "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\n\
         metadata: {{namespace: {CLUSTER}, name: {WORK}}}\nspec:\n  workload:\n    manifests:\n\
         \x20     - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings, namespace: default}}, data: {{generation: \"{generation}\"}}}}\n"
    );
    let mut w = match parse_documents(&doc).remove(0) {
        Ok(Document::Work(w)) => w,
        other => panic!("not a work: {other:?}"),
    };
    if let Some(m) = w.metadata.as_mut() {
        m.generation = generation;
    }
    w
}

/// An agent of the cluster, stopped when dropped.
struct Agent {
    backend: Arc<SimBackend>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Agent {
    fn start(url: &str) -> Self {
        let mut config = AgentConfig::new(CLUSTER, url);
        config.status_interval = Duration::from_millis(200);
        config.work_status_interval = Duration::from_millis(200);
        config.resync_interval = Duration::from_secs(2);
        config.score_interval = None;
        let backend = Arc::new(SimBackend::new(4, 16, "v1.32.0"));
        let (tx, rx) = oneshot::channel();
        let b: Arc<dyn Backend> = backend.clone();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            flotilla_agent::run(config, b, shutdown)
                .await
                .expect("agent");
        });
        Self {
            backend,
            stop: Some(tx),
            task,
        }
    }

    /// The generation of the applied ConfigMap, if any.
    async fn applied(&self) -> Option<String> {
        let maps = self
            .backend
            .list("ConfigMap", Some("default"))
            .await
            .unwrap_or_default();
        maps.iter()
            .find(|m| m["metadata"]["name"] == "settings")
            .and_then(|m| m["data"]["generation"].as_str().map(str::to_string))
    }

    async fn until_applied(&self, generation: i64, within: Duration) {
        let want = generation.to_string();
        flotilla_testkit::eventually(within, "the work applied", || async {
            (self.applied().await.as_deref() == Some(want.as_str())).then_some(())
        })
        .await;
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}

async fn until(what: &str, within: Duration, check: impl Fn() -> bool) {
    flotilla_testkit::eventually(within, what, || {
        let ok = check();
        async move { ok.then_some(()) }
    })
    .await;
}

/// An accepted agent reconnects; the hub answers its resyncs but not its re-registration, and
/// meanwhile publishes a spec: the agent applies it at once, not after the unanswered call's
/// bound (issue 45: spec events waited while any registration was in flight, and a tail of
/// agents whose registrations kept timing out held theirs for minutes).
#[tokio::test]
async fn an_accepted_agent_applies_specs_while_its_re_registration_goes_unanswered() {
    let common::StatusFeed {
        mut nats,
        js: _js,
        reports: _reports,
    } = common::status_feed().await;
    let url = nats.url();
    let hub = HandHub::start(
        &url,
        Script {
            first_resync_busy_ms: None,
            resync_period_seconds: 0,
        },
    )
    .await;
    let agent = Agent::start(&url);
    until("the first resync", Duration::from_secs(10), || {
        !hub.resyncs().is_empty()
    })
    .await;

    hub.answering.store(false, Ordering::SeqCst);
    let before = hub.registrations();
    nats.restart();
    until("the re-registration", Duration::from_secs(20), || {
        hub.registrations() > before
    })
    .await;
    let asked = Instant::now();
    hub.publish_spec(1).await;
    // The registration's bound is 5 s (and grows while unanswered): applied well before it.
    agent.until_applied(1, Duration::from_secs(2)).await;
    assert!(asked.elapsed() < Duration::from_secs(3));
    assert_eq!(
        hub.registrations(),
        before + 1,
        "the re-registration is still the one in flight"
    );
}

/// A resync of an agent holding a few works is one request carrying the whole version map (the
/// digest first would make it two whenever a spec was missed): one request per resync round.
#[tokio::test]
async fn a_resync_of_a_few_works_is_one_request_with_the_map() {
    let feed = common::status_feed().await;
    let url = feed.nats.url();
    let hub = HandHub::start(
        &url,
        Script {
            first_resync_busy_ms: None,
            resync_period_seconds: 0,
        },
    )
    .await;
    let agent = Agent::start(&url);
    until("the first resync", Duration::from_secs(10), || {
        !hub.resyncs().is_empty()
    })
    .await;
    hub.publish_spec(1).await;
    agent.until_applied(1, Duration::from_secs(5)).await;
    let rid = works::resource_id(CLUSTER, WORK);
    let applied_at = Instant::now();
    until(
        "two resyncs holding the work",
        Duration::from_secs(10),
        || {
            hub.resyncs()
                .iter()
                .filter(|(at, r)| *at > applied_at && r.versions.contains_key(&rid))
                .count()
                >= 2
        },
    )
    .await;
    for (_, r) in hub.resyncs() {
        assert!(r.digest.is_empty(), "a digest request: {r:?}");
        assert!(r.takes_busy && r.takes_specs, "{r:?}");
    }
    let held: Vec<_> = hub
        .resyncs()
        .into_iter()
        .filter(|(at, _)| *at > applied_at)
        .map(|(_, r)| r.versions)
        .collect();
    assert!(held.iter().all(|v| v.get(&rid) == Some(&1)), "{held:?}");
    // Rounds are 1-2 s apart (interval 2 s, jittered): one request each, never two in a row.
    let times: Vec<Instant> = hub.resyncs().iter().map(|(at, _)| *at).collect();
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(900),
            "two requests {gap:?} apart"
        );
    }
}

/// A busy answer to a resync is the time to ask again: the agent waits that long (not its
/// resync interval, not a retry schedule), then asks and is answered; a hub that never answers
/// busy (every other test here) is served as before.
#[tokio::test]
async fn a_busy_resync_answer_is_asked_again_when_it_says() {
    let feed = common::status_feed().await;
    let url = feed.nats.url();
    let hub = HandHub::start(
        &url,
        Script {
            first_resync_busy_ms: Some(4_000),
            resync_period_seconds: 0,
        },
    )
    .await;
    let _agent = Agent::start(&url);
    until(
        "a resync after the busy answer",
        Duration::from_secs(15),
        || hub.resyncs().len() >= 2,
    )
    .await;
    let resyncs = hub.resyncs();
    let gap = resyncs[1].0 - resyncs[0].0;
    // The resync interval is 2 s (jittered to 1-2 s): the busy answer's 4 s rules.
    assert!(
        gap >= Duration::from_millis(3_900) && gap < Duration::from_secs(6),
        "asked again {gap:?} after a busy answer of 4 s"
    );
    // Answered in sync the second time: the next comes at the resync interval again.
    until("the next periodic resync", Duration::from_secs(10), || {
        hub.resyncs().len() >= 3
    })
    .await;
    let resyncs = hub.resyncs();
    let gap = resyncs[2].0 - resyncs[1].0;
    assert!(
        gap <= Duration::from_millis(2_500),
        "periodic resync {gap:?} later"
    );
}

/// The hub asks a longer period of periodic resyncs than the agent's own (its fleet's size over
/// its budget, issue 45): the agent waits that long between them, jittered, instead of its own
/// 2 s.
#[tokio::test]
async fn the_agent_resyncs_as_rarely_as_the_hub_asks_when_that_is_longer() {
    let feed = common::status_feed().await;
    let url = feed.nats.url();
    let hub = HandHub::start(
        &url,
        Script {
            first_resync_busy_ms: None,
            resync_period_seconds: 6,
        },
    )
    .await;
    let _agent = Agent::start(&url);
    until("three resyncs", Duration::from_secs(30), || {
        hub.resyncs().len() >= 3
    })
    .await;
    let resyncs = hub.resyncs();
    for pair in resyncs.windows(2).skip(1) {
        let gap = pair[1].0 - pair[0].0;
        // The hub's 6 s, jittered to 3-6 s; the agent's own would be 1-2 s. No upper bound: a
        // busy machine may run the agent's timer late, and three resyncs in 30 s bound it.
        assert!(
            gap >= Duration::from_millis(2_900),
            "periodic resync {gap:?} after the previous one, the hub asking 6 s"
        );
    }
}
