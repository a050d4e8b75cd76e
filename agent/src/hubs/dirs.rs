//! The state directory of an agent with several hubs.
//!
//! ```text
//! STATE_DIR/agent-state.json      the cluster's identity (its `id.k8s.io` claim), the same on every hub
//! STATE_DIR/hubs.json             the current hub and the hubs that denied the cluster
//! STATE_DIR/hubs/<name>/          everything one hub gave: agent state with its own key,
//!                                 works/, policies/, cluster.creds, addons/
//! ```
//!
//! A hub's works live only in its own directory: the next hub's resync never names them as
//! unknown, so a switch leaves the previous hub's workloads on the spoke (OCM may wipe them).
//! An agent that ran with one hub is adopted by the first listed hub once: its key, works and
//! credentials move into that hub's directory, so that hub keeps knowing it.

use crate::store::{LocalStore, StoreError, write_atomically};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The per-hub directory of hub `name`.
pub fn hub_dir(root: &Path, name: &str) -> PathBuf {
    root.join("hubs").join(name)
}

/// What a single-hub agent kept at the top of its state directory, moved into the first hub's
/// directory when the agent first runs with several hubs.
const MOVED: &[&str] = &[
    "works",
    "policies",
    crate::credentials::CLUSTER_CREDS,
    "addons",
];
const STATE_FILE: &str = "agent-state.json";
const SELECTION_FILE: &str = "hubs.json";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { path, source }
}

/// Prepares `root` for hubs whose first is `first`: adopts a single-hub agent's state into
/// `first`'s directory (once), and returns the cluster's identity (`id.k8s.io`), kept at the top.
pub fn prepare(root: &Path, cluster: &str, first: &str) -> Result<String, StoreError> {
    let first_dir = hub_dir(root, first);
    let top_state = root.join(STATE_FILE);
    if !first_dir.exists() && top_state.exists() {
        std::fs::create_dir_all(&first_dir).map_err(io(&first_dir))?;
        for name in MOVED {
            let from = root.join(name);
            if from.exists() {
                let to = first_dir.join(name);
                std::fs::rename(&from, &to).map_err(io(&from))?;
            }
        }
        let bytes = std::fs::read(&top_state).map_err(io(&top_state))?;
        write_atomically(&first_dir.join(STATE_FILE), &bytes)?;
        tracing::info!(
            hub = first,
            dir = %first_dir.display(),
            "state of the single-hub agent adopted by the first listed hub"
        );
    }
    let identity = LocalStore::open(root, cluster)?;
    let id = identity.get().cluster_id;
    Ok(id)
}

/// Opens hub `name`'s state and gives it the cluster's identity.
pub fn open_hub(root: &Path, cluster: &str, name: &str, id: &str) -> Result<(), StoreError> {
    let store = LocalStore::open(&hub_dir(root, name), cluster)?;
    if store.get().cluster_id != id {
        store.update(|s| s.cluster_id = id.to_string())?;
    }
    Ok(())
}

/// The persisted selection: which hub the agent is on, which denied it (by name, so that a
/// reordered hubs file still means the same hubs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persisted {
    /// The current hub.
    pub current: String,
    /// Hubs that denied the cluster.
    #[serde(default)]
    pub denied: Vec<String>,
}

/// The selection a restarted agent resumes with (`None`: first start, or unreadable — then it
/// starts with the first hub and says so).
pub fn load_selection(root: &Path) -> Option<Persisted> {
    let file = root.join(SELECTION_FILE);
    let bytes = std::fs::read(&file).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "unreadable hub selection; starting with the first hub");
            None
        }
    }
}

/// Saves the selection.
pub fn save_selection(root: &Path, p: &Persisted) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec_pretty(p).map_err(|e| StoreError::Corrupt {
        path: root.join(SELECTION_FILE),
        message: e.to_string(),
    })?;
    write_atomically(&root.join(SELECTION_FILE), &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_hub_agent_is_adopted_by_the_first_hub_with_its_key_and_works() {
        let root = tempfile::tempdir().unwrap();
        let single = LocalStore::open(root.path(), "edge-1").unwrap();
        let (id, seed) = {
            let s = single.get();
            (s.cluster_id, s.nkey_seed.expose().to_string())
        };
        std::fs::create_dir_all(root.path().join("works")).unwrap();
        std::fs::write(root.path().join("works/w.pb"), b"work").unwrap();
        std::fs::write(root.path().join("cluster.creds"), b"creds").unwrap();
        drop(single);

        assert_eq!(prepare(root.path(), "edge-1", "hub-a").unwrap(), id);
        let a = hub_dir(root.path(), "hub-a");
        assert_eq!(std::fs::read(a.join("works/w.pb")).unwrap(), b"work");
        assert_eq!(std::fs::read(a.join("cluster.creds")).unwrap(), b"creds");
        assert!(!root.path().join("works").exists(), "moved, not copied");
        let adopted = LocalStore::open(&a, "edge-1").unwrap().get();
        assert_eq!(
            adopted.nkey_seed.expose(),
            seed,
            "hub A keeps knowing the agent's key"
        );
        // Once: a second start moves nothing and keeps the identity.
        assert_eq!(prepare(root.path(), "edge-1", "hub-a").unwrap(), id);

        // Hub B gets its own key and the same identity.
        open_hub(root.path(), "edge-1", "hub-b", &id).unwrap();
        let b = LocalStore::open(&hub_dir(root.path(), "hub-b"), "edge-1")
            .unwrap()
            .get();
        assert_eq!(b.cluster_id, id);
        assert_ne!(b.nkey_seed.expose(), seed);
    }

    #[test]
    fn the_selection_survives_a_restart() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(load_selection(root.path()), None);
        let p = Persisted {
            current: "hub-b".into(),
            denied: vec!["hub-a".into()],
        };
        save_selection(root.path(), &p).unwrap();
        assert_eq!(load_selection(root.path()), Some(p));
        std::fs::write(root.path().join(SELECTION_FILE), b"{").unwrap();
        assert_eq!(load_selection(root.path()), None);
    }
}
