//! Bytes captured from real kubectl port-forwards (fixtures/README.md says how) read with the
//! crate's codecs: the upgrade requests through `negotiate`, kubectl's SPDY frames through
//! `spdy::frame` and `spdy::headers` at every read boundary (and, for the tunnel, at the
//! WebSocket message boundaries kubectl really used), the streams through `portforward`.

use std::path::PathBuf;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use flotilla_kubestream::negotiate::{self, Purpose, SpdyProtocol, Upgrade, WsProtocol};
use flotilla_kubestream::portforward::{self, Added, Pairing, StreamType};
use flotilla_kubestream::spdy::frame::{Decoder, Event, Frame};
use flotilla_kubestream::spdy::headers::{self, Headers};

fn fixture(dir: &str, name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What a side sent, frame by frame, header blocks inflated in order.
#[derive(Debug, PartialEq)]
enum Seen {
    Syn {
        id: u32,
        fin: bool,
        headers: Headers,
    },
    Reply {
        id: u32,
        headers: Headers,
    },
    Data {
        id: u32,
        fin: bool,
        data: Bytes,
    },
    Ping(u32),
    GoAway {
        last: u32,
        status: u32,
    },
    Rst {
        id: u32,
        status: u32,
    },
}

/// Decodes `pieces` fed one after another, as a reader getting them from a socket would.
fn replay<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, max_slice: usize) -> Vec<Seen> {
    let mut frames = Decoder::new(64 * 1024, max_slice);
    let mut zlib = headers::Decoder::new();
    let mut buf = BytesMut::new();
    let mut seen = Vec::new();
    let mut data: Option<(u32, BytesMut)> = None;
    for piece in pieces {
        buf.extend_from_slice(piece);
        while let Some(event) = frames.decode(&mut buf).expect("kubectl's frames decode") {
            match event {
                Event::Data(s) => {
                    let (id, acc) = data.get_or_insert_with(|| (s.stream_id, BytesMut::new()));
                    assert_eq!(*id, s.stream_id);
                    acc.extend_from_slice(&s.data);
                    if s.end_of_frame {
                        let (id, acc) = data.take().unwrap();
                        seen.push(Seen::Data {
                            id,
                            fin: s.fin,
                            data: acc.freeze(),
                        });
                    }
                }
                Event::Control(Frame::SynStream {
                    stream_id,
                    fin,
                    headers,
                    ..
                }) => seen.push(Seen::Syn {
                    id: stream_id,
                    fin,
                    headers: zlib.decode(&headers).expect("kubectl's headers inflate"),
                }),
                Event::Control(Frame::SynReply {
                    stream_id, headers, ..
                }) => seen.push(Seen::Reply {
                    id: stream_id,
                    headers: zlib.decode(&headers).expect("the reply's headers inflate"),
                }),
                Event::Control(Frame::Ping { id }) => seen.push(Seen::Ping(id)),
                Event::Control(Frame::GoAway {
                    last_good_stream_id,
                    status,
                }) => seen.push(Seen::GoAway {
                    last: last_good_stream_id,
                    status,
                }),
                Event::Control(Frame::RstStream { stream_id, status }) => seen.push(Seen::Rst {
                    id: stream_id,
                    status,
                }),
                Event::Control(other) => panic!("unexpected frame {other:?}"),
            }
        }
    }
    assert!(buf.is_empty() && frames.at_frame_boundary());
    seen
}

/// The 40 KiB the second forwarded connection carried.
fn big_payload() -> Vec<u8> {
    (0..=255u8).cycle().take(256 * 160).collect()
}

fn syn(id: u32, kind: &str, request: &str) -> Seen {
    let headers = Headers::new()
        .with("streamtype", kind)
        .unwrap()
        .with("port", "8080")
        .unwrap()
        .with("requestid", request)
        .unwrap();
    Seen::Syn {
        id,
        fin: false,
        headers,
    }
}

fn data(id: u32, fin: bool, bytes: &[u8]) -> Seen {
    Seen::Data {
        id,
        fin,
        data: Bytes::copy_from_slice(bytes),
    }
}

