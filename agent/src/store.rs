//! The agent's local state: its identity (cluster id, NKey), what the hub last said
//! (acceptance, lease) and the status sequence counter. Durable in `--state-dir` (written
//! atomically: temp file, fsync, rename) so an agent restarted while disconnected keeps working;
//! in memory for simulators.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// A local-state failure.
#[derive(Debug, Error)]
pub enum StoreError {
    /// Reading or writing the state directory failed.
    #[error("agent state {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The state file is not valid.
    #[error("agent state {path}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
}

/// What the hub last told this agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum HubState {
    /// Not yet answered.
    #[default]
    Unknown,
    /// Waiting for acceptance.
    Pending,
    /// Accepted.
    Accepted,
    /// Denied.
    Denied,
}

/// The persisted state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct State {
    /// Cluster name this state belongs to (a state dir cannot be reused for another cluster).
    pub cluster_name: String,
    /// Value of the `id.k8s.io` claim, generated once.
    pub cluster_id: String,
    /// The agent's NKey seed (its private key; never sent anywhere, never printed).
    pub nkey_seed: flotilla_auth::Secret,
    /// The hub's last answer.
    pub hub_state: HubState,
    /// Lease duration the hub asked for.
    pub lease_duration_seconds: i32,
    /// Last `sequenceid` used.
    pub last_sequence: u64,
    /// The managed namespaces the hub last asked for (ManagedClusterSet `managedNamespaces`),
    /// kept so that an agent restarted without its hub keeps managing them.
    #[serde(default)]
    pub managed_namespaces: Vec<ManagedNamespace>,
    /// The add-ons installed here by someone else whose spoke Lease the hub last asked the
    /// agent to watch (and report in the cluster status).
    #[serde(default)]
    pub external_addons: Vec<WatchedAddOn>,
    /// The agent's static curve key (NKeys xkey seed) for MirrorPeer boxes, made on first use
    /// (never sent anywhere, never printed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_xkey_seed: Option<flotilla_auth::Secret>,
    /// The MirrorPeers this cluster was last a peer of, so that a restarted agent asks at once
    /// (and removes the GREEN Secrets of one deleted while it was away).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirror_peers: Vec<KnownMirrorPeer>,
}

/// A MirrorPeer this cluster is a peer of, and the namespace of its GREEN Secrets here.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct KnownMirrorPeer {
    /// The MirrorPeer.
    pub name: String,
    /// Its item's `storageClusterRef.namespace` on this cluster.
    pub namespace: String,
}

/// An add-on installed by someone else (not an AddOnTemplate): its `coordination.k8s.io/v1`
/// Lease, named after it, is in its install namespace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WatchedAddOn {
    /// The add-on's name.
    pub name: String,
    /// Its install namespace.
    pub install_namespace: String,
}

/// One managed namespace the hub asked for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedNamespace {
    /// Namespace name.
    pub name: String,
    /// The set that manages it.
    pub cluster_set: String,
}

enum Backing {
    Dir(PathBuf),
    Memory(Mutex<std::collections::HashMap<String, Vec<u8>>>),
}

/// The local store.
///
/// Saves may race: work actors and the registration actor all bump the sequence counter. Each
/// change takes a version number under the state lock; writers then take the `written` lock one
/// at a time and skip a snapshot older than what is already on disk, so the file only ever moves
/// forward and no two writers share a temp file.
pub struct LocalStore {
    backing: Backing,
    state: Mutex<Versioned>,
    /// The version of the state last written to disk; held while writing.
    written: Mutex<u64>,
    /// Bumped whenever a work record is saved or removed (see [`LocalStore::watch_works`]).
    works_changed: tokio::sync::watch::Sender<u64>,
    /// Replicated policy records in memory mode (on disk: `policies/<resourceid>.pb`).
    policies: Mutex<std::collections::HashMap<String, Vec<u8>>>,
}

/// The state and a counter of its changes.
struct Versioned {
    state: State,
    version: u64,
}

const WORKS_DIR: &str = "works";
const POLICIES_DIR: &str = "policies";

const FILE: &str = "agent-state.json";

/// A saved record (a work's or a policy's) read from `bytes`; unreadable bytes are
/// [`StoreError::Corrupt`] naming `path`.
fn decode_record<T: prost::Message + Default>(
    path: PathBuf,
    bytes: &[u8],
) -> Result<T, StoreError> {
    T::decode(bytes).map_err(|e| StoreError::Corrupt {
        path,
        message: e.to_string(),
    })
}

