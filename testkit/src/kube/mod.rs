//! A small Kubernetes API server for tests: the shared in-memory API ([`flotilla_kubemem`]:
//! the real wire format — discovery and OpenAPI documents, JSON objects, `Status` errors,
//! server-side apply with field managers and conflicts, merge, strategic merge and JSON patches,
//! label and field selectors, optimistic concurrency, delete propagation through owner
//! references, namespaces, watch streams that resume from a resourceVersion) over plain HTTP,
//! with this module's [`gate`] in front.
//!
//! SubjectAccessReviews are answered from a rule list the test sets ([`FakeKube::allow`],
//! [`access`]); what no rule allows is denied. The same rules, with RBAC's escalation rules for
//! Roles and bindings, judge requests that impersonate a user (`Impersonate-User`; a
//! ServiceAccount named without `Impersonate-Group` gets its groups from the server, as on a
//! real one), recorded for tests ([`FakeKube::impersonations`]); a `dryRun` create answers
//! without storing. A test may name who the client is ([`FakeKube::authenticate_as`]): its
//! requests are then judged by the same rules, and it may impersonate only whom a rule lets it
//! (`impersonate` on `serviceaccounts`, `users`, `groups`), so a least-privilege agent can be
//! tested.
//!
//! What it does not emulate: authentication (the token is not read: the caller is whom the
//! test names, and when it names no one any request that impersonates no one may do anything),
//! RBAC for version, health and discovery paths (open to all), admission and
//! defaulting, schema validation beyond what the wire format needs, field selectors beyond
//! `metadata.name` and `metadata.namespace`, server-side apply's list merge
//! keys (a list is owned and replaced whole), finalizers and the Terminating phase (a deletion —
//! Foreground or Background — removes the object and its dependents at once; a dependent with
//! another live owner only loses the reference), and controllers: its one "controller" marks
//! Deployments, StatefulSets, DaemonSets, Jobs and Pods ready as soon as they are written
//! ([`FakeOptions::auto_ready`]). Watch bookmarks are not sent.
//!
//! - [`access`]: the SubjectAccessReview authorizer and its rules.
//! - [`gate`]: the request log, tokens, impersonation and judgement in front of the server.
//! - [`streams`]: `pods/exec` and `pods/attach` over WebSocket, as local processes;
//!   [`forward`]: `pods/portforward` to addresses the test registers.
//!
//! Tests start one with [`FakeKube::start`], point a client at [`FakeKube::kubeconfig`], act
//! on objects behind the client's back ([`FakeKube::merge`], [`FakeKube::remove`]) and read the
//! request log ([`FakeKube::requests`]) to see which API calls were made.

pub mod access;
pub mod forward;
pub mod gate;
pub mod streams;

use flotilla_kubemem::{Store, server};
use gate::TestGate;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

pub use access::{AccessRule, Impersonation};
pub use flotilla_kubemem::{ObjectKey, Resource};
pub use gate::IssuedToken;

/// Settings of a fake API server.
#[derive(Debug, Clone)]
pub struct FakeOptions {
    /// `gitVersion` of `/version`.
    pub git_version: String,
    /// Mark Deployments, StatefulSets, DaemonSets and Jobs ready (status as their controllers
    /// would write it) when they are written.
    pub auto_ready: bool,
    /// Nodes created at start: `(name, cpu, memory)`.
    pub nodes: Vec<(String, String, String)>,
    /// `spec.providerID` prefix of the nodes (`aws://`, `gce://`, …; empty for none).
    pub provider: String,
    /// The longest ServiceAccount token the TokenRequest API issues, in seconds (a cloud's
    /// cap: the answer's `expirationTimestamp` is shorter than asked); `None`: as asked.
    pub token_max_seconds: Option<i64>,
}

impl Default for FakeOptions {
    fn default() -> Self {
        Self {
            git_version: "v1.30.2+k3s1".into(),
            auto_ready: true,
            nodes: vec![
                ("node-1".into(), "4".into(), "16Gi".into()),
                ("node-2".into(), "4".into(), "16Gi".into()),
            ],
            provider: "aws:///eu-west-1a/".into(),
            token_max_seconds: None,
        }
    }
}

impl FakeOptions {
    /// The shared store's part of these options.
    fn store(&self) -> flotilla_kubemem::Options {
        flotilla_kubemem::Options {
            git_version: self.git_version.clone(),
            auto_ready: self.auto_ready,
            nodes: self.nodes.clone(),
            provider: self.provider.clone(),
        }
    }
}

/// A running fake API server.
pub struct FakeKube {
    addr: SocketAddr,
    state: Arc<Mutex<Store>>,
    gate: Arc<TestGate>,
    task: JoinHandle<()>,
    streams: Arc<streams::Streams>,
    dir: tempfile::TempDir,
}

impl FakeKube {
    /// Starts a server on a free port with the default options.
    pub async fn start() -> Self {
        Self::start_with(FakeOptions::default()).await
    }

