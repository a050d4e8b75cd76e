//! Who may deliver how much: rates, the share of places, the penalty, the body's pace,
//! trusted proxies, and the forward's size.
use super::*;

#[test]
fn each_source_has_its_own_rate_and_the_table_stays_bounded() {
    let now = Instant::now();
    let mut rates = Rates::new(10.0, 20.0);
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let b = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    assert_eq!((0..25).filter(|_| rates.admit(a, now)).count(), 20);
    assert!(rates.admit(b, now), "another source is not held back");
    assert!(!rates.admit(a, now));
    assert!(rates.admit(a, now + Duration::from_millis(100)), "refilled");
    for i in 0..(SOURCES as u32 + 10) {
        rates.admit(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), now);
    }
    assert!(rates.len() <= SOURCES, "{}", rates.len());
}

#[test]
fn a_sender_rotating_addresses_neither_resets_the_others_nor_escapes_by_ipv6() {
    let now = Instant::now();
    let mut rates = Rates::new(10.0, 20.0);
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    assert_eq!((0..25).filter(|_| rates.admit(a, now)).count(), 20);
    // Every remembered bucket busy: a new source is refused, the old ones are kept.
    for i in 0..(SOURCES as u32) {
        rates.admit(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), now);
    }
    assert!(!rates.admit(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9)), now));
    assert!(!rates.admit(a, now), "a's bucket was not handed back full");
    assert!(rates.len() <= SOURCES);
    // Once buckets refill they are forgotten and new sources come in.
    let later = now + Duration::from_secs(5);
    assert!(rates.admit(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9)), later));

    // An IPv6 /64 is one source, whatever the address within it; an IPv4-mapped one is v4.
    let mut rates = Rates::new(10.0, 20.0);
    let admitted = (0..40u128)
        .filter(|i| {
            let ip: std::net::Ipv6Addr = (0x2001_0db8_0000_0001_0000_0000_0000_0000u128 + i).into();
            rates.admit(IpAddr::V6(ip), now)
        })
        .count();
    assert_eq!(admitted, 20);
    let other: std::net::Ipv6Addr = 0x2001_0db8_0000_0002_0000_0000_0000_0001u128.into();
    assert!(
        rates.admit(IpAddr::V6(other), now),
        "another /64 has its own"
    );
    let mapped = Ipv4Addr::new(198, 51, 100, 7).to_ipv6_mapped();
    assert_eq!(
        (0..25)
            .filter(|_| rates.admit(IpAddr::V6(mapped), now))
            .count(),
        20
    );
    assert!(!rates.admit(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)), now));
}

#[test]
fn a_source_holds_at_most_its_share_of_the_deliveries_in_flight() {
    let now = Instant::now();
    let mut pool = Pool::new(16, 2);
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    assert_eq!(pool.take(a, now), Ok(()));
    assert_eq!(pool.take(a, now), Ok(()));
    assert_eq!(pool.take(a, now), Err(Full::Source), "past its share");
    // It takes eight sources to fill the hub; a ninth is told the hub is full.
    for i in 2..=8 {
        let s = IpAddr::V4(Ipv4Addr::new(192, 0, 2, i));
        assert_eq!(
            (pool.take(s, now), pool.take(s, now)),
            (Ok(()), Ok(())),
            "source {i}"
        );
    }
    assert_eq!((pool.taken(), pool.sources()), (16, 8));
    let ninth = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9));
    assert_eq!(pool.take(ninth, now), Err(Full::Hub));
    assert_eq!(
        pool.take(a, now),
        Err(Full::Source),
        "its share is named first"
    );
    pool.give_back(a);
    assert_eq!(
        pool.take(ninth, now),
        Ok(()),
        "a place given back is taken again"
    );
    assert_eq!(pool.take(a, now), Err(Full::Hub));

    // An IPv6 /48 is one source (every /64 in it), an IPv4-mapped address its IPv4 one.
    let mut pool = Pool::new(16, 2);
    let v6 = |i: u128| IpAddr::V6((0x2001_0db8_0000_0001_0000_0000_0000_0000u128 + i).into());
    let next_64 = IpAddr::V6(0x2001_0db8_0000_0002_0000_0000_0000_0001u128.into());
    assert_eq!(holder_of(v6(1)), holder_of(next_64));
    assert_eq!(
        (pool.take(v6(1), now), pool.take(v6(2), now)),
        (Ok(()), Ok(()))
    );
    assert_eq!(pool.take(v6(3), now), Err(Full::Source));
    assert_eq!(pool.take(next_64, now), Err(Full::Source), "the same /48");
    let other = IpAddr::V6(0x2001_0db8_0001_0000_0000_0000_0000_0001u128.into());
    assert_eq!(
        pool.take(other, now),
        Ok(()),
        "another /48 has its own share"
    );
    let mapped = IpAddr::V6(Ipv4Addr::new(198, 51, 100, 7).to_ipv6_mapped());
    let v4 = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));
    assert_eq!(
        (pool.take(mapped, now), pool.take(v4, now)),
        (Ok(()), Ok(()))
    );
    assert_eq!(pool.take(v4, now), Err(Full::Source));
    // Giving back what a source does not hold changes nothing; a source with nothing in
    // flight is forgotten.
    pool.give_back(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)));
    assert_eq!((pool.taken(), pool.sources()), (5, 3));
    for ip in [v6(7), v6(8), other, mapped, v4] {
        pool.give_back(ip);
    }
    assert_eq!((pool.taken(), pool.sources()), (0, 0));
}

