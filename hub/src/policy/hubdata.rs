//! Hub ConfigMaps and Secrets: what hub templates read (`{{hub fromConfigMap "" "site" "vlan"
//! hub}}`, `fromSecret`, `copyConfigMapData`, `lookup "v1" "ConfigMap" …`), kept in memory and
//! written through to KV (`hubconfigmaps`, `hubsecrets`, `<namespace>.<name>`).
//!
//! A Secret's data rests in KV only as a box sealed by the hub's sealing key to itself (the key
//! every hub of the control plane shares, [`flotilla_hub_core::key::SealingKey`]); its plaintext
//! lives in this map alone, and no call returns it. A hub that runs without a sealing key file
//! (an ephemeral key) cannot open the boxes after a restart: those Secrets read as missing until
//! applied again, and the log says so.
//!
//! Every change is broadcast ([`HubData::subscribe`]); the policy actors of the object's
//! namespace look again, and their per-cluster caches make a change nobody read cost nothing.

use super::PolicyError;
use crate::keys::ObjectRef;
use crate::store::Bucket;
use flotilla_api::policy::template::source::{Answer, Query, Source};
use flotilla_api::v1::{HubConfigMap, HubSecret, HubSecretRecord, ObjectMeta};
use flotilla_hub_core::key::SealingKey;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use tokio::sync::broadcast;

/// KV bucket of hub ConfigMaps.
pub const CONFIG_MAPS: &str = "hubconfigmaps";
/// KV bucket of hub Secrets (sealed).
pub const SECRETS: &str = "hubsecrets";
/// What the digests of Secret data are made for ([`SealingKey::digest`]).
const DATA_DIGEST: &str = "hub secret data";

/// A hub ConfigMap or Secret changed (applied or deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// A Secret with its data opened.
#[derive(Clone)]
struct Open {
    /// What KV holds (its `sealed` kept, to write it back unchanged).
    record: HubSecretRecord,
    data: BTreeMap<String, Vec<u8>>,
}

/// The hub's ConfigMaps and Secrets (cheap to clone).
#[derive(Clone)]
pub struct HubData {
    inner: Arc<Inner>,
}

struct Inner {
    config_maps: RwLock<BTreeMap<String, HubConfigMap>>,
    /// Each ConfigMap's JSON as templates read it, by key, with the revision it was made at.
    json: RwLock<HashMap<String, (u64, Arc<serde_json::Value>)>>,
    secrets: RwLock<BTreeMap<String, Open>>,
    config_bucket: Bucket<HubConfigMap>,
    secret_bucket: Bucket<HubSecretRecord>,
    key: SealingKey,
    changes: broadcast::Sender<Changed>,
}

impl std::fmt::Debug for HubData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubData")
            .field(
                "config_maps",
                &self.inner.config_maps.read().expect("lock").len(),
            )
            .field("secrets", &self.inner.secrets.read().expect("lock").len())
            .finish_non_exhaustive()
    }
}

fn key_of(m: Option<&ObjectMeta>) -> ObjectRef {
    let m = m.cloned().unwrap_or_default();
    ObjectRef::new(&m.namespace, &m.name)
}

fn required(m: Option<&ObjectMeta>, kind: &str) -> Result<(), PolicyError> {
    match m {
        Some(m) if !m.namespace.is_empty() && !m.name.is_empty() => Ok(()),
        _ => Err(PolicyError::Invalid(vec![format!(
            "metadata: a hub {kind} needs a namespace (the policies' that read it) and a name"
        )])),
    }
}

/// Sealed JSON of a Secret's data (key → base64), and the digest standing for it.
fn seal(key: &SealingKey, data: &BTreeMap<String, Vec<u8>>) -> Result<(Vec<u8>, String), String> {
    use data_encoding::BASE64;
    let json: BTreeMap<&String, String> = data.iter().map(|(k, v)| (k, BASE64.encode(v))).collect();
    let json = serde_json::to_vec(&json).map_err(|e| e.to_string())?;
    let own = nkeys::XKey::from_public_key(key.public()).map_err(|e| e.to_string())?;
    let sealed = key
        .seal_to(&json, &own)
        .ok_or_else(|| "the box library failed".to_string())?;
    let digest = key.digest(DATA_DIGEST, &json);
    Ok((sealed, data_encoding::HEXLOWER.encode(&digest)))
}

fn open(key: &SealingKey, r: &HubSecretRecord) -> Result<BTreeMap<String, Vec<u8>>, String> {
    use data_encoding::BASE64;
    let sender = nkeys::XKey::from_public_key(&r.sender_xkey).map_err(|e| e.to_string())?;
    let json = key
        .open_from(&r.sealed, &sender)
        .ok_or_else(|| "the box does not open with this hub's sealing key".to_string())?;
    let map: BTreeMap<String, String> = serde_json::from_slice(&json).map_err(|e| e.to_string())?;
    map.into_iter()
        .map(|(k, v)| {
            BASE64
                .decode(v.as_bytes())
                .map(|b| (k, b))
                .map_err(|e| e.to_string())
        })
        .collect()
}

