//! The grants file followed while the hub runs (docs/notes/issue-48-design.md §8.4): read every
//! [`POLL`], put in force when its content changed and parses; a file that does not parse, or
//! cannot be read, keeps the last good grants in force and says what and where, once per
//! content. Polling a hash rather than watching the file: a Kubernetes ConfigMap mount swaps a
//! symlink, which inotify misses without care, and two seconds is soon enough for a removed
//! grant.

use super::file;
use super::live::Live;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How often the file is read.
pub const POLL: Duration = Duration::from_secs(2);

/// What one read of the file did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The same content as last time: nothing to do.
    Unchanged,
    /// New grants in force (their digest, hex).
    Reloaded(String),
    /// New content, the same grants (comments, order): nothing changed.
    Same,
    /// The file cannot be read or does not parse: the last good grants stay (the error).
    Kept(String),
}

/// Follows one grants file into a [`Live`].
pub struct Follower {
    path: PathBuf,
    live: Live,
    last: Option<[u8; 32]>,
}

impl Follower {
    /// Follows `path` into `live`, whose grants were read from it at start.
    pub fn new(path: PathBuf, live: Live) -> Self {
        let last = std::fs::read(&path).ok().map(|b| Sha256::digest(&b).into());
        Self { path, live, last }
    }

    /// Reads the file once and acts on what changed.
    pub fn poll(&mut self) -> Outcome {
        let shown = self.path.display().to_string();
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) => {
                let hash = Sha256::digest(e.to_string().as_bytes()).into();
                if self.last == Some(hash) {
                    return Outcome::Unchanged;
                }
                self.last = Some(hash);
                return Outcome::Kept(format!("{shown}: {e}"));
            }
        };
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        if self.last == Some(hash) {
            return Outcome::Unchanged;
        }
        self.last = Some(hash);
        match file::parse(&shown, &bytes) {
            Ok(grants) if grants.digest() == self.live.current().grants.digest() => Outcome::Same,
            Ok(grants) => {
                let digest = grants.digest_hex();
                self.live.replace(grants);
                Outcome::Reloaded(digest)
            }
            Err(e) => Outcome::Kept(e.to_string()),
        }
    }

    /// Polls every [`POLL`] until `stop` flips, logging each reload and each refusal.
    pub fn spawn(mut self, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
        let path = self.path.display().to_string();
        tokio::spawn(
            async move {
                let mut tick = tokio::time::interval(POLL);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = stop.changed() => return,
                        _ = tick.tick() => {}
                    }
                    match self.poll() {
                        Outcome::Unchanged | Outcome::Same => {}
                        Outcome::Reloaded(digest) => {
                            let current = self.live.current();
                            tracing::info!(
                                %digest,
                                generation = current.generation,
                                subjects = current.grants.subjects(),
                                entries = current.grants.entries(),
                                "grants reloaded"
                            );
                        }
                        Outcome::Kept(error) => tracing::error!(
                            %error,
                            "the grants file was not reloaded; the last good grants stay in force"
                        ),
                    }
                }
            }
            .instrument(tracing::info_span!("grants_file", path = %path)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::file::{Builder, user};
    use crate::grants::{Principal, SetRole, Via};

    #[test]
    fn a_changed_file_is_put_in_force_and_a_bad_one_keeps_the_last_good_grants() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grants.yaml");
        let first = Builder::default().set("team-a", SetRole::Admin, user("ana"));
        std::fs::write(&path, first.to_yaml()).unwrap();
        let live = Live::new(file::load(&path).unwrap());
        let mut follower = Follower::new(path.clone(), live.clone());
        let ana = Principal::user("ana", Via::Token);
        assert_eq!(follower.poll(), Outcome::Unchanged);

        let second = Builder::default().set("team-b", SetRole::View, user("ana"));
        std::fs::write(&path, second.to_yaml()).unwrap();
        assert!(matches!(follower.poll(), Outcome::Reloaded(_)));
        assert_eq!(
            live.scope(&ana, None).set_role("team-b"),
            Some(SetRole::View)
        );
        assert_eq!(live.scope(&ana, None).set_role("team-a"), None);

        std::fs::write(
            &path,
            "kind: Grants\nclusterSets:\n  team-a:\n    edits: {}\n",
        )
        .unwrap();
        let Outcome::Kept(error) = follower.poll() else {
            panic!("a bad file is not put in force");
        };
        assert!(error.contains("grants.yaml:4:5"), "{error}");
        assert!(error.contains("unknown field `edits`"), "{error}");
        assert_eq!(follower.poll(), Outcome::Unchanged, "said once per content");
        assert_eq!(
            live.scope(&ana, None).set_role("team-b"),
            Some(SetRole::View)
        );

        std::fs::remove_file(&path).unwrap();
        assert!(matches!(follower.poll(), Outcome::Kept(e) if e.contains("grants.yaml")));
        assert_eq!(live.current().generation, 1);
    }
}
