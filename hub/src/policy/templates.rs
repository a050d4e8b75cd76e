//! Hub templates (`{{hub … hub}}`) resolved for one cluster, as OCM's propagator resolves them
//! before it writes a replicated policy: each `policy-templates[i]` holding `{{hub` on its own,
//! with `.ManagedClusterName`, `.ManagedClusterLabels` and `.PolicyMetadata`, reads answered
//! from the hub's ConfigMaps and Secrets of the policy's namespace only.
//!
//! A template that fails is delivered unresolved with OCM's annotation
//! `policy.open-cluster-management.io/hub-templates-error` holding the error; the agent reports
//! `NonCompliant; template-error; <error>` for it and evaluates nothing of it.
//!
//! `protect` (and every value a hub template reads from a Secret) seals the value by the hub's
//! sealing key to the cluster's agent curve key (the agent presents it as the reserved claim
//! `curvekey.flotilla.io`): `$ocm_encrypted:<base64 box>`, and the template object names the
//! sender in `policy.flotilla.io/sealed-by`. Every seal differs, so the copy's hash is taken
//! with each box replaced by a keyed digest of its plaintext: unchanged values keep the
//! generation, and no record holds a plain hash of a secret.
//!
//! Pure but for the clock the resolution's deadline is read from.

use super::rules;
use data_encoding::{BASE64, HEXLOWER};
use flotilla_api::policy::template::funcs::{Mode, Protect};
use flotilla_api::policy::template::preprocess::{HUB, has_template};
use flotilla_api::policy::template::protected::{
    DISABLE_TEMPLATES, ENCRYPTED, HUB_TEMPLATES_ERROR, SEALED_BY, TRIGGER_UPDATE,
};
use flotilla_api::policy::template::source::{Query, Source};
use flotilla_api::policy::template::value::to_template;
use flotilla_api::policy::template::{Outcome, Resolver, budget};
use flotilla_api::v1::{ManagedCluster, ObjectMeta, Policy};
use flotilla_hub_core::key::SealingKey;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// What the digests standing for protected values are made for ([`SealingKey::digest`]).
const PROTECT_DIGEST: &str = "policy protect";

/// Whether the policy's templates hold hub templates to resolve (and the root does not turn
/// them off).
pub fn templated(policy: &Policy) -> bool {
    let disabled = policy
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.get(DISABLE_TEMPLATES))
        .is_some_and(|v| v == "true");
    !disabled
        && policy.spec.as_ref().is_some_and(|s| {
            s.policy_templates
                .iter()
                .any(|t| has_template(&String::from_utf8_lossy(&t.object_definition), HUB))
        })
}

/// The root's `trigger-update` annotation ("" without one).
pub fn trigger_update(policy: &Policy) -> &str {
    policy
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.get(TRIGGER_UPDATE))
        .map_or("", String::as_str)
}

/// What of a cluster its hub templates may read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterInputs {
    /// `.ManagedClusterName`.
    pub name: String,
    /// `.ManagedClusterLabels`.
    pub labels: BTreeMap<String, String>,
    /// The agent's curve key (`protect` seals to it), when its agent presented one.
    pub curve_key: Option<String>,
}

impl ClusterInputs {
    /// The inputs of a cluster in the inventory.
    pub fn of(cluster: &ManagedCluster) -> Self {
        let m = cluster.metadata.clone().unwrap_or_default();
        let curve_key = cluster
            .status
            .as_ref()
            .and_then(|s| {
                s.cluster_claims
                    .iter()
                    .find(|c| c.name == flotilla_api::meta::CLAIM_CURVE_KEY)
            })
            .map(|c| c.value.clone());
        Self {
            name: m.name,
            labels: m.labels.into_iter().collect(),
            curve_key,
        }
    }

    /// A digest of everything here (a cached resolution is good while it stays).
    pub fn fingerprint(&self) -> String {
        let text = serde_json::json!([self.name, self.labels, self.curve_key]).to_string();
        flotilla_bus::ids::status_hash(text.as_bytes())
    }
}

/// One cluster's copy with its hub templates resolved.
#[derive(Debug, Clone)]
pub struct Resolution {
    /// The copy to deliver (protected values freshly sealed).
    pub copy: Policy,
    /// Its spec hash, protected values counted by their digest.
    pub hash: String,
    /// What the templates read (with no failure: a failed template is resolved again at
    /// every reconcile, so a missing input is noticed once it exists).
    pub reads: BTreeSet<Query>,
    /// The error of each template that failed.
    pub errors: Vec<String>,
}

/// Seals for one cluster and remembers the digest standing for each box.
struct Sealer {
    key: SealingKey,
    cluster: String,
    recipient: Option<nkeys::XKey>,
    made: Mutex<Vec<(String, String)>>,
}

