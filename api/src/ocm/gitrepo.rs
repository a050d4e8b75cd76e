//! `apps.flotilla.io/v1alpha1 GitRepo` in the shape users write (Rancher Fleet's field names
//! where they exist; targets are OCM Placements):
//!
//! ```yaml
//! apiVersion: apps.flotilla.io/v1alpha1
//! kind: GitRepo
//! metadata: {name: shop, namespace: edge-apps}
//! spec:
//!   repo: https://git.example.com/ops/shop.git
//!   clientSecretName: shop-git      # a hub Secret, kubernetes.io/basic-auth
//!   branch: main
//!   paths: ["apps/*"]
//!   pollingInterval: 1m
//!   targets:
//!   - name: stores
//!     placementRef: {name: stores}
//!     rolloutStrategy: {type: Progressive, progressive: {maxConcurrency: 25%}}
//!   - name: depots                  # inline: the hub writes Placement shop-depots
//!     placement:
//!       clusterSelector: {matchLabels: {tier: depot}}
//! ```
//!
//! This module is the shape only (YAML ↔ protobuf) and refuses by name the Fleet keys Flotilla
//! does not take; the rules of a GitRepo (URLs, paths, intervals, targets) are
//! `flotilla_gitops::source::validate`, run by the hub on every apply.

use super::meta::{Condition, LabelSelector, Metadata, conditions};
use super::placement::{DecisionStrategy, Toleration};
use super::replicaset::{RolloutStrategy, Summary};
use crate::meta::rfc3339;
use crate::v1;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The API group/version of GitRepos.
pub const APPS_V1ALPHA1: &str = "apps.flotilla.io/v1alpha1";
/// The kind.
pub const KIND: &str = "GitRepo";

/// A GitRepo in the YAML shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GitRepo {
    /// `apps.flotilla.io/v1alpha1`.
    pub api_version: String,
    /// `GitRepo`.
    pub kind: String,
    /// Name and namespace.
    pub metadata: Metadata,
    /// The spec.
    #[serde(default)]
    pub spec: GitRepoSpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<GitRepoStatus>,
}

/// What to follow and where to deliver it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GitRepoSpec {
    /// The repository URL.
    #[serde(default)]
    pub repo: String,
    /// The branch followed (exactly one of `branch`, `revision`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// A pinned commit id or tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Directories to read; default the whole repository.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Go duration between polls; default 15s, `0` never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling_interval: Option<String>,
    /// Poll never (fetch on `forceSyncGeneration` or `flotilla gitrepo sync` only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_polling: bool,
    /// New commits are fetched and rendered, not rolled out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// An increase fetches and renders at once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub force_sync_generation: i64,
    /// A hub Secret in the namespace holding the credentials (`kubernetes.io/basic-auth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_name: Option<String>,
    /// CA certificates for an `https://` repository: base64 of their PEM, as Fleet writes it
    /// (the PEM itself is taken too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// A hub Secret in the namespace verifying push webhooks (key `github`, `gitlab` or
    /// `gitea`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
    /// Every object goes into this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_namespace: Option<String>,
    /// Works are orphaned, not deleted, with the GitRepo.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_resources: bool,
    /// Allow `git://` (no transport security).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_transport: bool,
    /// Where the bundles go.
    #[serde(default)]
    pub targets: Vec<GitTarget>,
    /// Every other key: refused by name with the reason, or as unknown.
    #[serde(flatten, skip_serializing)]
    pub other: BTreeMap<String, serde_yaml::Value>,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// One target: a Placement in the namespace — an existing one (`placementRef`) or one the
/// GitRepo writes (`placement`, inline) — and its rollout strategy.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GitTarget {
    /// The target's name.
    #[serde(default)]
    pub name: String,
    /// An existing Placement (never written by the GitRepo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_ref: Option<NameRef>,
    /// Inline: the GitRepo writes and owns Placement `<gitrepo>-<target>` from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<TargetPlacement>,
    /// OCM's rollout strategy (default `All`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<RolloutStrategy>,
    /// Every other key: refused by name with the reason, or as unknown.
    #[serde(flatten, skip_serializing)]
    pub other: BTreeMap<String, serde_yaml::Value>,
}

