//! The agent version on a cluster (issue 49 §6.2): the version a trusted registration reports
//! (`status.version.agent`) and the Flotilla condition `AgentVersionAccepted` — True for a
//! version the hub accepts, False with the refusal's text for one it refused, so `describe
//! cluster` says why an accepted cluster whose agent was up- or downgraded past the hub's
//! window goes Unknown.

use flotilla_api::meta;
use flotilla_api::v1::{ManagedCluster, ManagedClusterVersion};

/// Longest agent version recorded: the router lets any pre-release suffix through, and a
/// trusted agent's text should not grow its cluster's record.
const MAX_AGENT_VERSION: usize = 64;

/// Longest refusal kept in the condition's message (a refusal quotes the version it could not
/// read).
const MAX_REFUSAL: usize = 512;

/// Records the agent version a trusted registration reports (`status.version.agent`) and, for
/// a version stated, `AgentVersionAccepted=True` (the router refuses versions outside the
/// hub's window before any actor sees them); returns whether anything changed.
pub fn record_agent_version(c: &mut ManagedCluster, agent_version: &str) -> bool {
    let reported = bounded(agent_version, MAX_AGENT_VERSION);
    let mut changed = set_agent_version(c, reported);
    if !reported.is_empty() {
        changed |= agent_version_condition(
            c,
            "True",
            "AgentVersionAccepted",
            &format!("this hub accepts agent version {reported}"),
        );
    }
    changed
}

/// Records a trusted agent's version that the hub refused (`why`): `status.version.agent` and
/// `AgentVersionAccepted=False` with the refusal's text; returns whether anything changed.
pub fn record_refused_version(c: &mut ManagedCluster, agent_version: &str, why: &str) -> bool {
    let reported = bounded(agent_version, MAX_AGENT_VERSION);
    let why = bounded(why, MAX_REFUSAL);
    set_agent_version(c, reported) | agent_version_condition(c, "False", "AgentVersionRefused", why)
}

/// `text` cut to `max` bytes (on a character boundary).
fn bounded(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn set_agent_version(c: &mut ManagedCluster, reported: &str) -> bool {
    let st = c.status.get_or_insert_with(Default::default);
    let version = st
        .version
        .get_or_insert_with(ManagedClusterVersion::default);
    if version.agent == reported {
        return false;
    }
    version.agent = reported.to_string();
    true
}

fn agent_version_condition(
    c: &mut ManagedCluster,
    status: &str,
    reason: &str,
    message: &str,
) -> bool {
    let st = c.status.get_or_insert_with(Default::default);
    meta::set_condition(
        &mut st.conditions,
        meta::COND_AGENT_VERSION_ACCEPTED,
        status,
        reason,
        message,
    )
}
