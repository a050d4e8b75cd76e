use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::timeout;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::*;
use crate::spdy::conn::{self, tests::echo};
use crate::spdy::frame::{Decoder, Event, Frame};
use crate::spdy::headers;

const T: Duration = Duration::from_secs(5);

async fn pair() -> (
    WsIo<WebSocketStream<DuplexStream>>,
    WebSocketStream<DuplexStream>,
) {
    let (a, b) = tokio::io::duplex(256 * 1024);
    let server = WebSocketStream::from_raw_socket(a, Role::Server, None).await;
    let client = WebSocketStream::from_raw_socket(b, Role::Client, None).await;
    (WsIo::new(server), client)
}

#[tokio::test]
async fn reads_join_binary_messages_of_any_size_until_close() {
    let (mut io, mut client) = pair().await;
    let pieces: Vec<&[u8]> = vec![
        b"\x80\x03",
        b"",
        b"\x00\x06",
        b"\x00",
        b"\x00\x00\x04",
        b"rest",
    ];
    let reading = tokio::spawn(async move {
        let mut all = Vec::new();
        io.read_to_end(&mut all).await.map(|_| all)
    });
    for p in &pieces {
        client
            .send(Message::Binary(Bytes::copy_from_slice(p)))
            .await
            .unwrap();
    }
    // A ping is answered while the server only reads.
    client
        .send(Message::Ping(Bytes::from_static(b"p")))
        .await
        .unwrap();
    assert_eq!(
        timeout(T, client.next()).await.unwrap().unwrap().unwrap(),
        Message::Pong(Bytes::from_static(b"p"))
    );
    client.close(None).await.unwrap();
    let all = timeout(T, reading).await.unwrap().unwrap().unwrap();
    assert_eq!(all, pieces.concat());
}

async fn next_message(c: &mut WebSocketStream<DuplexStream>) -> Message {
    timeout(T, c.next()).await.unwrap().unwrap().unwrap()
}

#[tokio::test]
async fn writes_are_binary_messages_and_shutdown_closes_with_1000() {
    let (mut io, mut client) = pair().await;
    io.write_all(b"hello").await.unwrap();
    io.write_all(&vec![7u8; MAX_WRITE_MESSAGE + 10])
        .await
        .unwrap();
    io.flush().await.unwrap();
    assert_eq!(
        next_message(&mut client).await,
        Message::Binary(Bytes::from_static(b"hello"))
    );
    let Message::Binary(big) = next_message(&mut client).await else {
        panic!("not binary")
    };
    assert_eq!(big.len(), MAX_WRITE_MESSAGE);
    let Message::Binary(rest) = next_message(&mut client).await else {
        panic!("not binary")
    };
    assert_eq!(rest.len(), 10);
    let shutting = tokio::spawn(async move { io.shutdown().await });
    let Message::Close(Some(close)) = next_message(&mut client).await else {
        panic!("no close frame")
    };
    assert_eq!(close.code, CloseCode::Normal);
    // The client answers the close; the server's shutdown completes.
    while let Some(Ok(_)) = timeout(T, client.next()).await.unwrap() {}
    timeout(T, shutting).await.unwrap().unwrap().unwrap();
}

#[tokio::test]
async fn a_text_message_is_an_error() {
    let (mut io, mut client) = pair().await;
    client.send(Message::text("no")).await.unwrap();
    let mut buf = [0u8; 8];
    let err = timeout(T, io.read(&mut buf)).await.unwrap().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
}

/// The payloads of WebSocket frames (masked or not) and whether a close frame came.
fn messages(mut wire: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    while wire.len() >= 2 {
        let opcode = wire[0] & 0x0f;
        let masked = wire[1] & 0x80 != 0;
        let ext = match wire[1] & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        if wire.len() < 2 + ext + if masked { 4 } else { 0 } {
            break;
        }
        let (len, mut off) = match wire[1] & 0x7f {
            126 => (usize::from(u16::from_be_bytes([wire[2], wire[3]])), 4),
            127 => (
                usize::try_from(u64::from_be_bytes(wire[2..10].try_into().unwrap())).unwrap(),
                10,
            ),
            n => (usize::from(n), 2),
        };
        let mask = if masked {
            off += 4;
            [wire[off - 4], wire[off - 3], wire[off - 2], wire[off - 1]]
        } else {
            [0; 4]
        };
        if wire.len() < off + len {
            // A frame not read whole yet.
            break;
        }
        let payload = wire[off..off + len]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4]);
        wire = &wire[off + len..];
        match opcode {
            2 => out.extend(payload),
            8 => return (out, true),
            _ => {}
        }
    }
    (out, false)
}

