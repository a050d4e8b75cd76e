//! The GitRepos' decisions, pure: when a GitRepo is fetched next, whether a fetch must render,
//! which replica sets a rendered commit writes and which go, the status that says so, and what
//! `flotilla rollout pause|resume|undo gitrepo` does.

use crate::replicaset::rules::state;
use flotilla_api::meta::{self, status as cstatus};
use flotilla_api::v1::{
    BundleStatus, Condition, GitCommit, GitRepo, GitRepoStatus, ManifestWorkReplicaSet,
    ReplicaSetSummary,
};
use flotilla_gitfetch::protocol::CommitInfo;
use flotilla_gitops::render::Rendered;
use flotilla_gitops::source::{
    self, BUNDLE_LABEL, COMMIT_ANNOTATION, CONTENT_ANNOTATION, GITREPO_LABEL, PATH_ANNOTATION,
};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Condition: the last fetch worked (False: the worker's message and when it is tried again).
pub const FETCHED: &str = "Fetched";
/// Condition: the head commit rendered (False: every problem, each naming its file).
pub const RENDERED: &str = "Rendered";
/// Condition: every bundle's works are available on every cluster.
pub const READY: &str = "Ready";
/// Condition: undone to an earlier commit, delivered instead of the spec's until resumed.
pub const PINNED: &str = "Pinned";
/// Delivered commits kept for undo.
pub const PREVIOUS_KEPT: usize = 10;

/// Where one GitRepo's fetching stands (the task's own, never stored).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracked {
    /// The spec generation the last fetch was for (0: none since this task started).
    pub generation: i64,
    /// The `forceSyncGeneration` the last fetch was for.
    pub forced: i64,
    /// When the next fetch is due; `None`: only when asked (polling off).
    pub next: Option<Instant>,
    /// Fetches that failed in a row.
    pub failures: u32,
    /// A fetch is running.
    pub in_flight: bool,
    /// A fetch was asked for while one ran: another follows it at once.
    pub again: bool,
    /// The commit is fetched and rendered again, as a raised `forceSyncGeneration` would (a
    /// refusal that held it back cleared).
    pub render_again: bool,
    /// Placements the GitRepo owned at the last refresh (`None`: none since this task
    /// started): with none and no inline target, the refresh skips its Placements.
    pub owned_placements: Option<usize>,
}

/// Whether the spec asks for a fetch the last one did not make: a new generation, or a raised
/// `forceSyncGeneration`.
pub fn spec_moved(repo: &GitRepo, t: &Tracked) -> bool {
    let generation = repo.metadata.as_ref().map_or(0, |m| m.generation);
    let forced = source::spec(repo).force_sync_generation;
    generation != t.generation || forced != t.forced || t.render_again
}

/// Whether the refresh looks at `repo`'s Placements: it has inline targets, or owned
/// Placements at the last refresh (a removed target's, deleted once no set names it), or the
/// task has not looked yet.
pub fn places(repo: &GitRepo, t: Option<&Tracked>) -> bool {
    let inline = source::spec(repo)
        .targets
        .iter()
        .any(|target| target.placement.is_some());
    inline || t.and_then(|t| t.owned_placements).is_none_or(|n| n > 0)
}

/// Whether a fetch starts now.
pub fn due(repo: &GitRepo, t: &Tracked, now: Instant) -> bool {
    !t.in_flight && (spec_moved(repo, t) || t.next.is_some_and(|at| at <= now))
}

/// The wait after `failures` failed fetches in a row: `min`, doubling, at most `max`.
pub fn retry_wait(failures: u32, min: Duration, max: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    min.saturating_mul(1 << doublings).min(max)
}

/// When the next fetch is due after one ended `now`: the polling interval after a success, the
/// back-off after a failure (also when polling is off: a failure is always retried).
pub fn next_after(
    ok: bool,
    failures: u32,
    interval: Option<Duration>,
    now: Instant,
    (min, max): (Duration, Duration),
) -> Option<Instant> {
    if ok {
        interval.map(|i| now + i)
    } else {
        Some(now + retry_wait(failures, min, max))
    }
}

/// The commit a fetch may stop at after listing: the last commit fetched, when the spec that
/// rendered it is still current and no new fetch was forced. `None`: fetch and render whatever
/// the branch names.
pub fn known_commit(repo: &GitRepo) -> Option<String> {
    let generation = repo.metadata.as_ref().map_or(0, |m| m.generation);
    let status = repo.status.as_ref()?;
    let head = status.head.as_ref()?;
    (status.observed_generation == generation && !head.sha.is_empty()).then(|| head.sha.clone())
}

