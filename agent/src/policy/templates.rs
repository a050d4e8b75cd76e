//! Managed-cluster templates on the agent: the thin I/O around
//! [`flotilla_api::policy::template::policy::resolve_policy`]. Each round resolves against what
//! was fetched so far; the reads it could not answer are fetched from the backend (objects
//! through the same group listing the evaluation's snapshot uses, so a change of a looked-up
//! object is a backend change that re-evaluates the policy) and the policy is resolved again,
//! at most [`MAX_ROUNDS`] times. `ClusterClaim`s are the agent's claims: the reserved ones the
//! cluster gives and the configured ones.

use crate::backend::{Backend, BackendError, Scope};
use crate::store::LocalStore;
use flotilla_api::policy::config::{ConfigurationPolicy, Templates};
use flotilla_api::policy::template::budget::{MAX_TIME, thread_cpu};
use flotilla_api::policy::template::policy::{
    PolicyOutcome, ResolvedPolicy, error_finding, resolve_policy,
};
use flotilla_api::policy::template::source::{
    Answer, CLUSTER_CLAIM, CLUSTER_CLAIM_API_VERSION, Fetched, Query,
};
use flotilla_api::policy::template::{MAX_READS, MAX_ROUNDS, TemplateError};
use flotilla_api::v1::ClusterClaim;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// Resolves `policy`'s templates on this cluster. A backend failure other than "not found" is
/// returned (the evaluation is retried, never judged on a partial view). Each round runs on a
/// blocking thread (a template may compute for up to [`MAX_TIME`] of CPU time in all, which must not hold
/// an async worker), and the rounds together may read at most [`MAX_READS`] objects.
pub async fn resolve(
    backend: &dyn Backend,
    store: &LocalStore,
    configured: &[ClusterClaim],
    policy: &ConfigurationPolicy,
) -> Result<ResolvedPolicy, BackendError> {
    let shared = Arc::new(policy.clone());
    let mut fetched = Arc::new(Fetched::default());
    let mut reads = Reads::default();
    let mut claims: Option<Vec<ClusterClaim>> = None;
    let mut left = MAX_TIME;
    for _ in 0..MAX_ROUNDS {
        let (p, f) = (shared.clone(), fetched.clone());
        // The round's CPU time on its blocking thread: waiting for a thread, or for a core in
        // a loaded process, is not the template's.
        let round = move || {
            let started = thread_cpu();
            let outcome = resolve_policy(&p, f, left);
            (outcome, thread_cpu().saturating_sub(started))
        };
        let outcome = match tokio::task::spawn_blocking(round).await {
            Ok((o, used)) => {
                left = left.saturating_sub(used);
                o
            }
            Err(e) => {
                return Ok(failed(
                    policy,
                    format!("the template's resolution failed: {e}"),
                ));
            }
        };
        let pending = match outcome {
            PolicyOutcome::Done(r) => return Ok(*r),
            PolicyOutcome::Pending(p) => p,
        };
        if reads.count + pending.len() > MAX_READS {
            return Ok(failed(policy, TemplateError::Reads.to_string()));
        }
        let fetched = Arc::make_mut(&mut fetched);
        for query in pending {
            let answer = if query.kind() == (CLUSTER_CLAIM_API_VERSION, CLUSTER_CLAIM) {
                if claims.is_none() {
                    let info = backend.info().await;
                    let mut all = crate::claims::reserved(store, &info);
                    all.extend(configured.iter().cloned());
                    claims = Some(all);
                }
                claim_answer(&query, claims.as_deref().unwrap_or_default())
            } else {
                reads.answer(backend, &query).await?
            };
            reads.count += 1;
            fetched.insert(query, answer);
        }
    }
    Ok(failed(policy, TemplateError::Rounds.to_string()))
}

/// The policy with no object template left and `message` as its one finding.
fn failed(policy: &ConfigurationPolicy, message: String) -> ResolvedPolicy {
    let mut out = ResolvedPolicy {
        policy: policy.clone(),
        errors: vec![error_finding(message)],
        reads: Default::default(),
        sensitive: false,
    };
    out.policy.templates = Templates::Objects(Vec::new());
    out
}

/// What one resolution asked the backend: each kind's scope once, each listing once (by name
/// or by selector, every query of a kind and namespace is answered from one listing).
#[derive(Default)]
struct Reads {
    served: HashMap<(String, String), Option<Scope>>,
    listed: HashMap<(String, String, String), Arc<Vec<Value>>>,
    count: usize,
}

