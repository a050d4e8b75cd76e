//! The forwarded call and its answer on the wire (pure): sealed with the shared sealing key,
//! the caller the forwarding hub vouches for, and the answer sealed to the asking hub.

use super::*;
use crate::grants::{Principal, Via};

/// The forwarded call `inner` on the wire: sealed where the hubs share the sealing key; in
/// clear only without a caller (never a token's identity in clear).
pub fn seal_call(seal: &HubSeal, inner: InnerCall) -> Result<ForwardedCall, Status> {
    let inner = if seal.shared() {
        let sealed = seal
            .seal_call(&inner.encode_to_vec())
            .map_err(|e| Status::internal(format!("sealing the forwarded call: {e}")))?;
        forwarded_call::Inner::Sealed(sealed)
    } else if inner.caller.is_some() {
        return Err(Status::failed_precondition(
            "this call belongs to the hub holding the controllers, and this hub has no sealing key \
             shared with it (the secure directory's keys/sealing.xk or --sealing-key-file): it \
             does not send a caller's identity between hubs in clear; give every hub the same \
             sealing key, or make the call on the hub holding the controllers",
        ));
    } else {
        forwarded_call::Inner::Clear(inner)
    };
    Ok(ForwardedCall {
        version: FORWARD_VERSION,
        inner: Some(inner),
        ..ForwardedCall::default()
    })
}

/// The call inside a forwarded call's payload, opened with `seal` and admitted by `guard` at
/// `now` (each call id once, none past its deadline).
pub fn open_call(
    seal: &HubSeal,
    guard: &std::sync::Mutex<ReplayGuard>,
    payload: Bytes,
    now: SystemTime,
) -> Result<InnerCall, Status> {
    let call = ForwardedCall::decode(payload)
        .map_err(|e| Status::invalid_argument(format!("not a forwarded call: {e}")))?;
    if call.version != FORWARD_VERSION {
        return Err(Status::unimplemented(format!(
            "forwarded call version {} is not known to this hub (it speaks {FORWARD_VERSION}); \
             upgrade the hubs to one version",
            call.version
        )));
    }
    let inner = match call.inner {
        Some(forwarded_call::Inner::Sealed(sealed)) => {
            let plain = seal.open_call(&sealed).map_err(|e| {
                Status::unauthenticated(format!("the forwarded call does not open: {e}"))
            })?;
            InnerCall::decode(plain.as_slice()).map_err(|e| {
                Status::invalid_argument(format!("the sealed forwarded call is no InnerCall: {e}"))
            })?
        }
        Some(forwarded_call::Inner::Clear(_)) if seal.shared() => {
            return Err(Status::unauthenticated(
                "this hub takes forwarded calls only sealed with the sealing key the hubs share, \
                 and this one came in clear: give the forwarding hub the same keys/sealing.xk or \
                 --sealing-key-file",
            ));
        }
        Some(forwarded_call::Inner::Clear(inner)) => inner,
        None => {
            return Err(Status::invalid_argument(
                "the forwarded call carries no call, sealed or clear",
            ));
        }
    };
    let id: [u8; 16] = inner.call_id.as_slice().try_into().map_err(|_| {
        Status::invalid_argument(format!(
            "the forwarded call's id is {} bytes, not 16",
            inner.call_id.len()
        ))
    })?;
    let issued = SystemTime::UNIX_EPOCH
        + Duration::from_millis(u64::try_from(inner.issued_unix_millis).unwrap_or_default());
    let deadline = call_deadline(&inner.headers);
    guard
        .lock()
        .expect("replay guard lock")
        .admit(id, issued, deadline, now)
        .map_err(|r| Status::failed_precondition(format!("forwarded call refused: {r}")))?;
    Ok(inner)
}

/// A call's deadline: its `grpc-timeout`, at most [`MAX_CALL_TIME`].
fn call_deadline(headers: &[ForwardedHeader]) -> Duration {
    headers
        .iter()
        .filter(|h| h.name == "grpc-timeout")
        .filter_map(|h| {
            std::str::from_utf8(&h.value)
                .ok()
                .and_then(parse_grpc_timeout)
        })
        .fold(MAX_CALL_TIME, Duration::min)
}

/// `reply` sealed to `reply_xkey` by this hub.
pub(super) fn seal_reply(
    seal: &HubSeal,
    reply: &ForwardedReply,
    reply_xkey: &str,
) -> ForwardedReply {
    match seal.seal_answer(Purpose::Answer, &reply.encode_to_vec(), reply_xkey) {
        Ok(sealed) => ForwardedReply {
            version: FORWARD_VERSION,
            sealed: Some(SealedAnswer {
                sealed,
                sender_xkey: seal.public().to_string(),
            }),
            ..ForwardedReply::default()
        },
        Err(e) => status_reply(Status::internal(format!(
            "sealing the answer to the forwarded call: {e}"
        ))),
    }
}

