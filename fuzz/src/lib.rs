//! Fuzz targets for every decoder of bytes that reach Flotilla from the network or from a user,
//! on stable Rust: each target is a plain function of arbitrary bytes that must never panic and
//! must answer a clear accept or reject, never allocate in proportion to what the input claims.
//!
//! - [`TARGETS`] (from the private `targets` module): the targets, by name — CloudEvent
//!   envelopes and every payload the hub or the agent decodes from NATS (with the validation
//!   the receiver applies), multi-document OCM YAML, feedback JSONPaths, label and claim
//!   selectors, quantities, and the protobuf bodies of gRPC requests with the API's validation;
//! - [`seeds`]: valid inputs per target, the starting points of structure-aware mutation;
//! - [`mutate`]: byte-level mutations (flips, inserts, deletes, splices, truncation) that keep
//!   most of an input's structure, so that decoders are driven past their first check.
//!
//! The suite runs each target for a bounded number of cases (`tests/targets.rs`, proptest);
//! the `flotilla-fuzz` binary runs them for millions of iterations (`BENCHMARKS.md` records a
//! long run).

#![deny(missing_docs)]

pub mod seeds;
mod targets;

pub use targets::{Outcome, TARGETS, Target};

use rand::Rng;

/// Applies between one and four random mutations to `input`.
pub fn mutate(input: &[u8], rng: &mut impl Rng) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let len = out.len();
        match rng.random_range(0..7) {
            // Flip a bit.
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                out[i] ^= 1 << rng.random_range(0..8);
            }
            // Overwrite a byte with an interesting value.
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                out[i] = [0, 0x7f, 0x80, 0xff, b'[', b'{', b'\n', b':', b'.', b'=']
                    [rng.random_range(0..10)];
            }
            // Insert random bytes.
            2 => {
                let i = rng.random_range(0..=len);
                let n = rng.random_range(1..=8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                out.splice(i..i, bytes);
            }
            // Delete a range.
            3 if len > 0 => {
                let i = rng.random_range(0..len);
                let n = rng.random_range(1..=(len - i).min(16));
                out.drain(i..i + n);
            }
            // Duplicate a chunk (repeats nest structures and lengthen lists).
            4 if len > 0 => {
                let i = rng.random_range(0..len);
                let n = rng.random_range(1..=(len - i).min(64));
                let chunk = out[i..i + n].to_vec();
                let at = rng.random_range(0..=len);
                out.splice(at..at, chunk);
            }
            // Truncate.
            5 if len > 0 => out.truncate(rng.random_range(0..len)),
            // Protobuf-shaped noise: a varint length claiming far more than is there.
            _ => {
                let i = rng.random_range(0..=len);
                out.splice(i..i, [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]);
            }
        }
    }
    out
}
