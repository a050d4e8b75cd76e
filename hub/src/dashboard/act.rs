//! Whether a viewer may take one of the dashboard's actions on one object (issue 48): the API's
//! gate for the method the action is (`Identity::may_call`, which lets a grant-holder past when
//! some grant could allow it), then the object's grants, as the API decides the same call — a
//! set's admin accepts a cluster of its set, a namespace's editor pauses a rollout there, and
//! neither acts across the fence. [`act`] is the decision for an action being taken (an audit
//! line, allowed or refused); [`may`] the same decision for drawing a button (no line).

use super::auth::Viewer;
use crate::grants::{Decision, Target, Verb};
use crate::grpc::guard::{Outcome, audit_line};

/// Decides `viewer`'s action `action` (the audit line's words: "accept cluster a3"), the API
/// method `method` doing `verb` to `target`; writes its audit line. `Err` is the refusal.
pub fn act(
    viewer: &Viewer,
    method: &str,
    verb: Verb,
    target: Target<'_>,
    action: &str,
) -> Result<(), String> {
    let identity = &viewer.identity;
    if let Err(why) = identity.may_call(&viewer.access, method) {
        audit_line(&identity.principal, action, Outcome::Refused(&why));
        return Err(why);
    }
    match viewer.teams.allow(Some(identity), verb, target, action) {
        // Allowed (the line is written), or an open hub.
        Ok(Some(_)) => Ok(()),
        Ok(None) => {
            audit_line(
                &identity.principal,
                action,
                Outcome::Allowed(&"an open hub"),
            );
            Ok(())
        }
        Err(status) => Err(status.message().to_string()),
    }
}

/// [`act`]'s decision without its audit line: whether to offer the action.
pub fn may(
    viewer: &Viewer,
    method: &str,
    verb: Verb,
    target: Target<'_>,
    action: &str,
) -> Result<(), String> {
    let identity = &viewer.identity;
    identity.may_call(&viewer.access, method)?;
    match viewer.teams.decide(identity, verb, &target) {
        None | Some(Decision::Allowed(_)) => Ok(()),
        Some(Decision::Missing(missing)) => Err(missing.refusal(&identity.principal, action)),
    }
}
