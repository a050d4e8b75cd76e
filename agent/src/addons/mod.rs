//! Add-on agents run inside the agent for simulated clusters.
//!
//! A real spoke runs an add-on's agent as the Deployment the hub's add-on framework rendered into
//! a ManifestWork (`addon-<name>-deploy-0`). A simulated cluster has no kubelet to run it, so with
//! [`crate::AgentConfig::simulate_addons`] (off by default; `flotilla-sim` turns it on, and
//! `flotilla-agent --simulate-addons` with the `sim` backend) the [`Supervisor`] plays the
//! kubelet for the add-ons it knows:
//!
//! - it watches the backend's Deployments (on the simulated cluster's change signal,
//!   [`crate::backend::Backend::changes`], else every [`POLL_INTERVAL`]);
//! - for each Deployment whose first container runs the [`FLEET_METRICS_IMAGE`] image and whose
//!   `spec.replicas` is not 0, it runs one [`fleet_metrics`] reporter with the container's
//!   settings ([`fleet_metrics_settings`]); it stops the reporter when the Deployment goes away
//!   or is scaled to 0, and restarts it when its settings change;
//! - the simulated cluster reports such a Deployment ready like any other (`readyReplicas ==
//!   replicas` once its ready delay passed, 0/0 at 0 replicas), so the add-on's WorkStatus health
//!   probe sees it Available.
//!
//! Connections: without secure mode the reporters publish on the agent's own NATS connection.
//! In secure mode an add-on may not use the cluster's credentials: for each add-on the
//! supervisor makes a fresh user NKey, asks the hub for credentials on
//! `flotilla.addoncreds.<cluster>` ([`request_credentials`]: an `AddOnCredentialsRequest` →
//! `AddOnCredentialsResponse`, whose `user_jwt` allows only `flotilla.addon.<addon>.<cluster>.>`),
//! and reports over a connection of the add-on's own with that JWT and the NKey's seed — asking
//! again two thirds into the credentials' life, or at once when the server refuses them.

pub mod credentials;
pub mod fleet_metrics;
pub mod leases;

use crate::backend::Backend;
use crate::store::LocalStore;
use fleet_metrics::{Reporter, ReporterConfig, ReporterHandle};
use flotilla_api::v1::{AddOnCredentialsRequest, AddOnCredentialsResponse};
use flotilla_bus::connect::{self, Authenticator, NatsConfig};
use flotilla_bus::envelope::Event;
use flotilla_bus::publish::Publisher;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The image (repository) of the fleet-metrics add-on agent: a Deployment whose first container
/// runs `flotilla/fleet-metrics`, with any tag or digest and any registry in front
/// (`registry.example/flotilla/fleet-metrics:0.1.0`), is run in-process.
pub const FLEET_METRICS_IMAGE: &str = "flotilla/fleet-metrics";
/// Container env var naming the add-on (default [`fleet_metrics::ADDON_NAME`]).
pub const ENV_ADDON_NAME: &str = "ADDON_NAME";
/// Container env var of the report interval in seconds (default 60).
pub const ENV_REPORT_INTERVAL: &str = "REPORT_INTERVAL";
/// Container env var naming the cluster (default the agent's cluster).
pub const ENV_CLUSTER_NAME: &str = "CLUSTER_NAME";
/// How often Deployments are listed on a backend without a change signal.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);
/// How often Deployments are listed anyway on a backend with a change signal.
const SAFETY_POLL: Duration = Duration::from_secs(30);
/// Longest wait between two credentials requests that failed.
const MAX_RETRY: Duration = Duration::from_secs(60);
/// Shortest time between two credentials requests.
const MIN_RENEW: Duration = Duration::from_secs(10);

/// How one in-process add-on runs (from its Deployment).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AddOnSettings {
    /// The add-on's name.
    pub addon_name: String,
    /// The cluster it reports for.
    pub cluster_name: String,
    /// Its report interval.
    pub interval: Duration,
}

