use super::*;
use proptest::prelude::*;

fn port_forward(kind: &str, id: &str) -> Headers {
    Headers::new()
        .with("streamtype", kind)
        .unwrap()
        .with("port", "8080")
        .unwrap()
        .with("requestid", id)
        .unwrap()
}

#[test]
fn blocks_round_trip_through_one_context_per_direction() {
    let mut enc = Encoder::new().unwrap();
    let mut dec = Decoder::new();
    for i in 0..50 {
        let h = port_forward(if i % 2 == 0 { "error" } else { "data" }, &i.to_string());
        let block = enc.encode(&h).unwrap();
        // A sync flush ends every block.
        assert!(block.ends_with(&[0, 0, 0xff, 0xff]), "block {i}");
        assert_eq!(dec.decode(&block).unwrap(), h);
    }
    assert_eq!(
        dec.decode(&enc.encode(&Headers::new()).unwrap()).unwrap(),
        Headers::new()
    );
}

#[test]
fn the_first_block_names_the_spdy_dictionary() {
    let block = Encoder::new()
        .unwrap()
        .encode(&port_forward("data", "0"))
        .unwrap();
    // zlib header with FDICT set, then the dictionary's Adler-32.
    assert_eq!(block[0] & 0x0f, 8);
    assert_ne!(block[1] & 0x20, 0);
    assert_eq!(&block[2..6], &DICTIONARY_ID.to_be_bytes());
    assert_eq!(DICTIONARY.len(), 1423);
}

#[test]
fn a_block_from_another_context_does_not_read() {
    let mut enc = Encoder::new().unwrap();
    let first = enc.encode(&port_forward("error", "0")).unwrap();
    let second = enc.encode(&port_forward("data", "0")).unwrap();
    // Skipping the first block (say, a refused stream's) breaks the context.
    assert!(Decoder::new().decode(&second).is_err());
    let mut dec = Decoder::new();
    dec.decode(&first).unwrap();
    assert_eq!(dec.decode(&second).unwrap(), port_forward("data", "0"));
}

#[test]
fn values_are_nul_joined_and_names_checked() {
    let mut h = Headers::new();
    h.insert("x-stream-protocol-version", &["a", "b"]).unwrap();
    assert_eq!(
        h.values("x-stream-protocol-version").unwrap(),
        &["a".to_owned(), "b".to_owned()]
    );
    let block = h.to_block().unwrap();
    assert!(block.windows(3).any(|w| w == b"a\0b"));
    assert_eq!(Headers::from_block(&block).unwrap(), h);
    assert!(matches!(
        h.insert("x-stream-protocol-version", &["c"]),
        Err(Error::Duplicate { .. })
    ));
    assert!(matches!(
        h.insert("Port", &["1"]),
        Err(Error::BadName { .. })
    ));
    assert!(matches!(h.insert("", &["1"]), Err(Error::BadName { .. })));
    assert!(matches!(
        h.insert("v", &["a\0b"]),
        Err(Error::Malformed { .. })
    ));
}

fn raw_block(pairs: &[(&[u8], &[u8])], count: u32) -> Vec<u8> {
    let mut b = count.to_be_bytes().to_vec();
    for (n, v) in pairs {
        b.extend((n.len() as u32).to_be_bytes());
        b.extend(*n);
        b.extend((v.len() as u32).to_be_bytes());
        b.extend(*v);
    }
    b
}

#[test]
fn malformed_blocks_are_refused() {
    let dup = raw_block(&[(b"port", b"1"), (b"port", b"2")], 2);
    assert!(matches!(
        Headers::from_block(&dup),
        Err(Error::Duplicate { .. })
    ));
    let upper = raw_block(&[(b"Port", b"1")], 1);
    assert!(matches!(
        Headers::from_block(&upper),
        Err(Error::BadName { .. })
    ));
    let short = raw_block(&[(b"port", b"1")], 2);
    assert!(matches!(
        Headers::from_block(&short),
        Err(Error::Malformed { .. })
    ));
    let mut trailing = raw_block(&[(b"port", b"1")], 1);
    trailing.push(0);
    assert!(matches!(
        Headers::from_block(&trailing),
        Err(Error::Malformed { .. })
    ));
    let lying = [0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
    assert!(matches!(
        Headers::from_block(&lying),
        Err(Error::Malformed { .. })
    ));
    let many = 1_000_000u32.to_be_bytes();
    assert!(matches!(
        Headers::from_block(&many),
        Err(Error::TooManyPairs { .. })
    ));
    let binary = raw_block(&[(b"port", b"\xff")], 1);
    assert!(matches!(
        Headers::from_block(&binary),
        Err(Error::NotUtf8 { .. })
    ));
}

#[test]
fn a_zip_bomb_is_refused() {
    // 64 KiB of one letter in one value deflates to well under a kilobyte.
    let value = "a".repeat(MAX_BLOCK + 1);
    let block = raw_block(&[(b"x", value.as_bytes())], 1);
    let mut z = Compress::new(Compression::best(), true);
    z.set_dictionary(&DICTIONARY).unwrap();
    let mut out = Vec::with_capacity(block.len());
    z.compress_vec(&block, &mut out, FlushCompress::Sync)
        .unwrap();
    assert!(out.len() < 2048);
    assert!(matches!(Decoder::new().decode(&out), Err(Error::TooLarge)));
    // Encoding refuses it too.
    let mut h = Headers::new();
    h.insert("x", &[value.as_str()]).unwrap();
    assert!(matches!(
        Encoder::new().unwrap().encode(&h),
        Err(Error::TooLarge)
    ));
}

#[test]
fn a_stream_asking_for_another_dictionary_is_refused() {
    let mut z = Compress::new(Compression::default(), true);
    z.set_dictionary(b"not the spdy dictionary").unwrap();
    let mut out = Vec::with_capacity(256);
    z.compress_vec(&raw_block(&[], 0), &mut out, FlushCompress::Sync)
        .unwrap();
    assert!(matches!(
        Decoder::new().decode(&out),
        Err(Error::WrongDictionary { .. })
    ));
    // A block type of 3 is reserved: corrupt deflate data.
    assert!(matches!(
        Decoder::new().decode(&[0x78, 0x9c, 0xff, 0xff, 0xff]),
        Err(Error::Inflate { .. })
    ));
}

fn headers() -> impl Strategy<Value = Headers> {
    proptest::collection::btree_map(
        "[a-z][a-z0-9-]{0,15}",
        proptest::collection::vec("[ -~]{0,30}", 1..3),
        0..12,
    )
    .prop_map(|m| {
        let mut h = Headers::new();
        for (n, v) in &m {
            let v: Vec<&str> = v.iter().map(String::as_str).collect();
            h.insert(n, &v).unwrap();
        }
        h
    })
}

proptest! {
    #[test]
    fn any_sequence_of_blocks_round_trips(seq in proptest::collection::vec(headers(), 1..8)) {
        let mut enc = Encoder::new().unwrap();
        let mut dec = Decoder::new();
        for h in &seq {
            let block = enc.encode(h).unwrap();
            prop_assert_eq!(&dec.decode(&block).unwrap(), h);
        }
    }

    #[test]
    fn inflating_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Decoder::new().decode(&bytes);
    }
}