/// Every saved record (`*.pb`) in `dir`, decoded: none when the directory does not exist; an
/// unreadable or undecodable record is an error naming it, never skipped silently.
fn load_records<T: prost::Message + Default>(dir: PathBuf) -> Result<Vec<T>, StoreError> {
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StoreError::Io { path: dir, source }),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|source| StoreError::Io {
                path: dir.clone(),
                source,
            })?
            .path();
        if path.extension().and_then(|e| e.to_str()) != Some("pb") {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        out.push(decode_record(path, &bytes)?);
    }
    Ok(out)
}

impl LocalStore {
    fn fresh(cluster_name: &str) -> State {
        State {
            cluster_name: cluster_name.to_string(),
            cluster_id: uuid::Uuid::new_v4().to_string(),
            nkey_seed: flotilla_auth::Secret::new(
                nkeys::KeyPair::new_user().seed().unwrap_or_default(),
            ),
            hub_state: HubState::Unknown,
            lease_duration_seconds: 60,
            last_sequence: 0,
            managed_namespaces: Vec::new(),
            external_addons: Vec::new(),
            peer_xkey_seed: None,
            mirror_peers: Vec::new(),
        }
    }

    /// An in-memory store (simulators).
    pub fn memory(cluster_name: &str) -> Self {
        Self {
            backing: Backing::Memory(Mutex::new(std::collections::HashMap::new())),
            state: Mutex::new(Versioned {
                state: Self::fresh(cluster_name),
                version: 0,
            }),
            written: Mutex::new(0),
            works_changed: tokio::sync::watch::Sender::new(0),
            policies: Mutex::default(),
        }
    }

