//! The hub's API surface: gRPC calls and their refusals, authorization, bad input, start-up,
//! forwarding between hubs, takeover, leases, quarantine, identities from OIDC, and the web
//! dashboard (plain HTTP and a real Chromium).
//!
//! One test binary for several files: each `hub/tests` binary links the hub, the agent and
//! the testkit, and linking was most of its build time (BENCHMARKS.md, "Build times").

#[path = "../common/browser.rs"]
mod browser;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/dashboard.rs"]
mod dashboard_fixture;

mod api;
mod authorization;
mod bad_input;
mod dashboard;
mod dashboard_browser;
mod dashboard_oidc;
mod dashboard_teams;
mod forward;
mod lease_keeper;
mod oidc;
mod placement_bad_input;
mod quarantine;
mod startup;
mod takeover;
mod teams;
mod teams_governance;
mod teams_review;
