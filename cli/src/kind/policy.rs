//! Governance: Policies (kubectl's columns for them: NAME, REMEDIATION ACTION, COMPLIANCE STATE),
//! PlacementBindings, PolicySets and PlacementRules; `describe policy` (per cluster: compliance
//! and the newest messages).

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::ocm::policy as shapes;
use flotilla_api::v1::{
    ObjectMeta, PlacementBinding, PlacementRule, Policy, PolicyPlacementStatus, PolicySet,
    PolicyStatusReport,
};
use std::fmt::Write;

/// History messages `describe policy` shows per template.
pub const DESCRIBE_HISTORY: usize = 3;

fn or_dash(s: &str) -> String {
    if s.is_empty() { "-".into() } else { s.into() }
}

/// The request for a governance list of the query's namespace (every namespace when `None`).
fn governance_request(query: &super::Query) -> flotilla_api::v1::ListPoliciesRequest {
    flotilla_api::v1::ListPoliciesRequest {
        namespace: query.namespace.clone().unwrap_or_default(),
    }
}

impl Kind for Policy {
    type Ocm = shapes::Policy;
    const COLUMNS: &'static [&'static str] = &["NAME", "REMEDIATION ACTION", "COMPLIANCE STATE"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let spec = self.spec.clone().unwrap_or_default();
        let state = if spec.disabled {
            "Disabled".to_string()
        } else {
            or_dash(
                &self
                    .status
                    .as_ref()
                    .map(|s| s.compliant.clone())
                    .unwrap_or_default(),
            )
        };
        vec![self.name(), or_dash(&spec.remediation_action), state]
    }

    const WIDE_COLUMNS: &'static [&'static str] = &["CLUSTERS", "COMPLIANT"];

    fn wide_row(&self) -> Vec<String> {
        let st = self.status.clone().unwrap_or_default();
        let ok = st
            .status
            .iter()
            .filter(|c| c.compliant == "Compliant")
            .count();
        vec![st.status.len().to_string(), ok.to_string()]
    }

    fn to_ocm(&self) -> shapes::Policy {
        shapes::Policy::from(self)
    }

    const ACROSS_NAMESPACES: bool = true;

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No policies found.".into())
    }

    /// Those of the namespace (of every namespace when none is given), only the named ones
    /// when the query names some.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = governance_request(query);
        let items = hub
            .idempotent(async || hub.policies().list_policies(r.clone()).await)
            .await?
            .items;
        super::named(items, &query.names, "Policy")
    }
}

impl Kind for PlacementBinding {
    type Ocm = shapes::PlacementBinding;
    const COLUMNS: &'static [&'static str] = &["NAME", "PLACEMENT", "SUBJECTS", "OVERRIDE"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let r = self.placement_ref.clone().unwrap_or_default();
        vec![
            self.name(),
            format!("{}/{}", r.kind, r.name),
            self.subjects
                .iter()
                .map(|s| format!("{}/{}", s.kind, s.name))
                .collect::<Vec<_>>()
                .join(","),
            or_dash(
                &self
                    .binding_overrides
                    .as_ref()
                    .map(|o| o.remediation_action.clone())
                    .unwrap_or_default(),
            ),
        ]
    }

    fn to_ocm(&self) -> shapes::PlacementBinding {
        shapes::PlacementBinding::from(self)
    }

    const ACROSS_NAMESPACES: bool = true;

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No PlacementBindings found.".into())
    }

    /// Those of the namespace (of every namespace when none is given), only the named ones
    /// when the query names some.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = governance_request(query);
        let items = hub
            .idempotent(async || hub.policies().list_placement_bindings(r.clone()).await)
            .await?
            .items;
        super::named(items, &query.names, "PlacementBinding")
    }
}

impl Kind for PolicySet {
    type Ocm = shapes::PolicySet;
    const COLUMNS: &'static [&'static str] = &["NAME", "POLICIES", "COMPLIANCE STATE", "MESSAGE"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let st = self.status.clone().unwrap_or_default();
        vec![
            self.name(),
            self.spec
                .as_ref()
                .map(|s| s.policies.len())
                .unwrap_or_default()
                .to_string(),
            or_dash(&st.compliant),
            st.status_message,
        ]
    }

    fn to_ocm(&self) -> shapes::PolicySet {
        shapes::PolicySet::from(self)
    }

    const ACROSS_NAMESPACES: bool = true;

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No PolicySets found.".into())
    }

    /// Those of the namespace (of every namespace when none is given), only the named ones
    /// when the query names some.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = governance_request(query);
        let items = hub
            .idempotent(async || hub.policies().list_policy_sets(r.clone()).await)
            .await?
            .items;
        super::named(items, &query.names, "PolicySet")
    }
}

impl Kind for PlacementRule {
    type Ocm = shapes::PlacementRule;
    const COLUMNS: &'static [&'static str] = &["NAME", "REPLICAS", "DECISIONS"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let decided: Vec<String> = self
            .status
            .as_ref()
            .map(|s| s.decisions.iter().map(|d| d.cluster_name.clone()).collect())
            .unwrap_or_default();
        vec![
            self.name(),
            self.spec
                .as_ref()
                .and_then(|s| s.cluster_replicas)
                .map_or_else(|| "-".into(), |n| n.to_string()),
            if decided.len() > 5 {
                format!("{} and {} more", decided[..5].join(","), decided.len() - 5)
            } else {
                or_dash(&decided.join(","))
            },
        ]
    }

    fn to_ocm(&self) -> shapes::PlacementRule {
        shapes::PlacementRule::from(self)
    }

    const ACROSS_NAMESPACES: bool = true;

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No PlacementRules found.".into())
    }

    /// Those of the namespace (of every namespace when none is given), only the named ones
    /// when the query names some.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = governance_request(query);
        let items = hub
            .idempotent(async || hub.policies().list_placement_rules(r.clone()).await)
            .await?
            .items;
        super::named(items, &query.names, "PlacementRule")
    }
}