/// What one fetch came to.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The branch still names the commit last fetched: nothing to render.
    Unchanged {
        /// That commit.
        commit: String,
    },
    /// Fetched and rendered: every bundle.
    Rendered {
        /// The commit.
        commit: CommitInfo,
        /// Its bundles.
        bundles: Vec<Rendered>,
    },
    /// Fetched, and the commit's bundles did not render: every problem.
    Invalid {
        /// The commit.
        commit: CommitInfo,
        /// Each naming its file or bundle.
        problems: Vec<String>,
    },
    /// The fetch failed or the repository was refused.
    Failed {
        /// The worker's (or launcher's) message.
        message: String,
    },
}

/// What a rendered commit writes: replica sets to create or change, and the names of the ones
/// it no longer has.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Writes {
    /// Replica sets to apply (new, or their spec, labels or annotations changed).
    pub apply: Vec<ManifestWorkReplicaSet>,
    /// Owned replica sets (by name, in the GitRepo's namespace) whose bundle is gone.
    pub delete: Vec<String>,
}

/// Whether `rs` belongs to GitRepo `name` (its label; replica sets are in its namespace).
pub fn owned_by(rs: &ManifestWorkReplicaSet, name: &str) -> bool {
    rs.metadata
        .as_ref()
        .and_then(|m| m.labels.get(GITREPO_LABEL))
        .is_some_and(|n| n == name)
}

fn annotation<'a>(rs: &'a ManifestWorkReplicaSet, key: &str) -> Option<&'a str> {
    rs.metadata
        .as_ref()
        .and_then(|m| m.annotations.get(key))
        .map(String::as_str)
}

