//! Policy dependencies (`spec.dependencies` and a template's `extraDependencies`) as OCM's
//! governance-policy-framework evaluates them on the managed cluster: a template whose
//! dependencies are not all in the compliance they ask for is neither evaluated nor enforced and
//! reports `Pending` ("Dependencies were not satisfied: 1 is still pending (Policy
//! default.policy-a)"), or `Compliant` with `ignorePending`.
//!
//! - The hub writes dependencies in the replicated policy as OCM's propagator does
//!   ([`canonicalize`]): a Policy is named `<namespace>.<name>` (the name of its copy on the
//!   cluster, the namespace defaulting to the depending policy's) and a PolicySet becomes its
//!   policies.
//! - The agent merges a template's dependencies ([`of_template`]), looks each one up on its
//!   cluster and asks [`unmet`] which are not satisfied; [`pending_message`] says so.

use super::{Compliance, GROUP};
use crate::v1;
use std::fmt;

/// apiVersion of PolicySet, the only kind a dependency is expanded from.
const POLICY_SET_API: &str = "policy.open-cluster-management.io/v1beta1";
/// apiVersion of Policy.
const POLICY_API: &str = "policy.open-cluster-management.io/v1";

/// One dependency, as the agent checks it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dependency {
    /// API group of the object depended on (`""` for the core group).
    pub group: String,
    /// Its version.
    pub version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace: the cluster's for OCM's policy kinds (their copies live there), as
    /// written otherwise.
    pub namespace: String,
    /// Its name (`<namespace>.<name>` for a Policy).
    pub name: String,
    /// The compliance it must have.
    pub compliance: String,
}

impl Dependency {
    /// Whether the object is one of OCM's policy kinds (Policy and the template kinds), whose
    /// compliance the agent itself knows.
    pub fn is_policy_kind(&self) -> bool {
        self.group == GROUP && self.kind.ends_with("Policy")
    }

    /// Whether the object is a (replicated) Policy.
    pub fn is_policy(&self) -> bool {
        self.group == GROUP && self.kind == "Policy"
    }
}

impl fmt::Display for Dependency {
    /// `Kind name`, as OCM names a pending dependency.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// What the cluster shows of a dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// No such object on the cluster.
    NotFound,
    /// The object exists with this compliance ([`Compliance::Unknown`] while it has none).
    Found(Compliance),
    /// The object exists with a `status.compliant` OCM does not define (another controller's
    /// object): compared as written.
    Other(String),
}

fn split_api_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

/// The dependencies as the replicated policy carries them (OCM propagator's
/// `canonicalizeDependencies`): a Policy without a namespace is named after the depending
/// policy's `root_namespace` (`<namespace>.<name>`, unless already so named), with one after
/// its own; a PolicySet is replaced by its policies (`members(namespace, name)`), or kept as
/// written when the hub has no such set (the agent then reports it pending). Anything else is
/// kept as written.
pub fn canonicalize(
    deps: &[v1::PolicyDependency],
    root_namespace: &str,
    members: impl Fn(&str, &str) -> Option<Vec<String>>,
) -> Vec<v1::PolicyDependency> {
    let mut out = Vec::with_capacity(deps.len());
    for dep in deps {
        let mut dep = dep.clone();
        if dep.kind == "PolicySet" && dep.api_version == POLICY_SET_API {
            if dep.namespace.is_empty() {
                dep.namespace = root_namespace.to_string();
            }
            match members(&dep.namespace, &dep.name) {
                Some(policies) => out.extend(policies.into_iter().map(|p| v1::PolicyDependency {
                    api_version: POLICY_API.into(),
                    kind: "Policy".into(),
                    name: format!("{}.{p}", dep.namespace),
                    namespace: String::new(),
                    compliance: dep.compliance.clone(),
                })),
                None => out.push(dep),
            }
        } else if dep.kind == "Policy" && dep.api_version == POLICY_API {
            if dep.namespace.is_empty() {
                if dep.name.contains('.') {
                    // Already `<namespace>.<name>`.
                    out.push(dep);
                    continue;
                }
                dep.namespace = root_namespace.to_string();
            }
            dep.name = format!("{}.{}", dep.namespace, dep.name);
            dep.namespace.clear();
            out.push(dep);
        } else {
            out.push(dep);
        }
    }
    out
}

/// A template's dependencies on `cluster`: the policy's own (`root`) and the template's
/// `extra`, each object once. The same object asked for in two compliance states is an error
/// (the template is not evaluated), as in OCM.
pub fn of_template(
    root: &[v1::PolicyDependency],
    extra: &[v1::PolicyDependency],
    cluster: &str,
) -> Result<Vec<Dependency>, String> {
    let mut out: Vec<Dependency> = Vec::new();
    for d in root.iter().chain(extra) {
        let (group, version) = split_api_version(&d.api_version);
        let mut dep = Dependency {
            group,
            version,
            kind: d.kind.clone(),
            namespace: d.namespace.clone(),
            name: d.name.clone(),
            compliance: d.compliance.clone(),
        };
        if dep.is_policy_kind() {
            // OCM's policy kinds live in the cluster's namespace, whatever is written.
            dep.namespace = cluster.to_string();
        }
        let same = |o: &Dependency| {
            (&o.group, &o.version, &o.kind, &o.namespace, &o.name)
                == (
                    &dep.group,
                    &dep.version,
                    &dep.kind,
                    &dep.namespace,
                    &dep.name,
                )
        };
        match out.iter().find(|o| same(o)) {
            Some(o) if o.compliance != dep.compliance => {
                return Err(format!(
                    "dependency on {} has conflicting compliance states",
                    dep.name
                ));
            }
            Some(_) => {}
            None => out.push(dep),
        }
    }
    Ok(out)
}

/// The dependencies `observe` shows not to be in the compliance they ask for (missing, without
/// compliance, or in another one), in their order.
pub fn unmet(
    deps: &[Dependency],
    mut observe: impl FnMut(&Dependency) -> Observed,
) -> Vec<&Dependency> {
    deps.iter()
        .filter(|d| match observe(d) {
            Observed::NotFound | Observed::Found(Compliance::Unknown) => true,
            Observed::Found(c) => c.as_str() != d.compliance,
            Observed::Other(s) => s != d.compliance,
        })
        .collect()
}

/// OCM's message for unmet dependencies, names sorted: `Dependencies were not satisfied: 1 is
/// still pending (Policy default.policy-a)`.
pub fn pending_message(unmet: &[&Dependency]) -> String {
    let mut names: Vec<String> = unmet.iter().map(|d| d.to_string()).collect();
    names.sort();
    let verb = if names.len() == 1 { "is" } else { "are" };
    format!(
        "Dependencies were not satisfied: {} {verb} still pending ({})",
        names.len(),
        names.join(", ")
    )
}
