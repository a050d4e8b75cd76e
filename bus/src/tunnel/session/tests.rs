use super::*;
use crate::tunnel::{
    MAX_EXIT_BYTES, ProtocolError, RecvWindow, SendWindow, StreamId, decode, encode, up_type,
};
use bytes::Bytes;
use flotilla_api::v1::TunnelResponse;
use proptest::prelude::*;

fn exec(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> Spec {
    Spec {
        kind: Kind::Exec,
        container: Some("c".into()),
        command: vec!["cat".into()],
        streams: Streams {
            stdin,
            stdout,
            stderr,
            tty,
        },
        port: 0,
    }
}

fn port_forward(port: u16) -> Spec {
    Spec {
        kind: Kind::PortForward,
        container: None,
        command: Vec::new(),
        streams: Streams::default(),
        port,
    }
}

fn head(status: u32) -> Frame {
    Frame::Response(TunnelResponse {
        status,
        headers: vec![],
    })
}

fn chunk(channel: u32) -> Frame {
    Frame::Chunk {
        channel,
        data: Bytes::from_static(b"x"),
    }
}

fn exit() -> Frame {
    Frame::Exit(Bytes::from_static(br#"{"metadata":{},"status":"Success"}"#))
}

/// The hub's rules for an agent's frames of `spec`, after its 101.
fn agent_open(spec: &Spec) -> Rules {
    let mut rules = Rules::new(spec, Side::Agent);
    rules.check(&Frame::Credit(8)).unwrap();
    rules.check(&head(101)).unwrap();
    rules
}

#[test]
fn specs_round_trip_through_the_wire() {
    for spec in [
        exec(true, true, true, false),
        exec(true, true, false, true),
        Spec {
            kind: Kind::Attach,
            container: None,
            command: vec![],
            streams: Streams {
                stdin: true,
                stdout: true,
                ..Streams::default()
            },
            port: 0,
        },
        port_forward(8080),
    ] {
        assert_eq!(Spec::from_wire(&spec.to_wire()), Ok(spec));
    }
}

#[test]
fn sessions_no_api_server_serves_are_refused() {
    let wire = |f: &dyn Fn(&mut TunnelSession)| {
        let mut s = exec(true, true, true, false).to_wire();
        f(&mut s);
        Spec::from_wire(&s)
    };
    let refused = |r: Result<Spec, Violation>| matches!(r, Err(Violation::Request(_)));
    assert!(refused(wire(&|s| s.kind = 0)));
    assert!(refused(wire(&|s| s.kind = 99)));
    assert!(refused(wire(&|s| s.command.clear())));
    assert!(refused(wire(
        &|s| s.command = vec!["x".into(); MAX_COMMAND_ARGS + 1]
    )));
    assert!(refused(wire(&|s| s.tty = true)), "a tty with stderr");
    assert!(refused(wire(&|s| {
        s.stdin = false;
        s.stdout = false;
        s.stderr = false;
    })));
    assert!(refused(wire(&|s| s.container = "c".repeat(254))));
    assert!(refused(wire(&|s| s.port = 80)));
    assert!(refused(wire(
        &|s| s.kind = tunnel_session::Kind::Attach as i32
    )));
    let forward = |port: u32, command: bool| {
        let mut s = port_forward(1).to_wire();
        s.port = port;
        if command {
            s.command = vec!["sh".into()];
        }
        Spec::from_wire(&s)
    };
    assert!(refused(forward(0, false)));
    assert!(refused(forward(65_536, false)));
    assert!(refused(forward(80, true)));
    assert_eq!(forward(65_535, false).map(|s| s.port), Ok(65_535));
}

#[test]
fn an_exec_runs_chunks_within_its_channels_then_exit_then_end() {
    let mut rules = agent_open(&exec(true, true, true, false));
    assert!(rules.is_open());
    rules.check(&chunk(STDOUT)).unwrap();
    rules.check(&chunk(STDERR)).unwrap();
    rules.check(&Frame::Close(STDOUT)).unwrap();
    rules.check(&chunk(STDERR)).unwrap();
    rules.check(&Frame::Credit(9)).unwrap();
    rules.check(&Frame::Ping).unwrap();
    rules.check(&exit()).unwrap();
    rules.check(&Frame::End).unwrap();
    assert!(!rules.is_open());
    assert_eq!(
        rules.check(&chunk(STDOUT)),
        Err(Violation::AfterEnd { frame: "chunk" })
    );
}

#[test]
fn a_hostile_agent_breaks_its_session() {
    let spec = exec(true, true, false, true);
    // Before the 101.
    let mut rules = Rules::new(&spec, Side::Agent);
    assert_eq!(
        rules.check(&chunk(STDOUT)),
        Err(Violation::NotOpen { frame: "chunk" })
    );
    assert_eq!(
        rules.check(&exit()),
        Err(Violation::NotOpen { frame: "exit" })
    );
    assert_eq!(
        rules.check(&Frame::End),
        Err(Violation::NotOpen { frame: "end" })
    );
    // On stdin, on stderr it was not asked for, on a channel nobody uses.
    for channel in [STDIN, STDERR, 3, 255, u32::MAX] {
        let mut rules = agent_open(&spec);
        assert!(
            matches!(rules.check(&chunk(channel)), Err(Violation::Channel { .. })),
            "{channel}"
        );
    }
    let mut rules = agent_open(&spec);
    // Data, a resize, a second response.
    assert!(matches!(
        rules.check(&Frame::Data(Bytes::new())),
        Err(Violation::Wrong { frame: "data", .. })
    ));
    assert!(matches!(
        rules.check(&Frame::Resize {
            width: 80,
            height: 24
        }),
        Err(Violation::Wrong {
            frame: "resize",
            from: Side::Agent
        })
    ));
    assert_eq!(
        rules.check(&head(101)),
        Err(Violation::Twice { frame: "response" })
    );
    // After its close, after the exit, a second exit, an end before the exit.
    rules.check(&Frame::Close(STDOUT)).unwrap();
    assert_eq!(
        rules.check(&chunk(STDOUT)),
        Err(Violation::AfterClose { channel: STDOUT })
    );
    assert_eq!(
        rules.check(&Frame::Close(STDOUT)),
        Err(Violation::Close { channel: STDOUT })
    );
    assert_eq!(
        rules.check(&Frame::End),
        Err(Violation::EarlyEnd { kind: Kind::Exec })
    );
    rules.check(&exit()).unwrap();
    assert_eq!(
        rules.check(&exit()),
        Err(Violation::Twice { frame: "exit" })
    );
    assert_eq!(
        agent_open(&spec).check(&Frame::Request(Box::default())),
        Err(Violation::Wrong {
            frame: "request",
            from: Side::Agent
        })
    );
    let mut rules = agent_open(&spec);
    rules.check(&exit()).unwrap();
    assert_eq!(
        rules.check(&chunk(STDOUT)),
        Err(Violation::AfterExit { frame: "chunk" })
    );
}

#[test]
fn a_refused_session_is_an_ordinary_answer() {
    let mut rules = Rules::new(&exec(true, true, true, false), Side::Agent);
    rules.check(&head(403)).unwrap();
    assert!(!rules.is_open());
    rules
        .check(&Frame::Data(Bytes::from_static(b"{}")))
        .unwrap();
    assert!(matches!(
        rules.check(&chunk(STDOUT)),
        Err(Violation::Wrong { .. })
    ));
    assert!(matches!(rules.check(&exit()), Err(Violation::Wrong { .. })));
    rules.check(&Frame::End).unwrap();
}

#[test]
fn a_port_forward_ends_when_the_pod_side_closed_or_failed() {
    let spec = port_forward(8080);
    let mut rules = agent_open(&spec);
    rules.check(&chunk(DATA)).unwrap();
    assert_eq!(
        rules.check(&Frame::End),
        Err(Violation::EarlyEnd {
            kind: Kind::PortForward
        })
    );
    rules.check(&Frame::Close(DATA)).unwrap();
    rules.check(&Frame::End).unwrap();
    // A failed connection says so with an exit.
    let mut rules = agent_open(&spec);
    rules.check(&exit()).unwrap();
    rules.check(&Frame::End).unwrap();
    assert!(matches!(
        agent_open(&spec).check(&chunk(STDOUT)),
        Err(Violation::Channel { .. })
    ));
}

#[test]
fn the_hub_sends_stdin_closes_and_resizes_only_once_the_agent_opened() {
    let spec = exec(true, true, false, true);
    let mut rules = Rules::new(&spec, Side::Hub);
    assert_eq!(
        rules.check(&chunk(STDIN)),
        Err(Violation::NotOpen { frame: "chunk" })
    );
    rules.check(&Frame::Ping).unwrap();
    rules.opened();
    rules.check(&chunk(STDIN)).unwrap();
    rules
        .check(&Frame::Resize {
            width: 120,
            height: 40,
        })
        .unwrap();
    assert!(matches!(
        rules.check(&chunk(STDOUT)),
        Err(Violation::Channel {
            from: Side::Hub,
            ..
        })
    ));
    for frame in [Frame::Data(Bytes::new()), Frame::End, head(200), exit()] {
        assert!(
            matches!(
                rules.check(&frame),
                Err(Violation::Wrong {
                    from: Side::Hub,
                    ..
                })
            ),
            "{}",
            frame.name()
        );
    }
    rules.check(&Frame::Close(STDIN)).unwrap();
    assert_eq!(
        rules.check(&chunk(STDIN)),
        Err(Violation::AfterClose { channel: STDIN })
    );
    // Without a tty no resize; without stdin no chunk.
    let mut rules = Rules::new(&exec(false, true, true, false), Side::Hub);
    rules.opened();
    assert_eq!(
        rules.check(&Frame::Resize {
            width: 1,
            height: 1
        }),
        Err(Violation::NotTty)
    );
    assert!(matches!(
        rules.check(&chunk(STDIN)),
        Err(Violation::Channel { .. })
    ));
}

#[test]
fn chunks_exits_and_resizes_are_bounded_on_the_wire() {
    let round = |frame: Frame| {
        let ev = encode(up_type(), "agent", "edge-1", &StreamId::random(), 3, frame);
        decode(
            &ev.encode(1 << 20).unwrap(),
            1 << 20,
            &up_type(),
            "edge-1",
            16,
        )
    };
    for frame in [
        chunk(STDERR),
        Frame::Close(STDOUT),
        Frame::Resize {
            width: 65_535,
            height: 1,
        },
        exit(),
    ] {
        assert_eq!(round(frame.clone()).unwrap().frame, frame);
    }
    assert!(matches!(
        round(Frame::Chunk {
            channel: 1,
            data: Bytes::from(vec![0; 17])
        }),
        Err(ProtocolError::ChunkTooLarge { size: 17, max: 16 })
    ));
    assert!(matches!(
        round(Frame::Exit(Bytes::from(vec![b' '; MAX_EXIT_BYTES + 1]))),
        Err(ProtocolError::ExitTooLarge { .. })
    ));
    // A size no u16 holds, as a hostile peer would write it.
    let ev = crate::envelope::Event::new(
        up_type(),
        "agent",
        "edge-1",
        &flotilla_api::v1::TunnelFrame {
            stream: StreamId::random().to_string(),
            seq: 0,
            frame: Some(flotilla_api::v1::tunnel_frame::Frame::Resize(
                flotilla_api::v1::TunnelResize {
                    width: 70_000,
                    height: 24,
                },
            )),
        },
    );
    assert!(matches!(
        decode(
            &ev.encode(1 << 20).unwrap(),
            1 << 20,
            &up_type(),
            "edge-1",
            16
        ),
        Err(ProtocolError::BadResize { width: 70_000, .. })
    ));
    assert!(chunk(0).is_counted() && Frame::Data(Bytes::new()).is_counted());
    assert!(!Frame::Close(0).is_counted() && !exit().is_counted());
}

#[test]
fn a_session_names_its_pod_by_its_kinds_subresource() {
    assert_eq!(
        pod_of("/api/v1/namespaces/default/pods/p/exec", Kind::Exec),
        Some(("default", "p"))
    );
    assert_eq!(
        pod_of(
            "/api/v1/namespaces/ns/pods/web-0/portforward",
            Kind::PortForward
        ),
        Some(("ns", "web-0"))
    );
    for bad in [
        "/api/v1/namespaces/default/pods/p/attach",
        "/api/v1/namespaces/default/pods/p/exec/x",
        "/api/v1/namespaces//pods/p/exec",
        "/api/v1/namespaces/default/pods/../exec",
        "/api/v1/namespaces/default/services/p/exec",
        "/apis/v1/namespaces/default/pods/p/exec",
        "/api/v1/namespaces/default/pods/p/exec?x",
    ] {
        assert_eq!(pod_of(bad, Kind::Exec), None, "{bad}");
    }
}

#[test]
fn long_command_lines_are_cut_in_the_logs() {
    assert_eq!(command_line(&["ls".into(), "-l".into()]), "ls -l");
    let long = command_line(&["x".repeat(1000)]);
    assert_eq!(long.chars().count(), MAX_LOGGED_COMMAND + 1);
    assert!(long.ends_with('…'));
    let request = flotilla_api::v1::TunnelRequest {
        bearer: "t".into(),
        ..Default::default()
    };
    assert_eq!(
        crate::tunnel::as_user(&request),
        "its ManagedServiceAccount token"
    );
    assert_eq!(
        crate::tunnel::as_user(&flotilla_api::v1::TunnelRequest::default()),
        "agent"
    );
}

#[test]
fn resizes_go_at_most_once_per_interval_the_latest_winning() {
    let t0 = Instant::now();
    let mut gate = ResizeGate::default();
    assert_eq!(gate.offer((80, 24), t0), Some((80, 24)));
    assert_eq!(gate.due_at(), None);
    let soon = t0 + Duration::from_millis(10);
    assert_eq!(gate.offer((81, 24), soon), None);
    assert_eq!(gate.offer((82, 25), soon), None);
    assert_eq!(gate.due_at(), Some(t0 + RESIZE_INTERVAL));
    assert_eq!(gate.take_due(soon), None, "not yet");
    let later = t0 + RESIZE_INTERVAL;
    assert_eq!(gate.take_due(later), Some((82, 25)), "the latest size");
    assert_eq!(gate.take_due(later + RESIZE_INTERVAL), None, "sent once");
    assert_eq!(
        gate.offer((90, 30), later + RESIZE_INTERVAL),
        Some((90, 30))
    );
}

proptest! {
    /// Whatever an agent sends, the hub's rules never let a chunk through on a channel the
    /// session does not read, after that channel's close or after the exit, and never let a
    /// second exit through.
    #[test]
    fn no_frame_sequence_gets_past_the_rules(
        stdout in any::<bool>(),
        stderr in any::<bool>(),
        frames in proptest::collection::vec(0u8..8, 0..64),
    ) {
        let spec = exec(true, stdout || !stderr, stderr, false);
        let mut rules = agent_open(&spec);
        let (mut closed, mut exited) = ([false; 3], false);
        for f in frames {
            let frame = match f {
                0 => chunk(STDOUT),
                1 => chunk(STDERR),
                2 => Frame::Close(STDOUT),
                3 => Frame::Close(STDERR),
                4 => exit(),
                5 => chunk(STDIN),
                6 => Frame::Credit(1),
                _ => Frame::Data(Bytes::new()),
            };
            let ok = rules.check(&frame).is_ok();
            match frame {
                Frame::Chunk { channel, .. } if ok => {
                    prop_assert!(channel != STDIN && !exited && !closed[channel as usize]);
                    let asked = if channel == STDOUT { spec.streams.stdout } else { spec.streams.stderr };
                    prop_assert!(asked);
                }
                Frame::Close(channel) if ok => {
                    prop_assert!(!closed[channel as usize]);
                    closed[channel as usize] = true;
                }
                Frame::Exit(_) if ok => {
                    prop_assert!(!exited);
                    exited = true;
                }
                Frame::Data(_) => {
                    prop_assert!(!ok);
                }
                _ => {}
            }
        }
    }

    /// Both directions at once: each side's chunks stay within the other's credit, so neither
    /// holds more than its window, whatever the interleaving.
    #[test]
    fn both_directions_stay_within_their_windows(
        steps in proptest::collection::vec(0u8..4, 1..400),
    ) {
        let (mut up_send, mut up_recv) = (SendWindow::new(8), RecvWindow::new(8));
        let (mut down_send, mut down_recv) = (SendWindow::new(4), RecvWindow::new(4));
        let (mut up_held, mut down_held) = (0u64, 0u64);
        for step in steps {
            match step {
                0 if up_send.may_send() => {
                    up_send.sent();
                    up_recv.received().unwrap();
                    up_held += 1;
                }
                1 if down_send.may_send() => {
                    down_send.sent();
                    down_recv.received().unwrap();
                    down_held += 1;
                }
                2 if up_held > 0 => {
                    up_held -= 1;
                    if let Some(c) = up_recv.consumed() {
                        up_send.credit(c).unwrap();
                    }
                }
                3 if down_held > 0 => {
                    down_held -= 1;
                    if let Some(c) = down_recv.consumed() {
                        down_send.credit(c).unwrap();
                    }
                }
                _ => {}
            }
            prop_assert!(up_held <= 8 && down_held <= 4);
        }
    }
}

#[test]
fn a_command_line_cannot_forge_a_log_line() {
    let forged = command_line(&[
        "sh".into(),
        "-c".into(),
        "true\n2026-11-30T00:00:00Z INFO cluster proxy session ended caller=\"x\"\r\x1b[2K".into(),
    ]);
    assert_eq!(
        forged,
        "sh -c true\\n2026-11-30T00:00:00Z INFO cluster proxy session ended caller=\"x\"\\r\\u{1b}[2K"
    );
    assert_eq!(loggable("main\ncontainer"), "main\\ncontainer");
}
