//! The checks a registration request passes before it reaches its cluster actor: the event's
//! type and clustername against the subject, the request against the event, the request's own
//! validity and, in secure mode, who sent it. Pure: the router counts, logs and answers what
//! these refuse.

use crate::cluster::rules;
use flotilla_api::v1::RegistrationRequest;
use flotilla_bus::envelope::{Event, types};

/// Why a registration is refused before any actor sees it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// Bad input, counted as a rejected event under `reason`.
    Rejected {
        /// The metrics label (`unknown_type`, `clustername_mismatch`, `invalid_request`, …).
        reason: String,
        /// What the agent is told.
        why: String,
    },
    /// The requester is not an agent of the agents' account (secure mode), counted as a
    /// refused registration.
    Identity(String),
}

fn rejected(reason: &str, why: String) -> Refused {
    Refused::Rejected {
        reason: reason.to_string(),
        why,
    }
}

/// The request a registration event on `subject` carries and, in secure mode (an
/// `agents_account`), the NATS user that sent it; or why it is refused.
pub(super) fn registration(
    subject: &str,
    headers: Option<&async_nats::HeaderMap>,
    event: &Event,
    subject_cluster: &str,
    agents_account: Option<&str>,
) -> Result<(RegistrationRequest, Option<String>), Refused> {
    if event.event_type.to_string() != types::registration_request().to_string() {
        return Err(rejected(
            "unknown_type",
            format!("type {} is not accepted on {subject}", event.event_type),
        ));
    }
    if event.cluster != subject_cluster {
        return Err(rejected(
            "clustername_mismatch",
            format!(
                "clustername {:?} does not match subject cluster {subject_cluster:?}",
                event.cluster
            ),
        ));
    }
    let request: RegistrationRequest = event
        .decode_data("RegistrationRequest")
        .map_err(|e| rejected(&e.reason(), e.to_string()))?;
    if request.cluster_name != event.cluster {
        return Err(rejected(
            "clustername_mismatch",
            format!(
                "clusterName {:?} does not match the event's clustername {:?}",
                request.cluster_name, event.cluster
            ),
        ));
    }
    rules::validate_registration(&request).map_err(|why| rejected("invalid_request", why))?;
    let credential = requester(headers, agents_account).map_err(Refused::Identity)?;
    if credential.is_some() && !flotilla_auth::issuer::is_user_key(&request.agent_public_key) {
        return Err(rejected(
            "invalid_request",
            format!(
                "agentPublicKey {:?} is not a NATS user key (U…)",
                request.agent_public_key
            ),
        ));
    }
    Ok((request, credential))
}

/// The NATS user that sent a request through the agents' account, as the server attests it in
/// `Nats-Request-Info` — secure mode only (`Ok(None)` in plain mode, where anyone could write
/// the header). The server replaces a requester's copy of the header with its own, but servers
/// before 2.14 replace only the first copy and append theirs: a request carrying the header
/// more than once is a forgery, and one without it did not come through the import.
fn requester(
    headers: Option<&async_nats::HeaderMap>,
    agents_account: Option<&str>,
) -> Result<Option<String>, String> {
    let Some(agents) = agents_account else {
        return Ok(None);
    };
    let values: Vec<_> = headers
        .map(|h| h.get_all(REQUEST_INFO).collect())
        .unwrap_or_default();
    let [value] = values.as_slice() else {
        return Err(format!(
            "the request carries {} {REQUEST_INFO} headers where the server sets exactly one",
            values.len()
        ));
    };
    let info: serde_json::Value = serde_json::from_str(value.as_str())
        .map_err(|e| format!("{REQUEST_INFO} is not JSON: {e}"))?;
    match (info["acc"].as_str(), info["user"].as_str()) {
        (Some(acc), Some(user)) if acc == agents && !user.is_empty() => Ok(Some(user.to_string())),
        _ => Err(format!(
            "{REQUEST_INFO} names no user of the agents' account"
        )),
    }
}

/// The header a service import with `share` adds: the requesting account and user.
const REQUEST_INFO: &str = "Nats-Request-Info";

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::RegistrationRequest;

    const SUBJECT: &str = "flotilla.register.c1";

    fn event(cluster: &str, request: &RegistrationRequest) -> Event {
        Event::new(types::registration_request(), "agent", cluster, request)
    }

    fn request(name: &str) -> RegistrationRequest {
        RegistrationRequest {
            cluster_name: name.into(),
            ..Default::default()
        }
    }

    fn reason(r: Result<(RegistrationRequest, Option<String>), Refused>) -> String {
        match r.unwrap_err() {
            Refused::Rejected { reason, .. } => reason,
            Refused::Identity(why) => format!("identity: {why}"),
        }
    }

    #[test]
    fn a_well_formed_plain_mode_registration_passes_without_a_credential() {
        let (req, credential) =
            registration(SUBJECT, None, &event("c1", &request("c1")), "c1", None).unwrap();
        assert_eq!(req.cluster_name, "c1");
        assert_eq!(credential, None);
    }

    #[test]
    fn names_that_disagree_with_the_subject_or_the_event_are_rejected() {
        let other_subject = registration(SUBJECT, None, &event("c2", &request("c2")), "c1", None);
        assert_eq!(reason(other_subject), "clustername_mismatch");
        let other_request = registration(SUBJECT, None, &event("c1", &request("c2")), "c1", None);
        assert_eq!(reason(other_request), "clustername_mismatch");
    }

    #[test]
    fn another_event_type_or_an_invalid_request_is_rejected() {
        let mut ev = event("c1", &request("c1"));
        ev.event_type = types::lease_renewal();
        assert_eq!(
            reason(registration(SUBJECT, None, &ev, "c1", None)),
            "unknown_type"
        );
        let bad = registration(SUBJECT, None, &event("C_1", &request("C_1")), "C_1", None);
        assert_eq!(reason(bad), "invalid_request");
    }

    #[test]
    fn secure_mode_wants_exactly_one_request_info_naming_an_agent_user() {
        let ev = event("c1", &request("c1"));
        let missing = registration(SUBJECT, None, &ev, "c1", Some("AGENTS"));
        assert!(reason(missing).starts_with("identity: "));
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(REQUEST_INFO, r#"{"acc":"AGENTS","user":"UABC"}"#);
        headers.append(REQUEST_INFO, r#"{"acc":"AGENTS","user":"UABC"}"#);
        let twice = registration(SUBJECT, Some(&headers), &ev, "c1", Some("AGENTS"));
        assert!(reason(twice).starts_with("identity: "));
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(REQUEST_INFO, r#"{"acc":"OTHER","user":"UABC"}"#);
        let elsewhere = registration(SUBJECT, Some(&headers), &ev, "c1", Some("AGENTS"));
        assert!(reason(elsewhere).starts_with("identity: "));
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(REQUEST_INFO, r#"{"acc":"AGENTS","user":"UABC"}"#);
        // A sender of the agents' account whose request names no user key.
        let not_a_key = registration(SUBJECT, Some(&headers), &ev, "c1", Some("AGENTS"));
        assert_eq!(reason(not_a_key), "invalid_request");
    }
}