/// An inline target's Placement: the subset of a Placement's spec a GitRepo takes, in the
/// Placement's own types. `clusterSelector`, `claimSelector` and `clusterName` become the
/// written Placement's one predicate (`clusterName` as the CEL expression
/// `managedCluster.metadata.name == "<name>"`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TargetPlacement {
    /// Restricts the cluster sets bound in the namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_sets: Vec<String>,
    /// Matched against cluster labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
    /// Matched against cluster claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_selector: Option<LabelSelector>,
    /// One cluster by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// How many clusters to select (unset: every feasible one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_clusters: Option<i32>,
    /// Tolerations of cluster taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Decision groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_strategy: Option<DecisionStrategy>,
    /// Every other key: refused by name with the reason, or as unknown.
    #[serde(flatten, skip_serializing)]
    pub other: BTreeMap<String, serde_yaml::Value>,
}

impl TargetPlacement {
    /// The protobuf form; `at` names it in errors (`spec.targets[0].placement`).
    fn to_proto(&self, at: &str) -> Result<v1::GitTargetPlacement, String> {
        Ok(v1::GitTargetPlacement {
            cluster_sets: self.cluster_sets.clone(),
            cluster_selector: self.cluster_selector.as_ref().map(v1::LabelSelector::from),
            claim_selector: self.claim_selector.as_ref().map(v1::LabelSelector::from),
            cluster_name: self.cluster_name.clone().unwrap_or_default(),
            number_of_clusters: self.number_of_clusters,
            tolerations: self.tolerations.iter().map(Toleration::to_proto).collect(),
            decision_strategy: Some(DecisionStrategy::to_proto(
                self.decision_strategy.as_ref(),
                &format!("{at}.decisionStrategy"),
            )?),
        })
    }
}

impl From<&v1::GitTargetPlacement> for TargetPlacement {
    fn from(p: &v1::GitTargetPlacement) -> Self {
        Self {
            cluster_sets: p.cluster_sets.clone(),
            cluster_selector: p.cluster_selector.as_ref().map(LabelSelector::from),
            claim_selector: p.claim_selector.as_ref().map(LabelSelector::from),
            cluster_name: some(&p.cluster_name),
            number_of_clusters: p.number_of_clusters,
            tolerations: p.tolerations.iter().map(Toleration::from).collect(),
            decision_strategy: DecisionStrategy::from_proto(p.decision_strategy.as_ref()),
            other: BTreeMap::new(),
        }
    }
}

/// `{name: …}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NameRef {
    /// The name.
    pub name: String,
}

/// The status, as `flotilla get gitrepo -o yaml` prints it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GitRepoStatus {
    /// The generation the status is for.
    #[serde(default)]
    pub observed_generation: i64,
    /// The commit the replica sets carry (the last that fetched and rendered).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub commit: String,
    /// The last commit fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<Commit>,
    /// The commit the last verified push webhook named.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub webhook_commit: String,
    /// When it came (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_webhook_time: String,
    /// When the last fetch ended (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_fetch_time: String,
    /// When the next fetch is due (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_fetch_time: String,
    /// `Fetched`, `Rendered`, `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// One per bundle.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<Bundle>,
    /// `N/M` bundles whose every work is available.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ready_bundles: String,
    /// Fetches that failed in a row.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub failures: i32,
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

/// A commit.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Commit {
    /// Full id.
    pub sha: String,
    /// First line of the message.
    #[serde(default)]
    pub subject: String,
    /// `Name <email>`.
    #[serde(default)]
    pub author: String,
    /// Author time (RFC 3339).
    #[serde(default)]
    pub time: String,
}

/// One bundle's status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    /// Its name.
    pub name: String,
    /// Its directory.
    #[serde(default)]
    pub path: String,
    /// Its ManifestWorkReplicaSet.
    #[serde(default)]
    pub replica_set: String,
    /// Content hash of its rendering.
    #[serde(default)]
    pub content: String,
    /// The commit it was rendered at.
    #[serde(default)]
    pub content_commit: String,
    /// Its works.
    #[serde(default)]
    pub summary: Summary,
}

