use super::*;
use proptest::prelude::*;

fn client(protocol: Protocol, bytes: &[u8]) -> Result<ClientMessage> {
    ClientMessage::decode(protocol, Bytes::copy_from_slice(bytes))
}

#[test]
fn stdin_keeps_its_payload_and_a_one_byte_message_is_an_empty_write() {
    assert_eq!(
        client(Protocol::V5, b"\x00hello").unwrap(),
        ClientMessage::Stdin(Bytes::from_static(b"hello"))
    );
    assert_eq!(
        client(Protocol::V4, b"\x00").unwrap(),
        ClientMessage::Stdin(Bytes::new())
    );
}

#[test]
fn v5_close_of_stdin_is_the_end_of_stdin_and_v4_has_no_close() {
    assert_eq!(
        client(Protocol::V5, &[255, 0]).unwrap(),
        ClientMessage::Close(STDIN)
    );
    assert!(matches!(
        client(Protocol::V4, &[255, 0]),
        Err(Error::UnknownChannel { channel: 255, .. })
    ));
    assert!(matches!(
        client(Protocol::V5, &[255]),
        Err(Error::BadClose { len: 0 })
    ));
    assert!(matches!(
        client(Protocol::V5, &[255, 0, 1]),
        Err(Error::BadClose { len: 2 })
    ));
    assert!(matches!(
        client(Protocol::V5, &[255, 9]),
        Err(Error::BadClose { len: 1 })
    ));
}

#[test]
fn resize_reads_kubectl_json_and_lower_case_keys() {
    let want = ClientMessage::Resize(TerminalSize {
        width: 120,
        height: 40,
    });
    assert_eq!(
        client(Protocol::V5, b"\x04{\"Width\":120,\"Height\":40}").unwrap(),
        want
    );
    assert_eq!(
        client(Protocol::V4, b"\x04{\"width\":120,\"height\":40}").unwrap(),
        want
    );
    assert!(matches!(
        client(Protocol::V5, b"\x04{\"Width\":70000,\"Height\":40}"),
        Err(Error::BadResize { .. })
    ));
    assert!(matches!(
        client(Protocol::V5, b"\x04not json"),
        Err(Error::BadResize { .. })
    ));
    let mut huge = vec![RESIZE];
    huge.extend(std::iter::repeat_n(b' ', MAX_RESIZE_PAYLOAD + 1));
    assert!(matches!(
        client(Protocol::V5, &huge),
        Err(Error::ResizeTooLarge { .. })
    ));
}

#[test]
fn server_channels_from_the_client_are_dropped_and_unknown_ones_refused() {
    assert_eq!(
        client(Protocol::V5, b"\x01x").unwrap(),
        ClientMessage::Ignored(1)
    );
    assert_eq!(
        client(Protocol::V5, b"\x03").unwrap(),
        ClientMessage::Ignored(3)
    );
    assert!(matches!(
        client(Protocol::V5, b"\x05x"),
        Err(Error::UnknownChannel { channel: 5, .. })
    ));
}

#[test]
fn empty_and_oversized_client_messages_are_refused() {
    assert!(matches!(client(Protocol::V5, b""), Err(Error::Empty)));
    let big = vec![0u8; MAX_CLIENT_MESSAGE + 1];
    assert!(matches!(
        client(Protocol::V5, &big),
        Err(Error::TooLarge { .. })
    ));
    let fits = vec![0u8; MAX_CLIENT_MESSAGE];
    assert!(client(Protocol::V5, &fits).is_ok());
}

#[test]
fn server_messages_carry_their_channel_byte() {
    assert_eq!(
        &ServerMessage::Stdout(Bytes::from_static(b"hi\n")).encode()[..],
        b"\x01hi\n"
    );
    assert_eq!(
        &ServerMessage::Stderr(Bytes::from_static(b"oops")).encode()[..],
        b"\x02oops"
    );
    assert_eq!(
        &ServerMessage::Status(Bytes::from_static(b"{}")).encode()[..],
        b"\x03{}"
    );
    assert!(matches!(
        ServerMessage::decode(Bytes::from_static(&[255, 1])),
        Err(Error::UnknownChannel { channel: 255, .. })
    ));
    assert!(matches!(
        ServerMessage::decode(Bytes::new()),
        Err(Error::Empty)
    ));
}

#[test]
fn protocol_names_are_the_subprotocols() {
    assert_eq!(Protocol::V5.name(), "v5.channel.k8s.io");
    assert_eq!(Protocol::V4.name(), "v4.channel.k8s.io");
}

fn client_message() -> impl Strategy<Value = ClientMessage> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..2048)
            .prop_map(|v| ClientMessage::Stdin(Bytes::from(v))),
        (0u8..=4).prop_map(ClientMessage::Close),
        (any::<u16>(), any::<u16>())
            .prop_map(|(width, height)| ClientMessage::Resize(TerminalSize { width, height })),
        (1u8..=3).prop_map(ClientMessage::Ignored),
    ]
}

fn server_message() -> impl Strategy<Value = ServerMessage> {
    let data = || proptest::collection::vec(any::<u8>(), 0..2048).prop_map(Bytes::from);
    prop_oneof![
        data().prop_map(ServerMessage::Stdout),
        data().prop_map(ServerMessage::Stderr),
        data().prop_map(ServerMessage::Status),
    ]
}

proptest! {
    #[test]
    fn client_messages_round_trip_on_v5(msg in client_message()) {
        prop_assert_eq!(ClientMessage::decode(Protocol::V5, msg.encode()).unwrap(), msg);
    }

    #[test]
    fn server_messages_round_trip(msg in server_message()) {
        prop_assert_eq!(ServerMessage::decode(msg.encode()).unwrap(), msg);
    }

    #[test]
    fn client_decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = ClientMessage::decode(Protocol::V5, Bytes::from(bytes.clone()));
        let _ = ClientMessage::decode(Protocol::V4, Bytes::from(bytes));
    }
}
