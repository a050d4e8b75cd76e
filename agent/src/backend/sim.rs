//! A simulated cluster that behaves like one: objects are stored (optionally persisted to a
//! file, so an agent restarted offline keeps its "cluster"), namespaced objects need their
//! Namespace, server-side apply tracks field ownership and reports conflicts, and status evolves
//! like the controllers would — Deployments and DaemonSets become ready, Jobs complete (or fail),
//! Pods run — after a configurable delay. Failures can be injected per object or by annotation.
//! The kinds it serves ([`Backend::served`], its API's discovery) are those of the Kubernetes
//! version it reports, plus its CRDs'.

use super::{ApplyOutcome, Backend, BackendError, ClusterInfo, Strategy, kind_matches};
use flotilla_api::work::ManifestId;
use flotilla_kubemem::resources;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Annotation that makes applying a manifest fail with its value as the message.
pub const ANNOTATION_APPLY_ERROR: &str = "sim.flotilla.io/apply-error";
/// Annotation `fail` makes a Job fail instead of completing.
pub const ANNOTATION_JOB_OUTCOME: &str = "sim.flotilla.io/job-outcome";
/// Annotation that makes every apply of its object take this many seconds (a slow API server,
/// an admission webhook): tests of what the hub does while an agent applies slowly.
pub const ANNOTATION_APPLY_DELAY: &str = "sim.flotilla.io/apply-delay-seconds";
/// Annotation the simulated cluster shows on objects a work with an executor applied: the
/// executor's user name (`system:serviceaccount:<ns>:<name>`), so tests and `flotilla proxy`
/// see which identity the agent applied them as.
pub const ANNOTATION_EXECUTOR: &str = "sim.flotilla.io/executor";
/// Field manager of the `Update` strategy.
pub const UPDATE_MANAGER: &str = "flotilla-work-agent";
const BUILTIN_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// How the simulated controllers behave.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Time for workloads to become ready (and Jobs to finish) after a change.
    pub ready_delay: Duration,
    /// Nodes (DaemonSet pods per DaemonSet).
    pub nodes: u32,
    /// Every apply on this cluster fails with this message (a broken cluster of a fleet
    /// profile's failure share).
    pub apply_error: Option<String>,
    /// The longest ServiceAccount token this cluster issues (a cloud's cap: EKS, GKE and AKS
    /// shorten what is asked); `None`: the validity asked.
    pub token_max_lifetime: Option<Duration>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            ready_delay: Duration::from_secs(2),
            nodes: 3,
            apply_error: None,
            token_max_lifetime: None,
        }
    }
}

/// A stored object, kept compact: a simulator holds tens of thousands of clusters, each with
/// its works' objects, so an object is its JSON text (parsed when it is read or written, as an
/// API server decodes from its store) rather than a tree of maps, and its field ownership is one
/// name while one manager owns every field.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SimObject {
    /// The object as written (no status).
    object: Box<serde_json::value::RawValue>,
    /// When the spec last changed (unix ms).
    changed_at_ms: u64,
    /// Who owns each field.
    managers: Managers,
}

impl SimObject {
    fn new(object: &Value, changed_at_ms: u64, managers: Managers) -> Self {
        Self {
            object: raw(object),
            changed_at_ms,
            managers,
        }
    }

    /// The object as written.
    fn value(&self) -> Value {
        serde_json::from_str(self.object.get()).unwrap_or(Value::Null)
    }

    fn set_value(&mut self, object: &Value) {
        self.object = raw(object);
    }
}

fn raw(object: &Value) -> Box<serde_json::value::RawValue> {
    serde_json::value::to_raw_value(object).expect("a JSON value serializes")
}

/// Who owns each leaf field of a stored object (server-side apply's field ownership).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum Managers {
    /// One manager owns every leaf of the object's content: what a create or an `Update`
    /// leaves, and what a server-side apply by that same manager keeps.
    Sole(String),
    /// Leaf path → its manager, once a second manager applied.
    Fields(BTreeMap<String, String>),
}

