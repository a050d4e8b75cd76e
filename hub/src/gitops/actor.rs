//! The GitRepos' task: the only writer of the `gitrepos` bucket. It answers applies, deletes
//! and syncs; starts each due fetch as a job (through the fetch pool: a worker process per
//! fetch, bounded, one per host) that lists, fetches and renders off the task; writes a
//! rendered commit's replica sets through [`ReplicaSets`]; pauses, resumes and undoes every
//! bundle's rollout (an undo pins the commit delivered before, fetched by its id until resumed);
//! and keeps each GitRepo's status, its bundles' counts refreshed from the replica sets' views.

use super::rules::{self, Outcome, Rollout, Tracked};
use super::webhook::hook::Hooks;
use super::webhook::replay;
use super::{Buckets, Deps, GitRepoError, Views};
use crate::keys::ObjectRef;
use crate::replicaset::{ReplicaSets, Writer};
use flotilla_api::v1::{GitRepo, ManifestWorkReplicaSet, ReplicaSetHubState};
use flotilla_gitfetch::launch::Worker;
use flotilla_gitfetch::pool::Pool;
use flotilla_gitops::source;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument;

type Reply<T> = oneshot::Sender<Result<T, GitRepoError>>;

/// How often the bundles' counts are read from the replica sets (the status is written only
/// when they changed).
const REFRESH: Duration = Duration::from_secs(1);
/// The mailbox.
const MAILBOX: usize = 256;

/// The task's messages.
#[derive(Debug)]
pub enum Msg {
    /// Create or update a GitRepo (validated by the handle).
    Apply(Box<GitRepo>, Reply<GitRepo>),
    /// Delete a GitRepo and its replica sets.
    Delete(ObjectRef, Reply<()>),
    /// Fetch now.
    Sync(ObjectRef, Reply<GitRepo>),
    /// Pause, resume or undo every bundle's rollout.
    Rollout(ObjectRef, Rollout, Reply<GitRepo>),
    /// A verified push webhook named this commit (empty: none): fetch now unless the GitRepo
    /// is at it already. Answers whether a fetch was started or queued.
    Poke(ObjectRef, String, Reply<bool>),
}

/// A finished job: whose, for which spec and pin, and what it came to.
struct Done {
    key: ObjectRef,
    generation: i64,
    forced: i64,
    pinned: Option<String>,
    outcome: Outcome,
}

struct Actor {
    buckets: Buckets,
    deps: Deps,
    views: Views,
    /// The webhooks' index of who follows which URL, kept with the views.
    hooks: Hooks,
    /// When each GitRepo's status last recorded a webhook ([`replay::record`]).
    webhook_written: HashMap<ObjectRef, std::time::Instant>,
    pool: Pool,
    repos: BTreeMap<ObjectRef, GitRepo>,
    tracked: BTreeMap<ObjectRef, Tracked>,
    jobs: JoinSet<Done>,
    /// What the last delivery's reconcile of inline targets' Placements found (inline targets,
    /// problems), for the status written after it ([`super::placements::condition`]).
    placed: Option<(usize, Vec<String>)>,
}