/// `describe policy`: the policy, its bindings, and per decided cluster its compliance and the
/// newest messages of each template.
pub fn describe(p: &Policy, clusters: &[PolicyStatusReport]) -> String {
    let mut out = String::new();
    let spec = p.spec.clone().unwrap_or_default();
    let st = p.status.clone().unwrap_or_default();
    let _ = writeln!(out, "Name:                {}", p.name());
    let _ = writeln!(out, "Namespace:           {}", p.namespace());
    let _ = writeln!(
        out,
        "Remediation action:  {}",
        or_dash(&spec.remediation_action)
    );
    let _ = writeln!(out, "Disabled:            {}", spec.disabled);
    let _ = writeln!(
        out,
        "Compliance state:    {}",
        if st.compliant.is_empty() {
            "- (not every decided cluster has reported; a policy bound to no cluster is never Compliant)"
        } else {
            &st.compliant
        }
    );
    if let Some(m) = &p.metadata {
        for key in ["standards", "categories", "controls"] {
            if let Some(v) = m
                .annotations
                .get(&format!("policy.open-cluster-management.io/{key}"))
            {
                let _ = writeln!(out, "{:<21}{v}", format!("{}:", capitalise(key)));
            }
        }
    }
    let _ = writeln!(out, "Templates:");
    for t in &spec.policy_templates {
        let v: serde_json::Value = serde_json::from_slice(&t.object_definition).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} {}",
            v["kind"].as_str().unwrap_or("?"),
            v["metadata"]["name"].as_str().unwrap_or("?")
        );
    }
    let _ = writeln!(out, "Placements:");
    if st.placement.is_empty() {
        let _ = writeln!(out, "  <none: no PlacementBinding selects this policy>");
    }
    for pl in &st.placement {
        let _ = writeln!(out, "  {}", binding(pl));
    }
    let _ = writeln!(out, "Clusters:");
    if clusters.is_empty() {
        let _ = writeln!(out, "  <none decided>");
    }
    for c in clusters {
        let state = if c.compliant.is_empty() {
            "no report yet"
        } else {
            &c.compliant
        };
        let _ = writeln!(out, "  {}: {state}", c.cluster_name);
        for d in &c.details {
            let _ = writeln!(
                out,
                "    {} {}: {}",
                d.template_kind,
                d.template_name,
                or_dash(&d.compliant)
            );
            for e in d.history.iter().take(DESCRIBE_HISTORY) {
                let at = e
                    .last_timestamp
                    .as_ref()
                    .map(flotilla_api::meta::rfc3339)
                    .unwrap_or_default();
                let _ = writeln!(out, "      {at}  {}", e.message);
            }
        }
    }
    out
}

/// `BINDING → Placement P` (or `PlacementRule R`), and ` (through PolicySet S)` when the policy
/// is bound through a set: one of a policy's placements, as `describe` and `policy status` show it.
pub fn binding(pl: &PolicyPlacementStatus) -> String {
    let target = if pl.placement_rule.is_empty() {
        format!("Placement {}", pl.placement)
    } else {
        format!("PlacementRule {}", pl.placement_rule)
    };
    let via = if pl.policy_set.is_empty() {
        String::new()
    } else {
        format!(" (through PolicySet {})", pl.policy_set)
    };
    format!("{} → {target}{via}", pl.placement_binding)
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

impl Delete for Policy {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.policies().delete_policy(r).await;
        delete_governed(hub, target, "policy", "", call).await
    }
}

impl Delete for PlacementBinding {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.policies().delete_placement_binding(r).await;
        delete_governed(hub, target, "placementbinding", "", call).await
    }
}

impl Delete for PolicySet {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.policies().delete_policy_set(r).await;
        delete_governed(hub, target, "policyset", "", call).await
    }
}

impl Delete for PlacementRule {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.policies().delete_placement_rule(r).await;
        delete_governed(hub, target, "placementrule", "", call).await
    }
}

/// A delete through the PolicyService: `call` with the target as a `GetPolicyRequest`; the
/// message names `noun`/name, `place` (after "deleted") and the namespace.
pub(super) async fn delete_governed(
    hub: &Hub,
    target: Target,
    noun: &str,
    place: &str,
    call: impl AsyncFn(
        flotilla_api::v1::GetPolicyRequest,
    )
        -> Result<tonic::Response<flotilla_api::v1::DeletePolicyResponse>, tonic::Status>,
) -> anyhow::Result<Gone> {
    let r = flotilla_api::v1::GetPolicyRequest {
        namespace: target.namespace,
        name: target.name,
        ..Default::default()
    };
    let d = hub.delete(async || call(r.clone()).await).await?;
    Ok(Gone::new(
        d,
        format!(
            "{noun}/{} deleted{place} (namespace {})",
            r.name, r.namespace
        ),
    ))
}