/// Spec keys refused by name, with the reason.
const REFUSED: &[(&str, &str)] = &[
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

/// Target keys refused by name, with the reason.
const REFUSED_IN_TARGETS: &[(&str, &str)] = &[
    (
        "clusterName",
        "goes under placement: (an inline target), as placement.clusterName",
    ),
    (
        "clusterSelector",
        "goes under placement: (an inline target), as placement.clusterSelector",
    ),
    (
        "clusterGroup",
        "cluster groups are ManagedClusterSets here: use placement.clusterSets",
    ),
    (
        "clusterGroupSelector",
        "cluster groups are ManagedClusterSets here: use placement.clusterSets",
    ),
];

/// Why a Placement key is not taken inline.
const OWN_PLACEMENT: &str = "an inline target takes clusterSets, clusterSelector, claimSelector, \
     clusterName, numberOfClusters, tolerations and decisionStrategy: write a Placement of your \
     own and name it in placementRef";

/// Inline placement keys refused by name, with the reason.
const REFUSED_IN_PLACEMENT: &[(&str, &str)] = &[
    ("predicates", OWN_PLACEMENT),
    ("prioritizerPolicy", OWN_PLACEMENT),
    ("spreadPolicy", OWN_PLACEMENT),
    ("sortBy", OWN_PLACEMENT),
    ("scoreRateLimit", OWN_PLACEMENT),
];

fn refused(
    at: &str,
    other: &BTreeMap<String, serde_yaml::Value>,
    table: &[(&str, &str)],
) -> Vec<String> {
    other
        .keys()
        .map(|key| match table.iter().find(|(n, _)| n == key) {
            Some((_, why)) => format!("{at}.{key}: {why}"),
            None => format!("{at}.{key}: unknown field"),
        })
        .collect()
}

impl GitRepo {
    /// Converts to protobuf; every key refused by name, or unknown, is reported with the
    /// others. The rules of the values are the hub's (`flotilla_gitops::source::validate`).
    pub fn to_proto(&self) -> Result<v1::GitRepo, Vec<String>> {
        let mut problems = Vec::new();
        if self.api_version != APPS_V1ALPHA1 || self.kind != KIND {
            problems.push(format!(
                "apiVersion/kind: {}/{}: expected {APPS_V1ALPHA1} {KIND}",
                self.api_version, self.kind
            ));
        }
        let s = &self.spec;
        problems.extend(refused("spec", &s.other, REFUSED));
        let mut targets = Vec::new();
        for (i, t) in s.targets.iter().enumerate() {
            let at = format!("spec.targets[{i}]");
            problems.extend(refused(&at, &t.other, REFUSED_IN_TARGETS));
            let placement = t.placement.as_ref().and_then(|p| {
                let at = format!("{at}.placement");
                problems.extend(refused(&at, &p.other, REFUSED_IN_PLACEMENT));
                p.to_proto(&at).map_err(|e| problems.push(e)).ok()
            });
            targets.push(v1::GitTarget {
                name: t.name.clone(),
                placement_ref: t
                    .placement_ref
                    .as_ref()
                    .map(|p| p.name.clone())
                    .unwrap_or_default(),
                placement,
                rollout_strategy: t.rollout_strategy.as_ref().map(RolloutStrategy::to_proto),
            });
        }
        let ca_bundle = match s.ca_bundle.as_deref().map(pem_or_base64).transpose() {
            Ok(pem) => pem.unwrap_or_default(),
            Err(e) => {
                problems.push(e);
                Vec::new()
            }
        };
        let metadata = self.metadata.to_proto().map_err(|e| vec![e])?;
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(v1::GitRepo {
            metadata: Some(metadata),
            spec: Some(v1::GitRepoSpec {
                repo: s.repo.clone(),
                branch: s.branch.clone().unwrap_or_default(),
                revision: s.revision.clone().unwrap_or_default(),
                paths: s.paths.clone(),
                polling_interval: s.polling_interval.clone().unwrap_or_default(),
                disable_polling: s.disable_polling,
                paused: s.paused,
                force_sync_generation: s.force_sync_generation,
                client_secret_name: s.client_secret_name.clone().unwrap_or_default(),
                ca_bundle,
                webhook_secret: s.webhook_secret.clone().unwrap_or_default(),
                target_namespace: s.target_namespace.clone().unwrap_or_default(),
                keep_resources: s.keep_resources,
                insecure_transport: s.insecure_transport,
                targets,
            }),
            status: None,
        })
    }
}

/// `caBundle`'s bytes: PEM as written, or base64 of it (Fleet's `[]byte` in YAML).
fn pem_or_base64(text: &str) -> Result<Vec<u8>, String> {
    let text = text.trim();
    if text.starts_with("-----BEGIN") {
        return Ok(text.as_bytes().to_vec());
    }
    let compact: String = text.split_whitespace().collect();
    data_encoding::BASE64
        .decode(compact.as_bytes())
        .map_err(|e| format!("spec.caBundle: neither PEM nor base64 of PEM: {e}"))
}

fn some(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn time(t: &Option<prost_types::Timestamp>) -> String {
    t.as_ref().map(rfc3339).unwrap_or_default()
}

impl From<&v1::GitRepo> for GitRepo {
    fn from(r: &v1::GitRepo) -> Self {
        let s = r.spec.clone().unwrap_or_default();
        Self {
            api_version: APPS_V1ALPHA1.into(),
            kind: KIND.into(),
            metadata: r.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: GitRepoSpec {
                repo: s.repo,
                branch: some(&s.branch),
                revision: some(&s.revision),
                paths: s.paths,
                polling_interval: some(&s.polling_interval),
                disable_polling: s.disable_polling,
                paused: s.paused,
                force_sync_generation: s.force_sync_generation,
                client_secret_name: some(&s.client_secret_name),
                ca_bundle: (!s.ca_bundle.is_empty())
                    .then(|| data_encoding::BASE64.encode(&s.ca_bundle)),
                webhook_secret: some(&s.webhook_secret),
                target_namespace: some(&s.target_namespace),
                keep_resources: s.keep_resources,
                insecure_transport: s.insecure_transport,
                targets: s
                    .targets
                    .iter()
                    .map(|t| GitTarget {
                        name: t.name.clone(),
                        placement_ref: some(&t.placement_ref).map(|name| NameRef { name }),
                        placement: t.placement.as_ref().map(TargetPlacement::from),
                        rollout_strategy: t.rollout_strategy.as_ref().map(RolloutStrategy::from),
                        other: BTreeMap::new(),
                    })
                    .collect(),
                other: BTreeMap::new(),
            },
            status: r.status.as_ref().map(status),
        }
    }
}

fn status(s: &v1::GitRepoStatus) -> GitRepoStatus {
    GitRepoStatus {
        observed_generation: s.observed_generation,
        commit: s.commit.clone(),
        head: s.head.as_ref().map(|c| Commit {
            sha: c.sha.clone(),
            subject: c.subject.clone(),
            author: c.author.clone(),
            time: time(&c.time),
        }),
        webhook_commit: s.webhook_commit.clone(),
        last_webhook_time: time(&s.last_webhook_time),
        last_fetch_time: time(&s.last_fetch_time),
        next_fetch_time: time(&s.next_fetch_time),
        conditions: conditions(&s.conditions),
        bundles: s
            .bundles
            .iter()
            .map(|b| {
                let w = b.summary.unwrap_or_default();
                Bundle {
                    name: b.name.clone(),
                    path: b.path.clone(),
                    replica_set: b.replica_set.clone(),
                    content: b.content.clone(),
                    content_commit: b.content_commit.clone(),
                    summary: Summary {
                        total: w.total,
                        applied: w.applied,
                        available: w.available,
                        degraded: w.degraded,
                        progressing: w.progressing,
                    },
                }
            })
            .collect(),
        ready_bundles: s.ready_bundles.clone(),
        failures: s.failures,
    }
}

#[cfg(test)]
mod tests;
