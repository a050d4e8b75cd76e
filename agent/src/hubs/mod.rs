//! An agent with several hubs (OCM's MultipleHubs): it registers with one hub at a time and
//! fails over to the next when the current one stops answering or denies it.
//!
//! - [`file`]: the hubs file (`--hubs`): name, NATS URLs, CA and bootstrap credentials per hub.
//! - [`rules`]: which hub, when to switch (pure, over simulated instants).
//! - [`dirs`]: the state directory — one directory per hub, the identity shared.
//!
//! The [`Supervisor`] runs one *session* at a time: an ordinary agent ([`crate::run`]) for one
//! hub, with that hub's connection, credentials and state directory. The session tells it when
//! the hub answered ([`Signal::Alive`]: a registration or spec-resync answer — a JetStream
//! acknowledgement proves only that NATS is up) or denied the cluster ([`Signal::Denied`]); its
//! resync interval is capped at a sixth of the timeout so an accepted agent hears from its hub
//! often enough. Switching stops the session (its connection drained) and starts the next. Each
//! hub sees an ordinary agent: hub A turns the cluster Unknown after its grace, as for any
//! agent it lost; nothing changes on the hubs or the wire.
//!
//! Workloads survive a switch: the previous hub's works stay in its directory, parked — their
//! resources stay on the spoke, nothing reconciles or deletes them — and the next hub's
//! resync cannot name them. They come back to life if the agent returns to that hub.

pub mod cleanup;
pub mod dirs;
pub mod file;
pub mod rules;

use crate::metrics::SwitchReason;
use crate::{AgentConfig, AgentError, StateConfig};
use rules::{Decision, Event, Reason, Selection};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// One hub an agent may register with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubEndpoint {
    /// Its name (a DNS-1123 label): its state is `STATE_DIR/hubs/<name>`.
    pub name: String,
    /// Its NATS server URLs (comma-separated).
    pub nats_url: String,
    /// The CA of its NATS server.
    pub ca: Option<PathBuf>,
    /// Secure mode on this hub: the bootstrap credentials its admin handed out.
    pub bootstrap_creds: Option<PathBuf>,
    /// Its server starts TLS before its first line (`handshake_first`).
    pub tls_first: bool,
}

/// The hubs and how long one may stay silent.
#[derive(Debug, Clone)]
pub struct MultipleHubs {
    /// In the order they are tried.
    pub hubs: Vec<HubEndpoint>,
    /// `hubConnectionTimeoutSeconds`: how long the current hub may not answer before the agent
    /// switches ([`rules::DEFAULT_TIMEOUT`]; the binary enforces [`rules::MIN_TIMEOUT`]).
    pub timeout: Duration,
    /// What happens to the previous hub's works after a switch.
    pub cleanup: cleanup::Cleanup,
}

/// What a session tells its supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The hub answered a registration or a resync.
    Alive,
    /// The hub denied the cluster (`hubAcceptsClient: false`).
    Denied,
}

/// A session's link to its supervisor, carried in [`AgentConfig::hub_session`].
#[derive(Debug, Clone)]
pub struct Session {
    /// The hub's name (scopes the names of the works' anchors on a Kubernetes spoke).
    pub hub: String,
    signals: mpsc::UnboundedSender<Signal>,
    /// The other hubs' state directories, whose works are parked.
    others: Vec<PathBuf>,
}

impl Session {
    /// The resources the other hubs' parked works declare, each with an owner naming the hub
    /// and the work.
    pub fn parked_resources(&self, cluster: &str) -> Vec<(flotilla_api::work::ManifestId, String)> {
        declared_in(&self.others, cluster)
    }

    /// Tells the supervisor (ignored once it stopped listening).
    pub fn signal(&self, s: Signal) {
        let _ = self.signals.send(s);
    }
}

