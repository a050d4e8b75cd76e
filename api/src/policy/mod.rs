//! Governance (OCM `policy.open-cluster-management.io`): the rules hub, agent and CLI share.
//! Pure: no I/O and no clock (times are passed in).
//!
//! - [`config`]: a ConfigurationPolicy read from a policy template, every problem named by its
//!   field, with the root Policy's overrides ([`config::Remediation`] of the root wins).
//! - [`compare`]: config-policy-controller's object matching — `musthave`, `mustonlyhave`,
//!   `mustnothave` over maps, lists, missing and extra fields — and the object to write.
//! - [`namespaces`]: `namespaceSelector` (include/exclude globs, label selectors).
//! - [`dependency`]: `dependencies` / `extraDependencies` — as the replicated policy carries
//!   them, which are unmet on a cluster, OCM's Pending message.
//! - [`evaluate`]: one ConfigurationPolicy against a snapshot of the cluster → compliance,
//!   messages and the writes enforce would make (a decision, not side effects).
//! - [`history`]: per-template compliance history, newest first, bounded.
//! - [`status`]: root compliance over clusters, PolicySet compliance over policies.
//! - [`certificate`]: a CertificatePolicy read from a template, judged against the cluster's
//!   Secrets (expiry, lifetime, SAN patterns) with cert-policy-controller's message.
//! - [`strict`]: fields of a policy template its CRD does not define (the API server's strict
//!   field validation on OCM's spoke) and the template-error OCM reports for them.
//! - [`template`]: OCM's Go templates (hub and managed-cluster), resolved from a source of
//!   objects, with OCM's functions, a sprig subset and OCM's error texts.

pub mod certificate;
pub mod compare;
pub mod config;
pub mod dependency;
pub mod evaluate;
pub mod history;
pub mod namespaces;
pub mod status;
pub mod strict;
pub mod template;

use std::fmt;

/// API group of the governance kinds.
pub const GROUP: &str = "policy.open-cluster-management.io";
/// apiVersion of Policy, PlacementBinding and ConfigurationPolicy.
pub const POLICY_V1: &str = "policy.open-cluster-management.io/v1";
/// apiVersion of PolicySet.
pub const POLICY_V1BETA1: &str = "policy.open-cluster-management.io/v1beta1";
/// API group of the legacy PlacementRule.
pub const APPS_GROUP: &str = "apps.open-cluster-management.io";
/// apiVersion of the legacy PlacementRule.
pub const APPS_V1: &str = "apps.open-cluster-management.io/v1";
/// API group of Placement.
pub const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
/// The only template kind Flotilla evaluates.
pub const CONFIGURATION_POLICY: &str = "ConfigurationPolicy";
/// How many history events a template keeps per cluster (OCM keeps 10).
pub const HISTORY_LIMIT: usize = 10;

/// A compliance state as OCM spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Compliance {
    /// Every check passed.
    Compliant,
    /// Waiting on a dependency.
    Pending,
    /// A check failed (or the template cannot be evaluated).
    NonCompliant,
    /// Nothing reported yet: never read as compliant.
    #[default]
    Unknown,
}

impl Compliance {
    /// OCM's spelling; [`Compliance::Unknown`] is the empty string.
    pub fn as_str(self) -> &'static str {
        match self {
            Compliance::Compliant => "Compliant",
            Compliance::Pending => "Pending",
            Compliance::NonCompliant => "NonCompliant",
            Compliance::Unknown => "",
        }
    }

    /// Reads OCM's spelling; anything else (including hostile input) is unknown.
    pub fn parse(s: &str) -> Self {
        match s {
            "Compliant" => Compliance::Compliant,
            "Pending" => Compliance::Pending,
            "NonCompliant" => Compliance::NonCompliant,
            _ => Compliance::Unknown,
        }
    }
}

impl fmt::Display for Compliance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compliance::Unknown => f.write_str("Unknown"),
            c => f.write_str(c.as_str()),
        }
    }
}

/// One problem of a document, with the path of its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FieldError {
    /// Path of the field (`spec.object-templates[0].complianceType`).
    pub path: String,
    /// What was wrong.
    pub message: String,
}

impl FieldError {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The same problem under a parent path (`prefix.path`).
    pub fn under(self, prefix: &str) -> Self {
        let path = if self.path.is_empty() {
            prefix.to_string()
        } else {
            format!("{prefix}.{}", self.path)
        };
        Self { path, ..self }
    }
}

#[cfg(test)]
mod tests;
