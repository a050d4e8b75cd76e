//! ManifestWork events, both directions: the event types, the resource id and the status
//! subject. Hub and agent both use these, so a change cannot reach one side only.
//!
//! - spec (hub → agent, `flotilla.spec.<cluster>`): `io.flotilla.work.v1.manifestwork.spec.
//!   {create,update,delete}_request`, payload `ManifestWork` (metadata + spec), `resourceid`,
//!   `resourceversion` = generation, `deletiontimestamp` on deletes;
//! - status (agent → hub, `flotilla.status.<shard>.<cluster>.work.<resourceid>`):
//!   `…manifestwork.status.update_request`, payload `WorkStatusReport`;
//! - spec resync (agent → hub, request/reply on `flotilla.sync.<cluster>`):
//!   `…manifestwork.spec.resync_request` / `resync_response`.

use crate::envelope::{Action, Direction, EventType};

/// Kind name used in the resource id.
pub const WORK_KIND: &str = "ManifestWork";

fn work_type(direction: Direction, action: Action) -> EventType {
    EventType::new("work", "v1", "manifestwork", direction, action)
}

/// Whether `ty` is a ManifestWork event (any direction and action).
pub fn is_work(ty: &EventType) -> bool {
    ty.group == "work" && ty.resource == "manifestwork"
}

/// Event type of work specs with the given action (create, update, delete).
pub fn spec_type(action: Action) -> EventType {
    work_type(Direction::Spec, action)
}

/// Event type of work status reports.
pub fn status_type() -> EventType {
    work_type(Direction::Status, Action::UpdateRequest)
}

/// Event type of spec resync requests (agent → hub).
pub fn resync_request_type() -> EventType {
    work_type(Direction::Spec, Action::ResyncRequest)
}

/// Event type of spec resync responses (hub → agent).
pub fn resync_response_type() -> EventType {
    work_type(Direction::Spec, Action::ResyncResponse)
}

/// The stable resource id of work `name` on `cluster` (works live in the cluster's namespace).
pub fn resource_id(cluster: &str, name: &str) -> String {
    crate::ids::resource_id(cluster, WORK_KIND, cluster, name)
}

/// The digest of a `{resourceid: generation}` map, independent of its order: an agent and the
/// hub that hold the same works at the same generations compute the same digest.
pub fn versions_digest<'a>(versions: impl IntoIterator<Item = (&'a str, i64)>) -> String {
    let mut sorted: Vec<(&str, i64)> = versions.into_iter().collect();
    sorted.sort_unstable();
    let mut text = String::with_capacity(sorted.len() * 48);
    for (id, generation) in sorted {
        text.push_str(id);
        text.push('=');
        text.push_str(&generation.to_string());
        text.push('\n');
    }
    crate::ids::status_hash(text.as_bytes())
}

/// The status subject of the work with resource id `resource_id` on `cluster`.
pub fn status_subject(cluster: &str, resource_id: &str) -> String {
    crate::subjects::status(cluster, crate::subjects::KIND_WORK, Some(resource_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subjects::{KIND_WORK, StatusSubject};

    #[test]
    fn work_event_types_follow_the_grammar() {
        assert_eq!(
            spec_type(Action::CreateRequest).to_string(),
            "io.flotilla.work.v1.manifestwork.spec.create_request"
        );
        assert_eq!(
            status_type().to_string(),
            "io.flotilla.work.v1.manifestwork.status.update_request"
        );
        assert_eq!(
            resync_request_type().to_string(),
            "io.flotilla.work.v1.manifestwork.spec.resync_request"
        );
        for t in [status_type(), resync_request_type(), resync_response_type()] {
            assert_eq!(EventType::parse(&t.to_string()).unwrap(), t);
        }
    }

    #[test]
    fn the_versions_digest_ignores_order_and_sees_every_change() {
        let a = versions_digest([("x", 1), ("y", 2)]);
        assert_eq!(a, versions_digest([("y", 2), ("x", 1)]));
        assert_ne!(a, versions_digest([("x", 1), ("y", 3)]));
        assert_ne!(a, versions_digest([("x", 1)]));
        assert_ne!(a, versions_digest([("x", 1), ("y", 2), ("z", 1)]));
        assert_eq!(versions_digest([]), versions_digest(Vec::new()));
    }

    #[test]
    fn work_status_subjects_parse_with_their_resource_id() {
        let rid = resource_id("edge-1", "hello");
        assert_eq!(rid, resource_id("edge-1", "hello"));
        assert_ne!(rid, resource_id("edge-2", "hello"));
        let s = status_subject("edge-1", &rid);
        let p = StatusSubject::parse(&s).unwrap();
        assert_eq!((p.cluster, p.kind), ("edge-1", KIND_WORK));
        assert_eq!(p.resource_id, Some(rid.as_str()));
    }
}