/// Where kubectl's close frame starts in its recorded bytes.
fn close_offset(wire: &[u8]) -> usize {
    let mut off = 0;
    while wire[off] & 0x0f != 8 {
        let (len, head) = match wire[off + 1] & 0x7f {
            126 => (
                usize::from(u16::from_be_bytes([wire[off + 2], wire[off + 3]])),
                4,
            ),
            127 => (
                usize::try_from(u64::from_be_bytes(
                    wire[off + 2..off + 10].try_into().unwrap(),
                ))
                .unwrap(),
                10,
            ),
            n => (usize::from(n), 2),
        };
        off += head + 4 + len;
    }
    off
}

#[derive(Debug, Default)]
struct Answer {
    replies: Vec<u32>,
    echoed: Vec<u8>,
    fins: Vec<u32>,
    closed: bool,
}

/// What the server's bytes so far say.
fn answer(wire: &[u8]) -> Answer {
    let (spdy, closed) = messages(wire);
    let mut frames = Decoder::default();
    let mut zlib = headers::Decoder::new();
    let mut buf = bytes::BytesMut::from(&spdy[..]);
    let mut a = Answer {
        closed,
        ..Answer::default()
    };
    while let Some(event) = frames.decode(&mut buf).unwrap() {
        match event {
            Event::Control(Frame::SynReply {
                stream_id, headers, ..
            }) => {
                assert!(zlib.decode(&headers).unwrap().is_empty());
                a.replies.push(stream_id);
            }
            Event::Data(s) => {
                if s.stream_id == 7 {
                    a.echoed.extend_from_slice(&s.data);
                }
                if s.fin {
                    a.fins.push(s.stream_id);
                }
            }
            Event::Control(_) => {}
        }
    }
    a
}

async fn read_until(io: &mut DuplexStream, wire: &mut Vec<u8>, done: impl Fn(&Answer) -> bool) {
    while !done(&answer(wire)) {
        let n = timeout(T, io.read_buf(wire)).await.unwrap().unwrap();
        assert_ne!(n, 0, "the server ended early: {:?}", answer(wire));
    }
}

#[tokio::test]
async fn kubectls_recorded_tunnel_is_served_through_wsio_and_spdy() {
    let wire = include_bytes!("../../tests/fixtures/kubectl-1.32-tunnel/client.ws");
    let close = close_offset(wire);
    let (ours, mut theirs) = tokio::io::duplex(1 << 20);
    let ws = WebSocketStream::from_raw_socket(ours, Role::Server, None).await;
    let (conn, driver) = conn::serve(WsIo::new(ws), &conn::Config::default());
    let driver = tokio::spawn(driver);
    let app = tokio::spawn(echo(conn));
    // Everything but the close frame, as kubectl sent it before it waited for the echoes.
    theirs.write_all(&wire[..close]).await.unwrap();
    let mut got = Vec::new();
    read_until(&mut theirs, &mut got, |a| a.fins.len() == 4).await;
    theirs.write_all(&wire[close..]).await.unwrap();
    read_until(&mut theirs, &mut got, |a| a.closed).await;
    timeout(T, app).await.unwrap().unwrap();
    drop(theirs);
    let _ = timeout(T, driver).await.unwrap().unwrap();
    let mut a = answer(&got);
    assert_eq!(a.replies, vec![1, 3, 5, 7]);
    assert_eq!(
        a.echoed,
        (0..=255u8).cycle().take(40960).collect::<Vec<_>>()
    );
    a.fins.sort_unstable();
    assert_eq!(a.fins, vec![1, 3, 5, 7]);
}
