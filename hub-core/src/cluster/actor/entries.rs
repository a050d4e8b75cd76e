//! A cluster actor's works by name: a sorted `Vec` rather than a `BTreeMap`. Most clusters hold
//! one work or a few, and a `BTreeMap` allocates a node of eleven slots for the first
//! (≈ 1 KB per cluster, 6 % of the hub's heap in a fanout by `heaptrack`); this holds exactly
//! what it has while small, and lookups stay logarithmic.

/// Past this many works the vector grows as vectors do; below, by one slot at a time.
const EXACT_UP_TO: usize = 8;

/// Works by name, in name order.
pub(super) type WorkEntries = Entries<super::work::WorkEntry>;

/// Values by name, in name order.
pub(super) struct Entries<V>(Vec<(String, V)>);

impl<V> Default for Entries<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<V> Entries<V> {
    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(n, _)| n.as_str().cmp(name))
    }

    pub(super) fn get(&self, name: &str) -> Option<&V> {
        self.find(name).ok().map(|i| &self.0[i].1)
    }

    pub(super) fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.find(name).ok().map(|i| &mut self.0[i].1)
    }

    pub(super) fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Sets `name`'s entry; answers the one it replaced.
    pub(super) fn insert(&mut self, name: String, entry: V) -> Option<V> {
        match self.find(&name) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, entry)),
            Err(i) => {
                if self.0.len() < EXACT_UP_TO {
                    self.0.reserve_exact(1);
                }
                self.0.insert(i, (name, entry));
                None
            }
        }
    }

    /// `name`'s entry, made by `make` when there is none.
    pub(super) fn get_or_insert_with(&mut self, name: &str, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(name) {
            Ok(i) => i,
            Err(i) => {
                if self.0.len() < EXACT_UP_TO {
                    self.0.reserve_exact(1);
                }
                self.0.insert(i, (name.to_string(), make()));
                i
            }
        };
        &mut self.0[i].1
    }

    pub(super) fn remove(&mut self, name: &str) -> Option<V> {
        let i = self.find(name).ok()?;
        let (_, entry) = self.0.remove(i);
        if self.0.is_empty() {
            self.0 = Vec::new();
        }
        Some(entry)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, e)| e)
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.0.iter_mut().map(|(_, v)| v)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.0.iter().map(|(n, e)| (n, e))
    }
}

impl<V> IntoIterator for Entries<V> {
    type Item = (String, V);
    type IntoIter = std::vec::IntoIter<(String, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_stay_sorted_exact_while_small_and_free_when_empty() {
        let mut e = Entries::default();
        assert_eq!(e.insert("b".into(), 2), None);
        assert_eq!(e.insert("a".into(), 1), None);
        *e.get_or_insert_with("c", || 3) += 10;
        assert_eq!(*e.get_or_insert_with("a", || 99), 1);
        assert_eq!(e.insert("b".into(), 20), Some(2));
        let names: Vec<&String> = e.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(e.values().copied().collect::<Vec<_>>(), [1, 20, 13]);
        assert_eq!(e.0.capacity(), 3, "one slot per entry while small");
        assert!(e.contains_key("c") && !e.contains_key("d"));
        *e.get_mut("a").unwrap() = 5;
        assert_eq!(e.get("a"), Some(&5));
        assert_eq!(e.remove("b"), Some(20));
        assert_eq!(e.remove("b"), None);
        e.remove("a");
        e.remove("c");
        assert_eq!(e.0.capacity(), 0, "an empty map holds nothing");
        for i in 0..100 {
            e.insert(format!("w{i:03}"), i);
        }
        assert_eq!(e.get("w042"), Some(&42));
        assert_eq!(e.into_iter().count(), 100);
    }
}
