//! One in-memory Kubernetes API, speaking the real wire format (what `kubectl` 1.32 and kube-rs
//! accept), shared by the agent's simulated cluster and the testkit's API server for tests.
//!
//! The pure pieces serve both: the resource table and discovery documents ([`resources`]), the
//! OpenAPI v3 documents kubectl asks for before it writes ([`openapi`]), the patch types
//! ([`patch`]: JSON, merge, strategic merge), label and field selectors ([`select`]), errors as
//! `Status` objects ([`status`]) and watch events ([`watch`]: lines, timeouts, the diff of a
//! cluster read again after a change). The testkit serves a [`store::Store`] of objects
//! (resource versions, server-side apply with field managers and conflicts, garbage collection,
//! watch history) over HTTP ([`server`], with a [`server::Gate`] in front for its access rules);
//! the agent's simulated cluster keeps its own compact store. Both answer requests through one
//! [`engine`]: paths, verbs, patches, apply, watch and errors over a store's [`engine::Objects`].
//!
//! - [`resources`]: built-in API resources by Kubernetes version, those CRDs add, discovery
//!   documents (pure).
//! - [`openapi`]: the OpenAPI v3 root and per group version documents (pure).
//! - [`patch`]: JSON patch, JSON merge patch, strategic merge patch (pure).
//! - [`schema`]: strict field validation of the built-in kinds: the fields an object's kind
//!   does not define, and the API server's refusals naming them (pure).
//! - [`select`]: label and field selectors (pure).
//! - [`status`]: API errors and their `Status` objects (pure).
//! - [`store`]: the objects of an in-memory server (pure state).
//! - [`watch`]: watch events and streams.
//! - [`engine`]: the request engine over a store's objects (no I/O of its own).
//! - [`server`]: the HTTP serving of a [`Store`] (I/O).

#![deny(missing_docs)]

pub mod engine;
pub mod openapi;
pub use flotilla_api::patch;
pub mod resources;
pub mod schema;
pub mod select;
pub mod server;
pub mod status;
pub mod store;
pub mod watch;

pub use resources::Resource;
pub use status::ApiError;
pub use store::{ObjectKey, Store};

/// Settings of an in-memory server's store.
#[derive(Debug, Clone)]
pub struct Options {
    /// `gitVersion` of `/version` (and the nodes' kubelet version); its minor version decides
    /// which built-in group versions are served ([`resources::builtin_of`]).
    pub git_version: String,
    /// Mark Deployments, StatefulSets, ReplicaSets, DaemonSets, Jobs and Pods ready (status as
    /// their controllers would write it) when they are written.
    pub auto_ready: bool,
    /// Nodes created at start: `(name, cpu, memory)`.
    pub nodes: Vec<(String, String, String)>,
    /// `spec.providerID` prefix of the nodes (`aws://`, `gce://`, …; empty for none).
    pub provider: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            git_version: "v1.30.2+k3s1".into(),
            auto_ready: true,
            nodes: vec![
                ("node-1".into(), "4".into(), "16Gi".into()),
                ("node-2".into(), "4".into(), "16Gi".into()),
            ],
            provider: "aws:///eu-west-1a/".into(),
        }
    }
}