/// Whether `image` is the fleet-metrics image (any tag, digest or registry).
pub fn is_fleet_metrics_image(image: &str) -> bool {
    let repo = image.split('@').next().unwrap_or(image);
    // A tag is a ':' after the last '/' (a ':' before it is a registry port).
    let repo = match repo.rfind(':') {
        Some(i) if !repo[i..].contains('/') => &repo[..i],
        _ => repo,
    };
    repo == FLEET_METRICS_IMAGE || repo.ends_with(&format!("/{FLEET_METRICS_IMAGE}"))
}

/// A subject token: non-empty, no '.', '*', '>' or whitespace.
fn plain_token(s: &str) -> bool {
    !s.is_empty()
        && !s
            .chars()
            .any(|c| c == '.' || c == '*' || c == '>' || c.is_whitespace())
}

/// The value of `--name=value` or `--name value` in a container's args.
fn arg_value(args: &[&str], name: &str) -> Option<String> {
    let flag = format!("--{name}");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
            return Some(v.to_string());
        }
        if *a == flag {
            return it.next().map(|v| v.to_string());
        }
    }
    None
}

/// The settings of the fleet-metrics add-on a Deployment runs, as the real binary would read
/// them from its container (flags first, then env vars, then defaults): add-on name
/// `--addon-name` / `ADDON_NAME` (default `fleet-metrics`), interval `--interval-seconds` /
/// `REPORT_INTERVAL` seconds (default 60), cluster `--cluster-name` / `CLUSTER_NAME` (default
/// `default_cluster`). Only literal env values count (`valueFrom` is not resolved).
///
/// `None` when the Deployment is not the add-on (another image in its first container), is
/// scaled to 0 or is being deleted. Unusable values fall back to the defaults; the second item
/// says which.
pub fn fleet_metrics_settings(
    deployment: &Value,
    default_cluster: &str,
) -> Option<(AddOnSettings, Vec<String>)> {
    if !deployment["metadata"]["deletionTimestamp"].is_null()
        || deployment["spec"]["replicas"].as_i64().unwrap_or(1) == 0
    {
        return None;
    }
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    if !container["image"]
        .as_str()
        .is_some_and(is_fleet_metrics_image)
    {
        return None;
    }
    let args: Vec<&str> = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let env: HashMap<&str, &str> = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
        .collect();
    let setting = |flag: &str, var: &str| {
        arg_value(&args, flag).or_else(|| env.get(var).map(|v| v.to_string()))
    };
    let mut problems = Vec::new();
    let mut name = |flag: &str, var: &str, default: &str| match setting(flag, var) {
        Some(v) if plain_token(&v) => v,
        Some(v) => {
            problems.push(format!(
                "{var} {v:?} is not a usable name; using {default:?}"
            ));
            default.to_string()
        }
        None => default.to_string(),
    };
    let addon_name = name("addon-name", ENV_ADDON_NAME, fleet_metrics::ADDON_NAME);
    let cluster_name = name("cluster-name", ENV_CLUSTER_NAME, default_cluster);
    let interval = match setting("interval-seconds", ENV_REPORT_INTERVAL) {
        None => fleet_metrics::DEFAULT_INTERVAL,
        Some(v) => match v.trim().trim_end_matches('s').parse::<u64>() {
            Ok(n) if n > 0 => Duration::from_secs(n),
            _ => {
                problems.push(format!(
                    "{ENV_REPORT_INTERVAL} {v:?} is not a positive number of seconds; using {}",
                    fleet_metrics::DEFAULT_INTERVAL.as_secs()
                ));
                fleet_metrics::DEFAULT_INTERVAL
            }
        },
    };
    Some((
        AddOnSettings {
            addon_name,
            cluster_name,
            interval,
        },
        problems,
    ))
}

/// Add-on credentials the hub issued, presented at every (re)connect of the add-on's client.
#[derive(Debug)]
pub struct AddOnCredentials {
    seed: flotilla_auth::Secret,
    public_key: String,
    jwt: Mutex<Option<String>>,
    refused: tokio::sync::Notify,
}