#[test]
fn a_place_is_given_back_however_its_delivery_ends() {
    use futures::FutureExt;
    let now = Instant::now();
    let pool = std::sync::Arc::new(std::sync::Mutex::new(Pool::new(16, 2)));
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let held = [
        Place::take(&pool, a, now).unwrap(),
        Place::take(&pool, a, now).unwrap(),
    ];
    assert_eq!(Place::take(&pool, a, now).unwrap_err(), Full::Source);
    drop(held);
    // A handler dropped while it waits (the sender gone, a timeout) gives its place back too.
    let waiting = async {
        let _place = Place::take(&pool, a, now).unwrap();
        std::future::pending::<()>().await;
    };
    assert!(waiting.now_or_never().is_none());
    let refused = Place::take(&pool, a, now).map(|_| ());
    assert_eq!(refused, Ok(()));
    assert_eq!(pool.lock().unwrap().taken(), 0);
}

#[test]
fn a_source_whose_bodies_are_read_can_start_another_while_they_are_answered() {
    // Review M1: the share counts bodies being read, not answers awaited.
    let now = Instant::now();
    let pool = std::sync::Arc::new(std::sync::Mutex::new(Pool::new(16, 2)));
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let mut answering = [
        Place::take(&pool, a, now).unwrap(),
        Place::take(&pool, a, now).unwrap(),
    ];
    assert_eq!(Place::take(&pool, a, now).unwrap_err(), Full::Source);
    for place in &mut answering {
        place.body_read();
        place.body_read(); // twice is once
    }
    let third = Place::take(&pool, a, now).expect("a third while two are answered");
    let fourth = Place::take(&pool, a, now).expect("and a fourth");
    assert_eq!(Place::take(&pool, a, now).unwrap_err(), Full::Source);
    {
        let p = pool.lock().unwrap();
        assert_eq!(
            (p.taken(), p.sources()),
            (4, 1),
            "the hub's places stay taken"
        );
    }
    drop(answering);
    drop((third, fourth));
    let p = pool.lock().unwrap();
    assert_eq!((p.taken(), p.sources()), (0, 0));
    drop(p);

    // The hub's bound still holds answers awaited: 16 read bodies fill it.
    let mut pool = Pool::new(16, 2);
    for _ in 0..16 {
        assert_eq!(pool.take(a, now), Ok(()));
        assert!(pool.body_read(a));
    }
    assert_eq!(pool.take(a, now), Err(Full::Hub));
    pool.answered();
    assert_eq!(pool.take(a, now), Ok(()));
}

