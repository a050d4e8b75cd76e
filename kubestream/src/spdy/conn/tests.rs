use std::time::Duration;

use tokio::io::DuplexStream;
use tokio::task::JoinSet;
use tokio::time::timeout;

use super::*;

const T: Duration = Duration::from_secs(5);

/// The client's side of a connection, speaking SPDY with the crate's own codecs.
struct Client {
    io: DuplexStream,
    zout: headers::Encoder,
    zin: headers::Decoder,
    frames: Decoder,
    buf: BytesMut,
}

impl Client {
    fn new(io: DuplexStream) -> Client {
        Client {
            io,
            zout: headers::Encoder::new().unwrap(),
            zin: headers::Decoder::new(),
            frames: Decoder::new(1 << 20, 1 << 24),
            buf: BytesMut::new(),
        }
    }

    async fn send(&mut self, frame: Frame) {
        let mut b = BytesMut::new();
        frame.encode(&mut b).unwrap();
        self.io.write_all(&b).await.unwrap();
    }

    async fn syn(&mut self, id: u32, kind: &str, request: &str) {
        let h = Headers::new()
            .with("streamtype", kind)
            .unwrap()
            .with("port", "80")
            .unwrap()
            .with("requestid", request)
            .unwrap();
        let headers = self.zout.encode(&h).unwrap();
        self.send(Frame::SynStream {
            stream_id: id,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers,
        })
        .await;
    }

    async fn data(&mut self, id: u32, fin: bool, data: &[u8]) {
        self.send(Frame::Data {
            stream_id: id,
            fin,
            data: Bytes::copy_from_slice(data),
        })
        .await;
    }

    /// The next frame from the server (DATA whole), `None` at its end.
    async fn frame(&mut self) -> Option<Frame> {
        let mut data: Option<(u32, BytesMut)> = None;
        loop {
            while let Some(event) = self.frames.decode(&mut self.buf).unwrap() {
                match event {
                    Event::Control(Frame::SynReply {
                        stream_id,
                        fin,
                        headers,
                    }) => {
                        let h = self.zin.decode(&headers).unwrap();
                        assert!(h.is_empty(), "a reply with headers");
                        return Some(Frame::SynReply {
                            stream_id,
                            fin,
                            headers: Bytes::new(),
                        });
                    }
                    Event::Control(f) => return Some(f),
                    Event::Data(s) => {
                        let (_, acc) = data.get_or_insert_with(|| (s.stream_id, BytesMut::new()));
                        acc.extend_from_slice(&s.data);
                        if s.end_of_frame {
                            let (stream_id, acc) = data.take().unwrap();
                            return Some(Frame::Data {
                                stream_id,
                                fin: s.fin,
                                data: acc.freeze(),
                            });
                        }
                    }
                }
            }
            let n = timeout(T, self.io.read_buf(&mut self.buf))
                .await
                .expect("the server answers")
                .unwrap();
            if n == 0 {
                return None;
            }
        }
    }

    async fn expect(&mut self, want: Frame) {
        assert_eq!(self.frame().await, Some(want));
    }
}

fn reply(id: u32) -> Frame {
    Frame::SynReply {
        stream_id: id,
        fin: false,
        headers: Bytes::new(),
    }
}

fn data(id: u32, fin: bool, d: &[u8]) -> Frame {
    Frame::Data {
        stream_id: id,
        fin,
        data: Bytes::copy_from_slice(d),
    }
}

fn start(
    config: Config,
) -> (
    Client,
    Connection,
    tokio::task::JoinHandle<Result<(), Error>>,
) {
    let (ours, theirs) = tokio::io::duplex(256 * 1024);
    let (conn, driver) = serve(ours, &config);
    (Client::new(theirs), conn, tokio::spawn(driver))
}

/// Accepts every stream and echoes it; FIN answered with FIN.
pub(crate) async fn echo(mut conn: Connection) {
    let mut tasks = JoinSet::new();
    while let Some(incoming) = conn.next().await {
        let (mut rx, mut tx) = incoming.accept().await.unwrap();
        tasks.spawn(async move {
            while let Ok(Some(d)) = rx.recv().await {
                tx.send(d).await.unwrap();
            }
            let _ = tx.finish().await;
        });
    }
    while tasks.join_next().await.is_some() {}
}