impl Managers {
    /// The manager of `path`, a leaf of `content` (the stored object's [`content`]).
    fn owner<'a>(&'a self, path: &str, content: &BTreeMap<String, Value>) -> Option<&'a str> {
        match self {
            Self::Sole(m) => content.contains_key(path).then_some(m.as_str()),
            Self::Fields(fields) => fields.get(path).map(String::as_str),
        }
    }

    /// `manager` takes `paths`; `content` is the stored object's before the write.
    fn take<'p>(
        &mut self,
        manager: &str,
        paths: impl Iterator<Item = &'p String>,
        content: &BTreeMap<String, Value>,
    ) {
        if let Self::Sole(m) = self {
            if m == manager {
                return;
            }
            let sole = std::mem::take(m);
            *self = Self::Fields(content.keys().map(|p| (p.clone(), sole.clone())).collect());
        }
        if let Self::Fields(fields) = self {
            for p in paths {
                fields.insert(p.clone(), manager.to_string());
            }
        }
    }
}

#[derive(Default, Serialize, Deserialize)]
struct Objects {
    objects: BTreeMap<String, SimObject>,
    resource_version: u64,
}

/// An in-memory cluster.
pub struct SimBackend {
    info: Mutex<ClusterInfo>,
    config: SimConfig,
    objects: Mutex<Objects>,
    file: Option<PathBuf>,
    injected: Mutex<HashMap<(String, String), String>>,
    /// Fraction of allocatable CPU and memory in use (drives the resource-usage score).
    load: Mutex<f64>,
    /// The executor each object was last authorized for, by object key.
    executors: Mutex<HashMap<String, String>>,
    /// Bumped on every change of the stored objects ([`Backend::changes`]).
    changed: tokio::sync::watch::Sender<u64>,
    /// Clients of the simulated API following its changes ([`Backend::follow_api`]): only
    /// while there are some is readiness signalled.
    api_followers: Arc<std::sync::atomic::AtomicUsize>,
    /// ServiceAccount tokens issued, by SHA-256: `(namespace, name, expiry)`. The simulated
    /// API accepts them as bearer tokens until they expire or their ServiceAccount goes.
    tokens: Mutex<HashMap<String, (String, String, SystemTime)>>,
    /// The simulated containers' writable layers ([`super::sim_container`]).
    layers: super::sim_container::Layers,
}

/// Counts a client of the simulated API following it, while it lives.
struct Follower(Arc<std::sync::atomic::AtomicUsize>);

impl Follower {
    fn new(count: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn key(id: &ManifestId) -> String {
    format!("{}/{}/{}/{}", id.group, id.kind, id.namespace, id.name)
}

/// Leaf paths of an object's content (arrays are atomic), skipping server-managed fields.
fn leaves(v: &Value, prefix: &str, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                // A '.' inside a key (label and annotation keys such as
                // `clusterset.open-cluster-management.io/…`) is escaped so the path splits
                // back into the same keys.
                let k = k.replace('.', "\\.");
                let path = if prefix.is_empty() {
                    k
                } else {
                    format!("{prefix}.{k}")
                };
                if matches!(
                    path.as_str(),
                    "status"
                        | "metadata.uid"
                        | "metadata.resourceVersion"
                        | "metadata.generation"
                        | "metadata.creationTimestamp"
                        | "metadata.managedFields"
                ) {
                    continue;
                }
                leaves(child, &path, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.clone());
        }
    }
}

/// The keys of a leaf path: split at '.', except an escaped `\\.` (a dot inside a key).
fn split_path(path: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                chars.next();
                parts.last_mut().expect("never empty").push('.');
            }
            '.' => parts.push(String::new()),
            c => parts.last_mut().expect("never empty").push(c),
        }
    }
    parts
}