/// Header order follows Go's map iteration; compare by name.
fn normalise(seen: Vec<Seen>) -> Vec<Seen> {
    seen.into_iter()
        .map(|s| match s {
            Seen::Syn { id, fin, headers } => {
                let mut pairs: Vec<(String, String)> = headers
                    .iter()
                    .map(|(n, v)| (n.to_owned(), v.join("\0")))
                    .collect();
                pairs.sort();
                let mut sorted = Headers::new();
                for (n, v) in &pairs {
                    sorted.insert(n, &[v.as_str()]).unwrap();
                }
                Seen::Syn {
                    id,
                    fin,
                    headers: sorted,
                }
            }
            other => other,
        })
        .collect()
}

/// kubectl's side of two forwarded connections — `hello fixture\n`, then 40 KiB — each
/// half-closed by the local client, then pings of kubectl's parity and a GOAWAY(OK) when it
/// is interrupted.
fn check_kubectl_side(seen: Vec<Seen>) {
    let seen = normalise(seen);
    let big = big_payload();
    let streams = normalise(vec![
        syn(1, "error", "0"),
        data(1, true, b""),
        syn(3, "data", "0"),
        data(3, false, b"hello fixture\n"),
        data(3, true, b""),
        syn(5, "error", "1"),
        data(5, true, b""),
        syn(7, "data", "1"),
        // kubectl copies in 32 KiB buffers.
        data(7, false, &big[..32 * 1024]),
        data(7, false, &big[32 * 1024..]),
        data(7, true, b""),
    ]);
    assert_eq!(&seen[..streams.len()], &streams[..]);
    let rest = &seen[streams.len()..];
    let (last, pings) = rest.split_last().expect("pings and a GOAWAY");
    assert_eq!(last, &Seen::GoAway { last: 0, status: 0 });
    assert!(!pings.is_empty());
    for p in pings {
        assert!(matches!(p, Seen::Ping(id) if id % 2 == 1), "{p:?}");
    }
}

/// The answers kubectl accepted (written by the capture script): a SYN_REPLY without headers
/// per stream, the data echoed, FIN on both streams of a pair, each ping echoed.
fn check_server_side(seen: Vec<Seen>) {
    let replies: Vec<u32> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Reply { id, headers } if headers.is_empty() => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(replies, vec![1, 3, 5, 7]);
    let echoed = |id: u32| -> Vec<u8> {
        seen.iter()
            .filter_map(|s| match s {
                Seen::Data { id: i, data, .. } if *i == id => Some(data.to_vec()),
                _ => None,
            })
            .flatten()
            .collect()
    };
    assert_eq!(echoed(3), b"hello fixture\n");
    assert_eq!(echoed(7), big_payload());
    for id in [1, 3, 5, 7] {
        assert!(
            seen.iter()
                .any(|s| matches!(s, Seen::Data { id: i, fin: true, .. } if *i == id)),
            "no FIN on stream {id}"
        );
    }
    assert!(seen.iter().any(|s| matches!(s, Seen::Ping(_))));
}

fn every_boundary(bytes: &[u8]) {
    let whole = replay([bytes], 128 * 1024);
    for size in [1, 2, 3, 7, 64, 1000, 4096] {
        assert_eq!(
            replay(bytes.chunks(size), 128 * 1024),
            whole,
            "pieces of {size}"
        );
    }
    // Small slices hand DATA on in pieces but make the same frames.
    assert_eq!(replay(bytes.chunks(500), 100), whole);
}

#[test]
fn kubectl_1_30_raw_spdy_port_forward_decodes() {
    let client = fixture("kubectl-1.30-raw", "client.bin");
    every_boundary(&client);
    check_kubectl_side(replay([&client[..]], 128 * 1024));
    check_server_side(replay(
        [&fixture("kubectl-1.30-raw", "server.bin")[..]],
        128 * 1024,
    ));
}

#[test]
fn kubectl_1_32_raw_spdy_fallback_decodes() {
    let client = fixture("kubectl-1.32-raw", "client.bin");
    every_boundary(&client);
    check_kubectl_side(replay([&client[..]], 128 * 1024));
    check_server_side(replay(
        [&fixture("kubectl-1.32-raw", "server.bin")[..]],
        128 * 1024,
    ));
}

