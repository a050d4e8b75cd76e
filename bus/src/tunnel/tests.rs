use super::*;
use proptest::prelude::*;

fn round_trip(frame: Frame, max_chunk: usize) -> Result<Received, ProtocolError> {
    let id = StreamId::random();
    let ev = encode(up_type(), "agent", "edge-1", &id, 7, frame);
    let bytes = ev.encode(1024 * 1024).unwrap();
    decode(&bytes, 1024 * 1024, &up_type(), "edge-1", max_chunk)
}

#[test]
fn frames_round_trip_with_their_stream_and_counter() {
    for frame in [
        Frame::Data(bytes::Bytes::from_static(b"abc")),
        Frame::End,
        Frame::Credit(12),
        Frame::Cancel("client gone".into()),
        Frame::Ping,
        Frame::Response(TunnelResponse {
            status: 404,
            headers: vec![],
        }),
    ] {
        let got = round_trip(frame.clone(), 16).unwrap();
        assert_eq!(got.seq, 7);
        assert_eq!(got.frame, frame);
    }
}

#[test]
fn oversized_chunks_other_clusters_and_other_directions_are_refused() {
    let big = Frame::Data(bytes::Bytes::from(vec![0u8; 17]));
    assert!(matches!(
        round_trip(big, 16),
        Err(ProtocolError::ChunkTooLarge { size: 17, max: 16 })
    ));
    let id = StreamId::random();
    let bytes = encode(up_type(), "agent", "edge-2", &id, 0, Frame::Ping)
        .encode(1 << 20)
        .unwrap();
    assert!(matches!(
        decode(&bytes, 1 << 20, &up_type(), "edge-1", 16),
        Err(ProtocolError::WrongCluster { .. })
    ));
    assert!(matches!(
        decode(&bytes, 1 << 20, &down_type(), "edge-2", 16),
        Err(ProtocolError::WrongType { .. })
    ));
    assert!(matches!(
        decode(b"garbage", 1 << 20, &up_type(), "edge-2", 16),
        Err(ProtocolError::Envelope(_))
    ));
}

#[test]
fn stream_ids_are_32_hex_digits_only() {
    assert!(StreamId::parse(StreamId::random().as_str()).is_ok());
    for bad in [
        "",
        "ABCDEF0123456789abcdef0123456789",
        "x",
        "../../etc",
        &"a".repeat(33),
    ] {
        assert!(StreamId::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_skipped_or_repeated_frame_breaks_the_sequence() {
    let mut s = SeqCheck::default();
    s.check(0).unwrap();
    s.check(1).unwrap();
    assert!(matches!(
        s.check(1),
        Err(ProtocolError::Sequence { found: 1, want: 2 })
    ));
    let mut s = SeqCheck::default();
    assert!(s.check(3).is_err());
}

#[test]
fn a_sender_waits_for_credit_and_credits_never_go_back() {
    let mut w = SendWindow::new(2);
    assert!(w.may_send());
    w.sent();
    w.sent();
    assert!(!w.may_send());
    w.credit(3).unwrap();
    assert!(w.may_send());
    assert!(w.credit(2).is_err());
}

#[test]
fn data_beyond_the_credit_breaks_the_protocol() {
    let mut r = RecvWindow::new(2);
    r.received().unwrap();
    r.received().unwrap();
    assert!(matches!(
        r.received(),
        Err(ProtocolError::OverCredit {
            sent: 3,
            allowed: 2
        })
    ));
}

#[test]
fn chunks_fit_the_server_payload() {
    assert_eq!(max_chunk_for(1024 * 1024), DEFAULT_MAX_CHUNK);
    assert_eq!(
        max_chunk_for(64 * 1024),
        (64 * 1024 - FRAME_OVERHEAD) as u32
    );
    // A full chunk with its envelope fits the payload it was computed for.
    let max = 64 * 1024;
    let chunk = max_chunk_for(max) as usize;
    let ev = encode(
        up_type(),
        "flotilla-agent/edge-1",
        "edge-1",
        &StreamId::random(),
        u64::MAX,
        Frame::Data(bytes::Bytes::from(vec![7u8; chunk])),
    );
    assert!(ev.encode(max).is_ok());
}

proptest! {
    /// Whatever order data arrives and is consumed in, a receiver never has more than its
    /// window outstanding, and a sender following its credits never breaks it.
    #[test]
    fn credit_bounds_what_is_buffered(window in 1u32..20, steps in proptest::collection::vec(any::<bool>(), 1..400)) {
        let mut recv = RecvWindow::new(window);
        let mut send = SendWindow::new(u64::from(window));
        let (mut buffered, mut total_sent) = (0u64, 0u64);
        for produce in steps {
            if produce && send.may_send() {
                send.sent();
                total_sent += 1;
                recv.received().unwrap();
                buffered += 1;
                prop_assert!(buffered <= u64::from(window));
            } else if buffered > 0 {
                buffered -= 1;
                if let Some(c) = recv.consumed() {
                    send.credit(c).unwrap();
                }
            }
        }
        prop_assert!(recv.granted() >= total_sent);
    }
}
