//! Pure rules of ManifestWorkReplicaSets: validation naming every field, the per-cluster work a
//! replica set wants, where a cluster's work stands against the current template (the rollout's
//! input), and the status summary; [`owner`]: who may write a replica set a GitRepo writes;
//! [`state`]: each decided cluster's state, Rancher Fleet's; [`variant`]: which per-target
//! customization's template a cluster wants; [`revision`]: what a write keeps of the stored
//! revision, and what `rollout undo` puts back; [`facts`]: what the rules read of a work, read
//! from a stored work without decoding its spec.

use flotilla_api::meta;
use flotilla_api::v1::{
    Condition, ManifestWork, ManifestWorkReplicaSet, ManifestWorkSpec, ObjectMeta,
    ReplicaSetSummary,
};
use flotilla_api::work::conditions::{APPLIED, AVAILABLE, DEGRADED};
use flotilla_rollout::Status;
use prost::Message;
use sha2::{Digest, Sha256};
use std::time::SystemTime;

pub mod facts;
pub mod owner;
pub mod revision;
pub mod state;
pub mod variant;

pub use facts::{WorkFacts, WorkView};
pub use flotilla_api::meta::REPLICASET_LABEL;
/// Label naming the placement that put a work on its cluster.
pub const PLACEMENT_LABEL: &str = "work.open-cluster-management.io/placementname";
/// Annotation with the hash of the template a work was made from.
pub const TEMPLATE_HASH_ANNOTATION: &str = "work.flotilla.io/template-hash";
/// Annotation of a GitRepo's replica set (and of its works): the commit of its content.
pub use flotilla_gitops::source::COMMIT_ANNOTATION;

