//! Secure mode: hub credentials handed to the add-ons that ask for hub access, as Secrets on the
//! spoke.
//!
//! The hub annotates the work of an add-on whose template has `spec.registration`
//! ([`addon::HUB_CREDENTIALS_SECRET_ANNOTATION`] names the Secret,
//! [`addon::INSTALL_NAMESPACE_ANNOTATION`] its namespace). For every such work the agent holds,
//! the [`SecretKeeper`]:
//!
//! - takes the add-on's NKey from [`AddOnKeys`] (made once and kept in
//!   `STATE_DIR/addons/<addon>.nk`, mode 0600, so a restarted agent asks for the same key and
//!   the hub revokes nothing);
//! - asks the hub for the add-on's credentials on `flotilla.addoncreds.<cluster>`
//!   ([`super::request_credentials`]);
//! - applies through the backend a `v1 Secret` with key [`addon::HUB_CREDENTIALS_KEY`]
//!   (`nats.creds`: a standard NATS credentials file), labelled with the add-on's name, which the
//!   add-on's Deployment mounts;
//! - asks again two thirds into the credentials' life; a refusal (the hub may not have finished
//!   with the add-on yet) or a failed apply is logged and retried with backoff;
//! - deletes the Secret, and forgets the key, when the work goes (the hub revokes the key when
//!   the add-on is removed).
//!
//! It looks at the works when the agent's work records change (`LocalStore::watch_works`),
//! when credentials are due or a retry is, and once a minute otherwise (a Secret deleted by
//! hand comes back then).
//!
//! Without secure mode the agent does none of this: add-ons connect without credentials.

