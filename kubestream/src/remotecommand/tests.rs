use super::*;

fn headers(stream_type: &str) -> Headers {
    Headers::new().with(STREAM_TYPE, stream_type).unwrap()
}

fn gathering(wanted: Wanted) -> Gathering<&'static str> {
    Gathering::new(wanted, Instant::now(), STREAMS_TIMEOUT)
}

#[test]
fn stream_types_are_read_from_their_header() {
    for t in StreamType::ALL {
        assert_eq!(stream_type(&headers(t.name())), Ok(t));
    }
    assert_eq!(
        stream_type(&headers("data")),
        Err(Error::StreamType {
            value: Some("data".into())
        })
    );
    assert_eq!(
        stream_type(&Headers::new()),
        Err(Error::StreamType { value: None })
    );
    let long = "x".repeat(1000);
    let Err(Error::StreamType { value: Some(v) }) = stream_type(&headers(&long)) else {
        panic!("refused");
    };
    assert_eq!(v.len(), 64);
}

#[test]
fn an_exec_with_stdin_and_both_outputs_completes_with_its_fourth_stream() {
    let mut g = gathering(Wanted {
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
    });
    assert!(matches!(g.add(StreamType::Error, "e"), Added::Waiting));
    assert!(matches!(g.add(StreamType::Stdin, "i"), Added::Waiting));
    assert!(matches!(g.add(StreamType::Stdout, "o"), Added::Waiting));
    let Added::Complete(streams) = g.add(StreamType::Stderr, "x") else {
        panic!("complete");
    };
    assert_eq!(
        streams,
        Streams {
            error: "e",
            stdin: Some("i"),
            stdout: Some("o"),
            stderr: Some("x"),
            resize: None,
        }
    );
}

#[test]
fn a_tty_wants_resize_and_no_stderr_and_the_order_does_not_matter() {
    let wanted = Wanted {
        stdin: true,
        stdout: true,
        stderr: true,
        tty: true,
    };
    let mut g = gathering(wanted);
    assert!(matches!(g.add(StreamType::Resize, "r"), Added::Waiting));
    let Added::Refused("x", Error::NotExpected(StreamType::Stderr)) =
        g.add(StreamType::Stderr, "x")
    else {
        panic!("stderr refused with a tty");
    };
    assert!(matches!(g.add(StreamType::Stdout, "o"), Added::Waiting));
    assert!(matches!(g.add(StreamType::Stdin, "i"), Added::Waiting));
    let Added::Complete(streams) = g.add(StreamType::Error, "e") else {
        panic!("complete");
    };
    assert_eq!(streams.resize, Some("r"));
    assert_eq!(streams.stderr, None);
}

#[test]
fn unasked_and_repeated_streams_are_refused() {
    let mut g = gathering(Wanted {
        stdout: true,
        ..Wanted::default()
    });
    assert!(matches!(
        g.add(StreamType::Stdin, "i"),
        Added::Refused("i", Error::NotExpected(StreamType::Stdin))
    ));
    assert!(matches!(
        g.add(StreamType::Resize, "r"),
        Added::Refused("r", Error::NotExpected(StreamType::Resize))
    ));
    assert!(matches!(g.add(StreamType::Error, "e"), Added::Waiting));
    assert!(matches!(
        g.add(StreamType::Error, "e2"),
        Added::Refused("e2", Error::AlreadyOpen(StreamType::Error))
    ));
    assert!(matches!(g.add(StreamType::Stdout, "o"), Added::Complete(_)));
}

#[test]
fn the_deadline_is_the_kubelets_timeout_from_the_start() {
    let now = Instant::now();
    let g: Gathering<()> = Gathering::new(Wanted::default(), now, STREAMS_TIMEOUT);
    assert_eq!(g.deadline(), now + Duration::from_secs(30));
}

#[test]
fn resizes_are_read_as_json_as_it_comes_in_any_pieces() {
    let encoded = b"{\"Width\":80,\"Height\":24}\n{\"Width\":120,\"Height\":40}\n";
    for cut in 0..encoded.len() {
        let mut r = ResizeReader::default();
        let mut sizes = r.push(&encoded[..cut]).unwrap();
        sizes.extend(r.push(&encoded[cut..]).unwrap());
        assert_eq!(
            sizes,
            vec![
                TerminalSize {
                    width: 80,
                    height: 24
                },
                TerminalSize {
                    width: 120,
                    height: 40
                }
            ],
            "cut at {cut}"
        );
    }
    // Byte by byte.
    let mut r = ResizeReader::default();
    let n: usize = encoded.iter().map(|b| r.push(&[*b]).unwrap().len()).sum();
    assert_eq!(n, 2);
}

#[test]
fn a_broken_or_endless_resize_is_refused() {
    let mut r = ResizeReader::default();
    assert!(matches!(
        r.push(b"{\"Width\":-1,\"Height\":24}"),
        Err(Error::BadResize(_))
    ));
    let mut r = ResizeReader::default();
    assert!(matches!(r.push(b"\"tall\""), Err(Error::BadResize(_))));
    let mut r = ResizeReader::default();
    let mut endless = b"{\"Width\":80,\"x\":\"".to_vec();
    endless.extend(std::iter::repeat_n(b'a', MAX_RESIZE));
    assert_eq!(r.push(&endless), Err(Error::ResizeTooLarge));
}