/// The `REPLICASET_LABEL` value of a replica set.
pub fn owner_label(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// The replica set's own template (`spec.manifestWorkTemplate`).
pub fn template_of(rs: &ManifestWorkReplicaSet) -> Option<&ManifestWorkSpec> {
    rs.spec.as_ref()?.manifest_work_template.as_ref()
}

/// A short hash of the template (a change of it starts a new rollout). No template hashes as
/// an empty one (whose encoding is empty).
pub fn template_hash(rs: &ManifestWorkReplicaSet) -> String {
    let encoded = template_of(rs).map_or_else(Vec::new, Message::encode_to_vec);
    let digest = Sha256::digest(encoded);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn meta_of(rs: &ManifestWorkReplicaSet) -> ObjectMeta {
    rs.metadata.clone().unwrap_or_default()
}

/// The work the replica set wants on `cluster` (named after the replica set, in the cluster's
/// namespace), labelled with its owner and placement and annotated with `hash`, the hash of
/// `spec`: the template the cluster gets (the set's own or a per-target variant's).
pub fn work_for(
    rs: &ManifestWorkReplicaSet,
    cluster: &str,
    placement: &str,
    hash: &str,
    spec: Option<&ManifestWorkSpec>,
) -> ManifestWork {
    let unnamed = ObjectMeta::default();
    let m = rs.metadata.as_ref().unwrap_or(&unnamed);
    let mut labels = std::collections::HashMap::new();
    labels.insert(
        REPLICASET_LABEL.to_string(),
        owner_label(&m.namespace, &m.name),
    );
    labels.insert(PLACEMENT_LABEL.to_string(), placement.to_string());
    let mut annotations = std::collections::HashMap::new();
    annotations.insert(TEMPLATE_HASH_ANNOTATION.to_string(), hash.to_string());
    // A GitRepo's bundle: each work says the commit its content was rendered at.
    if let Some(commit) = m.annotations.get(COMMIT_ANNOTATION) {
        annotations.insert(COMMIT_ANNOTATION.to_string(), commit.clone());
    }
    ManifestWork {
        metadata: Some(ObjectMeta {
            name: m.name.clone(),
            namespace: cluster.to_string(),
            labels,
            annotations,
            ..Default::default()
        }),
        spec: spec.cloned(),
        status: None,
        hub: None,
    }
}

fn since(c: Option<&Condition>) -> Option<SystemTime> {
    c.and_then(|c| c.last_transition_time.as_ref())
        .map(meta::system_time)
}

/// Where a cluster's work stands against the template with `hash`, and since when.
pub fn status_of(work: Option<WorkView<'_>>, hash: &str) -> (Status, Option<SystemTime>) {
    let Some(w) = work else {
        return (Status::ToApply, None);
    };
    if w.template_hash() != Some(hash) {
        return (Status::ToApply, None);
    }
    progress_of(w)
}

/// Where a work at the wanted spec stands: failed (Degraded, or Applied=False), succeeded
/// (Applied and Available at its generation) or progressing, and since when.
pub fn progress(w: &ManifestWork) -> (Status, Option<SystemTime>) {
    progress_of(w.into())
}

/// [`progress`] of a work as the rules read it.
pub fn progress_of(w: WorkView<'_>) -> (Status, Option<SystemTime>) {
    let generation = w.generation();
    let at_generation = |c: &Condition| c.observed_generation >= generation;
    let applied = w.condition(APPLIED);
    let available = w.condition(AVAILABLE);
    let degraded = w.condition(DEGRADED);
    let accepted = w.accepted_at();
    if degraded.is_some_and(|c| c.status == meta::status::TRUE && at_generation(c))
        || applied.is_some_and(|c| c.status == meta::status::FALSE && at_generation(c))
    {
        return (Status::Failed, since(degraded.or(applied)).or(accepted));
    }
    let ok = |c: Option<&Condition>| {
        c.is_some_and(|c| c.status == meta::status::TRUE && at_generation(c))
    };
    if ok(applied) && ok(available) {
        return (Status::Succeeded, since(available).or(accepted));
    }
    (Status::Progressing, accepted)
}

/// Every problem of a replica set, each naming its field.
pub fn validate(rs: &ManifestWorkReplicaSet) -> Vec<String> {
    let mut errors = Vec::new();
    let m = meta_of(rs);
    if let Err(e) = flotilla_api::names::validate_dns1123_label("metadata.namespace", &m.namespace)
    {
        errors.push(e.to_string());
    }
    if let Err(e) = flotilla_api::names::validate_dns1123_subdomain("metadata.name", &m.name) {
        errors.push(e.to_string());
    }
    let spec = rs.spec.clone().unwrap_or_default();
    if spec.placement_refs.is_empty() {
        errors.push("spec.placementRefs: at least one placement is required".into());
    }
    let mut seen = std::collections::HashSet::new();
    for (i, p) in spec.placement_refs.iter().enumerate() {
        let path = format!("spec.placementRefs[{i}]");
        if let Err(e) =
            flotilla_api::names::validate_dns1123_subdomain(&format!("{path}.name"), &p.name)
        {
            errors.push(e.to_string());
        } else if !seen.insert(p.name.as_str()) {
            errors.push(format!(
                "{path}.name: placement {:?} is listed twice",
                p.name
            ));
        }
        if let Err(errs) = crate::rollout::strategy(
            p.rollout_strategy.as_ref(),
            &format!("{path}.rolloutStrategy"),
        ) {
            errors.extend(errs);
        }
    }
    if !matches!(
        spec.cascade_deletion_policy.as_str(),
        "" | "Background" | "Orphan"
    ) {
        errors.push(format!(
            "spec.cascadeDeletionPolicy: {:?} is not one of Background, Orphan",
            spec.cascade_deletion_policy
        ));
    }
    match &spec.manifest_work_template {
        None => errors.push("spec.manifestWorkTemplate: required".into()),
        Some(_) => {
            // The template must make a valid ManifestWork on any cluster.
            let probe = work_for(rs, "probe-cluster", "probe", "", template_of(rs));
            // Nor may it make a work carrying the keys reserved for the hub's add-on works
            // (the template has no metadata today: this holds the line if it ever gets some).
            errors.extend(
                probe
                    .metadata
                    .as_ref()
                    .map(flotilla_api::addon::reserved_key_errors)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|e| format!("spec.manifestWorkTemplate: {e}")),
            );
            for e in flotilla_api::work::validate(&probe) {
                if e.starts_with("metadata.namespace") {
                    continue;
                }
                errors.push(match e.strip_prefix("spec.") {
                    Some(rest) => format!("spec.manifestWorkTemplate.{rest}"),
                    None => e,
                });
            }
        }
    }
    errors
}

/// Counts of works: total, applied, available, degraded, progressing (OCM's summary).
pub fn summary<'a>(works: impl IntoIterator<Item = WorkView<'a>>) -> ReplicaSetSummary {
    let mut s = ReplicaSetSummary::default();
    for w in works {
        s.total += 1;
        let is = |t: &str| {
            w.condition(t)
                .is_some_and(|c| c.status == meta::status::TRUE)
        };
        if is(APPLIED) {
            s.applied += 1;
        }
        if is(AVAILABLE) {
            s.available += 1;
        }
        if is(DEGRADED) {
            s.degraded += 1;
        }
        if is(flotilla_api::work::conditions::PROGRESSING) {
            s.progressing += 1;
        }
    }
    s
}

#[cfg(test)]
mod tests;
