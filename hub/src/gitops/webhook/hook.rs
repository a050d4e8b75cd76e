//! The controllers' hub's side of a webhook ([`GitRepos::hook`]): the GitRepos following the
//! pushed repository from the [`Index`] (never every GitRepo), only the provider's key out of
//! each one's Secret, [`decide`] on a blocking thread (at most [`VERIFYING`] at once), a replay
//! answered without a fetch or a write, then a fetch for each GitRepo it verified for.

use super::index::Index;
use super::replay::{self, Recent};
use super::verify::Secret;
use super::{Answer, Candidate, Delivery, Outcome, decide, read, verify};
use crate::gitops::{GitRepoError, GitRepos, actor};
use crate::keys::ObjectRef;
use flotilla_api::v1::GitRepoSpec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::Semaphore;

/// Deliveries verified at once (each on a blocking thread); more wait their turn.
pub const VERIFYING: usize = 2;

/// What the GitRepos keep for webhooks: who follows which URL (kept by their task), the
/// deliveries handled lately, the verification slots, and a count of deliveries that rotates
/// where their candidates' round-robin by namespace starts. Cheap to clone.
#[derive(Clone)]
pub struct Hooks {
    index: Arc<RwLock<Index>>,
    recent: Arc<Mutex<Recent>>,
    verifying: Arc<Semaphore>,
    /// Deliveries read so far: where [`Index::candidates`] starts its round-robin.
    turn: Arc<AtomicUsize>,
}

impl Default for Hooks {
    fn default() -> Self {
        Self {
            index: Arc::default(),
            recent: Arc::default(),
            verifying: Arc::new(Semaphore::new(VERIFYING)),
            turn: Arc::default(),
        }
    }
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").finish_non_exhaustive()
    }
}

impl Hooks {
    /// `key` follows what `spec` says now (the GitRepos' task, as it publishes).
    pub fn follow(&self, key: &ObjectRef, spec: Option<&GitRepoSpec>) {
        self.index.write().expect("index lock").set(key, spec);
    }

    /// `key` was deleted.
    pub fn unfollow(&self, key: &ObjectRef) {
        self.index.write().expect("index lock").remove(key);
    }
}

impl GitRepos {
    /// A push webhook: read, matched with the GitRepos following its repository, verified with
    /// each one's `webhookSecret` (once per distinct secret), and a fetch at once for those it
    /// verifies with that follow the ref pushed ([`decide`]); a replay of a delivery handled
    /// lately fetches and writes nothing. What the sender is told.
    pub async fn hook(&self, d: &Delivery) -> Answer {
        let read = match read(d) {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        let provider = read.provider;
        // Each delivery starts the round-robin by namespace at the next namespace.
        let turn = self.hooks.turn.fetch_add(1, Ordering::Relaxed);
        let (found, left_out) = {
            let index = self.hooks.index.read().expect("index lock");
            index.candidates(&read, d.target.as_ref(), turn)
        };
        let keys = provider.secret_keys();
        let candidates: Vec<Candidate> = found
            .into_iter()
            .map(|(key, f)| {
                let secret = (!f.secret.is_empty())
                    .then(|| self.secrets.secret_value(&key.namespace, &f.secret, keys))
                    .flatten()
                    .map(Secret::new);
                Candidate {
                    key,
                    branch: f.branch,
                    revision: f.revision,
                    secret,
                }
            })
            .collect();
        let Ok(permit) = self.hooks.verifying.clone().acquire_owned().await else {
            return Answer::new(
                Outcome::Unavailable,
                Some(provider),
                "webhooks are not served",
            );
        };
        let (delivery, r) = (d.clone(), read.clone());
        let decided = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let (answer, fetch) = decide(&delivery, &r, &candidates, left_out);
            let fetch: Vec<(ObjectRef, Vec<replay::Mark>)> = fetch
                .into_iter()
                .map(|key| {
                    let marks = replay::marks(
                        r.provider,
                        &delivery.headers,
                        &delivery.body,
                        &key.to_string(),
                    );
                    (key, marks)
                })
                .collect();
            (answer, fetch)
        })
        .await;
        let (answer, fetch) = match decided {
            Ok(decided) => decided,
            Err(e) => {
                return Answer::new(
                    Outcome::Unavailable,
                    Some(provider),
                    format!("verifying the webhook failed: {e}"),
                );
            }
        };
        if fetch.is_empty() {
            return answer;
        }
        // A replay for one GitRepo is not one for another (each has its own hook).
        let (fetch, marks): (Vec<ObjectRef>, Vec<Vec<replay::Mark>>) = {
            let mut recent = self.hooks.recent.lock().expect("recent lock");
            fetch.into_iter().filter(|(_, m)| recent.first(m)).unzip()
        };
        if fetch.is_empty() {
            let id = verify::delivery_id(&d.headers).map_or(String::new(), |id| {
                format!(" {:?}", id.chars().take(64).collect::<String>())
            });
            tracing::debug!(delivery = %id, "a replayed webhook: nothing fetched or written");
            return Answer::new(
                Outcome::Replayed,
                Some(provider),
                format!(
                    "delivery{id} was handled already (the same signed body or delivery id): \
                     nothing fetched or written"
                ),
            );
        }
        let answer = self.poke_all(answer, fetch, &read.push.commit).await;
        if answer.outcome == Outcome::Unavailable {
            // Nothing was started for it: the sender's retry is welcome.
            let mut recent = self.hooks.recent.lock().expect("recent lock");
            for m in &marks {
                recent.forget(m);
            }
        }
        answer
    }

    /// Asks the task to fetch each of `fetch` at `commit`; `answer` with what came of it.
    async fn poke_all(&self, mut answer: Answer, fetch: Vec<ObjectRef>, commit: &str) -> Answer {
        let provider = answer.provider;
        let mut notes = Vec::new();
        for key in fetch {
            let poked = self
                .handle
                .ask(|r| actor::Msg::Poke(key.clone(), commit.to_owned(), r))
                .await;
            match poked.map_err(GitRepoError::from).and_then(|r| r) {
                Ok(true) => {}
                Ok(false) => notes.push(format!(
                    "no fetch for {key}: at {commit} already, or pinned by an undo"
                )),
                Err(e) => {
                    tracing::warn!(gitrepo = %key, error = %e, "a verified webhook could not start a fetch");
                    answer = Answer::new(Outcome::Unavailable, provider, format!("{key}: {e}"));
                }
            }
        }
        if !notes.is_empty() && answer.outcome == Outcome::Triggered {
            answer.message = format!("{} ({})", answer.message, notes.join("; "));
        }
        answer
    }
}