impl AddOnCredentials {
    /// Credentials for a fresh user NKey (none issued yet).
    pub fn generate() -> Self {
        let key = nkeys::KeyPair::new_user();
        Self {
            seed: flotilla_auth::Secret::new(key.seed().unwrap_or_default()),
            public_key: key.public_key(),
            jwt: Mutex::new(None),
            refused: tokio::sync::Notify::new(),
        }
    }

    /// Credentials for the user NKey whose seed is `seed` (none issued yet).
    pub fn from_seed(seed: &flotilla_auth::Secret) -> Result<Self, String> {
        let key =
            nkeys::KeyPair::from_seed(seed.expose()).map_err(|e| format!("add-on key: {e}"))?;
        Ok(Self {
            seed: seed.clone(),
            public_key: key.public_key(),
            jwt: Mutex::new(None),
            refused: tokio::sync::Notify::new(),
        })
    }

    /// The NKey's public key (what the hub signs a JWT for).
    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// Takes an issued JWT after checking it is a user JWT for this key; returns its expiry
    /// (unix seconds, `None` for never).
    pub fn adopt(&self, jwt: &str) -> Result<Option<i64>, String> {
        let claims = flotilla_auth::jwt::Claims::<flotilla_auth::jwt::User>::decode(jwt)
            .map_err(|e| format!("unreadable credentials: {e}"))?;
        if claims.sub != self.public_key {
            return Err(format!(
                "the credentials are for {}, not this add-on's key",
                claims.sub
            ));
        }
        *self.jwt.lock().unwrap_or_else(|p| p.into_inner()) = Some(jwt.to_string());
        Ok(claims.exp)
    }
}

impl Authenticator for AddOnCredentials {
    fn credentials(&self) -> Result<(String, String), String> {
        match &*self.jwt.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(jwt) => Ok((jwt.clone(), self.seed.expose().to_string())),
            None => Err("no add-on credentials yet".into()),
        }
    }

    fn refused(&self) {
        self.jwt.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.refused.notify_one();
    }
}

/// Asks the hub (over the cluster agent's connection `client`, the answer through its `spoke`
/// on the prefix wire) for credentials of add-on `addon` on `cluster` for the NKey
/// `public_key`, on `flotilla.addoncreds.<agent_cluster>`. `Err` when unanswered, unreadable or
/// refused (with the hub's message).
pub async fn request_credentials(
    client: &async_nats::Client,
    spoke: Option<&flotilla_bus::spoke::Spoke>,
    agent_cluster: &str,
    request: &AddOnCredentialsRequest,
    timeout: Duration,
    max_event_bytes: usize,
) -> Result<AddOnCredentialsResponse, String> {
    let ev = Event::new(
        flotilla_bus::addons::credentials_request_type(),
        format!("flotilla-agent/{agent_cluster}"),
        agent_cluster,
        request,
    );
    let resp: AddOnCredentialsResponse = Publisher::new(client.clone(), max_event_bytes, timeout)
        .with_spoke(spoke.cloned())
        .request(
            flotilla_bus::addons::credentials(agent_cluster),
            &ev,
            "AddOnCredentialsResponse",
        )
        .await
        .map_err(|e| e.to_string())?;
    if resp.user_jwt.is_empty() {
        return Err(if resp.message.is_empty() {
            "refused without a reason".into()
        } else {
            format!("refused: {}", resp.message)
        });
    }
    Ok(resp)
}