    /// Opens (or initialises) the state in `dir`.
    pub fn open(dir: &Path, cluster_name: &str) -> Result<Self, StoreError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let file = dir.join(FILE);
        let state = match std::fs::read(&file) {
            Ok(bytes) => {
                let s: State = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                    path: file.clone(),
                    message: e.to_string(),
                })?;
                if s.cluster_name != cluster_name {
                    return Err(StoreError::Corrupt {
                        path: file,
                        message: format!(
                            "belongs to cluster {:?}, not {cluster_name:?}; use another --state-dir",
                            s.cluster_name
                        ),
                    });
                }
                s
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::fresh(cluster_name),
            Err(e) => return Err(io(&file)(e)),
        };
        let store = Self {
            backing: Backing::Dir(dir.to_path_buf()),
            state: Mutex::new(Versioned { state, version: 1 }),
            written: Mutex::new(0),
            works_changed: tokio::sync::watch::Sender::new(0),
            policies: Mutex::default(),
        };
        store.save()?;
        Ok(store)
    }

    /// A copy of the state.
    pub fn get(&self) -> State {
        self.state.lock().expect("state lock").state.clone()
    }

    /// Changes the state and persists it.
    pub fn update(&self, f: impl FnOnce(&mut State)) -> Result<(), StoreError> {
        {
            let mut v = self.state.lock().expect("state lock");
            f(&mut v.state);
            v.version += 1;
        }
        self.save()
    }

    /// The next `sequenceid`: strictly increasing, and never below the wall clock in
    /// microseconds, so that an agent that lost its state still sorts after its old events.
    pub fn next_sequence(&self) -> Result<u64, StoreError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        let mut seq = 0;
        self.update(|s| {
            s.last_sequence = (s.last_sequence + 1).max(now);
            seq = s.last_sequence;
        })?;
        Ok(seq)
    }

    /// Writes the current state unless a newer one is already on disk.
    fn save(&self) -> Result<(), StoreError> {
        let Backing::Dir(dir) = &self.backing else {
            return Ok(());
        };
        let file = dir.join(FILE);
        let mut written = self.written.lock().expect("writer lock");
        // Snapshot after taking the writer lock: whatever this writer puts on disk is at least as
        // new as every write before it.
        let (version, bytes) = {
            let v = self.state.lock().expect("state lock");
            let bytes = serde_json::to_vec_pretty(&v.state).map_err(|e| StoreError::Corrupt {
                path: file.clone(),
                message: e.to_string(),
            })?;
            (v.version, bytes)
        };
        if version <= *written {
            return Ok(());
        }
        write_atomically(&file, &bytes)?;
        *written = version;
        Ok(())
    }

    /// Saves a work record (what the agent holds and applied for one work).
    pub fn save_work(
        &self,
        record: &flotilla_api::v1::AppliedManifestWork,
    ) -> Result<(), StoreError> {
        let result = self.save_work_record(record);
        self.works_changed();
        result
    }

    fn save_work_record(
        &self,
        record: &flotilla_api::v1::AppliedManifestWork,
    ) -> Result<(), StoreError> {
        let bytes = prost::Message::encode_to_vec(record);
        match &self.backing {
            Backing::Memory(m) => {
                m.lock()
                    .expect("works lock")
                    .insert(record.resource_id.clone(), bytes);
                Ok(())
            }
            Backing::Dir(dir) => {
                let works = dir.join(WORKS_DIR);
                std::fs::create_dir_all(&works).map_err(|source| StoreError::Io {
                    path: works.clone(),
                    source,
                })?;
                write_atomically(&works.join(format!("{}.pb", record.resource_id)), &bytes)
            }
        }
    }

    /// A receiver that sees a change whenever a work record is saved or removed, so readers
    /// of the records (the add-on credentials keeper) need not poll them.
    pub fn watch_works(&self) -> tokio::sync::watch::Receiver<u64> {
        self.works_changed.subscribe()
    }

    fn works_changed(&self) {
        self.works_changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Forgets a work record.
    pub fn remove_work(&self, resource_id: &str) -> Result<(), StoreError> {
        let result = self.remove_work_record(resource_id);
        self.works_changed();
        result
    }

    fn remove_work_record(&self, resource_id: &str) -> Result<(), StoreError> {
        match &self.backing {
            Backing::Memory(m) => {
                m.lock().expect("works lock").remove(resource_id);
                Ok(())
            }
            Backing::Dir(dir) => {
                let file = dir.join(WORKS_DIR).join(format!("{resource_id}.pb"));
                match std::fs::remove_file(&file) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(source) => Err(StoreError::Io { path: file, source }),
                }
            }
        }
    }

    /// The saved record of one work, if there is one.
    pub fn load_work(
        &self,
        resource_id: &str,
    ) -> Result<Option<flotilla_api::v1::AppliedManifestWork>, StoreError> {
        let (path, bytes) = match &self.backing {
            Backing::Memory(m) => {
                let works = m.lock().expect("works lock");
                let Some(bytes) = works.get(resource_id) else {
                    return Ok(None);
                };
                (PathBuf::from(resource_id), bytes.clone())
            }
            Backing::Dir(dir) => {
                let path = dir.join(WORKS_DIR).join(format!("{resource_id}.pb"));
                match std::fs::read(&path) {
                    Ok(bytes) => (path, bytes),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(source) => return Err(StoreError::Io { path, source }),
                }
            }
        };
        decode_record(path, &bytes).map(Some)
    }

    /// Every saved work record (an unreadable record is an error, never skipped silently).
    pub fn load_works(&self) -> Result<Vec<flotilla_api::v1::AppliedManifestWork>, StoreError> {
        let decode = decode_record::<flotilla_api::v1::AppliedManifestWork>;
        match &self.backing {
            Backing::Memory(m) => m
                .lock()
                .expect("works lock")
                .iter()
                .map(|(k, v)| decode(PathBuf::from(k), v))
                .collect(),
            Backing::Dir(dir) => load_records(dir.join(WORKS_DIR)),
        }
    }

    /// How many work records the agent holds (the ManifestWorks it applied and keeps), without
    /// decoding them.
    pub fn work_count(&self) -> usize {
        match &self.backing {
            Backing::Memory(m) => m.lock().expect("works lock").len(),
            Backing::Dir(dir) => std::fs::read_dir(dir.join(WORKS_DIR)).map_or(0, |entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.path().extension().and_then(|x| x.to_str()) == Some("pb"))
                    .count()
            }),
        }
    }

    /// Saves a replicated policy's record (its spec, history and what enforce created), so an
    /// agent restarted while offline keeps enforcing it.
    pub fn save_policy(&self, record: &flotilla_api::v1::AppliedPolicy) -> Result<(), StoreError> {
        let bytes = prost::Message::encode_to_vec(record);
        match &self.backing {
            Backing::Memory(_) => {
                self.policies
                    .lock()
                    .expect("policies lock")
                    .insert(record.resource_id.clone(), bytes);
                Ok(())
            }
            Backing::Dir(dir) => {
                let policies = dir.join(POLICIES_DIR);
                std::fs::create_dir_all(&policies).map_err(|source| StoreError::Io {
                    path: policies.clone(),
                    source,
                })?;
                write_atomically(&policies.join(format!("{}.pb", record.resource_id)), &bytes)
            }
        }
    }

    /// Forgets a replicated policy's record.
    pub fn remove_policy(&self, resource_id: &str) -> Result<(), StoreError> {
        match &self.backing {
            Backing::Memory(_) => {
                self.policies
                    .lock()
                    .expect("policies lock")
                    .remove(resource_id);
                Ok(())
            }
            Backing::Dir(dir) => {
                let file = dir.join(POLICIES_DIR).join(format!("{resource_id}.pb"));
                match std::fs::remove_file(&file) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(source) => Err(StoreError::Io { path: file, source }),
                }
            }
        }
    }

    /// Every saved replicated policy record (an unreadable one is an error, never skipped).
    pub fn load_policies(&self) -> Result<Vec<flotilla_api::v1::AppliedPolicy>, StoreError> {
        let decode = decode_record::<flotilla_api::v1::AppliedPolicy>;
        match &self.backing {
            Backing::Memory(_) => self
                .policies
                .lock()
                .expect("policies lock")
                .iter()
                .map(|(k, v)| decode(PathBuf::from(k), v))
                .collect(),
            Backing::Dir(dir) => load_records(dir.join(POLICIES_DIR)),
        }
    }

    /// The simulated cluster's file inside the state directory (None in memory mode).
    pub fn sim_cluster_file(&self) -> Option<PathBuf> {
        match &self.backing {
            Backing::Dir(dir) => Some(dir.join("sim-cluster.json")),
            Backing::Memory(_) => None,
        }
    }
}

