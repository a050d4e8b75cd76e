//! Unit tests of the governance rules, one file per module.

mod certificate;
mod compare;
mod config;
mod dependency;
mod evaluate;
mod strict;

use super::config::ConfigurationPolicy;
use serde_json::{Value, json};

/// A ConfigurationPolicy from its spec (`object-templates`, `namespaceSelector`, …).
fn policy(spec: Value) -> ConfigurationPolicy {
    ConfigurationPolicy::from_value(&json!({
        "apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy",
        "metadata": {"name": "test"},
        "spec": spec,
    }))
    .expect("valid policy")
}
