//! The dispatch over fake handlers: which handler an event reaches, acceptance and switched-off
//! handlers, resume, reconnect and shutdown reaching every handler in order; and the start and
//! the bounded stop of a lazily started task.

use super::*;
use crate::backend::sim::SimBackend;
use flotilla_bus::envelope::{Action, Direction, EventType};
use std::sync::Mutex;
use tokio::sync::mpsc;

const CLUSTER: &str = "edge-1";
const WAIT: Duration = Duration::from_secs(5);

/// What the fakes were told, as `"<name> <what>"`, in the order they were told.
type Log = Arc<Mutex<Vec<String>>>;

/// A handler of the events whose resource is `resource`, recording what it is told.
struct Fake {
    name: &'static str,
    resource: &'static str,
    off: Option<&'static str>,
    log: Log,
}

impl Fake {
    fn new(name: &'static str, resource: &'static str, log: &Log) -> Box<Self> {
        Box::new(Self {
            name,
            resource,
            off: None,
            log: log.clone(),
        })
    }

    fn off(mut self: Box<Self>, why: &'static str) -> Box<Self> {
        self.off = Some(why);
        self
    }

    fn record(&self, what: &str) {
        self.log
            .lock()
            .expect("log lock")
            .push(format!("{} {what}", self.name));
    }
}

#[async_trait::async_trait]
impl SpecHandler for Fake {
    fn kind(&self) -> &'static str {
        self.name
    }

    fn handles(&self, event: &Event) -> bool {
        event.event_type.resource == self.resource
    }

    fn off(&self) -> Option<&'static str> {
        self.off
    }

    async fn on_spec(&mut self, event: &Event, parts: &Parts<'_>) {
        assert_eq!(parts.config.cluster_name, CLUSTER);
        self.record(&format!("spec {}", event.event_type.resource));
    }

    fn resume(&mut self, parts: &Parts<'_>) {
        assert_eq!(parts.config.cluster_name, CLUSTER);
        self.record("resume");
    }

    fn on_reconnect(&mut self) {
        self.record("reconnect");
    }

    async fn shutdown(self: Box<Self>) {
        self.record("shutdown");
    }
}

/// What [`Parts`] lend: an agent's configuration, a simulated cluster, a memory store and a
/// client that never connects (the fakes start nothing).
struct Agent {
    config: AgentConfig,
    backend: Arc<dyn Backend>,
    store: Arc<LocalStore>,
    client: async_nats::Client,
}

impl Agent {
    async fn new() -> Self {
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect("nats://127.0.0.1:1")
            .await
            .expect("a client that connects later");
        Self {
            config: AgentConfig::new(CLUSTER, "nats://127.0.0.1:1"),
            backend: Arc::new(SimBackend::new(4, 16, "v1.30.0")),
            store: Arc::new(LocalStore::memory(CLUSTER)),
            client,
        }
    }

    fn parts(&self) -> Parts<'_> {
        Parts {
            config: &self.config,
            backend: &self.backend,
            store: &self.store,
            client: &self.client,
            spoke: None,
        }
    }
}

fn event(resource: &str) -> Event {
    let ty = EventType::new(
        "test",
        "v1",
        resource,
        Direction::Spec,
        Action::UpdateRequest,
    );
    Event::new(ty, "flotilla-hub", CLUSTER, &())
}

fn taken(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().expect("log lock"))
}

#[tokio::test]
async fn an_event_reaches_the_first_handler_of_its_type_and_no_other() {
    let agent = Agent::new().await;
    let log = Log::default();
    let mut handlers = Handlers::new(vec![
        Fake::new("a", "alpha", &log),
        Fake::new("b", "beta", &log),
        Fake::new("b2", "beta", &log),
    ]);
    assert!(handlers.on_spec(&event("beta"), true, &agent.parts()).await);
    assert_eq!(taken(&log), ["b spec beta"]);
    assert!(
        handlers
            .on_spec(&event("alpha"), true, &agent.parts())
            .await
    );
    assert_eq!(taken(&log), ["a spec alpha"]);
}

#[tokio::test]
async fn an_event_no_handler_takes_is_left_to_the_caller() {
    let agent = Agent::new().await;
    let log = Log::default();
    let mut handlers = Handlers::new(vec![Fake::new("a", "alpha", &log)]);
    assert!(
        !handlers
            .on_spec(&event("gamma"), true, &agent.parts())
            .await
    );
    assert!(
        !handlers
            .on_spec(&event("gamma"), false, &agent.parts())
            .await
    );
    assert!(taken(&log).is_empty());
}

