//! The GitRepos a push may be for, by the normalised URL of their `repo` ([`payload::normalise`]):
//! kept by the GitRepos' task as it publishes and deletes each GitRepo, so a delivery reads the
//! few entries under its URLs, never every GitRepo (pure).

use super::{Read, payload};
use crate::keys::ObjectRef;
use flotilla_api::v1::GitRepoSpec;
use std::collections::{BTreeMap, HashMap};

/// GitRepos considered for one delivery at most, taken round-robin by namespace (each
/// namespace's by name), from a namespace that changes with every delivery: one namespace
/// following a repository many times, or many namespaces that sort first, do not crowd out
/// another's GitRepo every time. More are not checked, and a verified answer says how many
/// were left out.
pub const MAX_CANDIDATES: usize = 64;

/// What a delivery needs of one GitRepo following a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follower {
    /// The branch it follows (empty: pinned at `revision`).
    pub branch: String,
    /// The tag or commit it is pinned at.
    pub revision: String,
    /// The hub Secret its `webhookSecret` names (empty: none; a webhook never fetches it).
    pub secret: String,
}

impl Follower {
    fn of(spec: &GitRepoSpec) -> Self {
        Self {
            branch: spec.branch.clone(),
            revision: spec.revision.clone(),
            secret: spec.webhook_secret.clone(),
        }
    }
}

/// GitRepos by the normalised URL they follow.
#[derive(Debug, Default)]
pub struct Index {
    by_url: HashMap<String, BTreeMap<ObjectRef, Follower>>,
    url_of: HashMap<ObjectRef, String>,
}

/// `found` (by key) ordered round-robin by namespace: the first of each namespace, then the
/// second of each, and so on — the namespaces in name order rotated to start at the
/// `turn`-th (modulo their number), so namespaces whose names sort first do not always take
/// the first places (session-17 review, beyond A4).
fn round_robin<'a>(
    found: BTreeMap<&'a ObjectRef, &'a Follower>,
    turn: usize,
) -> Vec<(&'a ObjectRef, &'a Follower)> {
    let mut by_namespace: BTreeMap<&str, Vec<(&ObjectRef, &Follower)>> = BTreeMap::new();
    for (k, f) in found {
        by_namespace
            .entry(k.namespace.as_str())
            .or_default()
            .push((k, f));
    }
    let mut namespaces: Vec<Vec<(&ObjectRef, &Follower)>> = by_namespace.into_values().collect();
    if !namespaces.is_empty() {
        let start = turn % namespaces.len();
        namespaces.rotate_left(start);
    }
    let rounds = namespaces.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::new();
    for round in 0..rounds {
        out.extend(namespaces.iter().filter_map(|v| v.get(round).copied()));
    }
    out
}

impl Index {
    /// `key` follows what `spec` says now (`None`: nothing; a GitRepo without a spec).
    pub fn set(&mut self, key: &ObjectRef, spec: Option<&GitRepoSpec>) {
        self.remove(key);
        let Some(spec) = spec else {
            return;
        };
        let url = payload::normalise(&spec.repo);
        self.by_url
            .entry(url.clone())
            .or_default()
            .insert(key.clone(), Follower::of(spec));
        self.url_of.insert(key.clone(), url);
    }

    /// `key` is gone.
    pub fn remove(&mut self, key: &ObjectRef) {
        let Some(url) = self.url_of.remove(key) else {
            return;
        };
        if let Some(followers) = self.by_url.get_mut(&url) {
            followers.remove(key);
            if followers.is_empty() {
                self.by_url.remove(&url);
            }
        }
    }

    /// The GitRepos the push of `r` may be for — those following one of its URLs; only the
    /// path's GitRepo when it names one — at most [`MAX_CANDIDATES`], round-robin by namespace
    /// starting at the `turn`-th (the caller's count of deliveries: each starts at another);
    /// and how many more were left out.
    pub fn candidates(
        &self,
        r: &Read,
        target: Option<&ObjectRef>,
        turn: usize,
    ) -> (Vec<(ObjectRef, Follower)>, usize) {
        let mut found: BTreeMap<&ObjectRef, &Follower> = BTreeMap::new();
        for followers in r.push.urls.iter().filter_map(|u| self.by_url.get(u)) {
            match target {
                Some(t) => {
                    if let Some((k, f)) = followers.get_key_value(t) {
                        found.insert(k, f);
                    }
                }
                None => found.extend(followers.iter()),
            }
        }
        let left_out = found.len().saturating_sub(MAX_CANDIDATES);
        let taken = round_robin(found, turn)
            .into_iter()
            .take(MAX_CANDIDATES)
            .map(|(k, f)| (k.clone(), f.clone()))
            .collect();
        (taken, left_out)
    }

    /// GitRepos indexed.
    pub fn len(&self) -> usize {
        self.url_of.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.url_of.is_empty()
    }
}
