//! Every fuzz target, for a bounded number of cases (more with `PROPTEST_CASES=N`): seeds
//! mutated, plain random bytes, and the inputs that once hurt — none may panic, and every
//! rejection must say something.

use flotilla_fuzz::{Outcome, TARGETS, mutate};
use proptest::prelude::*;
use rand::SeedableRng;

fn check(name: &str, input: &[u8]) -> Result<(), TestCaseError> {
    let target = TARGETS.iter().find(|t| t.name == name).expect("target");
    if let Outcome::Rejected(why) = (target.run)(input) {
        prop_assert!(
            !why.trim().is_empty(),
            "{name}: empty rejection for {input:?}"
        );
    }
    Ok(())
}

fn every_target() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(TARGETS.iter().map(|t| t.name).collect::<Vec<_>>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn mutated_seeds_never_panic(name in every_target(), seed in any::<u64>()) {
        let target = TARGETS.iter().find(|t| t.name == name).unwrap();
        let seeds = (target.seeds)();
        prop_assert!(!seeds.is_empty(), "{name} has no seeds");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let base = &seeds[(seed as usize) % seeds.len()];
        check(name, &mutate(base, &mut rng))?;
    }

    #[test]
    fn random_bytes_never_panic(
        name in every_target(),
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        check(name, &bytes)?;
    }
}

#[test]
fn every_seed_is_accepted() {
    for t in TARGETS {
        for (i, seed) in (t.seeds)().iter().enumerate() {
            assert_eq!((t.run)(seed), Outcome::Accepted, "{} seed {i}", t.name);
        }
    }
}

/// An event that claims a 4 GiB payload is refused before anything of that size is allocated:
/// protobuf length prefixes are checked against the bytes actually present.
#[test]
fn an_event_claiming_a_4_gib_payload_is_refused_at_once() {
    // Field 8 (binary_data), length-delimited, length 2^32 varint, and no data.
    let mut bytes = vec![0x42];
    bytes.extend([0x80, 0x80, 0x80, 0x80, 0x10]);
    let started = std::time::Instant::now();
    for t in TARGETS {
        let _ = (t.run)(&bytes);
    }
    // Allocating and zeroing 4 GiB takes seconds; refusing takes microseconds.
    assert!(started.elapsed() < std::time::Duration::from_millis(500));
}
