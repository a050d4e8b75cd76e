//! The rules of the `GitRepo` source object (`apps.flotilla.io/v1alpha1`, namespaced; its
//! protobuf is `flotilla_api::v1::GitRepo`, its YAML shape `flotilla_api::ocm::gitrepo`): its
//! validation (every error at once, each naming its field), its polling interval, the fetch
//! request it makes, and the ManifestWorkReplicaSet each rendered bundle becomes — one
//! `placementRefs` entry per target, so OCM's rollout strategies, decision groups, pause, resume
//! and undo apply unchanged.
//!
//! Built so far: `https://` (with `clientSecretName` and `caBundle`), `ssh://` and scp-like
//! `user@host:path` (with `clientSecretName`), `http://` and `git://` (with
//! `insecureTransport: true`) and `file://` repositories, branch or revision, `paths`,
//! polling settings, `paused`, `forceSyncGeneration`, `targetNamespace`, `keepResources`,
//! targets by `placementRef` or inline `placement` (the hub writes the owned Placement,
//! [`crate::targets`]), `webhookSecret` (the hub's webhook endpoint checks pushes with it).
//! Refused for good: Fleet's Helm, OCI, image-scan and
//! service-account fields.

use std::collections::{BTreeMap, BTreeSet};

pub use flotilla_api::v1::{GitRepo, GitRepoSpec, GitTarget};
use flotilla_api::{
    go_duration::GoDuration,
    names::{validate_dns1123_label, validate_dns1123_subdomain},
    v1::{
        LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec, ObjectMeta,
        ReplicaSetHubState,
    },
};
use flotilla_gitfetch::protocol::{FetchRequest, FetchResult, Limits, Want};

use crate::{
    Problem,
    discover::{discover, shown},
    render::{Rendered, Source, render},
    tree::Tree,
};

/// The API group/version of GitRepos.
pub const APPS_V1ALPHA1: &str = flotilla_api::ocm::gitrepo::APPS_V1ALPHA1;
/// Label on a GitRepo's replica sets: the GitRepo's name.
pub const GITREPO_LABEL: &str = "apps.flotilla.io/gitrepo";
/// Label on a GitRepo's replica sets: the bundle's name.
pub const BUNDLE_LABEL: &str = "apps.flotilla.io/bundle";
/// Annotation on a replica set (and later its works): the commit its content was rendered at.
pub const COMMIT_ANNOTATION: &str = "apps.flotilla.io/commit";
/// Annotation on a replica set: its content hash.
pub const CONTENT_ANNOTATION: &str = "apps.flotilla.io/content";
/// Annotation on a replica set: the bundle's directory in the repository.
pub const PATH_ANNOTATION: &str = "apps.flotilla.io/path";
/// The shortest polling interval (Fleet's default).
pub const MIN_POLLING_SECONDS: i64 = 15;
/// The polling interval when none is given (Fleet's default).
pub const DEFAULT_POLLING_SECONDS: u64 = 15;
/// Targets per GitRepo, at most.
pub const MAX_TARGETS: usize = 16;
/// `paths` entries, at most.
pub const MAX_PATHS: usize = 64;

/// Parses a GitRepo document (YAML) into the stored object and validates it: every problem,
/// the shape's (keys refused by name) and the rules', each naming its field.
pub fn parse(text: &str) -> Result<GitRepo, Vec<String>> {
    let doc: flotilla_api::ocm::gitrepo::GitRepo =
        serde_yaml::from_str(text).map_err(|e| vec![format!("not a GitRepo document: {e}")])?;
    let repo = doc.to_proto()?;
    let problems = validate(&repo);
    if problems.is_empty() {
        Ok(repo)
    } else {
        Err(problems)
    }
}

/// The spec of a GitRepo (an empty one when it has none: validation says so).
pub fn spec(r: &GitRepo) -> std::borrow::Cow<'_, GitRepoSpec> {
    match &r.spec {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(GitRepoSpec::default()),
    }
}

/// The metadata of a GitRepo (empty when it has none).
fn meta(r: &GitRepo) -> ObjectMeta {
    r.metadata.clone().unwrap_or_default()
}