/// Runs in-process add-on agents for the Deployments of a simulated cluster (see the module
/// documentation).
pub struct Supervisor {
    cluster_name: String,
    backend: Arc<dyn Backend>,
    store: Arc<LocalStore>,
    client: async_nats::Client,
    /// Secure mode: each add-on asks for credentials of its own and connects with these
    /// settings (URL, TLS; the credentials are replaced). `None`: the agent's connection.
    requested_credentials: Option<NatsConfig>,
    /// The add-ons' keys, shared with the [`credentials::SecretKeeper`] (one key per add-on:
    /// the hub revokes an add-on's previous key when another is presented).
    keys: Option<Arc<credentials::AddOnKeys>>,
    max_event_bytes: usize,
    poll_interval: Duration,
    running: BTreeMap<String, (AddOnSettings, ReporterHandle)>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("cluster_name", &self.cluster_name)
            .field("running", &self.running.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    /// A supervisor of `cluster_name`'s add-ons whose reporters publish on `client` (the agent's
    /// connection) and count with the backend and the agent's store.
    pub fn new(
        cluster_name: &str,
        backend: Arc<dyn Backend>,
        store: Arc<LocalStore>,
        client: async_nats::Client,
    ) -> Self {
        Self {
            cluster_name: cluster_name.to_string(),
            backend,
            store,
            client,
            requested_credentials: None,
            keys: None,
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            poll_interval: POLL_INTERVAL,
            running: BTreeMap::new(),
        }
    }

    /// Secure mode: each add-on asks the hub for credentials over `client` and reports over a
    /// connection of its own made from `nats` (its URL and TLS settings; its credentials are
    /// replaced by the add-on's).
    pub fn with_requested_credentials(mut self, nats: NatsConfig) -> Self {
        self.requested_credentials = Some(nats);
        self
    }

    /// Secure mode: the add-ons' keys come from `keys` (shared with the agent's
    /// [`credentials::SecretKeeper`]) instead of a fresh key per run.
    pub fn with_keys(mut self, keys: Arc<credentials::AddOnKeys>) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Largest event sent.
    pub fn with_max_event_bytes(mut self, max: usize) -> Self {
        self.max_event_bytes = max;
        self
    }

    /// How often Deployments are listed on a backend without a change signal.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The add-ons running now, by Deployment (`namespace/name`).
    pub fn running(&self) -> Vec<(String, AddOnSettings)> {
        self.running
            .iter()
            .map(|(k, (s, _))| (k.clone(), s.clone()))
            .collect()
    }

    /// Starts, restarts and stops add-ons to match the Deployments now.
    pub async fn reconcile(&mut self) {
        let deployments = match self.backend.list("deployments", None).await {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(error = %e, "listing deployments for add-ons failed");
                return;
            }
        };
        let mut wanted = BTreeMap::new();
        for d in &deployments {
            let Some((settings, problems)) = fleet_metrics_settings(d, &self.cluster_name) else {
                continue;
            };
            let key = format!(
                "{}/{}",
                d["metadata"]["namespace"].as_str().unwrap_or_default(),
                d["metadata"]["name"].as_str().unwrap_or_default()
            );
            wanted.insert(key, (settings, problems));
        }
        self.running.retain(|key, (settings, _)| {
            let keep = wanted.get(key).is_some_and(|(s, _)| s == settings);
            if !keep {
                tracing::info!(deployment = %key, addon = %settings.addon_name, "in-process add-on stopped");
            }
            keep
        });
        for (key, (settings, problems)) in wanted {
            if self.running.contains_key(&key) {
                continue;
            }
            for p in problems {
                tracing::warn!(deployment = %key, "{p}");
            }
            tracing::info!(
                deployment = %key,
                addon = %settings.addon_name,
                cluster = %settings.cluster_name,
                interval_s = settings.interval.as_secs(),
                "in-process add-on started"
            );
            let handle = self.start(&settings);
            self.running.insert(key, (settings, handle));
        }
    }

    fn start(&self, settings: &AddOnSettings) -> ReporterHandle {
        let mut config = ReporterConfig::new(
            &settings.addon_name,
            &settings.cluster_name,
            settings.interval,
        );
        config.max_event_bytes = self.max_event_bytes;
        let source = Arc::new(fleet_metrics::AgentSource::new(
            self.backend.clone(),
            self.store.clone(),
        ));
        match &self.requested_credentials {
            None => Reporter::new(config, self.client.clone(), source).spawn(),
            Some(nats) => ReporterHandle::new(tokio::spawn(run_with_credentials(
                self.client.clone(),
                nats.clone(),
                self.cluster_name.clone(),
                config,
                source,
                self.keys.clone(),
            ))),
        }
    }

