//! The forwarded call and its answer on the wire (pure): sealed with the shared sealing key,
//! the caller the forwarding hub vouches for, and the answer sealed to the asking hub.

use super::*;

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

/// `identity` on the wire.
pub(super) fn identity_to_wire(identity: &Identity) -> ForwardedIdentity {
    ForwardedIdentity {
        name: identity.name().to_string(),
        role: identity.role().to_string(),
        execute_as: identity
            .execute_as()
            .iter()
            .map(ToString::to_string)
            .collect(),
    }
}

/// The identity a forwarded call vouches for.
pub(super) fn identity_from_wire(wire: ForwardedIdentity) -> Result<Identity, Status> {
    let Some(role) = Role::parse(&wire.role) else {
        return Err(Status::invalid_argument(format!(
            "the forwarded caller's role {:?} is not admin, deployer, read-only or member",
            wire.role
        )));
    };
    let execute_as = wire
        .execute_as
        .iter()
        .map(|g| ExecuteAs::parse(g))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Status::invalid_argument(format!("the forwarded caller's {e}")))?;
    Ok(Identity::token(&wire.name, role, execute_as))
}

pub(super) fn unix_millis(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
