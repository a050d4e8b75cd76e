//! Unit tests of the forwarding layer: wire, headers, deadlines, sealing and refusals.

use super::*;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

fn value<'a>(wire: &'a [ForwardedHeader], name: &str) -> Option<&'a [u8]> {
    wire.iter()
        .find(|h| h.name == name)
        .map(|h| h.value.as_slice())
}

#[test]
fn grpc_timeouts_parse_in_every_unit_and_format_back() {
    for (text, want) in [
        ("1H", Duration::from_secs(3600)),
        ("2M", Duration::from_secs(120)),
        ("30S", Duration::from_secs(30)),
        ("250m", Duration::from_millis(250)),
        ("7u", Duration::from_micros(7)),
        ("99999999n", Duration::from_nanos(99_999_999)),
    ] {
        assert_eq!(parse_grpc_timeout(text), Some(want), "{text}");
    }
    for bad in ["", "m", "10", "10x", "123456789m", "-1S", "1.5S", "é"] {
        assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
    }
    assert_eq!(format_grpc_timeout(Duration::from_secs(30)), "30000m");
    // Rounded up: a deadline is never shortened to zero on the way.
    assert_eq!(format_grpc_timeout(Duration::from_micros(1)), "1m");
    let long = Duration::from_secs(200_000);
    assert_eq!(format_grpc_timeout(long), "200000S");
    for d in [Duration::from_millis(1), Duration::from_secs(30), long] {
        assert_eq!(parse_grpc_timeout(&format_grpc_timeout(d)), Some(d));
    }
}