    /// Reconciles now and on every change (or poll) until dropped; the add-ons stop with it.
    pub async fn run(mut self) {
        let mut changes = self.backend.changes();
        loop {
            self.reconcile().await;
            match changes.as_mut() {
                Some(rx) => {
                    tokio::select! {
                        r = rx.changed() => if r.is_err() { changes = None },
                        () = tokio::time::sleep(SAFETY_POLL) => {}
                    }
                }
                None => tokio::time::sleep(self.poll_interval).await,
            }
        }
    }
}

/// Secure mode: one add-on's reporter over a connection with credentials the hub issued for it,
/// renewed two thirds into their life or when refused.
async fn run_with_credentials(
    agent_client: async_nats::Client,
    nats: NatsConfig,
    agent_cluster: String,
    config: ReporterConfig,
    source: Arc<dyn fleet_metrics::Source>,
    keys: Option<Arc<credentials::AddOnKeys>>,
) {
    // The key shared with the Secret keeper when there is one (a second key would make the
    // hub revoke the first), else a fresh one.
    let shared = keys.and_then(|k| {
        k.seed(&config.addon_name)
            .and_then(|seed| AddOnCredentials::from_seed(&seed))
            .inspect_err(|e| tracing::warn!(addon = %config.addon_name, error = %e, "add-on key unusable; using a fresh one"))
            .ok()
    });
    let creds = Arc::new(shared.unwrap_or_else(AddOnCredentials::generate));
    let request = AddOnCredentialsRequest {
        cluster_name: config.cluster_name.clone(),
        addon_name: config.addon_name.clone(),
        public_key: creds.public_key().to_string(),
    };
    let mut reporter: Option<ReporterHandle> = None;
    let mut failures = 0u32;
    loop {
        let answer = request_credentials(
            &agent_client,
            None,
            &agent_cluster,
            &request,
            nats.request_timeout,
            config.max_event_bytes,
        )
        .await
        .and_then(|resp| {
            let expires = creds.adopt(&resp.user_jwt)?;
            Ok(expires.or(resp.expires.map(|t| t.seconds)))
        });
        let wait = match answer {
            Ok(expires) => {
                if reporter.is_none() {
                    let mut cfg = nats.clone();
                    cfg.name = config.source();
                    cfg.auth = Some(creds.clone());
                    cfg.credentials_file = None;
                    cfg.nkey_seed_file = None;
                    cfg.token = None;
                    cfg.inbox_prefix = Some(format!(
                        "{}.addon.{}",
                        flotilla_bus::subjects::inbox_prefix(&config.cluster_name),
                        config.addon_name
                    ));
                    match connect::connect(&cfg, None).await {
                        Ok(client) => {
                            reporter =
                                Some(Reporter::new(config.clone(), client, source.clone()).spawn());
                        }
                        Err(e) => {
                            tracing::warn!(addon = %config.addon_name, error = %e, "add-on connection failed");
                        }
                    }
                }
                let now = flotilla_auth::setup::unix_now();
                let left = expires.map_or(i64::MAX, |e| (e - now).max(0)) as u64;
                if reporter.is_some() {
                    failures = 0;
                    Duration::from_secs(left.saturating_mul(2) / 3).max(MIN_RENEW)
                } else {
                    // No connection yet: try again soon rather than at renewal.
                    failures += 1;
                    connect::backoff(failures as usize + 4, MAX_RETRY)
                }
            }
            Err(e) => {
                failures += 1;
                tracing::warn!(
                    addon = %config.addon_name,
                    cluster = %config.cluster_name,
                    error = %e,
                    "add-on credentials not issued; asking again"
                );
                connect::backoff(failures as usize + 4, MAX_RETRY)
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = creds.refused.notified() => {
                tracing::warn!(addon = %config.addon_name, "the NATS server refused the add-on's credentials; asking again");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(image: &str, replicas: Option<i64>, env: Value, args: Value) -> Value {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "fleet-metrics-agent", "namespace": "open-cluster-management-agent-addon"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "agent", "image": image, "env": env, "args": args}]}}}});
        if let Some(r) = replicas {
            d["spec"]["replicas"] = json!(r);
        }
        d
    }

    #[test]
    fn fleet_metrics_images_are_recognised_with_any_tag_or_registry() {
        for image in [
            "flotilla/fleet-metrics",
            "flotilla/fleet-metrics:0.1.0",
            "flotilla/fleet-metrics@sha256:abc",
            "registry.example:5000/flotilla/fleet-metrics:0.1.0",
        ] {
            assert!(is_fleet_metrics_image(image), "{image}");
        }
        for image in [
            "flotilla/fleet-metrics-extra:1",
            "nginx:1.27",
            "other/fleet-metrics",
            "",
        ] {
            assert!(!is_fleet_metrics_image(image), "{image}");
        }
    }

    #[test]
    fn settings_come_from_flags_then_env_then_defaults() {
        let d = deployment("flotilla/fleet-metrics:0.1.0", None, json!([]), json!([]));
        let (s, problems) = fleet_metrics_settings(&d, "edge-1").unwrap();
        assert_eq!(
            s,
            AddOnSettings {
                addon_name: "fleet-metrics".into(),
                cluster_name: "edge-1".into(),
                interval: Duration::from_secs(60),
            }
        );
        assert!(problems.is_empty());
        let d = deployment(
            "flotilla/fleet-metrics:0.1.0",
            Some(2),
            json!([{"name": "REPORT_INTERVAL", "value": "30"}, {"name": "ADDON_NAME", "value": "fm"},
                   {"name": "CLUSTER_NAME", "value": "from-env"}]),
            json!(["--cluster-name=from-args", "--nats-url=nats://hub:4222"]),
        );
        let (s, _) = fleet_metrics_settings(&d, "edge-1").unwrap();
        assert_eq!(s.addon_name, "fm");
        assert_eq!(s.cluster_name, "from-args");
        assert_eq!(s.interval, Duration::from_secs(30));
        let d = deployment(
            "flotilla/fleet-metrics",
            None,
            json!([{"name": "REPORT_INTERVAL", "value": "soon"}, {"name": "ADDON_NAME", "value": "a.b"}]),
            json!(["--interval-seconds", "0"]),
        );
        let (s, problems) = fleet_metrics_settings(&d, "edge-1").unwrap();
        assert_eq!(s.addon_name, "fleet-metrics");
        assert_eq!(s.interval, Duration::from_secs(60));
        assert_eq!(problems.len(), 2, "{problems:?}");
    }

    #[test]
    fn other_images_and_scaled_down_deployments_run_nothing() {
        let d = deployment("nginx:1.27", Some(1), json!([]), json!([]));
        assert!(fleet_metrics_settings(&d, "c").is_none());
        let d = deployment(
            "flotilla/fleet-metrics:0.1.0",
            Some(0),
            json!([]),
            json!([]),
        );
        assert!(fleet_metrics_settings(&d, "c").is_none());
    }

    #[test]
    fn issued_credentials_must_be_for_the_addons_key() {
        let creds = AddOnCredentials::generate();
        assert!(creds.credentials().is_err());
        assert!(creds.adopt("not a jwt").is_err());
        let account = nkeys::KeyPair::new_account();
        let other = nkeys::KeyPair::new_user().public_key();
        let jwt_for = |sub: &str| {
            let mut claims = flotilla_auth::jwt::Claims::new(
                "c1/fleet-metrics",
                sub,
                1,
                flotilla_auth::permissions::addon("fleet-metrics", "c1"),
            );
            claims.exp = Some(4_000_000_000);
            claims.encode(&account).unwrap()
        };
        assert!(creds.adopt(&jwt_for(&other)).is_err());
        let jwt = jwt_for(creds.public_key());
        assert_eq!(creds.adopt(&jwt).unwrap(), Some(4_000_000_000));
        assert_eq!(creds.credentials().unwrap().0, jwt);
        creds.refused();
        assert!(creds.credentials().is_err());
    }
}
