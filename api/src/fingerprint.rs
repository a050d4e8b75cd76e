//! Fingerprints of agent keys: what `get clusters -o wide`, `describe cluster` and the agent's
//! log show, and what `flotilla accept --key` takes, so that an admin accepts the key they
//! compared with the spoke's and not whichever key registered last.
//!
//! A fingerprint is the first 8 bytes of the SHA-256 of the public key, in hex, grouped by
//! four (`3f2a:91c0:5e77:0b1d`): short enough to compare by eye, and 64 bits, so that nobody
//! can make a key with a chosen fingerprint.

use sha2::{Digest, Sha256};

/// The fingerprint of a public key (empty for an empty key).
pub fn of(public_key: &str) -> String {
    if public_key.is_empty() {
        return String::new();
    }
    let digest = Sha256::digest(public_key.as_bytes());
    let hex = data_encoding::HEXLOWER.encode(&digest[..8]);
    hex.as_bytes()
        .chunks(4)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect::<Vec<_>>()
        .join(":")
}

/// Whether `given` — a fingerprint (with or without colons, any case) or the whole public key —
/// names `public_key`.
pub fn names(public_key: &str, given: &str) -> bool {
    let given = given.trim();
    if public_key.is_empty() || given.is_empty() {
        return false;
    }
    if given == public_key {
        return true;
    }
    let plain = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != ':')
            .flat_map(char::to_lowercase)
            .collect()
    };
    plain(&of(public_key)) == plain(given)
}

#[cfg(test)]
mod tests {
    #[test]
    fn fingerprints_are_stable_grouped_and_matched_loosely() {
        let key = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4";
        let fp = super::of(key);
        assert_eq!(fp.len(), 19, "{fp}");
        assert_eq!(fp.matches(':').count(), 3);
        assert_eq!(fp, super::of(key));
        assert!(super::names(key, &fp));
        assert!(super::names(key, &fp.replace(':', "").to_uppercase()));
        assert!(super::names(key, key));
        assert!(!super::names(key, "0000:0000:0000:0000"));
        assert!(!super::names(key, ""));
        assert!(!super::names("", &fp));
        assert_eq!(super::of(""), "");
    }
}