    /// Starts a server on a free port.
    pub async fn start_with(options: FakeOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake API server");
        let addr = listener.local_addr().expect("local address");
        let store_options = options.store();
        let state = Arc::new(Mutex::new(Store::new(&store_options)));
        let gate = Arc::new(TestGate::new(options.token_max_seconds));
        let dir = tempfile::tempdir().expect("temp dir for the kubeconfig");
        let streams = Arc::new(streams::Streams {
            store: state.clone(),
            options: store_options.clone(),
            gate: gate.clone(),
            dir: dir.path().to_owned(),
            attach: Mutex::default(),
            forwards: Mutex::default(),
            open: Arc::default(),
            tasks: Mutex::default(),
        });
        let app = streams::router(streams.clone()).merge(server::router(
            state.clone(),
            store_options,
            gate.clone(),
        ));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let kube = Self {
            addr,
            state,
            gate,
            task,
            streams,
            dir,
        };
        std::fs::write(kube.kubeconfig(), kubeconfig(&kube.url())).expect("write the kubeconfig");
        kube
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig file pointing at this server.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// The object at `key`, as the server holds it.
    pub fn get(&self, key: &ObjectKey) -> Option<Value> {
        self.lock().get(key).cloned()
    }

    /// Every object of a resource (`deployments`, `configmaps`, …) in every namespace.
    pub fn list(&self, resource: &str) -> Vec<Value> {
        self.lock().list_resource(resource)
    }

    /// Merges `patch` into an object as another client would (a drift), as manager `intruder`.
    pub fn merge(&self, key: &ObjectKey, patch: &Value) -> bool {
        self.lock().merge_patch(key, patch, "intruder").is_ok()
    }

    /// Deletes an object as another client would.
    pub fn remove(&self, key: &ObjectKey) -> bool {
        self.lock()
            .delete(key, flotilla_kubemem::store::Propagation::Background)
            .is_ok()
    }

    /// Sets an object's `status` (what a controller would report).
    pub fn set_status(&self, key: &ObjectKey, status: Value) -> bool {
        self.lock().set_status(key, status)
    }

    /// Adds a rule to the SubjectAccessReview authorizer (which denies what no rule allows).
    pub fn allow(&self, rule: AccessRule) {
        self.gate.rules().access.push(rule);
    }

    /// Removes every authorizer rule of `subject` (a user or a group).
    pub fn revoke(&self, subject: &str) {
        self.gate.rules().access.retain(|r| r.subject != subject);
    }

    /// Judges requests that impersonate no one as `user` (with a ServiceAccount's groups when
    /// it is one) by the authorizer's rules, and lets `user` impersonate only whom a rule allows
    /// it to; until called, such requests may do anything.
    pub fn authenticate_as(&self, user: &str) {
        self.gate.rules().caller = Some(user.to_string());
    }

    /// Pod log streams open now (a `logs -f` whose client went away is closed).
    pub fn open_log_streams(&self) -> usize {
        self.lock()
            .log_streams
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Runs `command` (on the test machine) for each `kubectl attach` to the pod `ns/pod`
    /// (`cat` until set).
    pub fn attach_command(&self, ns: &str, pod: &str, command: &[&str]) {
        self.streams
            .attach
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                (ns.into(), pod.into()),
                command.iter().map(|c| c.to_string()).collect(),
            );
    }

    /// Connects port-forwards to `port` of the pod `ns/pod` to `addr` (an unregistered port
    /// is refused as a kubelet refuses a port nothing listens on).
    pub fn forward(&self, ns: &str, pod: &str, port: u16, addr: SocketAddr) {
        self.streams
            .forwards
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((ns.into(), pod.into(), port), addr);
    }

    /// exec, attach and port-forward sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.streams.open.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Every request served so far that impersonated someone: the request, the user and the
    /// groups it named.
    pub fn impersonations(&self) -> Vec<Impersonation> {
        self.gate.rules().impersonations.clone()
    }

    /// Every SubjectAccessReview answered so far, with its `status`.
    pub fn reviews(&self) -> Vec<Value> {
        self.gate.rules().reviews.clone()
    }

    /// Removes every authorizer rule.
    pub fn revoke_all(&self) {
        self.gate.rules().access.clear();
    }

    /// Every ServiceAccount token issued (TokenRequest API).
    pub fn tokens(&self) -> Vec<IssuedToken> {
        self.gate.rules().tokens.clone()
    }

    /// Every request served so far: `METHOD /path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.gate.rules().requests.clone()
    }

    /// Makes the server answer 503 to everything but `/version` (`false` restores it).
    pub fn set_unavailable(&self, down: bool) {
        self.gate.rules().unavailable = down;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        self.task.abort();
        self.streams
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .abort_all();
    }
}

/// A kubeconfig for a plain-HTTP server at `url`.
pub fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n\
         users:\n- name: fake\n  user:\n    token: fake-token\n\
         contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
         current-context: fake\n"
    )
}

/// Writes a kubeconfig for `url` to `path`.
pub fn write_kubeconfig(path: &Path, url: &str) -> std::io::Result<()> {
    std::fs::write(path, kubeconfig(url))
}