/// The writes of `bundles` rendered at `commit` over the replica sets of the GitRepo's
/// namespace (`existing`). A bundle whose content did not change keeps the commit it was first
/// rendered at, so a commit that leaves it alone does not touch its works. A bundle whose name
/// is a replica set the GitRepo does not own is a problem (never overwritten).
pub fn writes(
    repo: &GitRepo,
    bundles: &[Rendered],
    commit: &str,
    existing: &[&ManifestWorkReplicaSet],
) -> Result<Writes, Vec<String>> {
    let name = repo.metadata.as_ref().map_or("", |m| m.name.as_str());
    let by_name: BTreeMap<&str, &ManifestWorkReplicaSet> = existing
        .iter()
        .filter_map(|rs| rs.metadata.as_ref().map(|m| (m.name.as_str(), *rs)))
        .collect();
    let mut out = Writes::default();
    let mut problems = Vec::new();
    for b in bundles {
        let old = by_name.get(b.name.as_str()).copied();
        if let Some(old) = old
            && !owned_by(old, name)
        {
            problems.push(format!(
                "bundle {}: ManifestWorkReplicaSet {} exists and does not belong to this GitRepo; \
                 rename the bundle (fleet.yaml `name`) or remove that replica set",
                b.name, b.name
            ));
            continue;
        }
        let same_content = old.and_then(|o| annotation(o, CONTENT_ANNOTATION)) == Some(&b.content);
        let at = match old.and_then(|o| annotation(o, COMMIT_ANNOTATION)) {
            Some(c) if same_content => c.to_owned(),
            _ => commit.to_owned(),
        };
        let want = source::replica_set(repo, b, &at);
        let changed = old.is_none_or(|o| {
            let (om, wm) = (
                o.metadata.clone().unwrap_or_default(),
                want.metadata.clone(),
            );
            let wm = wm.unwrap_or_default();
            o.spec != want.spec || om.labels != wm.labels || om.annotations != wm.annotations
        });
        if changed {
            out.apply.push(want);
        }
    }
    for rs in existing {
        let m = rs.metadata.clone().unwrap_or_default();
        if owned_by(rs, name) && !bundles.iter().any(|b| b.name == m.name) {
            out.delete.push(m.name);
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The first 7 hex of a commit.
pub fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

/// A commit as status shows it.
pub fn commit_of(info: &CommitInfo) -> GitCommit {
    GitCommit {
        sha: info.sha.clone(),
        subject: info.subject.clone(),
        author: info.author.clone(),
        time: Some(prost_types::Timestamp {
            seconds: info.time,
            nanos: 0,
        }),
    }
}

fn set(conditions: &mut Vec<Condition>, type_: &str, ok: bool, reason: &str, message: &str) {
    let status = if ok { cstatus::TRUE } else { cstatus::FALSE };
    meta::set_condition(conditions, type_, status, reason, message);
}

/// The status after `outcome`, from `before`: the commit delivered moves only when a commit
/// rendered and was written (`delivered`), so a bad commit leaves the last good one in place
/// and says what and where.
pub fn after_fetch(
    before: &GitRepoStatus,
    generation: i64,
    outcome: &Outcome,
    delivered: bool,
    retry_at: Option<String>,
) -> GitRepoStatus {
    let mut s = before.clone();
    s.last_fetch_time = Some(meta::now());
    let keeps = |s: &GitRepoStatus| {
        if s.commit.is_empty() {
            "nothing was delivered yet".to_owned()
        } else {
            format!("the replica sets keep commit {}", short(&s.commit))
        }
    };
    match outcome {
        Outcome::Unchanged { commit } => {
            s.failures = 0;
            let message = format!("commit {} unchanged", short(commit));
            set(&mut s.conditions, FETCHED, true, "Fetched", &message);
        }
        Outcome::Rendered { commit, bundles } => {
            s.failures = 0;
            s.observed_generation = generation;
            s.head = Some(commit_of(commit));
            let message = format!("commit {}", short(&commit.sha));
            set(&mut s.conditions, FETCHED, true, "Fetched", &message);
            if delivered {
                if s.commit != commit.sha {
                    s.previous_commits = previous_after(&s, &commit.sha);
                }
                s.commit = commit.sha.clone();
                let message = format!("{} bundles at {}", bundles.len(), short(&commit.sha));
                set(&mut s.conditions, RENDERED, true, "Rendered", &message);
            } else {
                let message = format!(
                    "commit {} rendered; the GitRepo is paused: {}",
                    short(&commit.sha),
                    keeps(&s)
                );
                set(&mut s.conditions, RENDERED, true, "Paused", &message);
            }
        }
        Outcome::Invalid { commit, problems } => {
            s.failures = 0;
            s.observed_generation = generation;
            s.head = Some(commit_of(commit));
            let message = format!("commit {}", short(&commit.sha));
            set(&mut s.conditions, FETCHED, true, "Fetched", &message);
            let message = format!(
                "commit {}: {}; {}",
                short(&commit.sha),
                problems.join("; "),
                keeps(&s)
            );
            set(&mut s.conditions, RENDERED, false, "RenderFailed", &message);
        }
        Outcome::Failed { message } => {
            s.failures = s.failures.saturating_add(1);
            let mut message = format!("{message}; {}", keeps(&s));
            if let Some(at) = retry_at {
                message.push_str(&format!("; retrying at {at}"));
            }
            set(&mut s.conditions, FETCHED, false, "FetchFailed", &message);
        }
    }
    s
}

/// The commits delivered before `delivering` once it is delivered over `s`: the one delivered
/// now goes first; delivering the pinned commit (an undo) drops it and every newer one, so a
/// second undo goes one further back.
fn previous_after(s: &GitRepoStatus, delivering: &str) -> Vec<String> {
    if s.pinned_commit == delivering {
        return match s.previous_commits.iter().position(|c| c == delivering) {
            Some(i) => s.previous_commits[i + 1..].to_vec(),
            None => s.previous_commits.clone(),
        };
    }
    let mut out: Vec<String> = std::iter::once(s.commit.clone())
        .filter(|c| !c.is_empty())
        .chain(
            s.previous_commits
                .iter()
                .filter(|c| *c != delivering)
                .cloned(),
        )
        .collect();
    out.dedup();
    out.truncate(PREVIOUS_KEPT);
    out
}

/// A rollout command over every bundle of a GitRepo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// Pause every bundle's replica set (new ones are made paused).
    Pause,
    /// Resume them, and unpin: what the spec follows is delivered again.
    Resume,
    /// Deliver the commit delivered before the current one, and pin it.
    Undo,
}

impl std::str::FromStr for Rollout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pause" => Ok(Self::Pause),
            "resume" => Ok(Self::Resume),
            "undo" => Ok(Self::Undo),
            other => Err(format!(
                "action: {other:?} is not one of pause, resume, undo"
            )),
        }
    }
}

/// What a rollout command does besides its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RolloutEffect {
    /// Pause (`true`) or resume (`false`) every bundle's replica set; `None`: leave them.
    pub pause_sets: Option<bool>,
    /// Fetch at once (the commit to deliver changed).
    pub fetch: bool,
}