/// The answer inside a forwarded reply, opened with the call's `reply_key`. In clear only a
/// holder's refusal to open the call is taken (a trailers-only error, nothing else).
pub fn open_reply(
    seal: &HubSeal,
    reply_key: &ReplyKey,
    reply: ForwardedReply,
) -> Result<ForwardedReply, Status> {
    if reply.version != FORWARD_VERSION {
        return Err(Status::unavailable(format!(
            "the hub holding the controllers answered in forwarding version {} (this hub speaks \
             {FORWARD_VERSION}); upgrade the hubs to one version",
            reply.version
        )));
    }
    let Some(sealed) = reply.sealed else {
        let refusal = reply.body.is_empty()
            && reply.trailers.is_empty()
            && reply
                .headers
                .iter()
                .any(|h| h.name == "grpc-status" && h.value != b"0");
        if refusal {
            return Ok(reply);
        }
        return Err(Status::unavailable(
            "the hub holding the controllers answered in clear, not sealed to this call: refused; \
             the outcome is unknown",
        ));
    };
    let plain = reply_key
        .open(seal, Purpose::Answer, &sealed.sealed, &sealed.sender_xkey)
        .map_err(|e| {
            Status::unavailable(format!(
                "the answer of the hub holding the controllers does not open ({e}): the outcome \
                 is unknown"
            ))
        })?;
    let inner = ForwardedReply::decode(plain.as_slice()).map_err(|e| {
        Status::internal(format!(
            "the hub holding the controllers sealed an answer that is not a ForwardedReply: {e}"
        ))
    })?;
    if inner.sealed.is_some() {
        return Err(Status::internal(
            "the hub holding the controllers sealed an answer inside its answer",
        ));
    }
    Ok(ForwardedReply {
        version: FORWARD_VERSION,
        ..inner
    })
}

/// How many groups a forwarded caller may carry, and how long each may be: the bounds the
/// OIDC claims and the token file hold them to.
const MAX_GROUPS: usize = 1_000;
const MAX_GROUP_LEN: usize = 256;

/// `identity` on the wire: everything the holder's grant checks use — its user, how it was
/// authenticated, its groups, and a CSV caller's own role and execute-as grants (never the
/// role this hub's grants file gave it: the holder decides by its own grants).
pub(super) fn identity_to_wire(identity: &Identity) -> ForwardedIdentity {
    let principal = &identity.principal;
    let mut wire = ForwardedIdentity {
        name: principal.user.to_string(),
        role: identity
            .legacy
            .as_ref()
            .map_or(Role::Member, |l| l.role)
            .to_string(),
        execute_as: identity
            .execute_as()
            .iter()
            .map(ToString::to_string)
            .collect(),
        groups: principal.groups.iter().map(ToString::to_string).collect(),
        ..ForwardedIdentity::default()
    };
    let mut via = &principal.via;
    while let Via::Vouched { first, .. } = via {
        via = first;
    }
    match via {
        Via::Token | Via::Vouched { .. } => wire.via = VIA_TOKEN.into(),
        Via::Oidc { issuer, expires } => {
            wire.via = VIA_OIDC.into();
            wire.issuer = issuer.to_string();
            wire.expires_unix = *expires;
        }
        Via::Open => wire.via = "open".into(),
    }
    wire
}

/// `ForwardedIdentity::via` of a token file's caller (an empty value means the same).
const VIA_TOKEN: &str = "token";
/// `ForwardedIdentity::via` of an OIDC issuer's caller.
const VIA_OIDC: &str = "oidc";

/// The identity a forwarded call vouches for, as the forwarding hub authenticated it: a token
/// file's caller with its CSV role (the holder knows it again by name, [`crate::grpc::auth::Tokens::vouched`]),
/// or an OIDC caller with its groups and no CSV role.
pub(super) fn identity_from_wire(wire: ForwardedIdentity) -> Result<Identity, Status> {
    let bad = |what: String| Status::invalid_argument(format!("the forwarded caller's {what}"));
    if wire.name.is_empty() {
        return Err(bad("name is empty".into()));
    }
    if wire.groups.len() > MAX_GROUPS {
        return Err(bad(format!(
            "groups number {}, more than {MAX_GROUPS}",
            wire.groups.len()
        )));
    }
    if let Some(g) = wire
        .groups
        .iter()
        .find(|g| g.is_empty() || g.len() > MAX_GROUP_LEN || g.chars().any(char::is_control))
    {
        return Err(bad(format!(
            "group {g:?} is empty, longer than {MAX_GROUP_LEN} bytes or has control characters"
        )));
    }
    let Some(role) = Role::parse(&wire.role) else {
        return Err(bad(format!(
            "role {:?} is not admin, deployer, read-only or member",
            wire.role
        )));
    };
    let execute_as = wire
        .execute_as
        .iter()
        .map(|g| ExecuteAs::parse(g))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    match wire.via.as_str() {
        "" | VIA_TOKEN => {
            let mut identity = Identity::token(&wire.name, role, execute_as);
            identity.principal = identity.principal.with_groups(&wire.groups);
            Ok(identity)
        }
        VIA_OIDC => {
            if role != Role::Member || !execute_as.is_empty() {
                return Err(bad(format!(
                    "OIDC identity {:?} carries a token file's role {role} or execute-as grants",
                    wire.name
                )));
            }
            if wire.issuer.is_empty() {
                return Err(bad(format!(
                    "OIDC identity {:?} names no issuer",
                    wire.name
                )));
            }
            let via = Via::Oidc {
                issuer: wire.issuer.as_str().into(),
                expires: wire.expires_unix,
            };
            Ok(Identity {
                principal: Principal::user(&wire.name, via).with_groups(&wire.groups),
                legacy: None,
                scope: Default::default(),
            })
        }
        other => Err(bad(format!(
            "authentication {other:?} is neither {VIA_TOKEN:?} nor {VIA_OIDC:?}"
        ))),
    }
}

pub(super) fn unix_millis(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