#[test]
fn a_body_too_slow_costs_its_source_every_place_for_a_minute() {
    // Review M2: the rule.
    assert_eq!(penalty(Outcome::TooSlow), Some(PENALTY));
    assert_eq!(PENALTY, Duration::from_secs(60));
    for o in [
        Outcome::TooLarge,
        Outcome::Triggered,
        Outcome::Unauthorized,
        Outcome::UnknownRepo,
        Outcome::BadRequest,
        Outcome::RateLimited,
        Outcome::Unavailable,
        Outcome::Busy,
    ] {
        assert_eq!(
            penalty(o),
            None,
            "{o:?}: a real sender's answer costs nothing"
        );
    }

    // The pool: refused at once, however many places are free, for PENALTY; its whole /48
    // with it; another source still served; an answer earning none changes nothing.
    let now = Instant::now();
    let mut pool = Pool::new(16, 2);
    let a = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let b = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    pool.penalise(b, Outcome::BadRequest, now);
    assert_eq!(pool.penalised(), 0);
    pool.penalise(a, Outcome::TooSlow, now);
    let refused = Full::Penalised {
        why: Outcome::TooSlow,
        left: PENALTY,
    };
    assert_eq!(pool.take(a, now), Err(refused));
    assert_eq!(pool.take(b, now), Ok(()), "another source is served");
    let later = now + Duration::from_secs(59);
    assert_eq!(
        pool.take(a, later),
        Err(Full::Penalised {
            why: Outcome::TooSlow,
            left: Duration::from_secs(1)
        })
    );
    assert_eq!(pool.take(a, now + PENALTY), Ok(()), "served once it lapsed");
    assert_eq!(pool.penalised(), 0, "and forgotten");

    let v6 = IpAddr::V6(0x2001_0db8_0000_0001_0000_0000_0000_0001u128.into());
    let same_48 = IpAddr::V6(0x2001_0db8_0000_ffff_0000_0000_0000_0001u128.into());
    pool.penalise(v6, Outcome::TooSlow, now);
    assert!(matches!(
        pool.take(same_48, now),
        Err(Full::Penalised {
            why: Outcome::TooSlow,
            ..
        })
    ));

    // Bounded: past SOURCES the lapsed go first, then the one ending soonest.
    let mut pool = Pool::new(16, 2);
    let ip = |i: usize| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i as u32));
    for i in 0..SOURCES {
        pool.penalise(
            ip(i),
            Outcome::TooSlow,
            now + Duration::from_millis(i as u64),
        );
    }
    assert_eq!(pool.penalised(), SOURCES);
    let at = now + Duration::from_secs(1);
    pool.penalise(ip(SOURCES), Outcome::TooSlow, at);
    assert_eq!(pool.penalised(), SOURCES);
    assert_eq!(
        pool.take(ip(0), at),
        Ok(()),
        "the soonest to end was forgotten"
    );
    assert!(matches!(pool.take(ip(1), at), Err(Full::Penalised { .. })));
    assert!(matches!(
        pool.take(ip(SOURCES), at),
        Err(Full::Penalised { .. })
    ));
    let lapsed = now + PENALTY + Duration::from_secs(10);
    pool.penalise(ip(SOURCES + 1), Outcome::TooSlow, lapsed);
    assert_eq!(pool.penalised(), 1, "every lapsed one forgotten");
}

proptest::proptest! {
    #[test]
    fn no_source_holds_more_than_its_share_and_the_hub_no_more_than_its_places(
        steps in proptest::collection::vec((0u8..12, proptest::bool::ANY), 0..200),
    ) {
        let now = Instant::now();
        let mut pool = Pool::new(16, 2);
        let mut held = std::collections::HashMap::<u8, usize>::new();
        for (source, take) in steps {
            let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, source));
            let n = held.entry(source).or_default();
            if take {
                let total: usize = pool.taken();
                match pool.take(ip, now) {
                    Ok(()) => *n += 1,
                    Err(Full::Source) => proptest::prop_assert_eq!(*n, 2),
                    Err(Full::Hub) => proptest::prop_assert_eq!(total, 16),
                    Err(Full::Penalised { .. }) => proptest::prop_assert!(false, "no penalty"),
                }
            } else if *n > 0 {
                pool.give_back(ip);
                *n -= 1;
            }
            proptest::prop_assert!(held.values().all(|n| *n <= 2));
            proptest::prop_assert_eq!(pool.taken(), held.values().sum::<usize>());
            proptest::prop_assert!(pool.taken() <= 16);
        }
    }
}

/// When the listener ends a body whose frames come as `frames` (time after the headers,
/// bytes), as it reads them: each may wait until [`deadline`] of what came before it.
fn cut_at(frames: impl IntoIterator<Item = (Duration, u64)>) -> Option<Duration> {
    let mut received = 0;
    for (at, n) in frames {
        if at > deadline(received) {
            return Some(deadline(received));
        }
        received += n;
    }
    None
}