#[test]
fn only_the_forwarded_headers_travel_and_the_deadline_is_the_edges() {
    let incoming = headers(&[
        ("authorization", "Bearer secret-token-0123"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("grpc-timeout", "10S"),
        ("x-request-id", "req-1"),
        ("x-flotilla-caller", "admin"),
        ("user-agent", "tonic"),
        ("cookie", "a=b"),
    ]);
    let wire = forwarded_headers(&incoming, Duration::from_secs(2));
    // The caller's token never leaves the edge: the call vouches for its identity instead.
    assert_eq!(value(&wire, "authorization"), None);
    assert_eq!(value(&wire, "x-request-id"), Some(&b"req-1"[..]));
    assert_eq!(value(&wire, "grpc-timeout"), Some(&b"2000m"[..]));
    assert_eq!(wire.iter().filter(|h| h.name == "grpc-timeout").count(), 1);
    for dropped in ["x-flotilla-caller", "user-agent", "cookie"] {
        assert_eq!(value(&wire, dropped), None, "{dropped}");
    }
}

fn shared_seal() -> HubSeal {
    let dir = tempfile::tempdir().unwrap();
    let key = crate::key::SealingKey::from_file(&dir.path().join("s.xk")).unwrap();
    HubSeal::new(key)
}

fn alice() -> Identity {
    Identity::token(
        "alice",
        Role::Deployer,
        vec![ExecuteAs::parse("apps/*").unwrap()],
    )
}

fn inner(caller: Option<&Identity>) -> InnerCall {
    InnerCall {
        call_id: uuid::Uuid::new_v4().into_bytes().to_vec(),
        issued_unix_millis: unix_millis(SystemTime::now()),
        reply_xkey: ReplyKey::new().public().to_string(),
        caller: caller.map(identity_to_wire),
        path: "/flotilla.v1.PlacementService/ApplyPlacement".into(),
        headers: vec![
            ForwardedHeader {
                name: "authorization".into(),
                value: b"Bearer t".to_vec(),
            },
            ForwardedHeader {
                name: "grpc-timeout".into(),
                value: b"1500m".to_vec(),
            },
            ForwardedHeader {
                name: "x-forged-identity".into(),
                value: b"admin".to_vec(),
            },
        ],
        body: vec![0, 0, 0, 0, 0],
    }
}

fn wire(call: &ForwardedCall) -> Bytes {
    Bytes::from(call.encode_to_vec())
}

#[test]
fn a_holder_takes_only_the_forwarded_headers_and_honours_the_deadline() {
    let call = inner(Some(&alice()));
    let (req, deadline) = request(call.clone(), true).unwrap();
    assert_eq!(req.uri().path(), call.path);
    assert_eq!(req.method(), http::Method::POST);
    // Neither a token nor a forged header from the wire reaches the service.
    assert!(req.headers().get("authorization").is_none());
    assert!(req.headers().get("x-forged-identity").is_none());
    assert_eq!(deadline, Duration::from_millis(1500));
    assert_eq!(req.extensions().get::<Vouched>(), Some(&Vouched(alice())));
    // A call that was not sealed vouches for nobody.
    let (req, _) = request(call.clone(), false).unwrap();
    assert!(req.extensions().get::<Vouched>().is_none());

    let relative = InnerCall {
        path: "flotilla.v1.X/Y".into(),
        ..call.clone()
    };
    let e = request(relative, true).unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let mut bad_role = call;
    bad_role.caller.as_mut().unwrap().role = "root".into();
    let e = request(bad_role, true).unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
}

#[test]
fn a_sealed_call_opens_once_on_a_hub_sharing_the_key_and_nowhere_else() {
    let seal = shared_seal();
    let guard = std::sync::Mutex::new(ReplayGuard::default());
    let call = inner(Some(&alice()));
    let sealed = wire(&seal_call(&seal, call.clone()).unwrap());
    // Nothing of the call is readable on the wire.
    for secret in [&b"alice"[..], b"apps/*", b"ApplyPlacement"] {
        assert!(!sealed.windows(secret.len()).any(|w| w == secret));
    }
    let opened = open_call(&seal, &guard, sealed.clone(), SystemTime::now()).unwrap();
    assert_eq!(opened, call);
    // The same box again is a replay.
    let e = open_call(&seal, &guard, sealed.clone(), SystemTime::now()).unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert!(e.message().contains("replay"), "{}", e.message());
    // A fresh guard (another holder after a takeover) still refuses it once stale.
    let later = SystemTime::now() + Duration::from_millis(1500) + crate::sealed::SLACK * 2;
    let fresh = std::sync::Mutex::new(ReplayGuard::default());
    let e = open_call(&seal, &fresh, sealed.clone(), later).unwrap_err();
    assert!(e.message().contains("stale"), "{}", e.message());
    // Another control plane's key does not open it.
    let e = open_call(&shared_seal(), &fresh, sealed, SystemTime::now()).unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    assert!(e.message().contains("do not share"), "{}", e.message());
    // A call in clear is refused where the hubs share a key.
    let alone = HubSeal::new(crate::key::SealingKey::ephemeral());
    let clear = wire(&seal_call(&alone, inner(None)).unwrap());
    let e = open_call(&seal, &fresh, clear.clone(), SystemTime::now()).unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    // ... and taken between hubs without one.
    assert!(open_call(&alone, &fresh, clear, SystemTime::now()).is_ok());
    // Without a shared key, a caller's identity is never sent.
    let e = seal_call(&alone, inner(Some(&alice()))).unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);

    // Versions: the other version fails clearly.
    let mut older = seal_call(&seal, inner(None)).unwrap();
    older.version = 1;
    let e = open_call(&seal, &fresh, wire(&older), SystemTime::now()).unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unimplemented);
    assert!(e.message().contains("version 1"), "{}", e.message());
    let e = open_call(
        &seal,
        &fresh,
        Bytes::from_static(b"\xff\xff not protobuf"),
        SystemTime::now(),
    )
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
}

#[test]
fn an_answer_is_taken_only_sealed_to_the_call_except_a_refusal() {
    let seal = shared_seal();
    let key = ReplyKey::new();
    let answer = ForwardedReply {
        version: FORWARD_VERSION,
        http_status: 200,
        body: b"a ServiceAccount token".to_vec(),
        ..ForwardedReply::default()
    };
    let sealed = seal_reply(&seal, &answer, key.public());
    assert!(sealed.body.is_empty() && sealed.sealed.is_some());
    let wire_bytes = sealed.encode_to_vec();
    assert!(!wire_bytes.windows(5).any(|w| w == b"token"));
    assert_eq!(open_reply(&seal, &key, sealed.clone()).unwrap(), answer);
    // Another call's key does not open it.
    let e = open_reply(&seal, &ReplyKey::new(), sealed).unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
    // An answer in clear is refused, unless it is a bare refusal.
    let e = open_reply(&seal, &key, answer).unwrap_err();
    assert!(e.message().contains("in clear"), "{}", e.message());
    let refusal = status_reply(Status::unauthenticated("does not open"));
    assert!(open_reply(&seal, &key, refusal).is_ok());
}

