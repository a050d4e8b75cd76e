use super::*;
use flotilla_api::v1::TunnelCaller;
use flotilla_bus::tunnel::session::Streams;

const MIB: u64 = 1 << 20;

fn limits(sessions: usize, per_identity: usize, bytes_per_identity: u64) -> Limits {
    Limits {
        sessions,
        per_identity,
        bytes_per_identity,
    }
}

#[test]
fn sessions_are_bounded_hub_wide_and_per_identity_and_given_back_when_they_end() {
    let ledger = Arc::new(Ledger::default());
    let l = limits(3, 2, 64 * MIB);
    let a1 = ledger.reserve("alice", 2 * MIB, &l).unwrap();
    let _a2 = ledger.reserve("alice", 2 * MIB, &l).unwrap();
    let refused = ledger.reserve("alice", 2 * MIB, &l).unwrap_err();
    assert_eq!(refused.reason(), "session_identity");
    assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.to_string().contains("\"alice\""), "{refused}");
    let _b1 = ledger.reserve("bob", 2 * MIB, &l).unwrap();
    let full = ledger.reserve("carol", 2 * MIB, &l).unwrap_err();
    assert_eq!(full, Refusal::Sessions(3));
    assert_eq!(full.status(), http::StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ledger.open(), 3);
    assert_eq!(ledger.held("alice"), (2, 4 * MIB));
    drop(a1);
    assert_eq!(ledger.held("alice"), (1, 2 * MIB));
    assert!(ledger.reserve("carol", 2 * MIB, &l).is_ok());
    assert_eq!(ledger.open(), 2, "carol's reservation was dropped at once");
}

#[test]
fn an_identitys_reserved_bytes_are_bounded_whatever_the_count() {
    let ledger = Arc::new(Ledger::default());
    // Windows raised: each session reserves 24 MiB of a 64 MiB budget.
    let l = limits(1024, 32, 64 * MIB);
    let first = ledger.reserve("alice", 24 * MIB, &l).unwrap();
    let _second = ledger.reserve("alice", 24 * MIB, &l).unwrap();
    let refused = ledger.reserve("alice", 24 * MIB, &l).unwrap_err();
    assert_eq!(refused.reason(), "session_bytes");
    assert!(
        ledger.reserve("bob", 24 * MIB, &l).is_ok(),
        "bob has his own"
    );
    drop(first);
    assert!(ledger.reserve("alice", 24 * MIB, &l).is_ok());
    assert_eq!(ledger.held("nobody"), (0, 0));
}

#[test]
fn a_session_is_counted_while_open_and_its_end_once() {
    let metrics = SessionMetrics::default();
    let spec = Spec {
        kind: Kind::Exec,
        container: Some("c".into()),
        command: vec!["sh".into(), "-c".into(), "echo hi".into()],
        streams: Streams {
            stdout: true,
            ..Streams::default()
        },
        port: 0,
    };
    let request = TunnelRequest {
        path: "/api/v1/namespaces/default/pods/p/exec".into(),
        caller: Some(TunnelCaller {
            name: "alice".into(),
            role: "admin".into(),
        }),
        ..Default::default()
    };
    let open = |m: &SessionMetrics| m.open.get_or_create(&KindLabels { kind: "exec" }).get();
    let mut tracked = Tracked::open(&metrics, "edge-1", &spec, &request, "v5.channel.k8s.io");
    assert_eq!(tracked.fields.namespace, "default");
    assert_eq!(tracked.fields.command, "sh -c echo hi");
    assert_eq!(open(&metrics), 1);
    tracked.bytes_in(10);
    tracked.bytes_out(5);
    tracked.bytes_out(7);
    assert_eq!(tracked.bytes(), (10, 12));
    tracked.exit_code(3);
    tracked.end("exited");
    tracked.end("client_gone");
    drop(tracked);
    assert_eq!(open(&metrics), 0);
    let ended = |why| {
        metrics
            .ended
            .get_or_create(&EndLabels { kind: "exec", why })
            .get()
    };
    assert_eq!(
        (ended("exited"), ended("client_gone"), ended("hub_stopping")),
        (1, 0, 0)
    );
    let out = metrics
        .bytes
        .get_or_create(&BytesLabels {
            kind: "exec",
            direction: "out",
        })
        .get();
    assert_eq!(out, 12);
}