use crate::backend::{Backend, Strategy};
use crate::store::LocalStore;
use flotilla_api::addon;
use flotilla_api::v1::AddOnCredentialsRequest;
use flotilla_api::work::ManifestId;
use flotilla_auth::{Creds, Secret};
use flotilla_bus::connect;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Shortest time between two passes over the works (add-ons wanting credentials).
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Longest time between two passes when nothing changes (a Secret deleted by hand comes back
/// within it).
pub const IDLE_PASS: Duration = Duration::from_secs(60);
/// Longest wait between two failed attempts.
const MAX_RETRY: Duration = Duration::from_secs(60);
/// Shortest time between two renewals.
const MIN_RENEW: Duration = Duration::from_secs(10);
/// Directory of the add-ons' keys in the state directory.
const KEYS_DIR: &str = "addons";

/// The add-ons' NKeys: one user key per add-on, made on first use and kept (in the state
/// directory, mode 0600, or in memory) until the add-on leaves the cluster.
#[derive(Debug, Default)]
pub struct AddOnKeys {
    dir: Option<PathBuf>,
    seeds: Mutex<HashMap<String, Secret>>,
}

impl AddOnKeys {
    /// Keys kept in `state_dir/addons/` (in memory only with `None`).
    pub fn new(state_dir: Option<PathBuf>) -> Self {
        Self {
            dir: state_dir.map(|d| d.join(KEYS_DIR)),
            seeds: Mutex::default(),
        }
    }

    fn file(&self, addon: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{addon}.nk")))
    }

    /// The seed of `addon`'s key: the one kept, else a new one (stored at once).
    pub fn seed(&self, addon: &str) -> Result<Secret, String> {
        let mut seeds = self.seeds.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = seeds.get(addon) {
            return Ok(s.clone());
        }
        let file = self.file(addon);
        if let Some(path) = file.as_ref().filter(|p| p.exists()) {
            match std::fs::read_to_string(path) {
                Ok(text) if nkeys::KeyPair::from_seed(text.trim()).is_ok() => {
                    let seed = Secret::new(text.trim());
                    seeds.insert(addon.to_string(), seed.clone());
                    return Ok(seed);
                }
                Ok(_) => {
                    tracing::warn!(file = %path.display(), "unusable add-on key; making a new one")
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "unreadable add-on key; making a new one")
                }
            }
        }
        let seed = Secret::new(
            nkeys::KeyPair::new_user()
                .seed()
                .map_err(|e| format!("making a key: {e}"))?,
        );
        if let Some(path) = &file {
            if let Some(dir) = path.parent() {
                flotilla_auth::secret::create_private_dir(dir)
                    .map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            flotilla_auth::secret::write_private(path, seed.expose().as_bytes())
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        seeds.insert(addon.to_string(), seed.clone());
        Ok(seed)
    }

    /// Forgets `addon`'s key (the add-on left; the hub revoked it).
    pub fn forget(&self, addon: &str) {
        self.seeds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(addon);
        if let Some(path) = self.file(addon) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Where an add-on's hub credentials go, from its work's annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The add-on.
    pub addon: String,
    /// The Secret (namespace, name).
    pub secret: ManifestId,
}

/// The add-ons of the works held that want hub credentials, by add-on name (a work being
/// deleted wants nothing).
pub fn wanted(works: &[flotilla_api::v1::AppliedManifestWork]) -> BTreeMap<String, Wanted> {
    let mut out = BTreeMap::new();
    for r in works.iter().filter(|r| !r.deleting) {
        let Some(meta) = r.work.as_ref().and_then(|w| w.metadata.as_ref()) else {
            continue;
        };
        if meta.deletion_timestamp.is_some() {
            continue;
        }
        let (Some(name), Some(namespace), Some(addon)) = (
            meta.annotations
                .get(addon::HUB_CREDENTIALS_SECRET_ANNOTATION),
            meta.annotations.get(addon::INSTALL_NAMESPACE_ANNOTATION),
            meta.labels.get(addon::ADDON_NAME_LABEL),
        ) else {
            continue;
        };
        let usable = |v: &str| flotilla_api::names::validate_dns1123_label("name", v).is_ok();
        if !usable(addon) || !usable(namespace) || !usable(name) {
            tracing::warn!(work = %meta.name, addon = %addon, secret = %name, namespace = %namespace, "unusable add-on credentials annotations ignored");
            continue;
        }
        if !rendered_by_hub(&meta.name, addon, name) {
            tracing::warn!(work = %meta.name, addon = %addon, secret = %name, "add-on credentials annotations on a work the hub did not render for that add-on ignored");
            continue;
        }
        out.insert(
            addon.clone(),
            Wanted {
                addon: addon.clone(),
                secret: ManifestId {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "Secret".into(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                },
            },
        );
    }
    out
}

/// Whether a work carrying the reserved add-on keys has the shape of one the hub renders for
/// add-on `addon`: named as its agent's works (`addon-<addon>-deploy-<n>`) and naming the
/// Secret the hub names (`<addon>-hub-credentials`). The hub refuses the reserved keys on every
/// work it did not render; this keeps a work that slipped past it (a hub bug, a new path) from
/// steering an add-on's credentials into a Secret of its choosing.
fn rendered_by_hub(work: &str, addon: &str, secret: &str) -> bool {
    addon::work_index(addon, work).is_some() && secret == addon::hub_credentials_secret_name(addon)
}

/// The Secret holding an add-on's credentials file.
pub fn secret(wanted: &Wanted, creds: &Creds) -> Value {
    let mut s = k8s_openapi::api::core::v1::Secret {
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    s.metadata.name = Some(wanted.secret.name.clone());
    s.metadata.namespace = Some(wanted.secret.namespace.clone());
    s.metadata.labels = Some(
        [(addon::ADDON_NAME_LABEL.to_string(), wanted.addon.clone())]
            .into_iter()
            .collect(),
    );
    s.data = Some(
        [(
            addon::HUB_CREDENTIALS_KEY.to_string(),
            k8s_openapi::ByteString(creds.format().expose().as_bytes().to_vec()),
        )]
        .into_iter()
        .collect(),
    );
    let mut v = serde_json::to_value(&s).unwrap_or_default();
    v["apiVersion"] = "v1".into();
    v["kind"] = "Secret".into();
    v
}

/// The credentials file text in a Secret made by [`secret`] (`data."nats.creds"`, base64).
pub fn secret_creds(secret: &Value) -> Option<String> {
    let s: k8s_openapi::api::core::v1::Secret = serde_json::from_value(secret.clone()).ok()?;
    let bytes = s.data?.remove(addon::HUB_CREDENTIALS_KEY)?;
    String::from_utf8(bytes.0).ok()
}

#[derive(Debug)]
struct Entry {
    wanted: Wanted,
    next: Instant,
    failures: u32,
}

/// Keeps the hub credentials Secrets of the add-ons on this cluster (see the module
/// documentation).
pub struct SecretKeeper {
    cluster_name: String,
    backend: Arc<dyn Backend>,
    store: Arc<LocalStore>,
    client: async_nats::Client,
    /// Where the hub's answers come back (prefix wire).
    spoke: Option<flotilla_bus::spoke::Spoke>,
    keys: Arc<AddOnKeys>,
    request_timeout: Duration,
    max_event_bytes: usize,
    poll_interval: Duration,
    entries: BTreeMap<String, Entry>,
    /// Secrets whose delete failed, retried at every pass.
    leaving: BTreeMap<String, ManifestId>,
}

impl std::fmt::Debug for SecretKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretKeeper")
            .field("cluster_name", &self.cluster_name)
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

impl SecretKeeper {
    /// A keeper for `cluster_name` asking the hub over `client` (the agent's own connection)
    /// and writing through `backend`.
    pub fn new(
        cluster_name: &str,
        backend: Arc<dyn Backend>,
        store: Arc<LocalStore>,
        client: async_nats::Client,
        keys: Arc<AddOnKeys>,
    ) -> Self {
        Self {
            cluster_name: cluster_name.to_string(),
            backend,
            store,
            client,
            spoke: None,
            keys,
            request_timeout: Duration::from_secs(5),
            max_event_bytes: flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES,
            poll_interval: POLL_INTERVAL,
            entries: BTreeMap::new(),
            leaving: BTreeMap::new(),
        }
    }

    /// Reads the hub's answers through `spoke` (the agent's one subscription, prefix wire).
    pub fn with_spoke(mut self, spoke: Option<flotilla_bus::spoke::Spoke>) -> Self {
        self.spoke = spoke;
        self
    }

    /// How long a credentials request waits for the hub.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Largest event sent.
    pub fn with_max_event_bytes(mut self, max: usize) -> Self {
        self.max_event_bytes = max;
        self
    }

    /// Runs until dropped: a pass when the agent's work records change, when credentials are
    /// due for renewal or a retry, and at least every [`IDLE_PASS`]; passes are at least
    /// `poll_interval` apart. Idle, it reads nothing.
    pub async fn run(mut self) {
        let mut changes = self.store.watch_works();
        loop {
            changes.mark_unchanged();
            self.reconcile().await;
            tokio::time::sleep(self.poll_interval).await;
            let now = Instant::now();
            let due = if self.leaving.is_empty() {
                self.entries
                    .values()
                    .map(|e| e.next)
                    .min()
                    .unwrap_or(now + IDLE_PASS)
                    .min(now + IDLE_PASS)
            } else {
                now
            };
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep_until(due) => {}
            }
        }
    }

    /// One pass: Secrets of add-ons gone deleted, due credentials requested and applied.
    pub async fn reconcile(&mut self) {
        let works = match self.store.load_works() {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "reading works for add-on credentials failed");
                return;
            }
        };
        let wanted = wanted(&works);
        let gone: Vec<String> = self
            .entries
            .iter()
            .filter(|(addon, e)| wanted.get(*addon) != Some(&e.wanted))
            .map(|(addon, _)| addon.clone())
            .collect();
        for addon in gone {
            if let Some(e) = self.entries.remove(&addon) {
                self.leaving.insert(
                    format!("{addon}/{}", e.wanted.secret.describe()),
                    e.wanted.secret,
                );
                if !wanted.contains_key(&addon) {
                    self.keys.forget(&addon);
                }
            }
        }
        // A Secret wanted again (by the same or another add-on) is not deleted.
        self.leaving
            .retain(|_, id| !wanted.values().any(|w| w.secret == *id));
        let mut deleted = Vec::new();
        for (key, id) in &self.leaving {
            match self.backend.delete(id).await {
                Ok(_) | Err(crate::backend::BackendError::NotFound(_)) => {
                    tracing::info!(secret = %id.describe(), "add-on hub credentials deleted");
                    deleted.push(key.clone());
                }
                Err(e) => {
                    tracing::warn!(secret = %id.describe(), error = %e, "deleting add-on hub credentials failed; trying again")
                }
            }
        }
        for key in deleted {
            self.leaving.remove(&key);
        }
        let now = Instant::now();
        for (addon, w) in wanted {
            let entry = self.entries.entry(addon).or_insert_with(|| Entry {
                wanted: w,
                next: now,
                failures: 0,
            });
            if entry.next > now {
                continue;
            }
            match issue(
                (&self.client, self.spoke.as_ref()),
                &self.cluster_name,
                &self.keys,
                &*self.backend,
                &entry.wanted,
                self.request_timeout,
                self.max_event_bytes,
            )
            .await
            {
                Ok(renew_in) => {
                    entry.failures = 0;
                    entry.next = Instant::now() + renew_in;
                }
                Err(e) => {
                    entry.failures += 1;
                    let wait = connect::backoff(entry.failures as usize + 2, MAX_RETRY);
                    tracing::warn!(
                        addon = %entry.wanted.addon,
                        secret = %entry.wanted.secret.describe(),
                        error = %e,
                        retry_in_ms = wait.as_millis() as u64,
                        "add-on hub credentials not delivered; trying again"
                    );
                    entry.next = Instant::now() + wait;
                }
            }
        }
    }
}

/// Asks for `w`'s credentials and applies its Secret; returns when to renew them.
async fn issue(
    (client, spoke): (&async_nats::Client, Option<&flotilla_bus::spoke::Spoke>),
    cluster: &str,
    keys: &AddOnKeys,
    backend: &dyn Backend,
    w: &Wanted,
    timeout: Duration,
    max_event_bytes: usize,
) -> Result<Duration, String> {
    let seed = keys.seed(&w.addon)?;
    let creds = super::AddOnCredentials::from_seed(&seed)?;
    let request = AddOnCredentialsRequest {
        cluster_name: cluster.to_string(),
        addon_name: w.addon.clone(),
        public_key: creds.public_key().to_string(),
    };
    let resp =
        super::request_credentials(client, spoke, cluster, &request, timeout, max_event_bytes)
            .await?;
    let expires = creds
        .adopt(&resp.user_jwt)?
        .or(resp.expires.map(|t| t.seconds));
    let file = Creds {
        jwt: resp.user_jwt,
        seed,
    };
    let outcome = backend
        .apply(&w.secret, &secret(w, &file), &Strategy::Update)
        .await
        .map_err(|e| format!("applying {}: {e}", w.secret.describe()))?;
    tracing::info!(addon = %w.addon, secret = %w.secret.describe(), ?outcome, "add-on hub credentials delivered");
    let now = flotilla_auth::setup::unix_now();
    let left = expires.map_or(i64::MAX, |e| (e - now).max(0)) as u64;
    Ok(Duration::from_secs(left.saturating_mul(2) / 3).max(MIN_RENEW))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{AppliedManifestWork, ManifestWork};

    fn work(addon: &str, annotated: bool, deleting: bool) -> AppliedManifestWork {
        let mut meta = flotilla_api::v1::ObjectMeta {
            name: addon::work_name(addon, 0),
            namespace: "c1".into(),
            ..Default::default()
        };
        meta.labels
            .insert(addon::ADDON_NAME_LABEL.into(), addon.into());
        if annotated {
            meta.annotations.insert(
                addon::HUB_CREDENTIALS_SECRET_ANNOTATION.into(),
                addon::hub_credentials_secret_name(addon),
            );
            meta.annotations
                .insert(addon::INSTALL_NAMESPACE_ANNOTATION.into(), "ns1".into());
        }
        AppliedManifestWork {
            resource_id: addon.into(),
            work: Some(ManifestWork {
                metadata: Some(meta),
                ..Default::default()
            }),
            applied: Vec::new(),
            deleting,
        }
    }

    #[test]
    fn reserved_keys_count_only_on_works_shaped_as_the_hub_renders_them() {
        let mut renamed = work("a", true, false);
        renamed
            .work
            .as_mut()
            .unwrap()
            .metadata
            .as_mut()
            .unwrap()
            .name = "my-work".into();
        let mut elsewhere = work("b", true, false);
        elsewhere
            .work
            .as_mut()
            .unwrap()
            .metadata
            .as_mut()
            .unwrap()
            .annotations
            .insert(
                addon::HUB_CREDENTIALS_SECRET_ANNOTATION.into(),
                "attackers-secret".into(),
            );
        assert!(wanted(&[renamed, elsewhere]).is_empty());
    }

    #[test]
    fn only_annotated_works_not_being_deleted_want_credentials() {
        let w = wanted(&[
            work("a", true, false),
            work("b", false, false),
            work("c", true, true),
        ]);
        assert_eq!(w.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(w["a"].secret.name, "a-hub-credentials");
        assert_eq!(w["a"].secret.namespace, "ns1");
        assert_eq!(w["a"].secret.kind, "Secret");
    }

    #[test]
    fn the_secret_holds_a_standard_creds_file_and_the_addon_label() {
        let w = &wanted(&[work("a", true, false)])["a"];
        let key = nkeys::KeyPair::new_user();
        let creds = Creds {
            jwt: "eyJ.x.y".into(),
            seed: Secret::new(key.seed().unwrap()),
        };
        let s = secret(w, &creds);
        assert_eq!(s["kind"], "Secret");
        assert_eq!(s["metadata"]["labels"][addon::ADDON_NAME_LABEL], "a");
        assert_eq!(
            flotilla_api::work::manifest_id(&s).unwrap(),
            w.secret,
            "applied under its own identity"
        );
        let text = secret_creds(&s).unwrap();
        let parsed = Creds::parse(&text).unwrap();
        assert_eq!(parsed.jwt, "eyJ.x.y");
        assert_eq!(parsed.public_key(), key.public_key());
    }

    #[test]
    fn keys_are_kept_private_reused_and_forgotten() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let keys = AddOnKeys::new(Some(dir.path().to_path_buf()));
        let seed = keys.seed("a").unwrap();
        let file = dir.path().join("addons/a.nk");
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A restarted agent reads the same key.
        let again = AddOnKeys::new(Some(dir.path().to_path_buf()));
        assert_eq!(again.seed("a").unwrap().expose(), seed.expose());
        again.forget("a");
        assert!(!file.exists());
        assert_ne!(again.seed("a").unwrap().expose(), seed.expose());
    }
}