#[tokio::test]
async fn answers_are_rebuilt_with_their_body_and_trailers() {
    let reply = ForwardedReply {
        version: FORWARD_VERSION,
        http_status: 200,
        headers: wire_headers(&headers(&[
            ("content-type", "application/grpc"),
            ("x-served-by", "hub-b"),
            ("connection", "close"),
        ])),
        body: vec![0, 0, 0, 0, 1, 42],
        trailers: wire_headers(&headers(&[("grpc-status", "0"), ("x-count", "3")])),
        sealed: None,
    };
    let response = response(reply).unwrap();
    assert_eq!(response.status(), http::StatusCode::OK);
    assert_eq!(response.headers()["x-served-by"], "hub-b");
    assert!(response.headers().get("connection").is_none());
    let collected = response.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap();
    assert_eq!(trailers["grpc-status"], "0");
    assert_eq!(trailers["x-count"], "3");
    assert_eq!(&collected.to_bytes()[..], &[0, 0, 0, 0, 1, 42]);
}

#[tokio::test]
async fn a_trailers_only_status_survives_the_round_trip() {
    let reply = status_reply(Status::not_found("placement default/web not found"));
    let wire = ForwardedReply::decode(Bytes::from(reply.encode_to_vec())).unwrap();
    let response = response(wire).unwrap();
    let status = Status::from_header_map(response.headers()).unwrap();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(status.message(), "placement default/web not found");
    let collected = response.into_body().collect().await.unwrap();
    assert!(collected.trailers().is_none());
    assert!(collected.to_bytes().is_empty());

    let e = self::response(ForwardedReply {
        version: 9,
        ..status_reply(Status::ok(""))
    })
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
}

#[tokio::test]
async fn a_holder_collects_the_whole_answer_of_its_service() {
    let body =
        Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])).with_trailers(std::future::ready(Some(
            Ok(headers(&[("grpc-status", "5"), ("grpc-message", "gone")])),
        )));
    let mut response = http::Response::new(body);
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    let reply = collect(response).await.unwrap();
    assert_eq!(reply.http_status, 200);
    assert_eq!(
        value(&reply.headers, "content-type"),
        Some(&b"application/grpc"[..])
    );
    assert_eq!(value(&reply.trailers, "grpc-status"), Some(&b"5"[..]));
    assert_eq!(value(&reply.trailers, "grpc-message"), Some(&b"gone"[..]));
    assert_eq!(reply.body, vec![0, 0, 0, 0, 0]);
}

#[tokio::test]
async fn request_bodies_over_the_limit_are_refused() {
    let body = Body::new(Full::new(Bytes::from(vec![7u8; 11])));
    assert_eq!(read_body(body, 11).await.unwrap().len(), 11);
    let body = Body::new(Full::new(Bytes::from(vec![7u8; 12])));
    let e = read_body(body, 11).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::ResourceExhausted);
}

#[test]
fn only_inboxes_are_answered() {
    let check = |s: &str| answerable(Some(&async_nats::Subject::from(s)));
    for ok in ["_INBOX_hub.abc.def", "_INBOX.xyz.1"] {
        assert!(check(ok).is_some(), "{ok}");
    }
    for bad in [
        "$KV.clusters.edge-1",
        "$JS.API.STREAM.PURGE.KV_works",
        "flotilla.spec.edge-1",
        "_INBOX.",
        "_INBOX.>",
        "_INBOX.*.x",
        "_INBOX..x",
        "_INBOX_bootstrap.x",
        "_R_.abc",
        "",
    ] {
        assert!(check(bad).is_none(), "{bad}");
    }
    assert!(answerable(None).is_none());
}

#[test]
fn retries_wait_100ms_doubling_to_one_second() {
    let delays: Vec<u64> = retry_delays()
        .take(7)
        .map(|d| d.as_millis() as u64)
        .collect();
    assert_eq!(delays, [100, 200, 400, 800, 1000, 1000, 1000]);
}

