//! The `GitRepo` source object (`apps.flotilla.io/v1alpha1`, namespaced) as far as it is built:
//! its YAML shape (Fleet's field names), its validation (every error at once, each naming its
//! field), the fetch request it makes, and the ManifestWorkReplicaSet each rendered bundle
//! becomes — one `placementRefs` entry per target, so OCM's rollout strategies, decision groups,
//! pause, resume and undo apply unchanged.
//!
//! Built so far: `git://` (with `insecureTransport: true`) and `file://` repositories, branch or
//! revision, `paths`, polling settings, `paused`, `targetNamespace`, `keepResources`, targets by
//! `placementRef`. Refused by name until built: HTTPS and SSH, credentials, webhooks, inline
//! placements; refused for good: Fleet's Helm, OCI, image-scan and service-account fields.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::{
    go_duration::GoDuration,
    names::validate_dns1123_label,
    ocm::{Metadata, replicaset::RolloutStrategy},
    v1::{LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec, ObjectMeta},
};
use flotilla_gitfetch::protocol::{FetchRequest, Limits, Want};
use serde::Deserialize;

use crate::render::Rendered;

/// The API group/version of GitRepos.
pub const APPS_V1ALPHA1: &str = "apps.flotilla.io/v1alpha1";
/// Label on a GitRepo's replica sets: the GitRepo's name.
pub const GITREPO_LABEL: &str = "apps.flotilla.io/gitrepo";
/// Label on a GitRepo's replica sets: the bundle's name.
pub const BUNDLE_LABEL: &str = "apps.flotilla.io/bundle";
/// Annotation on a replica set (and later its works): the commit its content was rendered at.
pub const COMMIT_ANNOTATION: &str = "apps.flotilla.io/commit";
/// Annotation on a replica set: its content hash.
pub const CONTENT_ANNOTATION: &str = "apps.flotilla.io/content";
/// The shortest polling interval (Fleet's default).
pub const MIN_POLLING_SECONDS: i64 = 15;
/// Targets per GitRepo, at most.
pub const MAX_TARGETS: usize = 16;
/// `paths` entries, at most.
pub const MAX_PATHS: usize = 64;

/// A GitRepo document.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitRepo {
    /// `apps.flotilla.io/v1alpha1`.
    pub api_version: String,
    /// `GitRepo`.
    pub kind: String,
    /// Name and namespace.
    pub metadata: Metadata,
    /// The spec.
    pub spec: GitRepoSpec,
}

/// What to follow and where to deliver it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitRepoSpec {
    /// The repository URL.
    pub repo: String,
    /// The branch followed (exactly one of `branch`, `revision`).
    #[serde(default)]
    pub branch: Option<String>,
    /// A pinned commit id or tag.
    #[serde(default)]
    pub revision: Option<String>,
    /// Directories to read; default the whole repository.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Go duration between polls; default 15s, `0` never.
    #[serde(default)]
    pub polling_interval: Option<String>,
    /// Poll never (fetch on `forceSyncGeneration` only).
    #[serde(default)]
    pub disable_polling: bool,
    /// New commits are fetched and rendered, not rolled out.
    #[serde(default)]
    pub paused: bool,
    /// Every object goes into this namespace.
    #[serde(default)]
    pub target_namespace: Option<String>,
    /// Works are orphaned, not deleted, with the GitRepo.
    #[serde(default)]
    pub keep_resources: bool,
    /// Allow `git://` and `http://` (no transport security).
    #[serde(default)]
    pub insecure_transport: bool,
    /// Where the bundles go.
    #[serde(default)]
    pub targets: Vec<GitTarget>,
}

/// One target: an existing Placement in the namespace and its rollout strategy.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitTarget {
    /// The target's name.
    pub name: String,
    /// The Placement.
    #[serde(default)]
    pub placement_ref: Option<NameRef>,
    /// OCM's rollout strategy (default `All`).
    #[serde(default)]
    pub rollout_strategy: Option<RolloutStrategy>,
}

/// `{name: …}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameRef {
    /// The name.
    pub name: String,
}

/// Spec keys refused by name, with the reason.
const REFUSED: &[(&str, &str)] = &[
    (
        "clientSecretName",
        "credentials are not built yet: use a public git:// or file:// repository",
    ),
    ("caBundle", "HTTPS is not built yet"),
    (
        "webhookSecret",
        "webhooks are not built yet: the repository is polled",
    ),
    ("forceSyncGeneration", "not built yet"),
    ("bundles", "not built yet: use paths"),
    (
        "insecureSkipTLSVerify",
        "never: give the server's CA in caBundle",
    ),
    ("helmSecretName", "Helm is not rendered here"),
    ("helmSecretNameForPaths", "Helm is not rendered here"),
    ("helmRepoURLRegex", "Helm is not rendered here"),
    ("ociRegistrySecret", "OCI storage is not supported"),
    ("imageScanInterval", "image scans are not supported"),
    ("imageScanCommit", "image scans are not supported"),
    ("serviceAccount", "the agent applies with its own identity"),
    ("deleteNamespace", "not supported"),
    ("correctDrift", "drift is always corrected"),
];