/// How often a valid GitRepo is polled: `None` never (`pollingInterval: 0` or
/// `disablePolling`).
pub fn polling_interval(r: &GitRepo) -> Option<std::time::Duration> {
    let s = spec(r);
    if s.disable_polling {
        return None;
    }
    if s.polling_interval.is_empty() {
        return Some(std::time::Duration::from_secs(DEFAULT_POLLING_SECONDS));
    }
    match GoDuration::parse(&s.polling_interval) {
        Ok(d) if d.0 > 0 => Some(std::time::Duration::from_nanos(d.0 as u64)),
        _ => None,
    }
}

/// Every problem of a GitRepo, each naming its field.
pub fn validate(r: &GitRepo) -> Vec<String> {
    let mut p = Vec::new();
    let m = meta(r);
    for (field, value) in [
        ("metadata.name", &m.name),
        ("metadata.namespace", &m.namespace),
    ] {
        if let Err(e) = validate_dns1123_label(field, value) {
            p.push(e.to_string());
        }
    }
    let s = spec(r);
    let s = s.as_ref();
    repo_url(s, &mut p);
    match (s.branch.is_empty(), s.revision.is_empty()) {
        (false, false) => p.push("spec.branch, spec.revision: give one, not both".into()),
        (true, true) => p.push(
            "spec.branch or spec.revision is required (no implicit default branch: it can change under you)".into(),
        ),
        _ => {}
    }
    if s.paths.len() > MAX_PATHS {
        p.push(format!(
            "spec.paths: {} entries; at most {MAX_PATHS}",
            s.paths.len()
        ));
    }
    for (i, path) in s.paths.iter().enumerate() {
        if let Err(e) = flotilla_gitfetch::paths::parse_spec(path) {
            p.push(format!("spec.paths[{i}]: {e}"));
        }
    }
    if !s.polling_interval.is_empty() {
        let interval = &s.polling_interval;
        match GoDuration::parse(interval) {
            Ok(d) if d.0 == 0 => {}
            Ok(d) if d.0 < MIN_POLLING_SECONDS * 1_000_000_000 || d.0 > 86_400 * 1_000_000_000 => {
                p.push(format!(
                    "spec.pollingInterval: {interval}: 0, or between 15s and 24h"
                ));
            }
            Ok(_) => {}
            Err(e) => p.push(format!("spec.pollingInterval: {interval}: {e}")),
        }
    }
    if !s.target_namespace.is_empty()
        && let Err(e) = validate_dns1123_label("spec.targetNamespace", &s.target_namespace)
    {
        p.push(e.to_string());
    }
    targets(s, &mut p);
    p
}