#[test]
fn refusals_are_counted_by_reason() {
    let m = ForwardMetrics::default();
    for status in [
        Status::unauthenticated("does not open"),
        Status::failed_precondition("replay"),
        Status::failed_precondition("stale"),
        Status::unimplemented("version 1"),
        Status::invalid_argument("no call"),
    ] {
        m.count_refusal(&status);
    }
    let count = |reason| m.refused.get_or_create(&RefusedLabels { reason }).get();
    assert_eq!(count("unopened"), 1);
    assert_eq!(count("replayed_or_stale"), 2);
    assert_eq!(count("version"), 1);
    assert_eq!(count("invalid"), 1);
}

#[test]
fn watches_are_told_apart_by_their_method() {
    assert!(is_watch("/flotilla.v1.PlacementService/WatchPlacements"));
    assert!(is_watch("/flotilla.v1.WorkService/WatchWorks"));
    assert!(!is_watch("/flotilla.v1.PlacementService/ApplyPlacement"));
    assert!(!is_watch("/flotilla.v1.Watchers/List"));
    assert!(!is_watch("Watch"));
}

#[test]
fn a_forwarded_identity_carries_how_it_was_authenticated_its_groups_and_only_its_own_role() {
    use crate::grants::file::{Builder, user};
    use crate::grants::{FleetRole, Principal, Via};
    // Review r3 §1: an OIDC caller keeps its via, issuer, expiry and groups across hubs.
    let oidc = Identity {
        principal: Principal::user(
            "https://idp#ana",
            Via::Oidc {
                issuer: "https://idp".into(),
                expires: 1_900_000_000,
            },
        )
        .with_groups(["team-a-sre", "team-a-dev"]),
        legacy: None,
        scope: Default::default(),
    };
    let wire = identity_to_wire(&oidc);
    assert_eq!((wire.via.as_str(), wire.role.as_str()), ("oidc", "member"));
    assert_eq!(wire.groups, ["team-a-sre", "team-a-dev"]);
    assert_eq!(identity_from_wire(wire.clone()).unwrap(), oidc);
    // A CSV member's groups travel too.
    let mut carol = Identity::token("carol", Role::Member, Vec::new());
    carol.principal = carol.principal.with_groups(["team-b"]);
    assert_eq!(identity_from_wire(identity_to_wire(&carol)).unwrap(), carol);
    // A fleet role the edge's grants file gave a CSV caller is not sent as its token role: the
    // holder decides by its own grants.
    let grants = Builder::default()
        .fleet(FleetRole::Admin, user("bob"))
        .build();
    let bob = Identity::token("bob", Role::ReadOnly, Vec::new()).under(&grants);
    assert_eq!(bob.role(), Role::Admin);
    let wire_bob = identity_to_wire(&bob);
    assert_eq!(
        (wire_bob.via.as_str(), wire_bob.role.as_str()),
        ("token", "read-only")
    );
    assert_eq!(
        identity_from_wire(wire_bob).unwrap(),
        Identity::token("bob", Role::ReadOnly, Vec::new())
    );
    // What an older hub sends (no via) is a token's caller.
    let old = ForwardedIdentity {
        name: "alice".into(),
        role: "deployer".into(),
        execute_as: vec!["apps/*".into()],
        ..ForwardedIdentity::default()
    };
    assert_eq!(identity_from_wire(old).unwrap(), alice());

    let refused = |wire: ForwardedIdentity, want: &str| {
        let e = identity_from_wire(wire).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message().contains(want),
            "want {want:?} in {}",
            e.message()
        );
    };
    refused(
        ForwardedIdentity {
            via: "root".into(),
            ..wire.clone()
        },
        "authentication \"root\" is neither",
    );
    refused(
        ForwardedIdentity {
            role: "admin".into(),
            ..wire.clone()
        },
        "carries a token file's role admin",
    );
    refused(
        ForwardedIdentity {
            issuer: String::new(),
            ..wire.clone()
        },
        "names no issuer",
    );
    refused(
        ForwardedIdentity {
            groups: vec!["a\nb".into()],
            ..wire.clone()
        },
        "control characters",
    );
    refused(
        ForwardedIdentity {
            groups: vec!["g".into(); 1_001],
            ..wire.clone()
        },
        "more than 1000",
    );
    refused(
        ForwardedIdentity {
            name: String::new(),
            ..wire
        },
        "name is empty",
    );
}