/// Writes a file atomically: a temp file of its own (created with mode 0600, so a seed is never
/// readable by others, not even briefly), fsync, rename, fsync of the directory.
pub(crate) fn write_atomically(file: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    static TEMP: AtomicU64 = AtomicU64::new(0);
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("state");
    let tmp = file.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        TEMP.fetch_add(1, Ordering::Relaxed)
    ));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut f = options.open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)?;
        if let Some(dir) = file.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        StoreError::Io {
            path: file.to_path_buf(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_survives_reopen_and_refuses_another_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::open(dir.path(), "c1").unwrap();
        s.update(|st| st.hub_state = HubState::Accepted).unwrap();
        let id = s.get().cluster_id;
        let seq = s.next_sequence().unwrap();
        drop(s);
        let s = LocalStore::open(dir.path(), "c1").unwrap();
        assert_eq!(s.get().hub_state, HubState::Accepted);
        assert_eq!(s.get().cluster_id, id);
        assert!(s.next_sequence().unwrap() > seq);
        assert!(LocalStore::open(dir.path(), "c2").is_err());
    }

    #[test]
    fn sequence_never_goes_below_the_clock_after_state_loss() {
        let a = LocalStore::memory("c1");
        let first = a.next_sequence().unwrap();
        // The counter starts at the wall clock in microseconds, not at 1.
        assert!(first > 1_600_000_000_000_000);
        let b = LocalStore::memory("c1");
        assert!(b.next_sequence().unwrap() >= first);
    }

    #[test]
    fn concurrent_saves_never_lose_or_corrupt_the_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(LocalStore::open(dir.path(), "c1").unwrap());
        let savers: Vec<_> = (0..16)
            .map(|i| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for n in 0..50 {
                        store.next_sequence().expect("sequence saved");
                        if n % 10 == 0 {
                            store
                                .update(|s| s.lease_duration_seconds = i * 100 + n)
                                .expect("state saved");
                        }
                    }
                })
            })
            .collect();
        for s in savers {
            s.join().unwrap();
        }
        // The newest state is on disk, whole; no temp file is left behind.
        let on_disk: State =
            serde_json::from_slice(&std::fs::read(dir.path().join(FILE)).unwrap()).unwrap();
        assert_eq!(on_disk, store.get());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        drop(store);
        let reopened = LocalStore::open(dir.path(), "c1").unwrap();
        assert_eq!(reopened.get(), on_disk);
    }

    #[cfg(unix)]
    #[test]
    fn state_file_holding_the_seed_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let _store = LocalStore::open(dir.path(), "c1").unwrap();
        let mode = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn work_records_are_counted_in_memory_and_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        for store in [
            LocalStore::memory("c1"),
            LocalStore::open(dir.path(), "c1").unwrap(),
        ] {
            assert_eq!(store.work_count(), 0);
            for id in ["w1", "w2"] {
                store
                    .save_work(&flotilla_api::v1::AppliedManifestWork {
                        resource_id: id.into(),
                        ..Default::default()
                    })
                    .unwrap();
            }
            assert_eq!(store.work_count(), 2);
            store.remove_work("w1").unwrap();
            assert_eq!(store.work_count(), 1);
        }
    }

    #[test]
    fn corrupt_state_is_reported_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        let err = LocalStore::open(dir.path(), "c1")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(FILE), "{err}");
    }
}