#[test]
fn kubectl_1_32_tunnelled_spdy_decodes_at_its_websocket_message_boundaries() {
    let wire = fixture("kubectl-1.32-tunnel", "client.ws");
    let (messages, closed) = websocket_messages(&wire);
    assert!(closed, "kubectl ends the tunnel with a close frame");
    // kubectl writes SPDY in tiny messages (a frame header in several), some empty.
    assert!(messages.iter().any(Vec::is_empty));
    assert!(messages.iter().any(|m| m.len() < 8 && !m.is_empty()));
    let client = fixture("kubectl-1.32-tunnel", "client.bin");
    assert_eq!(messages.concat(), client);
    let seen = replay(messages.iter().map(Vec::as_slice), 128 * 1024);
    assert_eq!(seen, replay([&client[..]], 128 * 1024));
    every_boundary(&client);
    check_kubectl_side(seen);
    check_server_side(replay(
        [&fixture("kubectl-1.32-tunnel", "server.bin")[..]],
        128 * 1024,
    ));
}

#[test]
fn kubectls_streams_pair_by_request_id() {
    let seen = replay([&fixture("kubectl-1.30-raw", "client.bin")[..]], 128 * 1024);
    let mut pairing = Pairing::default();
    let now = Instant::now();
    let mut pairs = Vec::new();
    for s in seen {
        if let Seen::Syn { id, headers, .. } = s {
            let h = portforward::stream_headers(id, &headers).unwrap();
            assert_eq!(h.port, 8080);
            match pairing.add(now, id, &h) {
                Added::Paired(p) => pairs.push((p.request_id, p.error, p.data)),
                Added::Waiting => assert_eq!(h.stream_type, StreamType::Error),
                Added::Refused(_, why) => panic!("refused: {why}"),
            }
        }
    }
    assert_eq!(pairs, vec![("0".into(), 1, 3), ("1".into(), 5, 7)]);
    assert_eq!(pairing.pending(), 0);
}

/// Parses a recorded request head into a request.
fn request(dir: &str) -> http::Request<()> {
    let text = String::from_utf8(fixture(dir, "request.txt")).unwrap();
    let mut lines = text.split("\r\n").filter(|l| !l.is_empty());
    let mut first = lines.next().unwrap().split(' ');
    let mut b = http::Request::builder()
        .method(first.next().unwrap())
        .uri(first.next().unwrap());
    for line in lines {
        let (name, value) = line.split_once(':').unwrap();
        b = b.header(name.trim(), value.trim());
    }
    b.body(()).unwrap()
}

#[test]
fn kubectls_port_forward_upgrades_are_accepted() {
    for dir in ["kubectl-1.30-raw", "kubectl-1.32-raw"] {
        assert_eq!(
            negotiate::upgrade(&request(dir), Purpose::PortForward).unwrap(),
            Upgrade::Spdy(negotiate::SpdyUpgrade {
                protocol: SpdyProtocol::PortForward
            }),
            "{dir}"
        );
    }
    let Upgrade::WebSocket(ws) =
        negotiate::upgrade(&request("kubectl-1.32-tunnel"), Purpose::PortForward).unwrap()
    else {
        panic!("not a WebSocket")
    };
    assert_eq!(ws.protocol, WsProtocol::SpdyTunnel);
    // The accept key the capture script answered (computed in Python) — kubectl took it.
    assert_eq!(ws.key, "v69MTBtjEsUERc2Uyb7RkA==");
    assert_eq!(
        ws.response().headers()["sec-websocket-accept"],
        negotiate::accept_key("v69MTBtjEsUERc2Uyb7RkA==").as_str()
    );
}

/// The binary messages of a client's WebSocket bytes (masked frames, unfragmented), and
/// whether a close frame ended them.
fn websocket_messages(mut wire: &[u8]) -> (Vec<Vec<u8>>, bool) {
    let mut messages = Vec::new();
    while wire.len() >= 2 {
        let opcode = wire[0] & 0x0f;
        assert_ne!(wire[0] & 0x80, 0, "fragmented message");
        assert_ne!(wire[1] & 0x80, 0, "unmasked client frame");
        let (len, mut off) = match wire[1] & 0x7f {
            126 => (usize::from(u16::from_be_bytes([wire[2], wire[3]])), 4),
            127 => (
                usize::try_from(u64::from_be_bytes(wire[2..10].try_into().unwrap())).unwrap(),
                10,
            ),
            n => (usize::from(n), 2),
        };
        let mask = [wire[off], wire[off + 1], wire[off + 2], wire[off + 3]];
        off += 4;
        let payload: Vec<u8> = wire[off..off + len]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4])
            .collect();
        wire = &wire[off + len..];
        match opcode {
            2 => messages.push(payload),
            8 => return (messages, true),
            other => panic!("opcode {other}"),
        }
    }
    (messages, false)
}
