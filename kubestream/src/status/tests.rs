use super::*;
use proptest::prelude::*;

fn code(n: u8) -> SessionStatus {
    SessionStatus::ExitCode(NonZeroU8::new(n).unwrap())
}

#[test]
fn success_is_the_kubelets_bytes() {
    assert_eq!(
        String::from_utf8(SessionStatus::Success.to_json()).unwrap(),
        r#"{"metadata":{},"status":"Success"}"#
    );
    assert_eq!(SessionStatus::exited(0), SessionStatus::Success);
}

#[test]
fn a_non_zero_exit_is_the_kubelets_bytes_and_kubectl_exits_with_it() {
    let s = SessionStatus::exited(3);
    assert_eq!(s, code(3));
    assert_eq!(
        String::from_utf8(s.to_json()).unwrap(),
        r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: exit status 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
    );
    assert_eq!(s.kubectl_exit_code(), 3);
    assert_eq!(s.message(), "command terminated with exit code 3");
}

#[test]
fn an_internal_error_is_worded_as_the_api_server_words_it() {
    let s = SessionStatus::internal_error("error executing command in container: boom");
    assert_eq!(
        String::from_utf8(s.to_json()).unwrap(),
        r#"{"metadata":{},"status":"Failure","message":"Internal error occurred: error executing command in container: boom","reason":"InternalError","code":500}"#
    );
    assert_eq!(s.kubectl_exit_code(), 1);
}

#[test]
fn a_real_kubelet_status_is_read() {
    // As the kubelet writes it, with kind/apiVersion that some API servers add.
    let s = SessionStatus::from_json(
        br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 42], exit code 42","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"42"}]}}"#,
    )
    .unwrap();
    assert_eq!(s, code(42));
    let s = SessionStatus::from_json(
        br#"{"metadata":{},"status":"Failure","message":"Internal error occurred: x","reason":"InternalError","details":{"causes":[{"message":"x"}]},"code":500}"#,
    )
    .unwrap();
    assert_eq!(
        s,
        SessionStatus::Failure {
            reason: "InternalError".into(),
            message: "Internal error occurred: x".into(),
            code: Some(500)
        }
    );
}

#[test]
fn exit_codes_are_read_as_kubectl_reads_them() {
    let with = |v: &str| {
        SessionStatus::from_json(
            format!(
                r#"{{"status":"Failure","reason":"NonZeroExitCode","details":{{"causes":[{{"reason":"ExitCode","message":"{v}"}}]}}}}"#
            )
            .as_bytes(),
        )
    };
    assert_eq!(with("255").unwrap(), code(255));
    assert_eq!(with("007").unwrap(), code(7));
    for bad in ["0", "256", "-1", "+3", "", "3 ", "1e2"] {
        assert!(
            matches!(with(bad), Err(Error::BadExitCode { .. })),
            "{bad:?} was accepted"
        );
    }
    assert!(matches!(
        SessionStatus::from_json(br#"{"status":"Failure","reason":"NonZeroExitCode"}"#),
        Err(Error::NoExitCode)
    ));
}

#[test]
fn hostile_statuses_are_refused_or_defused() {
    let big = format!(
        r#"{{"status":"Failure","message":"{}"}}"#,
        "x".repeat(MAX_STATUS_JSON)
    );
    assert!(matches!(
        SessionStatus::from_json(big.as_bytes()),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        SessionStatus::from_json(b"[1,2]"),
        Err(Error::Json { .. })
    ));
    assert!(matches!(
        SessionStatus::from_json(br#"{"status":"Success","status":"Failure"}"#),
        Err(Error::Json { .. })
    ));
    assert!(matches!(
        SessionStatus::from_json(br#"{"status":"Maybe"}"#),
        Err(Error::UnknownStatus { .. })
    ));
    assert!(matches!(
        SessionStatus::from_json(br#"{"status":"Failure","reason":"Not a reason!"}"#),
        Err(Error::BadReason { .. })
    ));
    assert!(matches!(
        SessionStatus::from_json(br#"{"status":"Failure","code":70000}"#),
        Err(Error::BadCode { code: 70000 })
    ));
    let s = SessionStatus::from_json(
        br#"{"status":"Failure","message":"line\n\u001b[2Jcleared\ttab\u009b"}"#,
    )
    .unwrap();
    assert_eq!(s.message(), "line\n\u{fffd}[2Jcleared\ttab\u{fffd}");
}

fn status() -> impl Strategy<Value = SessionStatus> {
    prop_oneof![
        Just(SessionStatus::Success),
        (1u8..=255).prop_map(code),
        (
            "[A-Za-z0-9]{0,20}",
            "[^\\p{Cc}]{0,80}",
            proptest::option::of(100u16..600)
        )
            .prop_map(|(reason, message, code)| SessionStatus::Failure {
                reason,
                message,
                code
            }),
    ]
}

proptest! {
    #[test]
    fn statuses_round_trip_through_the_kubelets_json(s in status()) {
        prop_assert_eq!(SessionStatus::from_json(&s.to_json()).unwrap(), s);
    }

    #[test]
    fn reading_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = SessionStatus::from_json(&bytes);
    }
}