#[tokio::test]
async fn a_cluster_not_accepted_hands_no_spec_to_its_handler() {
    let agent = Agent::new().await;
    let log = Log::default();
    let mut handlers = Handlers::new(vec![
        Fake::new("a", "alpha", &log),
        Fake::new("a2", "alpha", &log),
    ]);
    // Taken (so not the caller's), yet handed to no one.
    assert!(
        handlers
            .on_spec(&event("alpha"), false, &agent.parts())
            .await
    );
    assert!(taken(&log).is_empty());
}

#[tokio::test]
async fn a_handler_switched_off_takes_its_events_and_handles_none() {
    let agent = Agent::new().await;
    let log = Log::default();
    let mut handlers = Handlers::new(vec![
        Fake::new("a", "alpha", &log).off("alpha is off on this agent"),
        Fake::new("a2", "alpha", &log),
    ]);
    assert!(
        handlers
            .on_spec(&event("alpha"), true, &agent.parts())
            .await
    );
    assert!(
        handlers
            .on_spec(&event("alpha"), false, &agent.parts())
            .await
    );
    assert!(taken(&log).is_empty());
}

#[tokio::test]
async fn resume_and_reconnect_reach_every_handler_in_order() {
    let agent = Agent::new().await;
    let log = Log::default();
    let mut handlers = Handlers::new(vec![
        Fake::new("a", "alpha", &log),
        Fake::new("b", "beta", &log).off("beta is off on this agent"),
        Fake::new("c", "gamma", &log),
    ]);
    handlers.resume(&agent.parts());
    assert_eq!(taken(&log), ["a resume", "b resume", "c resume"]);
    handlers.on_reconnect();
    assert_eq!(taken(&log), ["a reconnect", "b reconnect", "c reconnect"]);
}

#[tokio::test]
async fn shutdown_reaches_every_handler_once_in_order() {
    let agent = Agent::new().await;
    let log = Log::default();
    let mut handlers = Handlers::new(vec![
        Fake::new("a", "alpha", &log),
        Fake::new("b", "beta", &log),
        Fake::new("c", "gamma", &log),
    ]);
    tokio::time::timeout(WAIT, handlers.shutdown())
        .await
        .expect("shutdown in time");
    assert_eq!(taken(&log), ["a shutdown", "b shutdown", "c shutdown"]);
    // Shut down, the list is empty: nothing is told twice, nothing taken.
    tokio::time::timeout(WAIT, handlers.shutdown())
        .await
        .expect("second shutdown in time");
    handlers.on_reconnect();
    assert!(
        !handlers
            .on_spec(&event("alpha"), true, &agent.parts())
            .await
    );
    assert!(taken(&log).is_empty());
}

/// A task that runs until its handle (the sender) is dropped, counting the starts.
fn until_dropped(starts: &Mutex<u32>) -> (mpsc::Sender<()>, JoinHandle<()>) {
    *starts.lock().expect("starts lock") += 1;
    let (tx, mut rx) = mpsc::channel::<()>(1);
    let task = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    (tx, task)
}

#[tokio::test]
async fn a_lazy_task_starts_once_on_first_need_and_ends_with_its_handle() {
    let starts = Mutex::new(0);
    let mut task = Lazy::default();
    assert!(task.running().is_none());
    task.start(|| until_dropped(&starts));
    task.start(|| until_dropped(&starts));
    assert!(task.running().is_some());
    assert_eq!(*starts.lock().expect("starts lock"), 1);
    // Its last handle dropped, the task ends at once: well before the grace period.
    tokio::time::timeout(WAIT, task.stop(Duration::from_secs(60)))
        .await
        .expect("the task ended with its handle");
}

#[tokio::test]
async fn stopping_a_lazy_task_waits_no_longer_than_its_grace() {
    let mut task = Lazy::default();
    // A task that never ends, whatever its handle does.
    task.start(|| ((), tokio::spawn(std::future::pending::<()>())));
    tokio::time::timeout(WAIT, task.stop(Duration::from_millis(20)))
        .await
        .expect("the stop gave up after its grace");
}

#[tokio::test]
async fn stopping_a_lazy_task_never_started_waits_for_nothing() {
    let task: Lazy<mpsc::Sender<()>> = Lazy::default();
    tokio::time::timeout(WAIT, task.stop(Duration::from_secs(60)))
        .await
        .expect("nothing to wait for");
}