#[tokio::test]
async fn kubectls_recorded_port_forward_is_served_and_echoed() {
    let client_bytes = include_bytes!("../../../tests/fixtures/kubectl-1.30-raw/client.bin");
    let (mut client, conn, driver) = start(Config::default());
    let app = tokio::spawn(echo(conn));
    client.io.write_all(client_bytes).await.unwrap();
    client.io.shutdown().await.unwrap();
    let mut frames = Vec::new();
    while let Some(f) = client.frame().await {
        frames.push(f);
    }
    timeout(T, app).await.unwrap().unwrap();
    timeout(T, driver).await.unwrap().unwrap().unwrap();
    let replies: Vec<u32> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::SynReply { stream_id, .. } => Some(*stream_id),
            _ => None,
        })
        .collect();
    assert_eq!(replies, vec![1, 3, 5, 7]);
    let echoed = |id: u32| -> Vec<u8> {
        frames
            .iter()
            .filter_map(|f| match f {
                Frame::Data {
                    stream_id, data, ..
                } if *stream_id == id => Some(data.to_vec()),
                _ => None,
            })
            .flatten()
            .collect()
    };
    assert_eq!(echoed(3), b"hello fixture\n");
    assert_eq!(
        echoed(7),
        (0..=255u8).cycle().take(40960).collect::<Vec<_>>()
    );
    for id in [1, 3, 5, 7] {
        assert!(frames.contains(&data(id, true, b"")), "no FIN on {id}");
    }
    // kubectl's pings (odd ids) are echoed.
    assert!(frames.contains(&Frame::Ping { id: 1 }));
    assert!(frames.contains(&Frame::Ping { id: 3 }));
}

#[tokio::test]
async fn a_full_stream_stops_reading_the_connection_and_memory_stays_bounded() {
    let config = Config {
        stream_buffer: 2,
        ..Config::default()
    };
    let (mut client, mut conn, _driver) = start(config);
    client.syn(1, "data", "0").await;
    client.syn(3, "data", "1").await;
    let (mut slow, _tx1) = conn.next().await.unwrap().accept().await.unwrap();
    let (mut fast, _tx3) = conn.next().await.unwrap().accept().await.unwrap();
    client.expect(reply(1)).await;
    client.expect(reply(3)).await;
    for i in 0..10u8 {
        client.data(1, false, &[i; 100]).await;
    }
    client.data(3, false, b"behind").await;
    // Stream 1 holds two slices and the reader waits on the third: stream 3 gets nothing.
    assert!(
        timeout(Duration::from_millis(300), fast.recv())
            .await
            .is_err()
    );
    for i in 0..10u8 {
        assert_eq!(
            slow.recv().await.unwrap().unwrap(),
            Bytes::from(vec![i; 100])
        );
    }
    assert_eq!(
        timeout(T, fast.recv()).await.unwrap().unwrap().unwrap(),
        "behind"
    );
}

#[tokio::test]
async fn refused_streams_get_rst_refused_and_so_do_streams_past_the_limit() {
    let config = Config {
        max_streams: 1,
        ..Config::default()
    };
    let (mut client, mut conn, _driver) = start(config);
    client.syn(1, "data", "0").await;
    conn.next().await.unwrap().refuse().await.unwrap();
    client
        .expect(Frame::RstStream {
            stream_id: 1,
            status: rst::REFUSED_STREAM,
        })
        .await;
    client.syn(3, "data", "1").await;
    let _kept = conn.next().await.unwrap().accept().await.unwrap();
    client.expect(reply(3)).await;
    client.syn(5, "error", "2").await;
    client
        .expect(Frame::RstStream {
            stream_id: 5,
            status: rst::REFUSED_STREAM,
        })
        .await;
    // A refused stream's late DATA is dropped, not an error.
    client.data(1, true, b"late").await;
    client.send(Frame::Ping { id: 7 }).await;
    client.expect(Frame::Ping { id: 7 }).await;
}

#[tokio::test]
async fn a_client_reset_reaches_both_halves_and_a_dropped_half_resets() {
    let (mut client, mut conn, _driver) = start(Config::default());
    client.syn(1, "data", "0").await;
    client.syn(3, "data", "1").await;
    let (mut rx, mut tx) = conn.next().await.unwrap().accept().await.unwrap();
    let (_rx3, tx3) = conn.next().await.unwrap().accept().await.unwrap();
    client.expect(reply(1)).await;
    client.expect(reply(3)).await;
    client
        .send(Frame::RstStream {
            stream_id: 1,
            status: rst::CANCEL,
        })
        .await;
    assert_eq!(
        timeout(T, rx.recv()).await.unwrap(),
        Err(StreamError::Reset {
            status: rst::CANCEL
        })
    );
    assert_eq!(
        tx.send(Bytes::from_static(b"x")).await,
        Err(StreamError::Reset {
            status: rst::CANCEL
        })
    );
    drop(tx3);
    client
        .expect(Frame::RstStream {
            stream_id: 3,
            status: rst::CANCEL,
        })
        .await;
}

#[tokio::test]
async fn large_writes_are_cut_into_frames_and_goaway_names_the_last_stream() {
    let config = Config {
        max_write_frame: 1000,
        ..Config::default()
    };
    let (mut client, mut conn, driver) = start(config);
    client.syn(1, "data", "0").await;
    let (_rx, mut tx) = conn.next().await.unwrap().accept().await.unwrap();
    client.expect(reply(1)).await;
    let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
    let sending = tokio::spawn(async move {
        tx.send(Bytes::from(payload)).await.unwrap();
        tx.finish().await.unwrap();
    });
    let want: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
    client.expect(data(1, false, &want[..1000])).await;
    client.expect(data(1, false, &want[1000..2000])).await;
    client.expect(data(1, false, &want[2000..])).await;
    client.expect(data(1, true, b"")).await;
    timeout(T, sending).await.unwrap().unwrap();
    conn.goaway(goaway::OK).await.unwrap();
    client
        .expect(Frame::GoAway {
            last_good_stream_id: 1,
            status: goaway::OK,
        })
        .await;
    // The client goes; with every handle dropped the driver ends and closes.
    client.io.shutdown().await.unwrap();
    assert!(conn.next().await.is_none());
    drop(conn);
    assert!(client.frame().await.is_none());
    timeout(T, driver).await.unwrap().unwrap().unwrap();
}