#[test]
fn a_body_keeps_up_with_the_floor_past_its_grace_and_is_whole_within_body_time() {
    assert_eq!(FLOOR, 52_428);
    assert_eq!(deadline(0), GRACE);
    assert_eq!(deadline(FLOOR / 2), GRACE);
    assert_eq!(GRACE, Duration::from_secs(3));
    assert_eq!(deadline(3 * FLOOR), GRACE);
    assert_eq!(deadline(4 * FLOOR), Duration::from_secs(4));
    assert_eq!(deadline(MAX_BODY as u64), BODY_TIME);
    let ms = Duration::from_millis;

    // The attack of review A2: a byte every 50 ms, which kept a place for 5 s, is ended at
    // the grace; so is a sender that sends its headers and nothing more.
    let trickle = (1..200).map(|i| (ms(50 * i), 1));
    assert_eq!(cut_at(trickle), Some(GRACE));
    assert_eq!(cut_at([(ms(4_900), 10)]), Some(GRACE));
    // A steady pace over the floor is never cut, up to BODY_TIME.
    let steady = (1..=45).map(|i| (ms(100 * i), 2 * FLOOR / 10));
    assert_eq!(cut_at(steady), None);
    let endless = (1..).map(|i| (ms(100 * i), 2 * FLOOR / 10));
    assert_eq!(cut_at(endless), Some(BODY_TIME));

    // Real senders: a push payload at once; a whole MAX_BODY in TCP slow start over a
    // 300 ms round trip (ten 1,448-byte segments, doubling every round trip); 200 KiB on a
    // 1 Mbit/s line; a small body held up for most of the grace.
    assert_eq!(cut_at([(ms(3), 30_000)]), None);
    let mut sent = 0;
    let slow_start = (0..).map_while(|rtt: u32| {
        let n = (14_480u64 << rtt).min(MAX_BODY as u64 - sent);
        sent += n;
        (n > 0).then(|| (ms(300 * u64::from(rtt)), n))
    });
    assert_eq!(cut_at(slow_start), None);
    let line = (1..=1_640).map(|i| (ms(i), 125));
    assert_eq!(cut_at(line), None);
    assert_eq!(cut_at([(ms(900), 40_000)]), None);
    // Review L6: a small body on a 300 ms path whose segment is lost once (retransmitted at
    // 1.4 s), or twice in a row (the timer doubled: 2.6 s), still comes whole.
    assert_eq!(cut_at([(ms(3), 1_448), (ms(1_400), 28_000)]), None);
    assert_eq!(cut_at([(ms(2_600), 40_000)]), None);

    assert!(too_slow(10, ms(3_000)).contains("slower than 51 KiB a second (10 bytes in 3.0 s)"));
    assert!(too_slow(900_000, BODY_TIME).contains("took longer than 5 s"));
}

#[test]
fn behind_a_trusted_proxy_the_rate_keys_on_the_right_most_untrusted_forwarded_address() {
    let trusted: Vec<Cidr> = ["10.0.0.0/8", "2001:db8:ffff::/48"]
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let ingress = ip("10.1.2.3");
    // Not from a proxy: its own address, whatever it claims.
    assert_eq!(
        client(ip("198.51.100.7"), &["192.0.2.1"], &trusted),
        ip("198.51.100.7")
    );
    assert_eq!(client(ingress, &["192.0.2.1"], &trusted), ip("192.0.2.1"));
    // A forged left-most entry is never read; a chain of trusted proxies is walked past.
    assert_eq!(
        client(ingress, &["6.6.6.6, 192.0.2.1, 10.9.9.9"], &trusted),
        ip("192.0.2.1")
    );
    assert_eq!(
        client(
            ingress,
            &["6.6.6.6", "192.0.2.1:4711", "10.9.9.9"],
            &trusted
        ),
        ip("192.0.2.1"),
        "several headers, a port"
    );
    assert_eq!(
        client(ingress, &["[2001:db8::1]:443, 2001:db8:ffff::2"], &trusted),
        ip("2001:db8::1")
    );
    // Nothing usable: the last trusted hop read, never the sender's word.
    assert_eq!(client(ingress, &[], &trusted), ingress);
    assert_eq!(
        client(ingress, &["junk, 10.9.9.9"], &trusted),
        ip("10.9.9.9")
    );
    assert_eq!(
        client(ingress, &["192.0.2.1"], &[]),
        ingress,
        "no trusted proxy"
    );
}

#[test]
fn address_blocks_parse_and_contain() {
    let c: Cidr = "10.0.0.0/8".parse().unwrap();
    assert!(c.contains("10.255.0.1".parse().unwrap()));
    assert!(c.contains(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped())));
    assert!(!c.contains("11.0.0.1".parse().unwrap()));
    let one: Cidr = "192.0.2.1".parse().unwrap();
    assert_eq!(one.to_string(), "192.0.2.1/32");
    assert!(!one.contains("192.0.2.2".parse().unwrap()));
    let v6: Cidr = "2001:db8::/32".parse().unwrap();
    assert!(v6.contains("2001:db8:1::1".parse().unwrap()));
    assert!(!v6.contains("10.0.0.1".parse().unwrap()));
    let all: Cidr = "0.0.0.0/0".parse().unwrap();
    assert!(all.contains("203.0.113.1".parse().unwrap()));
    for bad in ["10.0.0.0/33", "ten/8", "2001:db8::/129", ""] {
        let e = bad.parse::<Cidr>().unwrap_err();
        assert!(e.contains(&format!("{bad:?}")), "{e}");
    }
}

#[test]
fn a_forward_past_the_nats_max_payload_is_413_naming_it() {
    let a = too_large(MAX_BODY + 600, 1024 * 1024, Some(Provider::GitHub)).unwrap();
    assert_eq!((a.outcome, a.outcome.status()), (Outcome::TooLarge, 413));
    assert!(a.message.contains("max_payload of 1048576"), "{a:?}");
    assert!(too_large(1000, 1024 * 1024, None).is_none());
    assert!(
        too_large(MAX_BODY * 4, 0, None).is_none(),
        "unknown: not checked"
    );
}