fn set_path(root: &mut Value, path: &str, value: Value) {
    let mut cur = root;
    let parts = split_path(path);
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let map = cur.as_object_mut().expect("made an object above");
        if i + 1 == parts.len() {
            map.insert(p.clone(), value);
            return;
        }
        cur = map
            .entry(p.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// The object minus server-managed metadata, for change detection.
fn content(v: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    leaves(v, "", &mut out);
    out
}

fn service_account_id(namespace: &str, name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "ServiceAccount".into(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

impl SimBackend {
    /// Whether `token` is one this cluster issued, unexpired, of a ServiceAccount that still
    /// exists (the API server's TokenReview); the error is the 401's message.
    fn authenticate(&self, token: &str) -> Result<(), String> {
        let hash = flotilla_bus::serviceaccounts::token_hash(token);
        let tokens = self.tokens.lock().expect("sim lock");
        match tokens.get(&hash) {
            Some((_, _, expires)) if *expires > SystemTime::now() => Ok(()),
            Some(_) => Err("the ServiceAccount token has expired".into()),
            None => Err("the bearer token is not a ServiceAccount token of this cluster".into()),
        }
    }

    /// A healthy cluster with `cpu` cores and `memory_gib` GiB, default controller timings,
    /// serving the built-in kinds of `kubernetes_version` (`v1.30.2`; one it cannot read is
    /// taken as the newest it knows).
    pub fn new(cpu: u32, memory_gib: u32, kubernetes_version: &str) -> Self {
        if resources::minor_of(kubernetes_version).is_none() {
            tracing::warn!(
                %kubernetes_version,
                "not a Kubernetes 1.x version; the simulated cluster serves the newest kinds it knows"
            );
        }
        let capacity: HashMap<String, String> = [
            ("cpu".to_string(), cpu.to_string()),
            ("memory".to_string(), format!("{memory_gib}Gi")),
            ("pods".to_string(), "110".to_string()),
        ]
        .into();
        // Allocatable keeps some room for system daemons, like kubelet's reservations.
        let allocatable = [
            (
                "cpu".to_string(),
                format!("{}m", cpu * 1000 - cpu.min(4) * 100),
            ),
            (
                "memory".to_string(),
                format!("{}Mi", memory_gib * 1024 - memory_gib.min(8) * 128),
            ),
            ("pods".to_string(), "110".to_string()),
        ]
        .into();
        Self {
            info: Mutex::new(ClusterInfo {
                capacity,
                allocatable,
                kubernetes_version: kubernetes_version.to_string(),
                platform: "Other".into(),
                product: "Flotilla-Sim".into(),
                healthy: true,
                health_message: String::new(),
                cluster_id: String::new(),
                nodes: None,
            }),
            config: SimConfig::default(),
            objects: Mutex::new(Objects::default()),
            file: None,
            injected: Mutex::new(HashMap::new()),
            load: Mutex::new(0.0),
            executors: Mutex::new(HashMap::new()),
            changed: tokio::sync::watch::Sender::new(0),
            api_followers: Arc::default(),
            tokens: Mutex::new(HashMap::new()),
            layers: Default::default(),
        }
    }

    /// Sets the platform claim value.
    pub fn with_platform(self, platform: &str) -> Self {
        self.info.lock().expect("sim lock").platform = platform.to_string();
        self
    }

    /// Sets controller timings.
    pub fn with_config(mut self, config: SimConfig) -> Self {
        self.config = config;
        self
    }

    /// Persists the cluster's objects in `file` (loading what is there), so that the simulated
    /// cluster outlives an agent restart like a real one would.
    pub fn persisted(mut self, file: PathBuf) -> Result<Self, String> {
        match std::fs::read(&file) {
            Ok(bytes) => {
                let objects: Objects = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("simulated cluster state {}: {e}", file.display()))?;
                self.objects = Mutex::new(objects);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("simulated cluster state {}: {e}", file.display())),
        }
        self.file = Some(file);
        Ok(self)
    }

    /// Injects (or clears) a control-plane failure.
    pub fn set_health(&self, healthy: bool, message: &str) {
        let mut info = self.info.lock().expect("sim lock");
        info.healthy = healthy;
        info.health_message = message.to_string();
    }

    /// Sets the node count the cluster reports (default [`SimConfig::nodes`]).
    pub fn set_nodes(&self, nodes: u32) {
        self.info.lock().expect("sim lock").nodes = Some(nodes);
    }

    /// Changes an allocatable resource (simulates load).
    pub fn set_allocatable(&self, resource: &str, value: &str) {
        self.info
            .lock()
            .expect("sim lock")
            .allocatable
            .insert(resource.to_string(), value.to_string());
    }

    /// Makes every apply of `kind`/`name` fail with `message` (None clears it).
    pub fn inject_apply_error(&self, kind: &str, name: &str, message: Option<&str>) {
        let mut inj = self.injected.lock().expect("sim lock");
        let k = (kind.to_ascii_lowercase(), name.to_string());
        match message {
            Some(m) => {
                inj.insert(k, m.to_string());
            }
            None => {
                inj.remove(&k);
            }
        }
    }

    /// Sets the fraction (0–1) of allocatable CPU and memory in use.
    pub fn set_load(&self, load: f64) {
        *self.load.lock().expect("sim lock") = load.clamp(0.0, 1.0);
    }

    /// Number of stored objects.
    pub fn object_count(&self) -> usize {
        self.objects.lock().expect("sim lock").objects.len()
    }

    fn save(&self, objects: &Objects) {
        let Some(file) = &self.file else { return };
        let tmp = file.with_extension("tmp");
        let result = serde_json::to_vec(objects)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = result {
            tracing::error!(error = %e, file = %file.display(), "saving the simulated cluster failed");
        }
    }

    /// The executor (user name) the object at `id` was last applied as, if any.
    pub fn executor_of(&self, id: &ManifestId) -> Option<String> {
        self.executors
            .lock()
            .expect("sim lock")
            .get(&key(id))
            .cloned()
    }

    /// The object with its status, as `get` and `list` show it (`key` is the object's key).
    fn shown(&self, key: &str, id_group: &str, kind: &str, o: &SimObject) -> Value {
        let mut v = self.with_status(id_group, kind, o);
        if let Some(executor) = self.executors.lock().expect("sim lock").get(key)
            && let Some(meta) = v["metadata"].as_object_mut()
        {
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(a) = annotations.as_object_mut() {
                a.insert(ANNOTATION_EXECUTOR.into(), Value::String(executor.clone()));
            }
        }
        v
    }

    /// A written object becomes ready `ready_delay` later, with no write: while a client of
    /// the API follows the cluster (a watch, a followed log through the proxy), it is told then,
    /// as an API server's status update would tell it. Nobody following, nothing is spawned (a
    /// simulated fleet of 100,000 pays nothing).
    fn signal_readiness(&self) {
        if self
            .api_followers
            .load(std::sync::atomic::Ordering::Relaxed)
            == 0
            || tokio::runtime::Handle::try_current().is_err()
        {
            return;
        }
        let changed = self.changed.clone();
        let delay = self.config.ready_delay + Duration::from_millis(10);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            changed.send_modify(|_| {});
        });
    }

    fn with_status(&self, id_group: &str, kind: &str, o: &SimObject) -> Value {
        let mut v = o.value();
        let age = Duration::from_millis(now_ms().saturating_sub(o.changed_at_ms));
        let ready = age >= self.config.ready_delay;
        let generation = v["metadata"]["generation"].as_i64().unwrap_or(1);
        let status = match (id_group, kind) {
            ("apps", "Deployment") | ("apps", "StatefulSet") => {
                let replicas = v["spec"]["replicas"].as_i64().unwrap_or(1);
                let n = if ready { replicas } else { 0 };
                let (avail, reason) = if ready || replicas == 0 {
                    ("True", "MinimumReplicasAvailable")
                } else {
                    ("False", "MinimumReplicasUnavailable")
                };
                let progressing_reason = if ready {
                    "NewReplicaSetAvailable"
                } else {
                    "ReplicaSetUpdated"
                };
                Some(json!({
                    "observedGeneration": generation,
                    "replicas": replicas,
                    "updatedReplicas": replicas,
                    "readyReplicas": n,
                    "availableReplicas": n,
                    "conditions": [
                        {"type": "Available", "status": avail, "reason": reason},
                        {"type": "Progressing", "status": "True", "reason": progressing_reason},
                    ],
                }))
            }
            ("apps", "DaemonSet") => {
                let desired = i64::from(self.config.nodes);
                let n = if ready { desired } else { 0 };
                Some(json!({
                    "observedGeneration": generation,
                    "desiredNumberScheduled": desired,
                    "currentNumberScheduled": desired,
                    "numberReady": n,
                    "numberAvailable": n,
                    "updatedNumberScheduled": desired,
                }))
            }
            ("batch", "Job") => {
                let fail =
                    v["metadata"]["annotations"][ANNOTATION_JOB_OUTCOME].as_str() == Some("fail");
                let completions = v["spec"]["completions"].as_i64().unwrap_or(1);
                Some(if !ready {
                    json!({"active": 1})
                } else if fail {
                    json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]})
                } else {
                    json!({"succeeded": completions, "conditions": [{"type": "Complete", "status": "True"}]})
                })
            }
            ("", "Pod") => Some(if ready {
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
            } else {
                json!({"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]})
            }),
            ("", "Namespace") => Some(json!({"phase": "Active"})),
            ("", "Service") => Some(json!({"loadBalancer": {}})),
            _ => None,
        };
        if let (Some(s), Some(map)) = (status, v.as_object_mut()) {
            map.insert("status".into(), s);
        }
        v
    }
}

