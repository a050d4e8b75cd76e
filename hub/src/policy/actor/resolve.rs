//! The policy actor's side of hub templates: each decided cluster's copy resolved
//! ([`templates::resolve`]) and hashed, with a per-cluster cache so a reconcile that changes
//! nothing a cluster's templates read costs a digest, not a resolution; which cluster changes
//! concern the policy.
//!
//! A cached resolution is good while its inputs are: the copy before resolution (the root's
//! spec with the cluster's override), the cluster's name, labels and agent key, and the stored
//! revision of every hub object it read. A resolution that failed is not reused: it runs
//! again at the next reconcile, which every hub data change of the namespace brings (its
//! cluster's part is kept, so lease renewals of a fleet whose template fails cost nothing).

use super::Actor;
use crate::policy::PolicyError;
use crate::policy::rules;
use crate::policy::templates::{self, ClusterInputs};
use flotilla_api::policy::template::source::Query;
use flotilla_api::v1::{ManagedCluster, Policy, PolicySet, RenderedPolicy};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Clusters resolved between two yields to the runtime.
const CHUNK: usize = 256;

/// A cluster's last good resolution.
pub(super) struct Cached {
    /// The digest of its inputs.
    inputs: String,
    /// The cluster's own part of them ([`ClusterInputs::fingerprint`]).
    cluster: String,
    /// What it read.
    reads: BTreeSet<Query>,
    /// The copy's hash.
    hash: String,
    /// A template failed: resolved again at every reconcile (kept for `cluster`).
    failed: bool,
}

/// What a reconcile of a templated policy found: each target's hash, and the copies resolved
/// for the clusters whose hash differs from their record's (delivered by the caller).
#[derive(Default)]
pub(super) struct Hashed {
    pub hashes: BTreeMap<String, String>,
    pub copies: BTreeMap<String, Policy>,
}

impl Actor {
    fn inputs_of(&self, base: &str, cluster: &str, reads: &BTreeSet<Query>) -> String {
        let hubdata = &self.inner.hubdata;
        let mut text = String::from(base);
        text.push('\n');
        text.push_str(cluster);
        for q in reads {
            text.push_str(&format!("\n{}", hubdata.revision(q)));
        }
        flotilla_bus::ids::status_hash(text.as_bytes())
    }

    /// One cluster's copy resolved (`generation` 0: the caller stamps it).
    fn resolve_for(
        &self,
        policy: &Policy,
        cluster: &ClusterInputs,
        enforce: bool,
        sets: &[PolicySet],
    ) -> templates::Resolution {
        let copy = rules::replicated(policy, &cluster.name, enforce, 0, sets);
        let root = policy.metadata.clone().unwrap_or_default();
        let r = templates::resolve(
            copy,
            &root,
            cluster,
            Arc::new(self.inner.hubdata.clone()),
            &self.inner.deps.sealing,
        );
        self.inner.metrics.template_resolutions.inc();
        if let Some(e) = r.errors.first() {
            tracing::debug!(cluster = %cluster.name, error = %e, "hub templates failed");
            self.inner.metrics.template_errors.inc();
        }
        r
    }

    fn inputs_of_cluster(&self, name: &str) -> ClusterInputs {
        match self.inner.deps.clusters.get(name) {
            Some(c) => ClusterInputs::of(&c),
            None => ClusterInputs {
                name: name.to_string(),
                ..ClusterInputs::default()
            },
        }
    }

