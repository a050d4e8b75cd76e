//! Governance events, both directions: the event types, the resource id and the status
//! subject of a replicated policy. Hub and agent both use these.
//!
//! - spec (hub → agent, `flotilla.spec.<cluster>`): `io.flotilla.policy.v1.policy.spec.
//!   {create,update,delete}_request`, payload `Policy` — the replicated policy as OCM names it,
//!   `<root namespace>.<root name>` in the cluster's namespace, with the effective remediation
//!   (root, then binding override) — `resourceid`, `resourceversion` = its generation;
//! - status (agent → hub, `flotilla.status.<shard>.<cluster>.policy.<resourceid>`):
//!   `…policy.status.update_request`, payload `PolicyStatusReport`;
//! - spec resync (agent → hub, request/reply on `flotilla.sync.<cluster>`):
//!   `…policy.spec.resync_request` / `resync_response`, the same `SpecResyncRequest` and digest
//!   as works ([`crate::works::versions_digest`]).

use crate::envelope::{Action, Direction, EventType};

/// Status kind of policy reports (followed by the replicated policy's resource id).
pub const KIND_POLICY: &str = "policy";

/// Kind name used in the resource id.
pub const POLICY_KIND: &str = "Policy";

/// Label on a replicated policy naming its root (`<namespace>.<name>`), as OCM labels it.
pub const ROOT_POLICY_LABEL: &str = "policy.open-cluster-management.io/root-policy";

fn policy_type(direction: Direction, action: Action) -> EventType {
    EventType::new("policy", "v1", "policy", direction, action)
}

/// Event type of policy specs with the given action (create, update, delete).
pub fn spec_type(action: Action) -> EventType {
    policy_type(Direction::Spec, action)
}

/// Event type of policy status reports.
pub fn status_type() -> EventType {
    policy_type(Direction::Status, Action::UpdateRequest)
}

/// Event type of policy spec resync requests (agent → hub).
pub fn resync_request_type() -> EventType {
    policy_type(Direction::Spec, Action::ResyncRequest)
}

/// Event type of policy spec resync responses (hub → agent).
pub fn resync_response_type() -> EventType {
    policy_type(Direction::Spec, Action::ResyncResponse)
}

/// The replicated policy's name: `<root namespace>.<root name>`.
pub fn replicated_name(root_namespace: &str, root_name: &str) -> String {
    format!("{root_namespace}.{root_name}")
}

/// The stable resource id of the replicated policy `name` (`<ns>.<name>`) on `cluster`.
pub fn resource_id(cluster: &str, name: &str) -> String {
    crate::ids::resource_id(cluster, POLICY_KIND, cluster, name)
}

/// The status subject of the replicated policy with resource id `resource_id` on `cluster`.
pub fn status_subject(cluster: &str, resource_id: &str) -> String {
    crate::subjects::status(cluster, KIND_POLICY, Some(resource_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subjects::StatusSubject;

    #[test]
    fn policy_events_follow_the_grammar_and_subjects_parse() {
        assert_eq!(
            spec_type(Action::UpdateRequest).to_string(),
            "io.flotilla.policy.v1.policy.spec.update_request"
        );
        for t in [status_type(), resync_request_type(), resync_response_type()] {
            assert_eq!(EventType::parse(&t.to_string()).unwrap(), t);
        }
        let rid = resource_id("edge-1", &replicated_name("policies", "policy-namespace"));
        assert_ne!(rid, resource_id("edge-2", "policies.policy-namespace"));
        let s = status_subject("edge-1", &rid);
        let p = StatusSubject::parse(&s).unwrap();
        assert_eq!((p.cluster, p.kind), ("edge-1", KIND_POLICY));
        assert_eq!(p.resource_id, Some(rid.as_str()));
    }
}