#[async_trait::async_trait]
impl Backend for SimBackend {
    /// The cluster's facts; the node count is [`SimConfig::nodes`] unless set.
    async fn info(&self) -> ClusterInfo {
        let mut info = self.info.lock().expect("sim lock").clone();
        info.nodes = info.nodes.or(Some(self.config.nodes));
        info
    }

    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.changed.subscribe())
    }

    /// Against the built-in kinds' fields (Kubernetes 1.30's types, whatever version the
    /// cluster reports); a kind without a schema (a CRD) is accepted.
    async fn validate(
        &self,
        id: &ManifestId,
        object: &Value,
        _create: bool,
    ) -> Result<(), BackendError> {
        let api_version = if id.group.is_empty() {
            id.version.clone()
        } else {
            format!("{}/{}", id.group, id.version)
        };
        match flotilla_kubemem::schema::unknown_fields(&api_version, &id.kind, object) {
            Some(fields) if !fields.is_empty() => Err(BackendError::Invalid(
                flotilla_kubemem::schema::refused_body(&id.kind, &id.version, &fields),
            )),
            _ => Ok(()),
        }
    }

    fn follow_api(&self) -> Option<super::ApiFollow> {
        let follow = super::ApiFollow {
            changes: self.changed.subscribe(),
            _held: Some(Box::new(Follower::new(self.api_followers.clone()))),
        };
        // Objects written before anyone followed become ready within `ready_delay` too.
        self.signal_readiness();
        Some(follow)
    }

    /// Answered from the simulated objects ([`super::sim_api`]).
    async fn serve_api(
        self: std::sync::Arc<Self>,
        request: super::api::ApiRequest,
    ) -> super::api::ApiResponse {
        if let Some(bearer) = &request.bearer
            && let Err(why) = self.authenticate(&bearer.0)
        {
            return super::api::ApiResponse::status(
                http::StatusCode::UNAUTHORIZED,
                "Unauthorized",
                &why,
            );
        }
        super::sim_api::serve(self, request).await
    }

    /// A simulated container ([`super::sim_container`]); a ManagedServiceAccount's token is
    /// checked as the simulated API checks it.
    async fn open_session(
        self: std::sync::Arc<Self>,
        request: super::session::SessionRequest,
    ) -> Result<super::session::Session, super::api::ApiResponse> {
        if let Some(bearer) = &request.bearer
            && let Err(why) = self.authenticate(&bearer.0)
        {
            return Err(super::api::ApiResponse::status(
                http::StatusCode::UNAUTHORIZED,
                "Unauthorized",
                &why,
            ));
        }
        super::sim_container::open(self.as_ref(), &self.layers, request).await
    }

    async fn ensure_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), BackendError> {
        if !BUILTIN_NAMESPACES.contains(&namespace) {
            let ns = ManifestId {
                group: String::new(),
                version: "v1".into(),
                kind: "Namespace".into(),
                namespace: String::new(),
                name: namespace.to_string(),
            };
            if self.get(&ns).await?.is_none() {
                let object = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": namespace}});
                self.apply(&ns, &object, &Strategy::Update).await?;
            }
        }
        let id = service_account_id(namespace, name);
        if self.get(&id).await?.is_none() {
            let object = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace,
                    "labels": {"app.kubernetes.io/managed-by": "flotilla-agent"}}});
            self.apply(&id, &object, &Strategy::Update).await?;
        }
        Ok(())
    }

    async fn request_token(
        &self,
        namespace: &str,
        name: &str,
        validity: Duration,
    ) -> Result<super::IssuedToken, BackendError> {
        if self
            .get(&service_account_id(namespace, name))
            .await?
            .is_none()
        {
            return Err(BackendError::NotFound(format!(
                "serviceaccounts {name:?} not found in namespace {namespace:?}"
            )));
        }
        let lifetime = match self.config.token_max_lifetime {
            Some(cap) => validity.min(cap),
            None => validity,
        };
        // Shaped like the JWT a TokenRequest answers: three dot-separated base64url segments.
        let mut raw = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut raw);
        let token = format!(
            "sim.{}.sim",
            raw.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        let expires = SystemTime::now() + lifetime;
        self.tokens.lock().expect("sim lock").insert(
            flotilla_bus::serviceaccounts::token_hash(&token),
            (namespace.to_string(), name.to_string(), expires),
        );
        Ok(super::IssuedToken { token, expires })
    }

    async fn delete_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<bool, BackendError> {
        self.tokens
            .lock()
            .expect("sim lock")
            .retain(|_, (ns, n, _)| !(ns == namespace && n == name));
        self.delete(&service_account_id(namespace, name)).await
    }

    async fn apply(
        &self,
        id: &ManifestId,
        object: &Value,
        strategy: &Strategy,
    ) -> Result<ApplyOutcome, BackendError> {
        if let Some(msg) = &self.config.apply_error {
            return Err(BackendError::Invalid(msg.clone()));
        }
        if let Some(msg) = self
            .injected
            .lock()
            .expect("sim lock")
            .get(&(id.kind.to_ascii_lowercase(), id.name.clone()))
        {
            return Err(BackendError::Invalid(msg.clone()));
        }
        if let Some(msg) = object["metadata"]["annotations"][ANNOTATION_APPLY_ERROR].as_str() {
            return Err(BackendError::Invalid(msg.to_string()));
        }
        if let Some(secs) = object["metadata"]["annotations"][ANNOTATION_APPLY_DELAY]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
        {
            tokio::time::sleep(Duration::from_secs_f64(secs.min(3600.0))).await;
        }
        let mut objects = self.objects.lock().expect("sim lock");
        if !id.namespace.is_empty() && !BUILTIN_NAMESPACES.contains(&id.namespace.as_str()) {
            let ns_key = format!("/Namespace//{}", id.namespace);
            if !objects.objects.contains_key(&ns_key) {
                return Err(BackendError::NotFound(format!(
                    "namespaces {:?} not found",
                    id.namespace
                )));
            }
        }
        let k = key(id);
        let manager = match strategy {
            Strategy::ServerSideApply { field_manager, .. } => field_manager.clone(),
            _ => UPDATE_MANAGER.to_string(),
        };
        let mut desired = object.clone();
        if let Some(m) = desired.as_object_mut() {
            m.remove("status");
        }
        if id.namespace.is_empty() {
            if let Some(meta) = desired["metadata"].as_object_mut() {
                meta.remove("namespace");
            }
        } else {
            set_path(
                &mut desired,
                "metadata.namespace",
                Value::String(id.namespace.clone()),
            );
        }
        objects.resource_version += 1;
        let rv = objects.resource_version;
        let outcome = match (objects.objects.get_mut(&k), strategy) {
            (_, Strategy::ReadOnly) | (Some(_), Strategy::CreateOnly) => ApplyOutcome::Skipped,
            (Some(existing), Strategy::Update) => merge::update(existing, desired, &manager, rv),
            (Some(existing), Strategy::ServerSideApply { force, .. }) => {
                merge::server_side_apply(existing, &desired, &manager, *force, rv)?
            }
            (None, _) => {
                objects
                    .objects
                    .insert(k, merge::create(desired, &manager, rv));
                ApplyOutcome::Created
            }
        };
        if matches!(outcome, ApplyOutcome::Created | ApplyOutcome::Updated) {
            self.save(&objects);
            self.changed.send_replace(rv);
            self.signal_readiness();
        }
        Ok(outcome)
    }

    fn scores(&self) -> Vec<(String, Vec<flotilla_api::v1::AddOnPlacementScoreItem>)> {
        let info = self.info.lock().expect("sim lock").clone();
        let load = *self.load.lock().expect("sim lock");
        vec![(
            crate::scores::RESOURCE_NAME.to_string(),
            crate::scores::scores_for(
                info.allocatable.get("cpu").map(String::as_str),
                info.allocatable.get("memory").map(String::as_str),
                load,
            ),
        )]
    }

    /// Records the executor (shown as an annotation) and allows it: the simulated cluster has
    /// no RBAC.
    async fn authorize(
        &self,
        executor: Option<&flotilla_api::work::Executor>,
        id: &ManifestId,
        _object: &Value,
        _verbs: &[&'static str],
    ) -> Result<(), BackendError> {
        let mut executors = self.executors.lock().expect("sim lock");
        match executor {
            Some(e) => executors.insert(key(id), e.username()),
            None => executors.remove(&key(id)),
        };
        Ok(())
    }

    async fn get(&self, id: &ManifestId) -> Result<Option<Value>, BackendError> {
        let objects = self.objects.lock().expect("sim lock");
        let k = key(id);
        Ok(objects
            .objects
            .get(&k)
            .map(|o| self.shown(&k, &id.group, &id.kind, o)))
    }

    async fn delete(&self, id: &ManifestId) -> Result<bool, BackendError> {
        let mut objects = self.objects.lock().expect("sim lock");
        let existed = objects.objects.remove(&key(id)).is_some();
        if existed && id.group.is_empty() && id.kind == "Namespace" {
            // Deleting a namespace deletes what is in it.
            objects
                .objects
                .retain(|k, _| k.split('/').nth(2) != Some(id.name.as_str()));
        }
        if existed {
            objects.resource_version += 1;
            self.save(&objects);
            self.changed.send_replace(objects.resource_version);
        }
        Ok(existed)
    }

    /// From `flotilla-kubemem`'s table for the Kubernetes version the cluster reports, plus
    /// the CustomResourceDefinitions stored.
    async fn served(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<super::Scope>, BackendError> {
        let version = self
            .info
            .lock()
            .expect("sim lock")
            .kubernetes_version
            .clone();
        let is = |r: &flotilla_kubemem::Resource| r.api_version() == api_version && r.kind == kind;
        let mut found = resources::builtin_of(&version).into_iter().find(is);
        if found.is_none() {
            for crd in self.list("CustomResourceDefinition", None).await? {
                found = found.or_else(|| resources::from_crd(&crd).into_iter().find(is));
            }
        }
        Ok(found.map(|r| {
            if r.namespaced {
                super::Scope::Namespaced
            } else {
                super::Scope::Cluster
            }
        }))
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Value>, BackendError> {
        let objects = self.objects.lock().expect("sim lock");
        let mut out: Vec<Value> = objects
            .objects
            .iter()
            .filter_map(|(k, o)| {
                let mut parts = k.splitn(4, '/');
                let (group, okind, ns) = (parts.next()?, parts.next()?, parts.next()?);
                (kind_matches(kind, okind) && namespace.is_none_or(|n| n == ns))
                    .then(|| self.shown(k, group, okind, o))
            })
            .collect();
        // The namespaces every cluster has exist here too, as on a real cluster, unless one
        // was applied (then it is listed above).
        if kind_matches(kind, "Namespace") {
            for ns in BUILTIN_NAMESPACES {
                if !objects.objects.contains_key(&format!("/Namespace//{ns}")) {
                    out.push(serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                        "status": {"phase": "Active"}}));
                }
            }
        }
        Ok(out)
    }
}

mod merge;

#[cfg(test)]
mod tests;