impl HubData {
    /// Loads every stored ConfigMap and Secret (opening the Secrets with `key`).
    pub async fn load(
        config_bucket: Bucket<HubConfigMap>,
        secret_bucket: Bucket<HubSecretRecord>,
        key: SealingKey,
    ) -> Result<Self, PolicyError> {
        let mut config_maps = BTreeMap::new();
        for (_, mut c, rev) in config_bucket.load_all().await? {
            if let Some(m) = c.metadata.as_mut() {
                m.resource_version = rev;
            }
            config_maps.insert(key_of(c.metadata.as_ref()).inventory_key(), c);
        }
        let mut secrets = BTreeMap::new();
        for (_, mut r, rev) in secret_bucket.load_all().await? {
            if let Some(m) = r.metadata.as_mut() {
                m.resource_version = rev;
            }
            let k = key_of(r.metadata.as_ref()).inventory_key();
            match open(&key, &r) {
                Ok(data) => {
                    secrets.insert(k, Open { record: r, data });
                }
                Err(e) => tracing::error!(secret = %k, error = %e,
                    "a hub Secret does not open (the sealing key changed: run the hub with the \
                     same --sealing-key-file); hub templates read it as missing until it is \
                     applied again"),
            }
        }
        let (changes, _) = broadcast::channel(1024);
        Ok(Self {
            inner: Arc::new(Inner {
                config_maps: RwLock::new(config_maps),
                json: RwLock::default(),
                secrets: RwLock::new(secrets),
                config_bucket,
                secret_bucket,
                key,
                changes,
            }),
        })
    }

