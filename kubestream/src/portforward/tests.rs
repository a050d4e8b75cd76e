use super::*;

fn headers(kind: &str, port: &str, id: Option<&str>) -> Headers {
    let h = Headers::new()
        .with("streamtype", kind)
        .unwrap()
        .with("port", port)
        .unwrap();
    match id {
        Some(id) => h.with("requestid", id).unwrap(),
        None => h,
    }
}

fn read(kind: &str, port: &str, id: &str) -> StreamHeaders {
    stream_headers(1, &headers(kind, port, Some(id))).unwrap()
}

#[test]
fn kubectl_headers_are_read() {
    assert_eq!(
        read("data", "8080", "0"),
        StreamHeaders {
            stream_type: StreamType::Data,
            port: 8080,
            request_id: "0".into()
        }
    );
    assert_eq!(read("error", "65535", "7").stream_type, StreamType::Error);
}

#[test]
fn bad_headers_are_refused_with_the_kubelets_words() {
    let err = |h: Headers| stream_headers(1, &h).unwrap_err();
    assert!(matches!(
        err(headers("control", "80", Some("0"))),
        Error::StreamType { .. }
    ));
    assert_eq!(
        err(headers("bogus", "80", Some("0"))).to_string(),
        "invalid stream type Some(\"bogus\")"
    );
    for port in ["0", "65536", "-1", "+80", "", "80 ", "http"] {
        assert!(
            matches!(err(headers("data", port, Some("0"))), Error::Port { .. }),
            "{port:?}"
        );
    }
    assert!(matches!(
        err(Headers::new().with("streamtype", "data").unwrap()),
        Error::Port { value: None }
    ));
    assert!(matches!(
        err(headers("data", "80", Some(&"9".repeat(MAX_REQUEST_ID + 1)))),
        Error::RequestId { .. }
    ));
}

#[test]
fn a_missing_request_id_is_guessed_from_stream_ids_as_the_kubelet_does() {
    let e = stream_headers(5, &headers("error", "80", None)).unwrap();
    let d = stream_headers(7, &headers("data", "80", None)).unwrap();
    assert_eq!((e.request_id.as_str(), d.request_id.as_str()), ("5", "5"));
}

#[test]
fn error_then_data_make_a_pair_in_any_order() {
    let t0 = Instant::now();
    let mut p = Pairing::default();
    assert!(matches!(
        p.add(t0, 1, &read("error", "80", "0")),
        Added::Waiting
    ));
    assert!(matches!(
        p.add(t0, 5, &read("data", "81", "1")),
        Added::Waiting
    ));
    assert_eq!(p.pending(), 2);
    let Added::Paired(pair) = p.add(t0, 3, &read("data", "80", "0")) else {
        panic!("not paired")
    };
    assert_eq!(
        pair,
        Pair {
            request_id: "0".into(),
            port: 80,
            error: 1,
            data: 3
        }
    );
    let Added::Paired(pair) = p.add(t0, 7, &read("error", "81", "1")) else {
        panic!("not paired")
    };
    assert_eq!((pair.error, pair.data, pair.port), (7, 5, 81));
    assert_eq!(p.pending(), 0);
    assert_eq!(p.next_deadline(), None);
}

#[test]
fn a_second_stream_of_one_type_is_refused() {
    let t0 = Instant::now();
    let mut p = Pairing::default();
    assert!(matches!(
        p.add(t0, 1, &read("error", "80", "0")),
        Added::Waiting
    ));
    let Added::Refused(stream, why) = p.add(t0, 3, &read("error", "80", "0")) else {
        panic!("accepted")
    };
    assert_eq!(stream, 3);
    assert_eq!(
        why.to_string(),
        "error stream already assigned for request 0"
    );
    // The first one still pairs.
    assert!(matches!(
        p.add(t0, 5, &read("data", "80", "0")),
        Added::Paired(_)
    ));
}

#[test]
fn a_pair_without_partner_times_out_after_30_seconds() {
    let t0 = Instant::now();
    let mut p = Pairing::default();
    p.add(t0, 1, &read("error", "80", "0"));
    p.add(t0 + Duration::from_secs(10), 3, &read("data", "80", "1"));
    assert_eq!(p.next_deadline(), Some(t0 + PAIR_TIMEOUT));
    assert!(p.expire(t0 + Duration::from_secs(29)).is_empty());
    assert_eq!(
        p.expire(t0 + PAIR_TIMEOUT),
        vec![Unpaired {
            request_id: "0".into(),
            error: Some(1),
            data: None
        }]
    );
    assert_eq!(p.next_deadline(), Some(t0 + Duration::from_secs(40)));
    assert_eq!(
        p.cancel("1"),
        Some(Unpaired {
            request_id: "1".into(),
            error: None,
            data: Some(3)
        })
    );
    assert_eq!(p.pending(), 0);
}

#[test]
fn waiting_pairs_are_bounded() {
    let t0 = Instant::now();
    let mut p = Pairing::new(PAIR_TIMEOUT, 2);
    p.add(t0, 1, &read("error", "80", "0"));
    p.add(t0, 3, &read("error", "80", "1"));
    assert!(matches!(
        p.add(t0, 5, &read("error", "80", "2")),
        Added::Refused(5, Error::TooManyPending)
    ));
    // Completing a waiting pair is still allowed at the bound.
    assert!(matches!(
        p.add(t0, 7, &read("data", "80", "1")),
        Added::Paired(_)
    ));
}

#[test]
fn the_kubelets_forward_error_wording() {
    assert_eq!(
        forward_error(8080, "web", "u-1", "connection refused"),
        "error forwarding port 8080 to pod web, uid u-1: connection refused"
    );
}