    /// Every target's hash, resolving where the cache does not hold (in chunks of [`CHUNK`],
    /// yielding between them: a fleet-wide policy never holds a worker for long).
    pub(super) async fn template_hashes(&mut self, policy: &Policy, sets: &[PolicySet]) -> Hashed {
        // A new `trigger-update` value makes every cached resolution stale (resolved again;
        // sent only where the result differs, as OCM's propagator).
        let trigger = templates::trigger_update(policy);
        let base = [false, true].map(|enforce| {
            let copy = rules::replicated(policy, "", enforce, 0, sets);
            format!("{}\n{trigger}", rules::spec_hash(&copy))
        });
        let targets: Vec<(String, bool)> =
            self.targets.iter().map(|(c, e)| (c.clone(), *e)).collect();
        self.cache.retain(|c, _| self.targets.contains_key(c));
        let mut out = Hashed::default();
        for chunk in targets.chunks(CHUNK) {
            for (name, enforce) in chunk {
                let cluster = self.inputs_of_cluster(name);
                let fingerprint = cluster.fingerprint();
                let base = &base[usize::from(*enforce)];
                let recorded = self.records.get(name).map(|r| r.spec_hash.as_str());
                if let Some(c) = self.cache.get(name)
                    && !c.failed
                    && c.inputs == self.inputs_of(base, &fingerprint, &c.reads)
                    && recorded == Some(c.hash.as_str())
                {
                    out.hashes.insert(name.clone(), c.hash.clone());
                    continue;
                }
                let r = self.resolve_for(policy, &cluster, *enforce, sets);
                let inputs = self.inputs_of(base, &fingerprint, &r.reads);
                self.cache.insert(
                    name.clone(),
                    Cached {
                        inputs,
                        cluster: fingerprint,
                        reads: r.reads,
                        hash: r.hash.clone(),
                        failed: !r.errors.is_empty(),
                    },
                );
                if recorded != Some(r.hash.as_str()) {
                    out.copies.insert(name.clone(), r.copy);
                }
                out.hashes.insert(name.clone(), r.hash);
            }
            tokio::task::yield_now().await;
        }
        out
    }

    /// The copy a cluster is sent again: resolved anew (the same values, sealed afresh).
    pub(super) fn resent_copy(
        &self,
        policy: &Policy,
        cluster: &str,
        enforce: bool,
        generation: i64,
        sets: &[PolicySet],
    ) -> Policy {
        if !self.templated {
            return rules::replicated(policy, cluster, enforce, generation, sets);
        }
        let mut copy = self
            .resolve_for(policy, &self.inputs_of_cluster(cluster), enforce, sets)
            .copy;
        if let Some(m) = copy.metadata.as_mut() {
            m.generation = generation;
        }
        copy
    }

    /// Whether a cluster's change alters what its copy's hub templates saw (its labels, its
    /// agent key): lease renewals and status reports do not.
    pub(super) fn template_inputs_changed(&self, cluster: &ManagedCluster) -> bool {
        let name = cluster
            .metadata
            .as_ref()
            .map(|m| m.name.as_str())
            .unwrap_or_default();
        if !self.templated || !self.targets.contains_key(name) {
            return false;
        }
        self.cache
            .get(name)
            .is_none_or(|c| c.cluster != ClusterInputs::of(cluster).fingerprint())
    }

    /// One cluster's copy as a reconcile would resolve it now, sent nowhere (`flotilla policy
    /// render` / `explain`): protected values stay sealed to the cluster's agent.
    pub(super) fn render(&self, cluster: &str) -> Result<RenderedPolicy, PolicyError> {
        let Some((policy, _)) = &self.policy else {
            return Err(PolicyError::NotFound(format!("Policy {}", self.key)));
        };
        let Some(found) = self.inner.deps.clusters.get(cluster) else {
            return Err(PolicyError::NotFound(format!("ManagedCluster {cluster}")));
        };
        let sets: Vec<PolicySet> = self
            .inner
            .sets
            .read()
            .expect("lock")
            .values()
            .cloned()
            .collect();
        let decided = self.targets.get(cluster);
        let copy = rules::replicated(policy, cluster, decided == Some(&true), 0, &sets);
        let r = if templates::templated(policy) {
            templates::resolve(
                copy,
                &policy.metadata.clone().unwrap_or_default(),
                &ClusterInputs::of(&found),
                Arc::new(self.inner.hubdata.clone()),
                &self.inner.deps.sealing,
            )
        } else {
            // No hub templates, or the root turns them off: the copy as it is sent.
            templates::Resolution {
                hash: rules::spec_hash(&copy),
                copy,
                reads: BTreeSet::new(),
                errors: Vec::new(),
            }
        };
        let record = self.records.get(cluster).cloned();
        Ok(RenderedPolicy {
            current: record.as_ref().is_some_and(|rec| rec.spec_hash == r.hash),
            copy: Some(r.copy),
            errors: r.errors,
            reads: r.reads.iter().map(ToString::to_string).collect(),
            decided: decided.is_some(),
            record,
        })
    }
}
