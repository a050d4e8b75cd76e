//! One allocation per distinct encoded spec in the process (pure, with a process-wide table).
//!
//! A fleet's works are mostly the same few specs — a replica set, an add-on or a fanout gives
//! every cluster an equal one — and each cluster's work held its own copy (≈ 1.5 KB for the
//! fanout's three manifests, at 100,000 clusters 150 MB). [`shared`] returns the allocation
//! already held for equal bytes. The table holds weak references: a spec no work holds any
//! more is freed as before, and its entry is swept once the table has doubled since the last
//! sweep, so the table stays proportional to the specs alive.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, Weak};

/// Specs shorter than this are not shared: the table's entry would cost about as much.
const SMALLEST_SHARED: usize = 64;

/// Live and dead entries by the hash of their bytes; one entry per hash (a colliding spec is
/// simply not shared).
#[derive(Default)]
struct Table {
    entries: HashMap<u64, Weak<[u8]>>,
    /// Entries after the last sweep: the next sweep comes at twice this.
    swept_at: usize,
    hasher: std::collections::hash_map::RandomState,
}

impl Table {
    fn shared(&mut self, bytes: Vec<u8>) -> Arc<[u8]> {
        let key = self.hasher.hash_one(&bytes);
        if let Some(held) = self.entries.get(&key).and_then(Weak::upgrade)
            && *held == *bytes
        {
            return held;
        }
        let new: Arc<[u8]> = bytes.into();
        self.entries.insert(key, Arc::downgrade(&new));
        if self.entries.len() >= 2 * self.swept_at.max(1024) {
            self.entries.retain(|_, w| w.strong_count() > 0);
            self.swept_at = self.entries.len();
        }
        new
    }
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// `bytes` as a shared allocation: the one already held for equal bytes, if any.
pub(super) fn shared(bytes: Vec<u8>) -> Arc<[u8]> {
    if bytes.len() < SMALLEST_SHARED {
        return bytes.into();
    }
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    table.get_or_insert_with(Table::default).shared(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_bytes_share_one_allocation_and_unequal_do_not() {
        let a = shared(vec![7; 100]);
        let b = shared(vec![7; 100]);
        let c = shared(vec![8; 100]);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, [8; 100]);
    }

    #[test]
    fn short_bytes_are_not_shared() {
        let a = shared(vec![1; 10]);
        let b = shared(vec![1; 10]);
        assert!(!Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn a_spec_nobody_holds_is_freed_and_swept() {
        let mut t = Table::default();
        for i in 0..5_000u32 {
            let bytes: Vec<u8> = i.to_le_bytes().repeat(20);
            drop(t.shared(bytes));
        }
        assert!(
            t.entries.len() < 2_048,
            "dead entries were kept: {}",
            t.entries.len()
        );
        let held = t.shared(vec![3; 80]);
        assert!(Arc::ptr_eq(&held, &t.shared(vec![3; 80])));
    }
}
