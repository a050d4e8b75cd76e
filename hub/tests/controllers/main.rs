//! The controller families against real processes: placement, policies and their dependencies,
//! replica sets, GitRepos, import policies, add-ons and their documents, MirrorPeers, managed
//! namespaces.
//!
//! One test binary for several files: each `hub/tests` binary links the hub, the agent and
//! the testkit, and linking was most of its build time (BENCHMARKS.md, "Build times").

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/dashboard.rs"]
mod dashboard_fixture;

mod addon_documents;
mod addons;
mod gitops;
mod gitops_customize;
mod gitops_dashboard;
mod gitops_groups;
mod gitops_hostile;
mod gitops_https;
mod gitops_inline;
mod gitops_ssh;
mod gitops_webhook;
mod import_policy;
mod managed_namespaces;
mod mirror_peers;
mod placement;
mod policy;
mod policy_dependencies;
mod policy_templates;
mod replicaset;