impl Protect for Sealer {
    fn protect(&self, plain: &str) -> Result<String, String> {
        let Some(recipient) = &self.recipient else {
            return Err(format!(
                "protect needs the cluster's agent key; the agent of {} has not presented one \
                 (claim {}: upgrade the agent)",
                self.cluster,
                flotilla_api::meta::CLAIM_CURVE_KEY
            ));
        };
        let sealed = self
            .key
            .seal_to(plain.as_bytes(), recipient)
            .ok_or_else(|| "sealing the value failed".to_string())?;
        let text = format!("{ENCRYPTED}{}", BASE64.encode(&sealed));
        let digest = format!(
            "{ENCRYPTED}digest:{}",
            HEXLOWER.encode(&self.key.digest(PROTECT_DIGEST, plain.as_bytes()))
        );
        self.made
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((text.clone(), digest));
        Ok(text)
    }
}

/// The propagator's `templateCtx`: `.ManagedClusterName`, `.ManagedClusterLabels` and
/// `.PolicyMetadata` (the root's name, namespace, labels and annotations).
fn context(root: &ObjectMeta, cluster: &ClusterInputs) -> serde_json::Value {
    let sorted = |m: &std::collections::HashMap<String, String>| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    serde_json::json!({
        "ManagedClusterName": cluster.name,
        "ManagedClusterLabels": cluster.labels,
        "PolicyMetadata": {
            "name": root.name,
            "namespace": root.namespace,
            "labels": sorted(&root.labels),
            "annotations": sorted(&root.annotations),
        },
    })
}

/// Resolves the hub templates of `copy` (the replicated policy for `cluster`, from
/// [`rules::replicated`]) reading `source`; `root` is the root policy's metadata.
pub fn resolve(
    mut copy: Policy,
    root: &ObjectMeta,
    cluster: &ClusterInputs,
    source: Arc<dyn Source>,
    sealing: &SealingKey,
) -> Resolution {
    let sealer = Arc::new(Sealer {
        key: sealing.clone(),
        cluster: cluster.name.clone(),
        recipient: cluster
            .curve_key
            .as_deref()
            .and_then(|k| nkeys::XKey::from_public_key(k).ok()),
        made: Mutex::new(Vec::new()),
    });
    let resolver = Resolver {
        mode: Mode::Hub {
            namespace: root.namespace.clone(),
        },
        context: to_template(&context(root, cluster)),
        source,
        protect: Some(sealer.clone()),
        deadline: budget::Deadline::after(budget::MAX_TIME),
    };
    let mut reads = BTreeSet::new();
    let mut errors = Vec::new();
    if let Some(spec) = copy.spec.as_mut() {
        for t in &mut spec.policy_templates {
            if !has_template(&String::from_utf8_lossy(&t.object_definition), HUB) {
                continue;
            }
            let Ok(raw) = serde_json::from_slice::<serde_json::Value>(&t.object_definition) else {
                // Not JSON: the agent reports it as unreadable.
                continue;
            };
            let before = sealer.made.lock().unwrap_or_else(|p| p.into_inner()).len();
            let resolved = match resolver.resolve_json(&raw) {
                Ok(Outcome::Resolved(r)) => Ok(r),
                Ok(Outcome::Pending(_)) => {
                    Err("the hub's data did not answer a read (retried)".to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            match resolved {
                Ok(r) => {
                    reads.extend(r.reads);
                    let mut value = r.value;
                    let sealed =
                        sealer.made.lock().unwrap_or_else(|p| p.into_inner()).len() > before;
                    if sealed {
                        annotate(&mut value, SEALED_BY, sealing.public());
                    }
                    t.object_definition = serde_json::to_vec(&value).unwrap_or_default();
                }
                Err(e) => {
                    let mut value = raw;
                    let cut = flotilla_api::policy::history::cut(&e).into_owned();
                    annotate(&mut value, HUB_TEMPLATES_ERROR, &cut);
                    t.object_definition = serde_json::to_vec(&value).unwrap_or_default();
                    errors.push(e);
                }
            }
        }
    }
    let made = std::mem::take(&mut *sealer.made.lock().unwrap_or_else(|p| p.into_inner()));
    let hash = hash_with_digests(&copy, &made);
    if !errors.is_empty() {
        reads.clear();
    }
    Resolution {
        copy,
        hash,
        reads,
        errors,
    }
}

/// Sets `metadata.annotations[name]` of a template object (a non-object is left alone).
fn annotate(value: &mut serde_json::Value, name: &str, text: &str) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(m) = metadata.as_object_mut() {
        let annotations = m
            .entry("annotations")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                name.to_string(),
                serde_json::Value::String(text.to_string()),
            );
        }
    }
}

/// The spec hash of `copy` with each sealed box replaced by the digest standing for it.
fn hash_with_digests(copy: &Policy, made: &[(String, String)]) -> String {
    if made.is_empty() {
        return rules::spec_hash(copy);
    }
    let mut stable = copy.clone();
    if let Some(spec) = stable.spec.as_mut() {
        for t in &mut spec.policy_templates {
            let mut text = String::from_utf8_lossy(&t.object_definition).into_owned();
            if !text.contains(ENCRYPTED) {
                continue;
            }
            for (sealed, digest) in made {
                text = text.replace(sealed.as_str(), digest);
            }
            t.object_definition = text.into_bytes();
        }
    }
    rules::spec_hash(&stable)
}

#[cfg(test)]
mod tests;
