use super::*;
use proptest::prelude::*;

fn encode(frames: &[Frame]) -> BytesMut {
    let mut buf = BytesMut::new();
    for f in frames {
        f.encode(&mut buf).unwrap();
    }
    buf
}

/// Feeds `bytes` to a decoder in the given pieces and rebuilds whole frames, checking the
/// slices on the way (bounded, FIN only on a frame's last slice).
fn decode_in_pieces(bytes: &[u8], cuts: &[usize], max_slice: usize) -> Result<Vec<Frame>> {
    let mut decoder = Decoder::new(DEFAULT_MAX_CONTROL, max_slice);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut data: Option<(u32, BytesMut)> = None;
    let mut start = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    points.push(bytes.len());
    for end in points {
        if end < start {
            continue;
        }
        buf.extend_from_slice(&bytes[start..end]);
        start = end;
        while let Some(event) = decoder.decode(&mut buf)? {
            match event {
                Event::Control(f) => {
                    assert!(data.is_none(), "a control frame inside a DATA frame");
                    frames.push(f);
                }
                Event::Data(s) => {
                    assert!(s.data.len() <= max_slice);
                    assert!(!s.fin || s.end_of_frame);
                    let (id, acc) = data.get_or_insert_with(|| (s.stream_id, BytesMut::new()));
                    assert_eq!(*id, s.stream_id);
                    acc.extend_from_slice(&s.data);
                    if s.end_of_frame {
                        let (stream_id, acc) = data.take().unwrap();
                        frames.push(Frame::Data {
                            stream_id,
                            fin: s.fin,
                            data: acc.freeze(),
                        });
                    } else {
                        assert!(!s.data.is_empty(), "an empty slice inside a frame");
                    }
                }
            }
        }
    }
    assert!(buf.is_empty() && decoder.at_frame_boundary());
    Ok(frames)
}

fn block() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from)
}

fn stream_id() -> impl Strategy<Value = u32> {
    1..=MAX_STREAM_ID
}

fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (
            stream_id(),
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..3000)
        )
            .prop_map(|(stream_id, fin, d)| Frame::Data {
                stream_id,
                fin,
                data: Bytes::from(d)
            }),
        (
            stream_id(),
            0..=MAX_STREAM_ID,
            0u8..8,
            any::<u8>(),
            any::<bool>(),
            any::<bool>(),
            block()
        )
            .prop_map(
                |(stream_id, associated_to, priority, slot, fin, unidirectional, headers)| {
                    Frame::SynStream {
                        stream_id,
                        associated_to,
                        priority,
                        slot,
                        fin,
                        unidirectional,
                        headers,
                    }
                }
            ),
        (stream_id(), any::<bool>(), block()).prop_map(|(stream_id, fin, headers)| {
            Frame::SynReply {
                stream_id,
                fin,
                headers,
            }
        }),
        (stream_id(), any::<bool>(), block()).prop_map(|(stream_id, fin, headers)| {
            Frame::Headers {
                stream_id,
                fin,
                headers,
            }
        }),
        (stream_id(), any::<u32>())
            .prop_map(|(stream_id, status)| Frame::RstStream { stream_id, status }),
        (0..=MAX_STREAM_ID, any::<u32>()).prop_map(|(last_good_stream_id, status)| {
            Frame::GoAway {
                last_good_stream_id,
                status,
            }
        }),
        (0..=MAX_STREAM_ID, 0..=MAX_STREAM_ID)
            .prop_map(|(stream_id, delta)| Frame::WindowUpdate { stream_id, delta }),
        any::<u32>().prop_map(|id| Frame::Ping { id }),
        (
            any::<bool>(),
            proptest::collection::vec((any::<u8>(), 0u32..1 << 24, any::<u32>()), 0..5)
        )
            .prop_map(|(clear, e)| Frame::Settings {
                clear,
                entries: e
                    .into_iter()
                    .map(|(flags, id, value)| Setting { flags, id, value })
                    .collect()
            }),
        (10u16..100, any::<u8>(), block()).prop_map(|(kind, flags, payload)| Frame::Unknown {
            kind,
            flags,
            payload
        }),
    ]
}

proptest! {
    #[test]
    fn frames_round_trip_whatever_the_read_boundaries(
        frames in proptest::collection::vec(frame(), 0..12),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
        max_slice in 1usize..5000,
    ) {
        let bytes = encode(&frames);
        prop_assert_eq!(decode_in_pieces(&bytes, &cuts, max_slice).unwrap(), frames);
    }

    #[test]
    fn decoding_garbage_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut decoder = Decoder::new(128, 16);
        let mut buf = BytesMut::new();
        let mut start = 0;
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        points.sort_unstable();
        points.push(bytes.len());
        'feed: for end in points {
            buf.extend_from_slice(&bytes[start..end.max(start)]);
            start = end.max(start);
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => break 'feed,
                }
            }
        }
    }
}

