//! What reaches a spoke: ManifestWork delivery and its executors, the Kubernetes backend against
//! the testkit's API server, the cluster proxy and its tunnel, agents sharing a connection,
//! agents of both wires (one subscription, or the previous wire's) served by one hub.
//!
//! One test binary for several files: each `hub/tests` binary links the hub, the agent and
//! the testkit, and linking was most of its build time (BENCHMARKS.md, "Build times").

#[path = "../common/mod.rs"]
mod common;
#[path = "../kube_fixture/mod.rs"]
mod kube_fixture;

mod apply_works;
mod cluster_proxy;
mod cluster_proxy_credentials;
mod cluster_proxy_kube_streams;
mod cluster_proxy_leaf;
mod cluster_proxy_spdy_exec;
mod cluster_proxy_stream_ends;
mod cluster_proxy_streams;
mod cluster_proxy_teams;
mod cluster_proxy_tunnel;
mod executor;
mod kube;
mod kube_executor;
mod policy_templates_kube;
mod shared_connections;
mod wires;
mod works;