/// Spawns the task over what was stored.
pub(super) fn spawn(
    buckets: Buckets,
    deps: Deps,
    views: Views,
    hooks: Hooks,
    stored: Vec<(String, GitRepo, u64)>,
    shutdown: watch::Receiver<bool>,
) -> (mpsc::Sender<Msg>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(MAILBOX);
    let config = &deps.config;
    let mut worker = Worker::new(config.worker_binary());
    worker.memory_bytes = config.worker_memory;
    worker.timeout = config.fetch_timeout;
    let mut pool_stop = shutdown.clone();
    let (pool, pool_task) = Pool::spawn(worker, config.fetches, MAILBOX, async move {
        while !*pool_stop.borrow_and_update() {
            if pool_stop.changed().await.is_err() {
                break;
            }
        }
    });
    let mut actor = Actor {
        buckets,
        deps,
        views,
        hooks,
        webhook_written: HashMap::new(),
        pool,
        repos: BTreeMap::new(),
        tracked: BTreeMap::new(),
        jobs: JoinSet::new(),
        placed: None,
    };
    for (_, mut repo, rev) in stored {
        if let Some(m) = repo.metadata.as_mut() {
            m.resource_version = rev;
        }
        actor.adopt(repo);
    }
    let task = tokio::spawn(
        async move {
            actor.run(rx, shutdown).await;
            // The pool's workers are killed when it stops (the shutdown signal, or its
            // handle dropped with the actor).
            let _ = pool_task.await;
        }
        .instrument(tracing::info_span!("gitrepos")),
    );
    (tx, task)
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>, mut shutdown: watch::Receiver<bool>) {
        if *shutdown.borrow_and_update() {
            return;
        }
        let mut refresh = tokio::time::interval(REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            self.start_due();
            let wake = self.next_wake();
            tokio::select! {
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        break;
                    }
                }
                msg = rx.recv() => match msg {
                    Some(msg) => self.handle(msg).await,
                    None => break,
                },
                Some(done) = self.jobs.join_next(), if !self.jobs.is_empty() => match done {
                    Ok(done) => self.finished(done).await,
                    Err(e) => tracing::warn!(error = %e, "a GitRepo fetch job ended without an answer"),
                },
                () = sleep_until(wake) => {}
                _ = refresh.tick() => self.refresh_all().await,
            }
        }
        self.jobs.shutdown().await;
    }

    async fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Apply(repo, reply) => {
                let _ = reply.send(self.apply(*repo).await);
            }
            Msg::Delete(key, reply) => {
                let _ = reply.send(self.delete(&key).await);
            }
            Msg::Sync(key, reply) => {
                let answer = match self.tracked.get_mut(&key) {
                    Some(t) if t.in_flight => {
                        t.again = true;
                        Ok(self.repos[&key].clone())
                    }
                    Some(t) => {
                        t.next = Some(Instant::now());
                        Ok(self.repos[&key].clone())
                    }
                    None => Err(GitRepoError::NotFound(key.to_string())),
                };
                let _ = reply.send(answer);
            }
            Msg::Rollout(key, action, reply) => {
                let _ = reply.send(self.rollout(&key, action).await);
            }
            Msg::Poke(key, commit, reply) => {
                let _ = reply.send(self.poke(&key, commit).await);
            }
        }
    }

    /// A verified webhook: a fetch now (after the running one) unless the commit is the one
    /// delivered or last fetched, or an undo pinned the GitRepo; its commit and time recorded
    /// in the status at most once a second per GitRepo, the same commit again at most once a
    /// minute ([`replay::record`]) — a stream of verified deliveries does not become a stream
    /// of store writes. (A replay of one delivery never gets here: [`super::webhook::hook`].)
    async fn poke(&mut self, key: &ObjectRef, commit: String) -> Result<bool, GitRepoError> {
        let Some(mut repo) = self.repos.get(key).cloned() else {
            return Err(GitRepoError::NotFound(key.to_string()));
        };
        let mut status = repo.status.clone().unwrap_or_default();
        let at = !commit.is_empty()
            && (status.commit == commit || status.head.as_ref().is_some_and(|h| h.sha == commit));
        // Undone to a pinned commit: the branch is not followed until resumed.
        let fetch = !at && rules::pinned(&repo).is_none();
        if fetch && let Some(t) = self.tracked.get_mut(key) {
            if t.in_flight {
                t.again = true;
            } else {
                t.next = Some(Instant::now());
            }
        }
        let now = std::time::Instant::now();
        let same = status.webhook_commit == commit;
        if replay::record(self.webhook_written.get(key).copied(), same, now) {
            self.webhook_written.insert(key.clone(), now);
            status.webhook_commit = commit;
            status.last_webhook_time = Some(flotilla_api::meta::now());
            repo.status = Some(status);
            // The fetch is due already: a failed status write delays nothing.
            if let Err(e) = self.store(repo).await {
                tracing::warn!(gitrepo = %key, error = %e, "could not record the webhook in the status");
            }
        }
        tracing::info!(gitrepo = %key, fetch, "push webhook verified");
        Ok(fetch)
    }

    /// Pauses, resumes or undoes every bundle's rollout; the status says so (an undo's pin is
    /// fetched at once).
    async fn rollout(&mut self, key: &ObjectRef, action: Rollout) -> Result<GitRepo, GitRepoError> {
        let Some(mut repo) = self.repos.get(key).cloned() else {
            return Err(GitRepoError::NotFound(key.to_string()));
        };
        let mut status = repo.status.clone().unwrap_or_default();
        let effect = rules::rollout(&mut status, action, key).map_err(GitRepoError::Refused)?;
        if let Some(pause) = effect.pause_sets {
            let verb = if pause { "pause" } else { "resume" };
            for name in owned(&self.deps.replicasets, key) {
                let by = Writer::GitRepo(&key.name);
                match self
                    .deps
                    .replicasets
                    .rollout_as(&key.namespace, &name, verb, by)
                    .await
                {
                    Ok(_) | Err(crate::replicaset::ReplicaSetError::NotFound(_)) => {}
                    Err(source) => return Err(GitRepoError::ReplicaSet { name, source }),
                }
            }
        }
        repo.status = Some(status);
        let repo = self.store(repo).await?;
        if effect.fetch
            && let Some(t) = self.tracked.get_mut(key)
        {
            if t.in_flight {
                t.again = true;
            } else {
                t.next = Some(Instant::now());
            }
        }
        tracing::info!(gitrepo = %key, ?action, "GitRepo rollout changed");
        Ok(repo)
    }

    /// Publishes a stored GitRepo and tracks it (fetched at once: nothing was fetched for it
    /// by this task yet).
    fn adopt(&mut self, repo: GitRepo) {
        let key = super::key_of(&repo);
        self.views
            .write()
            .expect("views lock")
            .insert(key.inventory_key(), repo.clone());
        self.hooks.follow(&key, repo.spec.as_ref());
        self.tracked.entry(key.clone()).or_default();
        self.repos.insert(key, repo);
    }

    async fn apply(&mut self, mut repo: GitRepo) -> Result<GitRepo, GitRepoError> {
        let key = super::key_of(&repo);
        match self.repos.get(&key) {
            Some(old) => {
                let stored = old.metadata.clone().unwrap_or_default();
                let changed = old.spec != repo.spec;
                crate::identity::keep(
                    repo.metadata.get_or_insert_with(Default::default),
                    &stored,
                    changed,
                );
                repo.status = old.status.clone();
            }
            None => {
                if self.repos.len() >= self.deps.config.max_repos {
                    return Err(GitRepoError::Exhausted(self.deps.config.max_repos));
                }
                crate::identity::create(repo.metadata.get_or_insert_with(Default::default));
                repo.status = None;
            }
        }
        let repo = self.store(repo).await?;
        tracing::info!(gitrepo = %key, generation = repo.metadata.as_ref().map_or(0, |m| m.generation), "GitRepo applied");
        Ok(repo)
    }

    /// Writes `repo` and publishes it.
    async fn store(&mut self, mut repo: GitRepo) -> Result<GitRepo, GitRepoError> {
        let key = super::key_of(&repo);
        if let Some(m) = repo.metadata.as_mut() {
            m.resource_version = 0;
        }
        let rev = self.buckets.repos.put(&key.store_key(), &repo).await?;
        if let Some(m) = repo.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.adopt(repo.clone());
        Ok(repo)
    }

    async fn delete(&mut self, key: &ObjectRef) -> Result<(), GitRepoError> {
        let Some(repo) = self.repos.get(key).cloned() else {
            return Err(GitRepoError::NotFound(key.to_string()));
        };
        for name in owned(&self.deps.replicasets, key) {
            let by = Writer::GitRepo(&key.name);
            match self
                .deps
                .replicasets
                .delete_as(&key.namespace, &name, by)
                .await
            {
                Ok(()) | Err(crate::replicaset::ReplicaSetError::NotFound(_)) => {}
                Err(e) => {
                    return Err(GitRepoError::Invalid(vec![format!(
                        "its replica set {}/{name} could not be deleted: {e}; try again",
                        key.namespace
                    )]));
                }
            }
        }
        let placements = &self.deps.placements;
        let namespace_sets = self.deps.replicasets.list(&key.namespace);
        // Its own sets are gone (deleted above), whatever the view still shows.
        let others: Vec<&ManifestWorkReplicaSet> = namespace_sets
            .iter()
            .map(Arc::as_ref)
            .filter(|rs| !rules::owned_by(rs, &key.name))
            .collect();
        if let Err((name, e)) =
            super::placements::remove_all(placements, &key.namespace, &key.name, &others).await
        {
            return Err(GitRepoError::Invalid(vec![format!(
                "its Placement {}/{name} could not be deleted: {e}; try again",
                key.namespace
            )]));
        }
        self.buckets.repos.purge(&key.store_key()).await?;
        self.repos.remove(key);
        self.tracked.remove(key);
        self.hooks.unfollow(key);
        self.webhook_written.remove(key);
        self.views
            .write()
            .expect("views lock")
            .remove(&key.inventory_key());
        let cache = self.cache_of(&repo);
        if let Err(e) = tokio::fs::remove_dir_all(&cache).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(gitrepo = %key, cache = %cache.display(), error = %e, "could not remove the fetch cache");
        }
        tracing::info!(gitrepo = %key, "GitRepo deleted");
        Ok(())
    }

    /// The fetch cache of a GitRepo: named by its uid, so a GitRepo deleted and made again
    /// (perhaps naming another repository) never shares one.
    fn cache_of(&self, repo: &GitRepo) -> PathBuf {
        let m = repo.metadata.clone().unwrap_or_default();
        self.deps
            .config
            .cache_dir
            .join(format!("{}.{}.{}.git", m.namespace, m.name, m.uid))
    }

    /// The soonest due fetch that is not running (spec changes are due at once).
    fn next_wake(&self) -> Option<Instant> {
        self.tracked
            .iter()
            .filter(|(_, t)| !t.in_flight)
            .filter_map(|(k, t)| {
                if rules::spec_moved(&self.repos[k], t) {
                    Some(Instant::now())
                } else {
                    t.next
                }
            })
            .min()
    }

    fn start_due(&mut self) {
        let now = Instant::now();
        let due: Vec<ObjectRef> = self
            .tracked
            .iter()
            .filter(|(k, t)| rules::due(&self.repos[*k], t, now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.start(key);
        }
    }

    fn start(&mut self, key: ObjectRef) {
        let repo = self.repos[&key].clone();
        let t = self.tracked.entry(key.clone()).or_default();
        let moved = rules::spec_moved(&repo, t);
        t.in_flight = true;
        t.again = false;
        t.render_again = false;
        t.next = None;
        let generation = repo.metadata.as_ref().map_or(0, |m| m.generation);
        let forced = source::spec(&repo).force_sync_generation;
        let pinned = rules::pinned(&repo).map(str::to_owned);
        let delivered = repo.status.as_ref().map_or("", |s| s.commit.as_str());
        // A new spec, a forced sync or a pin not delivered yet renders whatever is asked for;
        // otherwise a listing naming the commit last fetched ends the fetch there.
        let known =
            if (moved && t.generation != 0) || pinned.as_deref().is_some_and(|p| p != delivered) {
                None
            } else {
                rules::known_commit(&repo)
            };
        let config = &self.deps.config;
        let mut request = source::fetch_request(
            &repo,
            config.limits,
            &config.file_roots,
            config.allow_loopback,
        );
        if let Some(pin) = &pinned {
            // Undone: the pinned commit, by its id, whatever the spec follows.
            request.want = Some(flotilla_gitfetch::protocol::Want::Revision(pin.clone()));
        }
        // The Secret `clientSecretName` names, read now: its values reach the worker on stdin
        // only; a missing or unusable one fails this fetch, saying which and why.
        let refused = match super::credentials::of(&self.deps.secrets, &repo) {
            Ok(credentials) => {
                request.credentials = credentials;
                None
            }
            Err(message) => Some(message),
        };
        let job = Job {
            refused,
            pool: self.pool.clone(),
            key: key.clone(),
            cache: self.cache_of(&repo),
            request,
            repo,
            known,
        };
        self.jobs.spawn(
            async move {
                let outcome = job.run().await;
                Done {
                    key: job.key,
                    generation,
                    forced,
                    pinned,
                    outcome,
                }
            }
            .instrument(tracing::info_span!("gitfetch", gitrepo = %key)),
        );
    }

    async fn finished(&mut self, done: Done) {
        let Some(repo) = self.repos.get(&done.key).cloned() else {
            return; // deleted meanwhile
        };
        let config = &self.deps.config;
        let now = Instant::now();
        let ok = !matches!(done.outcome, Outcome::Failed { .. });
        let t = self.tracked.entry(done.key.clone()).or_default();
        t.in_flight = false;
        if done.pinned.as_deref() != rules::pinned(&repo) {
            // Undone or resumed while it ran: what it fetched is not what is wanted now.
            t.next = Some(now);
            return;
        }
        t.generation = done.generation;
        t.forced = done.forced;
        t.failures = if ok { 0 } else { t.failures + 1 };
        t.next = rules::next_after(
            ok,
            t.failures,
            source::polling_interval(&repo),
            now,
            (config.retry_min, config.retry_max),
        );
        if std::mem::take(&mut t.again) {
            t.next = Some(now);
        }
        let next_fetch = t.next.map(|at| {
            flotilla_api::meta::timestamp(
                std::time::SystemTime::now() + at.saturating_duration_since(now),
            )
        });
        let retry_at = next_fetch
            .as_ref()
            .filter(|_| !ok)
            .map(flotilla_api::meta::rfc3339);
        let outcome = self.deliver(&repo, done.outcome).await;
        let delivered = matches!(outcome, Outcome::Rendered { .. }) && !source::spec(&repo).paused;
        match &outcome {
            Outcome::Failed { message } => {
                tracing::warn!(gitrepo = %done.key, %message, "fetch failed")
            }
            Outcome::Invalid { commit, problems } => {
                tracing::warn!(gitrepo = %done.key, commit = %commit.sha, problems = problems.len(), "commit refused")
            }
            Outcome::Rendered { commit, bundles } => {
                tracing::info!(gitrepo = %done.key, commit = %commit.sha, bundles = bundles.len(), delivered, "commit rendered")
            }
            Outcome::Unchanged { .. } => {}
        }
        let before = repo.status.clone().unwrap_or_default();
        let mut status =
            rules::after_fetch(&before, done.generation, &outcome, delivered, retry_at);
        status.next_fetch_time = next_fetch;
        if let Some((inline, refused)) = self.placed.take() {
            super::placements::condition(&mut status, inline, &refused);
        }
        let sets = owned_sets(&self.deps.replicasets, &done.key);
        rules::refresh_bundles(
            &mut status,
            &sets.iter().map(Arc::as_ref).collect::<Vec<_>>(),
        );
        self.write_status(repo, status).await;
    }

    /// Writes a rendered commit's replica sets (unless paused); a commit whose writes are
    /// refused (a bundle named like a replica set it does not own) becomes `Invalid`.
    async fn deliver(&mut self, repo: &GitRepo, outcome: Outcome) -> Outcome {
        let Outcome::Rendered { commit, bundles } = outcome else {
            return outcome;
        };
        if source::spec(repo).paused {
            return Outcome::Rendered { commit, bundles };
        }
        let key = super::key_of(repo);
        // The inline targets' Placements first: the sets name them (one taken by a Placement
        // this GitRepo does not own refuses the commit).
        let existing = self.deps.replicasets.list(&key.namespace);
        let refs: Vec<&ManifestWorkReplicaSet> = existing.iter().map(Arc::as_ref).collect();
        let deadline = tokio::time::Instant::now() + super::placements::WRITE_TIME;
        let done = super::placements::reconcile(&self.deps.placements, repo, &refs, deadline).await;
        self.tracked
            .entry(key.clone())
            .or_default()
            .owned_placements = Some(done.owned);
        self.placed = Some((done.inline, done.problems.clone()));
        if done.timed_out {
            // Not the commit's fault: fetched and rendered again after the back-off.
            return Outcome::Failed {
                message: done.problems.join("; "),
            };
        }
        if !done.problems.is_empty() {
            return Outcome::Invalid {
                commit,
                problems: done.problems,
            };
        }
        let mut writes = match rules::writes(repo, &bundles, &commit.sha, &refs) {
            Ok(w) => w,
            Err(problems) => return Outcome::Invalid { commit, problems },
        };
        if repo.status.as_ref().is_some_and(|s| s.rollout_paused) {
            // New bundles are made paused (existing sets keep their own pause).
            for rs in &mut writes.apply {
                rs.hub
                    .get_or_insert_with(ReplicaSetHubState::default)
                    .paused = true;
            }
        }
        let mut problems = Vec::new();
        let by = Writer::GitRepo(&key.name);
        for rs in writes.apply {
            let name = rs
                .metadata
                .as_ref()
                .map_or(String::new(), |m| m.name.clone());
            if let Err(e) = self.deps.replicasets.apply_as(rs, by).await {
                problems.push(format!("bundle {name}: {e}"));
            }
        }
        for name in writes.delete {
            if let Err(e) = self
                .deps
                .replicasets
                .delete_as(&key.namespace, &name, by)
                .await
            {
                problems.push(format!("replica set {name} (its bundle is gone): {e}"));
            }
        }
        if problems.is_empty() {
            Outcome::Rendered { commit, bundles }
        } else {
            Outcome::Invalid { commit, problems }
        }
    }

    async fn write_status(&mut self, mut repo: GitRepo, status: flotilla_api::v1::GitRepoStatus) {
        if repo.status.as_ref() == Some(&status) {
            return;
        }
        let key = super::key_of(&repo);
        repo.status = Some(status);
        if let Err(e) = self.store(repo).await {
            tracing::warn!(gitrepo = %key, error = %e, "could not write the GitRepo's status");
        }
    }

    /// Reads every GitRepo's bundle counts from the replica sets, and carries out its inline
    /// targets' Placements when it has any (or owned ones are left); writes the statuses that
    /// changed.
    async fn refresh_all(&mut self) {
        let keys: Vec<ObjectRef> = self.repos.keys().cloned().collect();
        // One budget for every GitRepo's Placement writes: past it, the rest wait for the
        // next refresh (the mailbox is not read meanwhile).
        let deadline = tokio::time::Instant::now() + super::placements::WRITE_TIME;
        for key in keys {
            let repo = self.repos[&key].clone();
            let mut status = repo.status.clone().unwrap_or_default();
            let namespace_sets = self.deps.replicasets.list(&key.namespace);
            let sets: Vec<&ManifestWorkReplicaSet> = namespace_sets
                .iter()
                .map(Arc::as_ref)
                .filter(|rs| rules::owned_by(rs, &key.name))
                .collect();
            let mut changed = rules::refresh_bundles(&mut status, &sets);
            if rules::places(&repo, self.tracked.get(&key))
                && tokio::time::Instant::now() < deadline
            {
                // Inline targets' Placements follow the spec (and are put back if edited).
                let every: Vec<&ManifestWorkReplicaSet> =
                    namespace_sets.iter().map(Arc::as_ref).collect();
                let done =
                    super::placements::reconcile(&self.deps.placements, &repo, &every, deadline)
                        .await;
                let cleared = super::placements::cleared(&status, &done.problems);
                changed |= super::placements::condition(&mut status, done.inline, &done.problems);
                let t = self.tracked.entry(key.clone()).or_default();
                t.owned_placements = Some(done.owned);
                // The commit a taken name refused is fetched and rendered again now that it is
                // free.
                t.render_again |= cleared;
            }
            if changed {
                self.write_status(repo, status).await;
            }
        }
    }
}

