//! The defaults of [`Limits`] (the hub's `--gitops-*` flags start from these), and the one
//! place a request's zero fields become them.

use crate::protocol::Limits;

/// Bytes received from the server in one fetch (`--gitops-max-fetch-bytes`).
pub const MAX_FETCH_BYTES: u64 = 64 * 1024 * 1024;
/// One file's size (`--gitops-max-file-bytes`).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Entries visited under `paths` in one fetch (`--gitops-max-files`).
pub const MAX_ENTRIES: u32 = 20_000;
/// Directory depth under the repository root.
pub const MAX_DEPTH: u32 = 32;
/// Bytes of manifest content in one answer.
pub const MAX_CONTENT_BYTES: u64 = 32 * 1024 * 1024;
/// Refs advertised for the branch or tag asked.
pub const MAX_REFS: u32 = 10_000;

/// Bytes of answer the hub reads from a worker beyond its content bound (paths, ids, framing).
pub const ANSWER_OVERHEAD_BYTES: u64 = 8 * 1024 * 1024;

impl Limits {
    /// These limits with every zero field replaced by its default.
    pub fn effective(&self) -> Limits {
        fn or<T: PartialEq + Default>(v: T, d: T) -> T {
            if v == T::default() { d } else { v }
        }
        Limits {
            max_fetch_bytes: or(self.max_fetch_bytes, MAX_FETCH_BYTES),
            max_file_bytes: or(self.max_file_bytes, MAX_FILE_BYTES),
            max_entries: or(self.max_entries, MAX_ENTRIES),
            max_depth: or(self.max_depth, MAX_DEPTH),
            max_content_bytes: or(self.max_content_bytes, MAX_CONTENT_BYTES),
            max_refs: or(self.max_refs, MAX_REFS),
        }
    }
}

/// Bytes as an operator reads them: `64 MiB`, `3.2 MiB`, `812 KiB`, `17 bytes`.
pub fn human_bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if n >= MIB {
        if n.is_multiple_of(MIB) {
            format!("{} MiB", n / MIB)
        } else {
            format!("{:.1} MiB", n as f64 / MIB as f64)
        }
    } else if n >= KIB {
        if n.is_multiple_of(KIB) {
            format!("{} KiB", n / KIB)
        } else {
            format!("{:.1} KiB", n as f64 / KIB as f64)
        }
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_fields_take_their_defaults_and_set_ones_stay() {
        let limits = Limits {
            max_file_bytes: 10,
            ..Default::default()
        }
        .effective();
        assert_eq!(limits.max_file_bytes, 10);
        assert_eq!(limits.max_fetch_bytes, MAX_FETCH_BYTES);
        assert_eq!(limits.max_entries, MAX_ENTRIES);
    }

    #[test]
    fn bytes_read_as_an_operator_writes_them() {
        assert_eq!(human_bytes(64 * 1024 * 1024), "64 MiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 + 200 * 1024), "3.2 MiB");
        assert_eq!(human_bytes(1024), "1 KiB");
        assert_eq!(human_bytes(17), "17 bytes");
    }
}
