//! The agent's local state: its identity (cluster id, NKey), what the hub last said
//! (acceptance, lease) and the status sequence counter. Durable in `--state-dir` (written
//! atomically: temp file, fsync, rename) so an agent restarted while disconnected keeps working;
//! in memory for simulators.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
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
    /// The agent's NKey seed (its private key; never sent anywhere).
    pub nkey_seed: String,
    /// The hub's last answer.
    pub hub_state: HubState,
    /// Lease duration the hub asked for.
    pub lease_duration_seconds: i32,
    /// Last `sequenceid` used.
    pub last_sequence: u64,
}

enum Backing {
    Dir(PathBuf),
    Memory(Mutex<std::collections::HashMap<String, Vec<u8>>>),
}

/// The local store.
pub struct LocalStore {
    backing: Backing,
    state: Mutex<State>,
}

const WORKS_DIR: &str = "works";

const FILE: &str = "agent-state.json";

impl LocalStore {
    fn fresh(cluster_name: &str) -> State {
        State {
            cluster_name: cluster_name.to_string(),
            cluster_id: uuid::Uuid::new_v4().to_string(),
            nkey_seed: nkeys::KeyPair::new_user().seed().unwrap_or_default(),
            hub_state: HubState::Unknown,
            lease_duration_seconds: 60,
            last_sequence: 0,
        }
    }

    /// An in-memory store (simulators).
    pub fn memory(cluster_name: &str) -> Self {
        Self {
            backing: Backing::Memory(Mutex::new(std::collections::HashMap::new())),
            state: Mutex::new(Self::fresh(cluster_name)),
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
            state: Mutex::new(state),
        };
        store.save()?;
        Ok(store)
    }

    /// A copy of the state.
    pub fn get(&self) -> State {
        self.state.lock().expect("state lock").clone()
    }

    /// Changes the state and persists it.
    pub fn update(&self, f: impl FnOnce(&mut State)) -> Result<(), StoreError> {
        f(&mut self.state.lock().expect("state lock"));
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

    fn save(&self) -> Result<(), StoreError> {
        let Backing::Dir(dir) = &self.backing else {
            return Ok(());
        };
        let file = dir.join(FILE);
        let bytes =
            serde_json::to_vec_pretty(&*self.state.lock().expect("state lock")).map_err(|e| {
                StoreError::Corrupt {
                    path: file.clone(),
                    message: e.to_string(),
                }
            })?;
        write_atomically(&file, &bytes)
    }

    /// Saves a work record (what the agent holds and applied for one work).
    pub fn save_work(
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

    /// Forgets a work record.
    pub fn remove_work(&self, resource_id: &str) -> Result<(), StoreError> {
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

    /// Every saved work record (an unreadable record is an error, never skipped silently).
    pub fn load_works(&self) -> Result<Vec<flotilla_api::v1::AppliedManifestWork>, StoreError> {
        let decode = |path: PathBuf, bytes: &[u8]| {
            <flotilla_api::v1::AppliedManifestWork as prost::Message>::decode(bytes).map_err(|e| {
                StoreError::Corrupt {
                    path,
                    message: e.to_string(),
                }
            })
        };
        match &self.backing {
            Backing::Memory(m) => m
                .lock()
                .expect("works lock")
                .iter()
                .map(|(k, v)| decode(PathBuf::from(k), v))
                .collect(),
            Backing::Dir(dir) => {
                let works = dir.join(WORKS_DIR);
                let entries = match std::fs::read_dir(&works) {
                    Ok(e) => e,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(source) => {
                        return Err(StoreError::Io {
                            path: works,
                            source,
                        });
                    }
                };
                let mut out = Vec::new();
                for entry in entries {
                    let path = entry
                        .map_err(|source| StoreError::Io {
                            path: works.clone(),
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
                    out.push(decode(path, &bytes)?);
                }
                Ok(out)
            }
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

/// Writes a file atomically: temp file, fsync, rename; mode 0600.
fn write_atomically(file: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = file.with_extension("tmp");
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        }
        std::fs::rename(&tmp, file)
    };
    write().map_err(|source| StoreError::Io {
        path: file.to_path_buf(),
        source,
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