/// Parses a GitRepo document (YAML); every key refused by name is reported with the others.
pub fn parse(text: &str) -> Result<GitRepo, Vec<String>> {
    let value: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| vec![format!("not YAML: {e}")])?;
    let mut problems = Vec::new();
    if let Some(spec) = value.get("spec").and_then(|s| s.as_mapping()) {
        for (k, _) in spec {
            let key = k.as_str().unwrap_or_default();
            if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == key) {
                problems.push(format!("spec.{key}: {why}"));
            }
        }
        for (i, t) in spec
            .get("targets")
            .and_then(|t| t.as_sequence())
            .into_iter()
            .flatten()
            .enumerate()
        {
            for key in [
                "placement",
                "clusterName",
                "clusterSelector",
                "clusterGroup",
                "clusterGroupSelector",
            ] {
                if t.get(key).is_some() {
                    problems.push(format!(
                        "spec.targets[{i}].{key}: inline targets are not built yet: name an existing Placement in placementRef"
                    ));
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let repo: GitRepo = serde_yaml::from_value(value).map_err(|e| vec![e.to_string()])?;
    let problems = validate(&repo);
    if problems.is_empty() {
        Ok(repo)
    } else {
        Err(problems)
    }
}

/// Every problem of a GitRepo, each naming its field.
pub fn validate(r: &GitRepo) -> Vec<String> {
    let mut p = Vec::new();
    if r.api_version != APPS_V1ALPHA1 || r.kind != "GitRepo" {
        p.push(format!(
            "apiVersion/kind: {}/{}: expected {APPS_V1ALPHA1} GitRepo",
            r.api_version, r.kind
        ));
    }
    for (field, value) in [
        ("metadata.name", &r.metadata.name),
        ("metadata.namespace", &r.metadata.namespace),
    ] {
        if let Err(e) = validate_dns1123_label(field, value) {
            p.push(e.to_string());
        }
    }
    let s = &r.spec;
    repo_url(s, &mut p);
    match (&s.branch, &s.revision) {
        (Some(_), Some(_)) => p.push("spec.branch, spec.revision: give one, not both".into()),
        (None, None) => p.push(
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
    if let Some(interval) = &s.polling_interval {
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
    if let Some(ns) = &s.target_namespace
        && let Err(e) = validate_dns1123_label("spec.targetNamespace", ns)
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
        p.push(format!(
            "spec.repo: {url}: scp-like and SSH URLs are not built yet: use git:// or file://"
        ));
        return;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        p.push(format!(
            "spec.repo: {scheme}://…@…: no user or password in the URL (put credentials in a Secret)"
        ));
    }
    match scheme {
        "git" if !s.insecure_transport => p.push(
            "spec.repo: git:// has no transport security: set spec.insecureTransport: true".into(),
        ),
        "git" | "file" => {}
        "https" | "http" | "ssh" => p.push(format!(
            "spec.repo: {scheme}:// is not built yet: use git:// or file://"
        )),
        other => p.push(format!("spec.repo: unknown scheme {other}://")),
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
        match &t.placement_ref {
            Some(r) => {
                if let Err(e) =
                    validate_dns1123_label(&format!("spec.targets[{i}].placementRef.name"), &r.name)
                {
                    p.push(e.to_string());
                }
            }
            None => p.push(format!("spec.targets[{i}].placementRef: required")),
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
    let want = match (&r.spec.branch, &r.spec.revision) {
        (Some(b), _) => Want::Branch(b.clone()),
        (None, Some(rev)) => Want::Revision(rev.clone()),
        (None, None) => Want::Branch(String::new()), // refused by validation and by the worker
    };
    FetchRequest {
        url: r.spec.repo.clone(),
        want: Some(want),
        paths: r.spec.paths.clone(),
        limits: Some(limits),
        file_roots: file_roots.to_vec(),
        allow_loopback,
        list_only: false,
    }
}

/// The ManifestWorkReplicaSet a rendered bundle of a valid GitRepo becomes, at `commit`.
pub fn replica_set(r: &GitRepo, bundle: &Rendered, commit: &str) -> ManifestWorkReplicaSet {
    let mut labels: BTreeMap<String, String> = bundle.labels.clone();
    labels.insert(GITREPO_LABEL.into(), r.metadata.name.clone());
    labels.insert(BUNDLE_LABEL.into(), bundle.name.clone());
    let annotations = BTreeMap::from([
        (COMMIT_ANNOTATION.to_owned(), commit.to_owned()),
        (CONTENT_ANNOTATION.to_owned(), bundle.content.clone()),
    ]);
    ManifestWorkReplicaSet {
        metadata: Some(ObjectMeta {
            name: bundle.name.clone(),
            namespace: r.metadata.namespace.clone(),
            labels: labels.into_iter().collect(),
            annotations: annotations.into_iter().collect(),
            ..Default::default()
        }),
        spec: Some(ManifestWorkReplicaSetSpec {
            manifest_work_template: Some(bundle.spec.clone()),
            placement_refs: r
                .spec
                .targets
                .iter()
                .map(|t| LocalPlacementReference {
                    name: t
                        .placement_ref
                        .as_ref()
                        .map(|p| p.name.clone())
                        .unwrap_or_default(),
                    rollout_strategy: t.rollout_strategy.as_ref().map(RolloutStrategy::to_proto),
                })
                .collect(),
            cascade_deletion_policy: if r.spec.keep_resources {
                "Orphan"
            } else {
                "Background"
            }
            .into(),
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