impl Reads {
    /// One query answered: unserved kinds as such, objects filtered from the listing of their
    /// group, kind and namespace (none for a cluster-scoped kind, whatever the query names, as
    /// go-template-utils scopes its client only for namespaced kinds).
    async fn answer(
        &mut self,
        backend: &dyn Backend,
        query: &Query,
    ) -> Result<Answer, BackendError> {
        let (api_version, kind) = query.kind();
        let key = (api_version.to_string(), kind.to_string());
        let scope = match self.served.get(&key) {
            Some(s) => *s,
            None => {
                let s = backend.served(api_version, kind).await?;
                self.served.insert(key, s);
                s
            }
        };
        let Some(scope) = scope else {
            return Ok(Answer::Unserved);
        };
        let (namespace, selector) = match query {
            Query::Get { namespace, .. } => (namespace.as_str(), None),
            Query::List {
                namespace,
                selector,
                ..
            } => (namespace.as_str(), Some(selector)),
        };
        let namespace = if scope == Scope::Cluster {
            ""
        } else {
            namespace
        };
        let selector = match selector.filter(|s| !s.is_empty()) {
            Some(s) => match flotilla_api::selector::parse(s) {
                Ok(sel) => Some(sel),
                Err(e) => return Ok(Answer::Failed(e.to_string())),
            },
            None => None,
        };
        let listed = self.listing(backend, api_version, kind, namespace).await?;
        Ok(match query {
            Query::Get { name, .. } => Answer::object(
                listed
                    .iter()
                    .find(|o| o["metadata"]["name"].as_str() == Some(name))
                    .cloned(),
            ),
            Query::List { .. } => Answer::Objects(
                listed
                    .iter()
                    .filter(|o| {
                        selector.as_ref().is_none_or(|sel| {
                            flotilla_api::selector::matches_labels(
                                sel,
                                &flotilla_api::policy::config::labels_of(o),
                            )
                        })
                    })
                    .cloned()
                    .collect(),
            ),
        })
    }

    /// The objects of a group's kind in `namespace` (`""`: all), sorted by namespace and name,
    /// listed once per resolution.
    async fn listing(
        &mut self,
        backend: &dyn Backend,
        api_version: &str,
        kind: &str,
        namespace: &str,
    ) -> Result<Arc<Vec<Value>>, BackendError> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let key = (group.to_string(), kind.to_string(), namespace.to_string());
        if let Some(l) = self.listed.get(&key) {
            return Ok(l.clone());
        }
        let ns = (!namespace.is_empty()).then_some(namespace);
        let mut listed = match backend.list_in_group(group, kind, ns).await {
            Ok(l) => l,
            Err(BackendError::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        listed.retain(|o| {
            namespace.is_empty() || o["metadata"]["namespace"].as_str() == Some(namespace)
        });
        let text = |o: &Value, f: &str| o["metadata"][f].as_str().unwrap_or_default().to_string();
        listed.sort_by_key(|o| (text(o, "namespace"), text(o, "name")));
        let listed = Arc::new(listed);
        self.listed.insert(key, listed.clone());
        Ok(listed)
    }
}

/// The claims as ClusterClaim objects (the last of a name wins, as configured claims come
/// after the reserved ones).
fn claim_answer(query: &Query, claims: &[ClusterClaim]) -> Answer {
    let object = |c: &ClusterClaim| {
        json!({
            "apiVersion": CLUSTER_CLAIM_API_VERSION,
            "kind": CLUSTER_CLAIM,
            "metadata": {"name": c.name},
            "spec": {"value": c.value},
        })
    };
    match query {
        Query::Get { name, .. } => {
            Answer::object(claims.iter().rev().find(|c| &c.name == name).map(object))
        }
        Query::List { selector, .. } => {
            if !selector.is_empty() {
                // Claims carry no labels: a selector matches none.
                return Answer::Objects(Vec::new());
            }
            let mut names: Vec<&ClusterClaim> = Vec::new();
            for c in claims.iter().rev() {
                if !names.iter().any(|n| n.name == c.name) {
                    names.push(c);
                }
            }
            names.sort_by(|a, b| a.name.cmp(&b.name));
            Answer::Objects(names.into_iter().map(object).collect())
        }
    }
}