#[test]
fn a_large_data_frame_is_handed_on_in_slices_as_it_arrives() {
    let payload = vec![7u8; 300_000];
    let bytes = encode(&[Frame::Data {
        stream_id: 1,
        fin: true,
        data: Bytes::from(payload),
    }]);
    let mut decoder = Decoder::default();
    let mut buf = BytesMut::from(&bytes[..HEADER_LEN + 1000]);
    let Some(Event::Data(first)) = decoder.decode(&mut buf).unwrap() else {
        panic!("no slice")
    };
    assert_eq!(
        (first.data.len(), first.end_of_frame, first.fin),
        (1000, false, false)
    );
    assert!(decoder.decode(&mut buf).unwrap().is_none());
    buf.extend_from_slice(&bytes[HEADER_LEN + 1000..]);
    let mut sizes = vec![];
    while let Some(Event::Data(s)) = decoder.decode(&mut buf).unwrap() {
        sizes.push((s.data.len(), s.fin));
    }
    assert_eq!(
        sizes,
        vec![
            (DEFAULT_MAX_SLICE, false),
            (DEFAULT_MAX_SLICE, false),
            (300_000 - 1000 - 2 * DEFAULT_MAX_SLICE, true)
        ]
    );
}

#[test]
fn an_empty_data_frame_with_fin_is_one_empty_slice() {
    let bytes = encode(&[Frame::Data {
        stream_id: 3,
        fin: true,
        data: Bytes::new(),
    }]);
    let mut buf = BytesMut::from(&bytes[..]);
    assert_eq!(
        Decoder::default().decode(&mut buf).unwrap(),
        Some(Event::Data(DataSlice {
            stream_id: 3,
            data: Bytes::new(),
            end_of_frame: true,
            fin: true
        }))
    );
}

#[test]
fn known_bytes_encode_as_spdystream_writes_them() {
    let mut buf = BytesMut::new();
    Frame::Ping { id: 1 }.encode(&mut buf).unwrap();
    assert_eq!(&buf[..], &[0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1]);
    buf.clear();
    Frame::RstStream {
        stream_id: 5,
        status: rst::CANCEL,
    }
    .encode(&mut buf)
    .unwrap();
    assert_eq!(
        &buf[..],
        &[0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 5, 0, 0, 0, 5]
    );
    buf.clear();
    Frame::Data {
        stream_id: 1,
        fin: true,
        data: Bytes::from_static(b"hi"),
    }
    .encode(&mut buf)
    .unwrap();
    assert_eq!(&buf[..], &[0, 0, 0, 1, 1, 0, 0, 2, b'h', b'i']);
}

#[test]
fn bounds_and_malformed_frames_are_errors() {
    let decode = |bytes: &[u8]| Decoder::default().decode(&mut BytesMut::from(bytes));
    // A control frame declaring more than 64 KiB is refused before it is buffered.
    assert!(matches!(
        decode(&[0x80, 3, 0, 1, 0, 0x01, 0x00, 0x01]),
        Err(Error::ControlTooLarge { length: 65537, .. })
    ));
    assert!(matches!(
        decode(&[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1]),
        Err(Error::Version { version: 2 })
    ));
    assert!(matches!(
        decode(&[0x80, 3, 0, 6, 0, 0, 0, 3, 0, 0, 1]),
        Err(Error::BadLength { kind: 6, length: 3 })
    ));
    assert!(matches!(
        decode(&[0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 5]),
        Err(Error::ZeroStreamId { kind: 3 })
    ));
    assert!(matches!(
        decode(&[0, 0, 0, 0, 0, 0, 0, 0]),
        Err(Error::ZeroStreamId { kind: 0 })
    ));
    assert!(matches!(
        decode(&[0x80, 3, 0, 4, 0, 0, 0, 8, 0, 0, 0, 2, 0, 0, 0, 0]),
        Err(Error::BadLength { kind: 4, .. })
    ));
    assert!(matches!(
        Frame::Data {
            stream_id: 1,
            fin: false,
            data: Bytes::from(vec![0; MAX_LENGTH + 1])
        }
        .encode(&mut BytesMut::new()),
        Err(Error::Unencodable { .. })
    ));
}