/// `action` on the status of GitRepo `key`; the refusal says why (nothing to go back to).
pub fn rollout(
    status: &mut GitRepoStatus,
    action: Rollout,
    key: &crate::keys::ObjectRef,
) -> Result<RolloutEffect, String> {
    let resume = format!(
        "`flotilla rollout resume gitrepo {} -n {}`",
        key.name, key.namespace
    );
    match action {
        Rollout::Pause => {
            status.rollout_paused = true;
            Ok(RolloutEffect {
                pause_sets: Some(true),
                fetch: false,
            })
        }
        Rollout::Resume => {
            status.rollout_paused = false;
            let pinned = std::mem::take(&mut status.pinned_commit);
            meta::remove_condition(&mut status.conditions, PINNED);
            Ok(RolloutEffect {
                pause_sets: Some(false),
                fetch: !pinned.is_empty(),
            })
        }
        Rollout::Undo => {
            // Pinned and not delivered yet: the pinned commit is still listed; go past it.
            let from = status
                .previous_commits
                .iter()
                .position(|c| *c == status.pinned_commit)
                .map_or(0, |i| i + 1);
            let Some(target) = status.previous_commits.get(from).cloned() else {
                return Err(if status.commit.is_empty() {
                    format!("GitRepo {key}: nothing was delivered yet: nothing to go back to")
                } else {
                    format!(
                        "GitRepo {key}: no commit was delivered before {}: nothing to go back to",
                        short(&status.commit)
                    )
                });
            };
            let message = format!(
                "undone to {}: new commits are fetched but not rolled out until {resume}",
                short(&target)
            );
            set(&mut status.conditions, PINNED, true, "Undone", &message);
            status.pinned_commit = target;
            Ok(RolloutEffect {
                pause_sets: None,
                fetch: true,
            })
        }
    }
}

/// The commit a fetch of `repo` asks for instead of what its spec follows: the pinned one.
pub fn pinned(repo: &GitRepo) -> Option<&str> {
    repo.status
        .as_ref()
        .map(|s| s.pinned_commit.as_str())
        .filter(|c| !c.is_empty())
}

/// Each bundle's status from its replica set as the replica sets show it now, and the `Ready`
/// condition over them. Returns whether anything changed.
pub fn refresh_bundles(status: &mut GitRepoStatus, owned: &[&ManifestWorkReplicaSet]) -> bool {
    let mut bundles: Vec<BundleStatus> = owned
        .iter()
        .map(|rs| {
            let m = rs.metadata.clone().unwrap_or_default();
            let get = |k: &str| m.annotations.get(k).cloned().unwrap_or_default();
            BundleStatus {
                name: m
                    .labels
                    .get(BUNDLE_LABEL)
                    .cloned()
                    .unwrap_or(m.name.clone()),
                path: get(PATH_ANNOTATION),
                replica_set: m.name.clone(),
                content: get(CONTENT_ANNOTATION),
                content_commit: get(COMMIT_ANNOTATION),
                summary: rs.status.as_ref().and_then(|s| s.summary),
                states: rs.status.as_ref().and_then(|s| s.states),
            }
        })
        .collect();
    bundles.sort_by(|a, b| a.name.cmp(&b.name));
    let ready = |b: &BundleStatus| {
        let s = b.summary.unwrap_or_default();
        s.total > 0 && s.available == s.total
    };
    let not_ready: Vec<String> = bundles
        .iter()
        .filter(|b| !ready(b))
        .map(|b| {
            let s: ReplicaSetSummary = b.summary.unwrap_or_default();
            format!(
                "bundle {}: {}/{} works available",
                b.name, s.available, s.total
            )
        })
        .collect();
    let ready_bundles = format!("{}/{}", bundles.len() - not_ready.len(), bundles.len());
    let states = bundles
        .iter()
        .filter_map(|b| b.states.as_ref())
        .fold(Default::default(), |sum, s| state::sum(&sum, s));
    let display = state::worst(&states).map_or("", state::State::name);
    let before = (
        status.bundles.clone(),
        status.ready_bundles.clone(),
        status.states,
        status.display_state.clone(),
    );
    status.bundles = bundles;
    status.ready_bundles = ready_bundles;
    status.states = Some(states);
    status.display_state = display.to_owned();
    let after = (
        status.bundles.clone(),
        status.ready_bundles.clone(),
        status.states,
        status.display_state.clone(),
    );
    let mut changed = before != after;
    changed |= if status.bundles.is_empty() {
        meta::set_condition(
            &mut status.conditions,
            READY,
            cstatus::FALSE,
            "NoBundles",
            "no bundles delivered",
        )
    } else if not_ready.is_empty() {
        meta::set_condition(
            &mut status.conditions,
            READY,
            cstatus::TRUE,
            "Ready",
            "every bundle's works are available",
        )
    } else {
        meta::set_condition(
            &mut status.conditions,
            READY,
            cstatus::FALSE,
            "NotReady",
            &not_ready.join("; "),
        )
    };
    changed
}

#[cfg(test)]
mod tests;
