//! Add-on agents ↔ hub: subjects and event types.
//!
//! An add-on agent on a spoke talks to the hub on its own subjects,
//! `flotilla.addon.<addon>.<cluster>.<kind>` — in secure mode with its own NATS credentials,
//! which allow exactly `flotilla.addon.<addon>.<cluster>.>` (see `flotilla_auth::permissions`):
//! - `lease`: an `AddOnLeaseRenewal` (event type
//!   `io.flotilla.addon.v1alpha1.lease.status.update_request`) every renew interval; the hub
//!   marks the add-on Available while renewals keep coming (Lease health);
//! - `score`: an `AddOnPlacementScoreReport` (the score event type of [`crate::scores`]) for a
//!   score in the add-on's cluster, which placements then prioritise on.
//!
//! Core NATS, not the status stream: a lost renewal is made good by the next one, and scores
//! carry their own `validUntil`.
//!
//! The cluster agent asks for an add-on agent's credentials on `flotilla.addoncreds.<cluster>`
//! (request/reply, `AddOnCredentialsRequest` → `AddOnCredentialsResponse`); only an installed
//! add-on whose template asks for hub access gets them.

use crate::envelope::{Action, Direction, EventType};
use thiserror::Error;

/// Subject kind of lease renewals.
pub const KIND_LEASE: &str = "lease";
/// Subject kind of score reports.
pub const KIND_SCORE: &str = "score";
/// Every add-on agent subject (the hub's subscription).
pub const ALL: &str = "flotilla.addon.*.*.*";
/// Every add-on credentials request (the hub's subscription).
pub const CREDENTIALS_ALL: &str = "flotilla.addoncreds.*";

/// Subject of `kind` messages of add-on `addon` on `cluster`.
pub fn subject(addon: &str, cluster: &str, kind: &str) -> String {
    format!("flotilla.addon.{addon}.{cluster}.{kind}")
}

/// Every subject of add-on `addon` on `cluster` (its permission).
pub fn all_of(addon: &str, cluster: &str) -> String {
    format!("flotilla.addon.{addon}.{cluster}.>")
}

/// The subject on which `cluster`'s agent asks for add-on credentials.
pub fn credentials(cluster: &str) -> String {
    format!("flotilla.addoncreds.{cluster}")
}

/// Event type of a lease renewal.
pub fn lease_type() -> EventType {
    EventType::new(
        "addon",
        "v1alpha1",
        "lease",
        Direction::Status,
        Action::UpdateRequest,
    )
}

/// Event type of an add-on credentials request (cluster agent → hub).
pub fn credentials_request_type() -> EventType {
    EventType::new(
        "addon",
        "v1alpha1",
        "credentials",
        Direction::Status,
        Action::CreateRequest,
    )
}

/// Event type of the hub's answer to a credentials request.
pub fn credentials_response_type() -> EventType {
    EventType::new(
        "addon",
        "v1alpha1",
        "credentials",
        Direction::Spec,
        Action::UpdateRequest,
    )
}

/// A parsed add-on subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddOnSubject<'a> {
    /// The add-on.
    pub addon: &'a str,
    /// The cluster.
    pub cluster: &'a str,
    /// `lease` or `score`.
    pub kind: &'a str,
}

/// A subject that is not an add-on subject.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("subject {subject:?}: {reason}")]
pub struct AddOnSubjectError {
    /// The subject.
    pub subject: String,
    /// What was wrong.
    pub reason: &'static str,
}

impl<'a> AddOnSubject<'a> {
    /// Parses `flotilla.addon.<addon>.<cluster>.<kind>`.
    pub fn parse(subject: &'a str) -> Result<Self, AddOnSubjectError> {
        let err = |reason| AddOnSubjectError {
            subject: subject.to_string(),
            reason,
        };
        let rest = subject
            .strip_prefix("flotilla.addon.")
            .ok_or_else(|| err("not a flotilla.addon subject"))?;
        let mut parts = rest.split('.');
        let (Some(addon), Some(cluster), Some(kind), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(err("expected flotilla.addon.<addon>.<cluster>.<kind>"));
        };
        if addon.is_empty() || cluster.is_empty() {
            return Err(err("empty add-on or cluster token"));
        }
        Ok(Self {
            addon,
            cluster,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addon_subjects_round_trip() {
        let s = subject("fleet-metrics", "edge-1", KIND_LEASE);
        assert_eq!(s, "flotilla.addon.fleet-metrics.edge-1.lease");
        let p = AddOnSubject::parse(&s).unwrap();
        assert_eq!(
            (p.addon, p.cluster, p.kind),
            ("fleet-metrics", "edge-1", "lease")
        );
        assert_eq!(
            all_of("fleet-metrics", "edge-1"),
            "flotilla.addon.fleet-metrics.edge-1.>"
        );
        assert_eq!(
            lease_type().to_string(),
            "io.flotilla.addon.v1alpha1.lease.status.update_request"
        );
        assert!(EventType::parse(&lease_type().to_string()).is_ok());
    }

    #[test]
    fn malformed_addon_subjects_are_refused() {
        for s in [
            "flotilla.addon.a.b",
            "flotilla.addon.a.b.c.d",
            "flotilla.status.a.b.c",
            "flotilla.addon..b.lease",
        ] {
            assert!(AddOnSubject::parse(s).is_err(), "{s}");
        }
    }
}