#[tokio::test]
async fn protocol_errors_end_the_connection_with_goaway() {
    let (mut client, mut conn, driver) = start(Config::default());
    client.syn(2, "data", "0").await;
    client
        .expect(Frame::GoAway {
            last_good_stream_id: 0,
            status: goaway::PROTOCOL_ERROR,
        })
        .await;
    assert!(conn.next().await.is_none());
    drop(conn);
    assert!(matches!(
        timeout(T, driver).await.unwrap().unwrap(),
        Err(Error::Protocol { .. })
    ));

    let (mut client, conn, driver) = start(Config::default());
    // A control frame declaring 1 MiB.
    client
        .io
        .write_all(&[0x80, 3, 0, 1, 0, 0x10, 0, 0])
        .await
        .unwrap();
    client
        .expect(Frame::GoAway {
            last_good_stream_id: 0,
            status: goaway::PROTOCOL_ERROR,
        })
        .await;
    drop(conn);
    assert!(matches!(
        timeout(T, driver).await.unwrap().unwrap(),
        Err(Error::Frame { .. })
    ));
}

#[tokio::test]
async fn a_header_block_that_does_not_inflate_ends_the_connection() {
    let (mut client, conn, driver) = start(Config::default());
    client
        .send(Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers: Bytes::from_static(&[0x78, 0x9c, 0xff, 0xff, 0xff]),
        })
        .await;
    client
        .expect(Frame::GoAway {
            last_good_stream_id: 0,
            status: goaway::PROTOCOL_ERROR,
        })
        .await;
    drop(conn);
    assert!(matches!(
        timeout(T, driver).await.unwrap().unwrap(),
        Err(Error::Headers { .. })
    ));
}

fn pinging() -> Config {
    Config {
        ping_interval: Some(Duration::from_millis(50)),
        silence_limit: Some(Duration::from_millis(300)),
        ..Config::default()
    }
}

#[tokio::test]
async fn a_quiet_client_is_pinged_and_a_silent_one_is_let_go() {
    let (mut client, conn, driver) = start(pinging());
    // The client reads but never answers: our even pings, then GOAWAY and the end.
    client.expect(Frame::Ping { id: 2 }).await;
    client.expect(Frame::Ping { id: 4 }).await;
    loop {
        match client.frame().await {
            Some(Frame::Ping { id }) => assert_eq!(id % 2, 0),
            Some(other) => {
                assert_eq!(
                    other,
                    Frame::GoAway {
                        last_good_stream_id: 0,
                        status: goaway::OK
                    }
                );
                break;
            }
            None => panic!("no GOAWAY"),
        }
    }
    drop(conn);
    assert!(matches!(
        timeout(T, driver).await.unwrap().unwrap(),
        Err(Error::Silent(_))
    ));
}

#[tokio::test]
async fn a_client_answering_pings_stays_however_long_it_is_quiet() {
    let (mut client, conn, driver) = start(pinging());
    let started = std::time::Instant::now();
    // As spdystream does: every ping of the other side echoed.
    while started.elapsed() < Duration::from_millis(1000) {
        match client.frame().await {
            Some(Frame::Ping { id }) => client.send(Frame::Ping { id }).await,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(!driver.is_finished(), "a live client was let go");
    drop(client);
    drop(conn);
    assert!(timeout(T, driver).await.unwrap().unwrap().is_ok());
}

#[tokio::test]
async fn a_client_gone_while_its_stream_is_full_ends_the_connection() {
    let config = Config {
        stream_buffer: 1,
        ..pinging()
    };
    let (mut client, mut conn, driver) = start(config);
    client.syn(1, "data", "0").await;
    // Taken, never read: the reader waits on the stream's room, not on the socket.
    let (_rx, _tx) = conn.next().await.unwrap().accept().await.unwrap();
    client.expect(reply(1)).await;
    for i in 0..4u8 {
        client.data(1, false, &[i; 100]).await;
    }
    // Pinged meanwhile, well past the silence limit: waiting on our own stream is no silence.
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(600) {
        let frame = client.frame().await;
        assert!(matches!(frame, Some(Frame::Ping { .. })), "{frame:?}");
    }
    assert!(!driver.is_finished(), "a waiting client was let go");
    // The client goes without a word: the next ping's write fails and the connection ends.
    drop(client);
    let ended = timeout(T, driver).await.expect("the connection ended");
    assert!(matches!(ended.unwrap(), Err(Error::Io { .. })));
}