    /// Changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Changed> {
        self.inner.changes.subscribe()
    }

    fn changed(&self, k: &ObjectRef) {
        let _ = self.inner.changes.send(Changed {
            namespace: k.namespace.clone(),
            name: k.name.clone(),
        });
    }

    /// Creates or replaces a ConfigMap.
    pub async fn apply_config_map(&self, mut c: HubConfigMap) -> Result<HubConfigMap, PolicyError> {
        required(c.metadata.as_ref(), "ConfigMap")?;
        let k = key_of(c.metadata.as_ref());
        let old = self
            .inner
            .config_maps
            .read()
            .expect("lock")
            .get(&k.inventory_key())
            .cloned();
        if let Some(o) = &old
            && o.immutable
            && o.data != c.data
        {
            return Err(PolicyError::Invalid(vec![format!(
                "data: ConfigMap {k} is immutable: delete it and apply it again"
            )]));
        }
        let changed = old.as_ref().is_none_or(|o| o.data != c.data);
        super::stamp(
            c.metadata.get_or_insert_with(Default::default),
            old.as_ref().and_then(|o| o.metadata.as_ref()),
            changed,
        )?;
        let rev = self.inner.config_bucket.put(&k.store_key(), &c).await?;
        if let Some(m) = c.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.inner
            .config_maps
            .write()
            .expect("lock")
            .insert(k.inventory_key(), c.clone());
        self.changed(&k);
        Ok(c)
    }

    /// Creates or replaces a Secret: sealed, then stored; the answer holds no value.
    pub async fn apply_secret(&self, s: HubSecret) -> Result<HubSecretRecord, PolicyError> {
        required(s.metadata.as_ref(), "Secret")?;
        let k = key_of(s.metadata.as_ref());
        let data: BTreeMap<String, Vec<u8>> = s.data.into_iter().collect();
        let old = self
            .inner
            .secrets
            .read()
            .expect("lock")
            .get(&k.inventory_key())
            .cloned();
        if let Some(o) = &old
            && o.record.immutable
            && o.data != data
        {
            return Err(PolicyError::Invalid(vec![format!(
                "data: Secret {k} is immutable: delete it and apply it again"
            )]));
        }
        let (sealed, data_hash) = seal(&self.inner.key, &data).map_err(|e| {
            PolicyError::Invalid(vec![format!("data: the Secret could not be sealed: {e}")])
        })?;
        let mut record = HubSecretRecord {
            metadata: s.metadata,
            r#type: s.r#type,
            keys: data.keys().cloned().collect(),
            sealed,
            sender_xkey: self.inner.key.public().to_string(),
            data_hash,
            immutable: s.immutable,
        };
        let changed = old.as_ref().is_none_or(|o| o.data != data);
        super::stamp(
            record.metadata.get_or_insert_with(Default::default),
            old.as_ref().and_then(|o| o.record.metadata.as_ref()),
            changed,
        )?;
        let rev = self
            .inner
            .secret_bucket
            .put(&k.store_key(), &record)
            .await?;
        if let Some(m) = record.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.inner.secrets.write().expect("lock").insert(
            k.inventory_key(),
            Open {
                record: record.clone(),
                data,
            },
        );
        self.changed(&k);
        record.sealed.clear();
        Ok(record)
    }

    /// Deletes a ConfigMap.
    pub async fn delete_config_map(&self, namespace: &str, name: &str) -> Result<(), PolicyError> {
        let k = ObjectRef::new(namespace, name);
        if !self
            .inner
            .config_maps
            .read()
            .expect("lock")
            .contains_key(&k.inventory_key())
        {
            return Err(PolicyError::NotFound(format!("ConfigMap {k}")));
        }
        self.inner.config_bucket.purge(&k.store_key()).await?;
        self.inner
            .config_maps
            .write()
            .expect("lock")
            .remove(&k.inventory_key());
        self.changed(&k);
        Ok(())
    }

    /// Deletes a Secret.
    pub async fn delete_secret(&self, namespace: &str, name: &str) -> Result<(), PolicyError> {
        let k = ObjectRef::new(namespace, name);
        if !self
            .inner
            .secrets
            .read()
            .expect("lock")
            .contains_key(&k.inventory_key())
        {
            return Err(PolicyError::NotFound(format!("Secret {k}")));
        }
        self.inner.secret_bucket.purge(&k.store_key()).await?;
        self.inner
            .secrets
            .write()
            .expect("lock")
            .remove(&k.inventory_key());
        self.changed(&k);
        Ok(())
    }

    /// ConfigMaps of a namespace (every namespace when empty).
    pub fn list_config_maps(&self, namespace: &str) -> Vec<HubConfigMap> {
        super::in_namespace(&self.inner.config_maps.read().expect("lock"), namespace)
    }

    /// A Secret's type and data, opened: for the hub's own use only (a GitRepo's credentials,
    /// handed to its fetch worker on stdin), never returned by a call. `None`: no such Secret,
    /// or one that did not open with this hub's sealing key.
    pub fn secret_data(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<(String, BTreeMap<String, Vec<u8>>)> {
        let k = ObjectRef::new(namespace, name).inventory_key();
        let secrets = self.inner.secrets.read().expect("lock");
        let open = secrets.get(&k)?;
        Some((open.record.r#type.clone(), open.data.clone()))
    }

    /// One value of a Secret, opened: the first of `keys` it holds non-empty — for the hub's
    /// own use only (a GitRepo's webhook secret), never returned by a call; only that value
    /// leaves the lock. `None`: no such Secret or key, or one that did not open.
    pub fn secret_value(&self, namespace: &str, name: &str, keys: &[&str]) -> Option<Vec<u8>> {
        let k = ObjectRef::new(namespace, name).inventory_key();
        let secrets = self.inner.secrets.read().expect("lock");
        let open = secrets.get(&k)?;
        keys.iter()
            .find_map(|key| open.data.get(*key).filter(|v| !v.is_empty()))
            .cloned()
    }

    /// Secrets of a namespace (every namespace when empty), without their sealed data.
    pub fn list_secrets(&self, namespace: &str) -> Vec<HubSecretRecord> {
        let secrets = self.inner.secrets.read().expect("lock");
        let records: BTreeMap<String, HubSecretRecord> = secrets
            .iter()
            .map(|(k, o)| {
                let mut r = o.record.clone();
                r.sealed.clear();
                (k.clone(), r)
            })
            .collect();
        super::in_namespace(&records, namespace)
    }

    /// The stored revision of what `query` reads (`0`: absent), for the policy actors' caches:
    /// a cached resolution stays good while every object it read keeps its revision.
    pub fn revision(&self, query: &Query) -> u64 {
        match query {
            Query::Get {
                kind,
                namespace,
                name,
                ..
            } => {
                let k = ObjectRef::new(namespace, name).inventory_key();
                let rev = |m: Option<&ObjectMeta>| m.map_or(0, |m| m.resource_version);
                match kind.as_str() {
                    "ConfigMap" => self
                        .inner
                        .config_maps
                        .read()
                        .expect("lock")
                        .get(&k)
                        .map_or(0, |c| rev(c.metadata.as_ref())),
                    "Secret" => self
                        .inner
                        .secrets
                        .read()
                        .expect("lock")
                        .get(&k)
                        .map_or(0, |o| rev(o.record.metadata.as_ref())),
                    _ => 0,
                }
            }
            // A list's result depends on every object of its namespace: the sum of their
            // revisions changes whenever one is written, added or removed.
            Query::List {
                kind, namespace, ..
            } => {
                let prefix = ObjectRef::prefix(namespace);
                let sum = |revs: &mut dyn Iterator<Item = u64>| {
                    revs.fold(0u64, |a, r| a.wrapping_mul(31).wrapping_add(r + 1))
                };
                match kind.as_str() {
                    "ConfigMap" => sum(&mut self
                        .inner
                        .config_maps
                        .read()
                        .expect("lock")
                        .range(prefix.clone()..)
                        .take_while(|(k, _)| k.starts_with(&prefix))
                        .map(|(_, c)| c.metadata.as_ref().map_or(0, |m| m.resource_version))),
                    "Secret" => sum(&mut self
                        .inner
                        .secrets
                        .read()
                        .expect("lock")
                        .range(prefix.clone()..)
                        .take_while(|(k, _)| k.starts_with(&prefix))
                        .map(|(_, o)| {
                            o.record.metadata.as_ref().map_or(0, |m| m.resource_version)
                        })),
                    _ => 0,
                }
            }
        }
    }
}

impl HubData {
    /// The ConfigMap `key` as its JSON object, made once per stored revision and shared by
    /// every cluster's resolution (a fleet-wide ConfigMap with a key per cluster is large: made
    /// for each cluster, resolution was quadratic in the fleet).
    fn config_map_json(
        &self,
        key: &str,
        json: impl Fn(&HubConfigMap) -> serde_json::Value,
    ) -> Option<Arc<serde_json::Value>> {
        let maps = self.inner.config_maps.read().expect("lock");
        let Some(map) = maps.get(key) else {
            drop(maps);
            self.inner.json.write().expect("lock").remove(key);
            return None;
        };
        let rev = map.metadata.as_ref().map_or(0, |m| m.resource_version);
        if let Some((at, made)) = self.inner.json.read().expect("lock").get(key)
            && *at == rev
            && rev != 0
        {
            return Some(made.clone());
        }
        let made = Arc::new(json(map));
        drop(maps);
        if rev != 0 {
            self.inner
                .json
                .write()
                .expect("lock")
                .insert(key.to_string(), (rev, made.clone()));
        }
        Some(made)
    }
}

/// Hub templates' reads answered from the hub's data: ConfigMaps and Secrets only (the
/// template functions refuse any other kind in hub mode before asking), every read answered
/// at once (nothing is pending on the hub).
impl Source for HubData {
    fn answer(&self, query: &Query) -> Option<Answer> {
        use flotilla_api::ocm::hubdata::{config_map_json, secret_json};
        Some(match query {
            Query::Get {
                kind,
                namespace,
                name,
                ..
            } => {
                let k = ObjectRef::new(namespace, name).inventory_key();
                match kind.as_str() {
                    "ConfigMap" => Answer::Object(self.config_map_json(&k, config_map_json)),
                    "Secret" => {
                        Answer::object(self.inner.secrets.read().expect("lock").get(&k).map(|o| {
                            secret_json(
                                &o.record.metadata.clone().unwrap_or_default(),
                                &o.record.r#type,
                                &o.data,
                            )
                        }))
                    }
                    _ => Answer::Unserved,
                }
            }
            Query::List {
                kind,
                namespace,
                selector,
                ..
            } => {
                let selector = match flotilla_api::selector::parse(selector) {
                    Ok(s) => s,
                    Err(e) => return Some(Answer::Failed(e.to_string())),
                };
                let prefix = ObjectRef::prefix(namespace);
                let items: Vec<serde_json::Value> = match kind.as_str() {
                    "ConfigMap" => self
                        .inner
                        .config_maps
                        .read()
                        .expect("lock")
                        .range(prefix.clone()..)
                        .take_while(|(k, _)| k.starts_with(&prefix))
                        .filter(|(_, c)| matches(&selector, c.metadata.as_ref()))
                        .map(|(_, c)| config_map_json(c))
                        .collect(),
                    "Secret" => self
                        .inner
                        .secrets
                        .read()
                        .expect("lock")
                        .range(prefix.clone()..)
                        .take_while(|(k, _)| k.starts_with(&prefix))
                        .filter(|(_, o)| matches(&selector, o.record.metadata.as_ref()))
                        .map(|(_, o)| {
                            secret_json(
                                &o.record.metadata.clone().unwrap_or_default(),
                                &o.record.r#type,
                                &o.data,
                            )
                        })
                        .collect(),
                    _ => return Some(Answer::Unserved),
                };
                Answer::Objects(items)
            }
        })
    }
}

fn matches(selector: &flotilla_api::v1::LabelSelector, m: Option<&ObjectMeta>) -> bool {
    let none = std::collections::HashMap::new();
    flotilla_api::selector::matches_labels(selector, m.map_or(&none, |m| &m.labels))
}