fn repo_url(s: &GitRepoSpec, p: &mut Vec<String>) {
    let url = s.repo.as_str();
    if url.is_empty() || url.len() > 2048 {
        p.push("spec.repo: required, at most 2,048 bytes".into());
        return;
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        match scp_like(url) {
            Ok(()) => credentials(s, "ssh", p),
            Err(why) => p.push(format!("spec.repo: {url}: {why}")),
        }
        return;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && (scheme != "ssh" || userinfo.contains(':'))
    {
        p.push(format!(
            "spec.repo: {scheme}://…@…: no user or password in the URL (put credentials in a Secret)"
        ));
    }
    match scheme {
        "git" | "http" if !s.insecure_transport => p.push(format!(
            "spec.repo: {scheme}:// has no transport security: set spec.insecureTransport: true \
             (or use https://)"
        )),
        "https" | "http" | "git" | "file" | "ssh" => {}
        other => p.push(format!("spec.repo: unknown scheme {other}://")),
    }
    credentials(s, scheme, p);
}

/// A scp-like SSH address, `[user@]host:path` (Git's own rule: a `:` before any `/`).
fn scp_like(url: &str) -> Result<(), String> {
    let not = "not a URL: use https://, ssh://, git://, file:// or the scp-like user@host:path";
    let Some((login, path)) = url.split_once(':') else {
        return Err(not.into());
    };
    if login.contains('/') {
        return Err(not.into());
    }
    if !login.contains('@') && path.split('/').next().is_some_and(|p| p.contains('@')) {
        // `user:password@host:path`: the first `:` came before the `@`.
        return Err("no password in the URL (put credentials in a Secret)".into());
    }
    let host = login.rsplit_once('@').map_or(login, |(_, h)| h);
    if host.is_empty() || path.is_empty() {
        return Err(format!("{not} (a host and a path are both needed)"));
    }
    if host.starts_with('-') || path.starts_with('-') {
        return Err("a host or path that starts with '-'".into());
    }
    Ok(())
}

/// Bytes of a `caBundle`, at most.
pub const MAX_CA_BUNDLE_BYTES: usize = 64 * 1024;

/// `clientSecretName`: for `https://` and `ssh://` only (credentials never travel in the
/// clear), and required by `ssh://` (an SSH server takes no anonymous fetch); `caBundle`: for
/// `https://` only (a CA bundle means nothing elsewhere). The certificates themselves are parsed
/// by the worker, which names the one that does not.
fn credentials(s: &GitRepoSpec, scheme: &str, p: &mut Vec<String>) {
    if s.client_secret_name.is_empty() && scheme == "ssh" {
        p.push(
            "spec.clientSecretName: required for an SSH repository: a kubernetes.io/ssh-auth \
             Secret (ssh-privatekey, known_hosts)"
                .into(),
        );
    }
    if !s.client_secret_name.is_empty() {
        if scheme != "https" && scheme != "ssh" {
            p.push(format!(
                "spec.clientSecretName: credentials are sent over https:// and ssh:// only, not \
                 {scheme}://"
            ));
        }
        if let Err(e) = validate_dns1123_subdomain("spec.clientSecretName", &s.client_secret_name) {
            p.push(e.to_string());
        }
    }
    if !s.webhook_secret.is_empty()
        && let Err(e) = validate_dns1123_subdomain("spec.webhookSecret", &s.webhook_secret)
    {
        p.push(e.to_string());
    }
    if !s.ca_bundle.is_empty() {
        if scheme != "https" {
            p.push(format!(
                "spec.caBundle: for https:// repositories only, not {scheme}://"
            ));
        }
        if s.ca_bundle.len() > MAX_CA_BUNDLE_BYTES {
            p.push(format!(
                "spec.caBundle: {} bytes; at most {MAX_CA_BUNDLE_BYTES}",
                s.ca_bundle.len()
            ));
        }
        let pem = String::from_utf8_lossy(&s.ca_bundle);
        if !pem.contains("-----BEGIN CERTIFICATE-----") {
            p.push("spec.caBundle: no PEM certificate (-----BEGIN CERTIFICATE-----) in it".into());
        }
    }
}

fn targets(s: &GitRepoSpec, p: &mut Vec<String>) {
    if s.targets.is_empty() || s.targets.len() > MAX_TARGETS {
        p.push(format!(
            "spec.targets: {} targets; between 1 and {MAX_TARGETS}",
            s.targets.len()
        ));
    }
    let mut names = BTreeSet::new();
    for (i, t) in s.targets.iter().enumerate() {
        if let Err(e) = validate_dns1123_label(&format!("spec.targets[{i}].name"), &t.name) {
            p.push(e.to_string());
        }
        if !names.insert(&t.name) {
            p.push(format!("spec.targets[{i}].name: {} is used twice", t.name));
        }
        match (&t.placement, t.placement_ref.is_empty()) {
            (Some(_), false) => p.push(format!(
                "spec.targets[{i}]: placementRef and placement: give one, not both \
                 (placementRef names an existing Placement, placement is an inline one)"
            )),
            (None, true) => p.push(format!(
                "spec.targets[{i}]: placementRef or placement is required \
                 (an existing Placement, or an inline one)"
            )),
            (None, false) => {
                if let Err(e) = validate_dns1123_label(
                    &format!("spec.targets[{i}].placementRef.name"),
                    &t.placement_ref,
                ) {
                    p.push(e.to_string());
                }
            }
            (Some(inline), true) => {
                // The rest is the Placement's own validation, run by the hub on the Placement
                // the target becomes (crate::targets::placement).
                if !inline.cluster_name.is_empty()
                    && let Err(e) = validate_dns1123_label(
                        &format!("spec.targets[{i}].placement.clusterName"),
                        &inline.cluster_name,
                    )
                {
                    p.push(e.to_string());
                }
            }
        }
    }
}

/// The fetch request of a valid GitRepo.
pub fn fetch_request(
    r: &GitRepo,
    limits: Limits,
    file_roots: &[String],
    allow_loopback: bool,
) -> FetchRequest {
    let s = spec(r);
    let want = if s.branch.is_empty() {
        // Both empty is refused by validation, and by the worker.
        Want::Revision(s.revision.clone())
    } else {
        Want::Branch(s.branch.clone())
    };
    FetchRequest {
        url: s.repo.clone(),
        want: Some(want),
        paths: s.paths.clone(),
        limits: Some(limits),
        file_roots: file_roots.to_vec(),
        allow_loopback,
        list_only: false,
        // Credentials are the hub's to add (from the Secret `clientSecretName` names).
        credentials: None,
        ca_bundle: s.ca_bundle.clone(),
    }
}

/// Every bundle of a fetched commit of a valid GitRepo, rendered, in path order; or every
/// problem found, each naming its file or bundle (one bad bundle holds the whole commit back:
/// a commit is delivered whole or not at all).
pub fn render_commit(r: &GitRepo, result: &FetchResult) -> Result<Vec<Rendered>, Vec<Problem>> {
    let m = meta(r);
    let s = spec(r);
    let tree = Tree::new(result);
    let source = Source {
        namespace: &m.namespace,
        name: &m.name,
        target_namespace: (!s.target_namespace.is_empty()).then_some(s.target_namespace.as_str()),
    };
    let dirs = discover(&tree)?;
    let mut bundles = Vec::new();
    let mut problems = Vec::new();
    for dir in &dirs {
        match render(source, &tree, dir) {
            Ok(b) => bundles.push(b),
            Err(p) => problems.extend(p),
        }
    }
    let mut paths: BTreeMap<&str, &str> = BTreeMap::new();
    for b in &bundles {
        if let Some(first) = paths.insert(&b.name, &b.path) {
            problems.push(Problem::new(
                format!("bundle {}", b.name),
                format!(
                    "the name is used by {} and {}: give one a different `name` in its fleet.yaml",
                    shown(first),
                    shown(&b.path)
                ),
            ));
        }
    }
    if problems.is_empty() {
        Ok(bundles)
    } else {
        Err(problems)
    }
}

/// The ManifestWorkReplicaSet a rendered bundle of a valid GitRepo becomes, at `commit`.
pub fn replica_set(r: &GitRepo, bundle: &Rendered, commit: &str) -> ManifestWorkReplicaSet {
    let m = meta(r);
    let s = spec(r);
    let mut labels: BTreeMap<String, String> = bundle.labels.clone();
    labels.insert(GITREPO_LABEL.into(), m.name.clone());
    labels.insert(BUNDLE_LABEL.into(), bundle.name.clone());
    let annotations = BTreeMap::from([
        (COMMIT_ANNOTATION.to_owned(), commit.to_owned()),
        (CONTENT_ANNOTATION.to_owned(), bundle.content.clone()),
        (PATH_ANNOTATION.to_owned(), bundle.path.clone()),
    ]);
    ManifestWorkReplicaSet {
        metadata: Some(ObjectMeta {
            name: bundle.name.clone(),
            namespace: m.namespace.clone(),
            labels: labels.into_iter().collect(),
            annotations: annotations.into_iter().collect(),
            ..Default::default()
        }),
        spec: Some(ManifestWorkReplicaSetSpec {
            manifest_work_template: Some(bundle.spec.clone()),
            placement_refs: s
                .targets
                .iter()
                .map(|t| LocalPlacementReference {
                    name: crate::targets::placement_name(&m.name, t),
                    rollout_strategy: t.rollout_strategy.clone(),
                })
                .collect(),
            cascade_deletion_policy: if s.keep_resources {
                "Orphan"
            } else {
                "Background"
            }
            .into(),
        }),
        // Per-target customizations ride in the set's hub state: the GitRepo writes them.
        hub: (!bundle.variants.is_empty()).then(|| ReplicaSetHubState {
            variants: bundle.variants.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
