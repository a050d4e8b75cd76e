//! What templates read: the queries a resolution makes, the answers a caller gives, and the
//! [`Fetched`] set of answers the agent fills round by round.
//!
//! Resolution never does I/O: a function asks its [`Source`] and, when the answer is not there
//! yet, the query is recorded as pending and the function returns a placeholder; the caller
//! fetches every pending query and resolves again (the agent's rounds, bounded by
//! [`super::MAX_ROUNDS`]).

use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// apiVersion of OCM's ClusterClaim, which `fromClusterClaim` reads.
pub const CLUSTER_CLAIM_API_VERSION: &str = "cluster.open-cluster-management.io/v1alpha1";
/// Kind of OCM's ClusterClaim.
pub const CLUSTER_CLAIM: &str = "ClusterClaim";

/// One read a template makes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Query {
    /// One object by name (`namespace` empty for cluster-scoped kinds).
    Get {
        /// `apiVersion` as the template wrote it.
        api_version: String,
        /// Kind.
        kind: String,
        /// Namespace (empty: cluster-scoped, or every namespace for a list).
        namespace: String,
        /// Name.
        name: String,
    },
    /// Every object of a kind, in one namespace or all (`namespace` empty), matching a label
    /// selector in Kubernetes' text form (empty: everything).
    List {
        /// `apiVersion`.
        api_version: String,
        /// Kind.
        kind: String,
        /// Namespace, empty for all.
        namespace: String,
        /// Label selector (`app=web,tier!=db`), empty for all.
        selector: String,
    },
}

/// `ConfigMap default/site`, `Secret default (every one)`, `Namespace (every one, app=web)`: a
/// read as `flotilla policy explain` names it.
impl std::fmt::Display for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Query::Get {
                kind,
                namespace,
                name,
                ..
            } if namespace.is_empty() => write!(f, "{kind} {name}"),
            Query::Get {
                kind,
                namespace,
                name,
                ..
            } => write!(f, "{kind} {namespace}/{name}"),
            Query::List {
                kind,
                namespace,
                selector,
                ..
            } => {
                write!(f, "{kind}")?;
                if !namespace.is_empty() {
                    write!(f, " {namespace}")?;
                }
                match selector.as_str() {
                    "" => write!(f, " (every one)"),
                    s => write!(f, " (every one with {s})"),
                }
            }
        }
    }
}

impl Query {
    /// `(apiVersion, kind)` of the query.
    pub fn kind(&self) -> (&str, &str) {
        match self {
            Query::Get {
                api_version, kind, ..
            }
            | Query::List {
                api_version, kind, ..
            } => (api_version, kind),
        }
    }
}

/// The answer to a [`Query`].
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The object (`None`: it does not exist). Shared: a hub ConfigMap a fleet-wide policy
    /// reads is one object for every cluster's resolution, not a copy each (at 10,000
    /// clusters with a key each, copying it made resolution quadratic).
    Object(Option<Arc<Value>>),
    /// The objects of a list, in the API server's order (by namespace and name).
    Objects(Vec<Value>),
    /// The cluster serves no such kind in that apiVersion.
    Unserved,
    /// The read failed; the message is reported as the function's error.
    Failed(String),
}

impl Answer {
    /// The answer naming `object` (`None`: it does not exist).
    pub fn object(object: Option<Value>) -> Self {
        Self::Object(object.map(Arc::new))
    }
}

/// Where resolution reads from. `None` means "not fetched yet": the query becomes pending.
pub trait Source: Send + Sync {
    /// The answer to `query`, if known.
    fn answer(&self, query: &Query) -> Option<Answer>;
}

/// Answers fetched so far (the agent's per-evaluation cache).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fetched {
    answers: BTreeMap<Query, Answer>,
}

impl Fetched {
    /// Records the answer to `query`.
    pub fn insert(&mut self, query: Query, answer: Answer) {
        self.answers.insert(query, answer);
    }

    /// Every query answered so far.
    pub fn queries(&self) -> impl Iterator<Item = &Query> {
        self.answers.keys()
    }
}

impl Source for Fetched {
    fn answer(&self, query: &Query) -> Option<Answer> {
        self.answers.get(query).cloned()
    }
}

/// The lower-case plural the API server names a kind's resource with (`ConfigMap` →
/// `configmaps`, `NetworkPolicy` → `networkpolicies`), used in its not-found messages.
pub fn resource_of(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    if lower.ends_with('s') || lower.ends_with("ch") || lower.ends_with('x') {
        return format!("{lower}es");
    }
    format!("{lower}s")
}

/// The API server's not-found text: `configmaps "site-config" not found`,
/// `clusterclaims.cluster.open-cluster-management.io "env" not found`.
pub fn not_found(api_version: &str, kind: &str, name: &str) -> String {
    let resource = resource_of(kind);
    match api_version.rsplit_once('/') {
        Some((group, _)) => format!("{resource}.{group} \"{name}\" not found"),
        None => format!("{resource} \"{name}\" not found"),
    }
}