/// The replica sets GitRepo `key` owns.
fn owned_sets(sets: &ReplicaSets, key: &ObjectRef) -> Vec<Arc<ManifestWorkReplicaSet>> {
    sets.list(&key.namespace)
        .into_iter()
        .filter(|rs| rules::owned_by(rs, &key.name))
        .collect()
}

fn owned(sets: &ReplicaSets, key: &ObjectRef) -> Vec<String> {
    owned_sets(sets, key)
        .iter()
        .filter_map(|rs| rs.metadata.as_ref().map(|m| m.name.clone()))
        .collect()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One fetch, off the task: list (when a known commit may end it there), fetch, render.
struct Job {
    /// Why it cannot start (its credentials), reported as a failed fetch.
    refused: Option<String>,
    pool: Pool,
    key: ObjectRef,
    cache: PathBuf,
    request: flotilla_gitfetch::protocol::FetchRequest,
    repo: GitRepo,
    known: Option<String>,
}

impl Job {
    async fn run(&self) -> Outcome {
        if let Some(message) = &self.refused {
            return Outcome::Failed {
                message: message.clone(),
            };
        }
        let pool_key = self.key.inventory_key();
        if let Some(known) = &self.known {
            let mut list = self.request.clone();
            list.list_only = true;
            match self.pool.fetch(&pool_key, self.cache.clone(), list).await {
                Ok(f) if f.result.error.is_none() && &f.result.commit == known => {
                    return Outcome::Unchanged {
                        commit: f.result.commit,
                    };
                }
                Ok(f) if f.result.error.is_some() => return failed(&f.result),
                Ok(_) => {}
                Err(e) => {
                    return Outcome::Failed {
                        message: e.to_string(),
                    };
                }
            }
        }
        let finished = match self
            .pool
            .fetch(&pool_key, self.cache.clone(), self.request.clone())
            .await
        {
            Ok(f) if f.result.error.is_some() => return failed(&f.result),
            Ok(f) => f,
            Err(e) => {
                return Outcome::Failed {
                    message: e.to_string(),
                };
            }
        };
        let result = finished.result;
        let commit =
            result
                .info
                .clone()
                .unwrap_or_else(|| flotilla_gitfetch::protocol::CommitInfo {
                    sha: result.commit.clone(),
                    ..Default::default()
                });
        let repo = self.repo.clone();
        // Rendering is pure and bounded (the answer was checked against the limits), but it
        // parses YAML: off the runtime's threads.
        let rendered =
            tokio::task::spawn_blocking(move || source::render_commit(&repo, &result)).await;
        match rendered {
            Ok(Ok(bundles)) => Outcome::Rendered { commit, bundles },
            Ok(Err(problems)) => Outcome::Invalid {
                commit,
                problems: problems.iter().map(ToString::to_string).collect(),
            },
            Err(e) => Outcome::Invalid {
                commit,
                problems: vec![format!("rendering ended without an answer: {e}")],
            },
        }
    }
}

fn failed(result: &flotilla_gitfetch::protocol::FetchResult) -> Outcome {
    Outcome::Failed {
        message: result
            .error
            .as_ref()
            .map(|e| e.message.clone())
            .unwrap_or_default(),
    }
}
