//! Managed-cluster templates on the agent: the thin I/O around
//! [`flotilla_api::policy::template::policy::resolve_policy`]. Each round resolves against what
//! was fetched so far; the reads it could not answer are fetched from the backend (objects
//! through the same group listing the evaluation's snapshot uses, so a change of a looked-up
//! object is a backend change that re-evaluates the policy) and the policy is resolved again,
//! at most [`MAX_ROUNDS`] times. `ClusterClaim`s are the agent's claims: the reserved ones the
//! cluster gives and the configured ones.

use crate::backend::{Backend, BackendError};
use crate::store::LocalStore;
use flotilla_api::policy::config::ConfigurationPolicy;
use flotilla_api::policy::template::budget::MAX_TIME;
use flotilla_api::policy::template::policy::{
    PolicyOutcome, ResolvedPolicy, error_finding, resolve_policy,
};
use flotilla_api::policy::template::source::{
    Answer, CLUSTER_CLAIM, CLUSTER_CLAIM_API_VERSION, Fetched, Query,
};
use flotilla_api::policy::template::{MAX_ROUNDS, TemplateError};
use flotilla_api::v1::ClusterClaim;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

/// Resolves `policy`'s templates on this cluster. A backend failure other than "not found" is
/// returned (the evaluation is retried, never judged on a partial view). Each round runs on a
/// blocking thread: a template may compute for up to [`MAX_TIME`] over all rounds, which must
/// not hold an async worker.
pub async fn resolve(
    backend: &dyn Backend,
    store: &LocalStore,
    configured: &[ClusterClaim],
    policy: &ConfigurationPolicy,
) -> Result<ResolvedPolicy, BackendError> {
    let shared = Arc::new(policy.clone());
    let mut fetched = Fetched::default();
    let mut claims: Option<Vec<ClusterClaim>> = None;
    let mut left = MAX_TIME;
    for _ in 0..MAX_ROUNDS {
        let started = Instant::now();
        let (p, f, deadline) = (shared.clone(), Arc::new(fetched.clone()), started + left);
        let outcome = match tokio::task::spawn_blocking(move || resolve_policy(&p, f, deadline))
            .await
        {
            Ok(o) => o,
            Err(e) => {
                let mut out = ResolvedPolicy {
                    policy: policy.clone(),
                    errors: vec![error_finding(format!(
                        "the template's resolution failed: {e}"
                    ))],
                    reads: Default::default(),
                    sensitive: false,
                };
                out.policy.templates = flotilla_api::policy::config::Templates::Objects(Vec::new());
                return Ok(out);
            }
        };
        left = left.saturating_sub(started.elapsed());
        let pending = match outcome {
            PolicyOutcome::Done(r) => return Ok(*r),
            PolicyOutcome::Pending(p) => p,
        };
        for query in pending {
            let answer = if query.kind() == (CLUSTER_CLAIM_API_VERSION, CLUSTER_CLAIM) {
                if claims.is_none() {
                    let info = backend.info().await;
                    let mut all = crate::registration::reserved_claims(store, &info);
                    all.extend(configured.iter().cloned());
                    claims = Some(all);
                }
                claim_answer(&query, claims.as_deref().unwrap_or_default())
            } else {
                fetch(backend, &query).await?
            };
            fetched.insert(query, answer);
        }
    }
    let mut out = ResolvedPolicy {
        policy: policy.clone(),
        errors: vec![error_finding(TemplateError::Rounds.to_string())],
        reads: Default::default(),
        sensitive: false,
    };
    out.policy.templates = flotilla_api::policy::config::Templates::Objects(Vec::new());
    Ok(out)
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
            Answer::Object(claims.iter().rev().find(|c| &c.name == name).map(object))
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

/// One read from the backend: unserved kinds answered as such, objects filtered from the
/// group's listing.
async fn fetch(backend: &dyn Backend, query: &Query) -> Result<Answer, BackendError> {
    let (api_version, kind) = query.kind();
    if backend.served(api_version, kind).await?.is_none() {
        return Ok(Answer::Unserved);
    }
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let (namespace, selector) = match query {
        Query::Get { namespace, .. } => (namespace, None),
        Query::List {
            namespace,
            selector,
            ..
        } => (namespace, Some(selector)),
    };
    let selector = match selector.filter(|s| !s.is_empty()) {
        Some(s) => match flotilla_api::selector::parse(s) {
            Ok(sel) => Some(sel),
            Err(e) => return Ok(Answer::Failed(e.to_string())),
        },
        None => None,
    };
    let ns = (!namespace.is_empty()).then_some(namespace.as_str());
    let listed = match backend.list_in_group(group, kind, ns).await {
        Ok(l) => l,
        Err(BackendError::NotFound(_)) => Vec::new(),
        Err(e) => return Err(e),
    };
    let in_namespace = |o: &Value| {
        namespace.is_empty() || o["metadata"]["namespace"].as_str() == Some(namespace.as_str())
    };
    Ok(match query {
        Query::Get { name, .. } => Answer::Object(
            listed
                .into_iter()
                .find(|o| in_namespace(o) && o["metadata"]["name"].as_str() == Some(name)),
        ),
        Query::List { .. } => {
            let mut items: Vec<Value> = listed
                .into_iter()
                .filter(|o| in_namespace(o))
                .filter(|o| {
                    selector.as_ref().is_none_or(|sel| {
                        flotilla_api::selector::matches_labels(
                            sel,
                            &flotilla_api::policy::config::labels_of(o),
                        )
                    })
                })
                .collect();
            items.sort_by(|a, b| {
                let key = |o: &Value| {
                    (
                        o["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        o["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    )
                };
                key(a).cmp(&key(b))
            });
            Answer::Objects(items)
        }
    })
}