/// The resources the works kept in the hub directories `dirs` declare, each with an owner
/// naming the directory and the work (`<dir>/<resourceid>`). Read only; a directory that cannot
/// be read keeps nothing and is logged.
fn declared_in(dirs: &[PathBuf], cluster: &str) -> Vec<(flotilla_api::work::ManifestId, String)> {
    let mut out = Vec::new();
    for dir in dirs {
        if !dir.join("agent-state.json").exists() {
            continue;
        }
        match crate::store::LocalStore::open(dir, cluster).and_then(|s| s.load_works()) {
            Ok(works) => {
                for w in works {
                    for a in &w.applied {
                        let owner = format!("{}/{}", dir.display(), w.resource_id);
                        out.push((crate::work::actor::applied_id(a), owner));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "reading another hub's parked works failed");
            }
        }
    }
    out
}

/// How a session ended.
enum Outcome {
    Shutdown,
    Switch(usize, Reason),
}

/// Runs the agent over several hubs until `shutdown` resolves.
pub struct Supervisor {
    config: AgentConfig,
    multi: MultipleHubs,
    backend: Arc<dyn crate::backend::Backend>,
    root: PathBuf,
    identity: String,
}

impl Supervisor {
    /// Checks the configuration and prepares the state directory (adopting a single-hub
    /// agent's state into the first hub's directory).
    pub fn new(
        config: AgentConfig,
        multi: MultipleHubs,
        backend: Arc<dyn crate::backend::Backend>,
    ) -> Result<Self, AgentError> {
        let errors = config.validate();
        if !errors.is_empty() {
            return Err(AgentError::Config(errors));
        }
        let StateConfig::Dir(root) = config.state.clone() else {
            return Err(AgentError::Config(vec![
                "several hubs need a state directory (one per hub inside it)".into(),
            ]));
        };
        if multi.hubs.len() < 2 {
            return Err(AgentError::Config(vec![format!(
                "several hubs: {} listed, at least 2 needed",
                multi.hubs.len()
            )]));
        }
        if config.connection.is_some() {
            return Err(AgentError::Config(vec![
                "several hubs cannot share a NATS connection".into(),
            ]));
        }
        let identity = dirs::prepare(&root, &config.cluster_name, &multi.hubs[0].name)?;
        Ok(Self {
            config,
            multi,
            backend,
            root,
            identity,
        })
    }

    /// Runs sessions, one hub at a time, until `shutdown` resolves.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), AgentError> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut selection = self.resume();
        loop {
            let hub = self.multi.hubs[selection.current].clone();
            tracing::info!(hub = %hub.name, url = %hub.nats_url, "registering with hub");
            match self.session(&hub, &mut selection, shutdown.as_mut()).await {
                Outcome::Shutdown => return Ok(()),
                Outcome::Switch(to, reason) => {
                    let why = match reason {
                        Reason::Unanswered => "unanswered",
                        Reason::Denied => "denied",
                    };
                    tracing::warn!(
                        from = %hub.name,
                        to = %self.multi.hubs[to].name,
                        reason = why,
                        timeout_seconds = self.multi.timeout.as_secs(),
                        "switching hubs; the previous hub's workloads stay on the cluster"
                    );
                    self.config
                        .metrics
                        .hub_switches
                        .get_or_create(&SwitchReason { reason: why })
                        .inc();
                    self.persist(&selection);
                    if self.multi.cleanup == cleanup::Cleanup::Delete {
                        self.clean_up(&hub).await;
                    }
                }
            }
        }
    }

    /// The selection a restarted agent resumes with.
    fn resume(&self) -> Selection {
        let index = |name: &str| self.multi.hubs.iter().position(|h| h.name == name);
        let saved = dirs::load_selection(&self.root).unwrap_or_default();
        let current = index(&saved.current).unwrap_or(0);
        let denied: BTreeSet<usize> = saved.denied.iter().filter_map(|n| index(n)).collect();
        let now = std::time::Instant::now();
        Selection::new(
            self.multi.hubs.len(),
            current,
            denied,
            self.multi.timeout,
            now,
        )
    }

    /// `--hub-switch-cleanup delete`: the works of the hub just left go from the spoke.
    async fn clean_up(&self, left: &HubEndpoint) {
        let others: Vec<PathBuf> = self
            .multi
            .hubs
            .iter()
            .filter(|h| h.name != left.name)
            .map(|h| dirs::hub_dir(&self.root, &h.name))
            .collect();
        let kept = declared_in(&others, &self.config.cluster_name)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let dir = dirs::hub_dir(&self.root, &left.name);
        match cleanup::delete_works(
            self.backend.as_ref(),
            &dir,
            &self.config.cluster_name,
            &left.name,
            &kept,
        )
        .await
        {
            Ok(n) => {
                tracing::info!(hub = %left.name, resources = n, "the previous hub's works deleted (--hub-switch-cleanup delete)")
            }
            Err(e) => {
                tracing::error!(hub = %left.name, error = %e, "deleting the previous hub's works failed")
            }
        }
    }

    fn persist(&self, s: &Selection) {
        let p = dirs::Persisted {
            current: self.multi.hubs[s.current].name.clone(),
            denied: s
                .denied
                .iter()
                .map(|&i| self.multi.hubs[i].name.clone())
                .collect(),
        };
        if let Err(e) = dirs::save_selection(&self.root, &p) {
            tracing::error!(error = %e, "saving the hub selection failed");
        }
    }

    /// One hub's session: runs the agent for `hub` until the selection switches or `shutdown`
    /// resolves, then stops it.
    async fn session(
        &self,
        hub: &HubEndpoint,
        selection: &mut Selection,
        mut shutdown: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> Outcome {
        let (tx, mut signals) = mpsc::unbounded_channel();
        let config = self.session_config(hub, tx);
        let (stop, stopped) = oneshot::channel::<()>();
        // A hub whose state cannot be opened is a session that ends at once, like one whose
        // credentials are unusable: the other hubs are still worth trying.
        let opened = dirs::open_hub(
            &self.root,
            &self.config.cluster_name,
            &hub.name,
            &self.identity,
        );
        let mut task = match opened {
            Ok(()) => tokio::spawn(crate::run(config, self.backend.clone(), async move {
                let _ = stopped.await;
            })),
            Err(e) => tokio::spawn(async move { Err(AgentError::Store(e)) }),
        };
        let mut running = true;
        // The hub's time counts from now: stopping the previous session may have taken a while.
        selection.started(std::time::Instant::now());
        let outcome = loop {
            let deadline = Instant::from_std(selection.deadline());
            let event = tokio::select! {
                () = shutdown.as_mut() => break Outcome::Shutdown,
                Some(s) = signals.recv(), if running => match s {
                    Signal::Alive => Event::Alive,
                    Signal::Denied => Event::Denied,
                },
                () = tokio::time::sleep_until(deadline) => Event::Tick,
                r = &mut task, if running => {
                    running = false;
                    Self::session_ended(hub, r);
                    continue;
                }
            };
            if let Decision::Switch { to, reason } = selection.on(event, std::time::Instant::now())
            {
                break Outcome::Switch(to, reason);
            }
        };
        let _ = stop.send(());
        // A session stuck connecting or enrolling is not waited for.
        if running
            && tokio::time::timeout(Duration::from_secs(10), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
        outcome
    }

    /// A session that ended by itself. The hub-independent settings were checked before any
    /// session started, so what failed is this hub's: its credentials, its state, its
    /// connection settings. The agent waits for the connection timeout and goes on to the next
    /// hub, as for a hub that does not answer.
    fn session_ended(hub: &HubEndpoint, r: Result<Result<(), AgentError>, tokio::task::JoinError>) {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(hub = %hub.name, error = %e, "the session with this hub ended; waiting for the connection timeout");
            }
            Err(e) => {
                tracing::error!(hub = %hub.name, error = %e, "the session with this hub failed; waiting for the connection timeout");
            }
        }
    }

    /// The agent configuration of `hub`'s session.
    fn session_config(
        &self,
        hub: &HubEndpoint,
        signals: mpsc::UnboundedSender<Signal>,
    ) -> AgentConfig {
        let mut c = self.config.clone();
        c.nats.url = hub.nats_url.clone();
        c.nats.tls_ca_file = hub.ca.clone();
        c.nats.tls_first = hub.tls_first;
        c.nats.require_tls = flotilla_bus::connect::tls_required(hub.ca.is_some(), &hub.nats_url);
        c.bootstrap_creds = hub.bootstrap_creds.clone();
        c.state = StateConfig::Dir(dirs::hub_dir(&self.root, &hub.name));
        c.resync_interval = c.resync_interval.min(self.multi.timeout / 6);
        c.hub_session = Some(Session {
            hub: hub.name.clone(),
            signals,
            others: self
                .multi
                .hubs
                .iter()
                .filter(|h| h.name != hub.name)
                .map(|h| dirs::hub_dir(&self.root, &h.name))
                .collect(),
        });
        c
    }
}
