//! A cluster's labels or claims as one sorted slice of shared strings (pure).
//!
//! The scheduler keeps a copy of every cluster ([`Cluster`](crate::Cluster)), and a
//! `BTreeMap<String, String>` per labels and per claims cost a leaf node of eleven slots each
//! plus a heap string per key and value — about 1.4 KB a cluster at the fanout's peak, every
//! string already held once more by the fleet's interned table. [`Pairs`] is a boxed slice of
//! `(Arc<str>, Text)` sorted by key: 32 bytes a pair and no string of its own once
//! [`Fleet::upsert_cluster`](crate::Fleet::upsert_cluster) has pointed it at the interned
//! strings. It reads like the map it replaces (`get`, `contains_key`, `iter`, `pairs["key"]`)
//! and serializes as a map, so JSON and YAML clusters keep their format.
//!
//! [`Labels`] is what selectors read: both `Pairs` and `BTreeMap<String, String>` implement it,
//! so API callers holding maps keep matching them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Labels or claims as a selector reads them: a value by key.
pub trait Labels {
    /// The value of `key`, if set.
    fn get(&self, key: &str) -> Option<&str>;

    /// Whether `key` is set (to any value, the empty one included).
    fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
}

impl Labels for Pairs {
    fn get(&self, key: &str) -> Option<&str> {
        Pairs::get(self, key)
    }
}

/// A shared immutable string value: an `Arc<str>` that compares with `&str` and `String`, so
/// that `pairs["env"] == "prod"` reads as it did on a map of `String`s.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Text(Arc<str>);

impl Text {
    /// The string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The shared string itself (the fleet interns it).
    pub(crate) fn arc(&self) -> &Arc<str> {
        &self.0
    }
}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<Arc<str>> for Text {
    fn from(s: Arc<str>) -> Self {
        Text(s)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Text(s.into())
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        Text(s.into())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

/// One key and its value.
type Pair = (Arc<str>, Text);

fn as_strs((k, v): &Pair) -> (&str, &str) {
    (k, v.as_str())
}

/// Key → value pairs sorted by key, keys unique; see the module doc.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Pairs(Box<[Pair]>);

impl Pairs {
    /// No pairs.
    pub fn new() -> Self {
        Pairs::default()
    }

    /// Pairs already sorted by key with unique keys (the fleet's interned copy of a sorted
    /// `Pairs`).
    pub(crate) fn from_sorted(pairs: Vec<Pair>) -> Self {
        debug_assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0));
        Pairs(pairs.into_boxed_slice())
    }

    /// The pairs with their shared strings, sorted by key.
    pub(crate) fn entries(&self) -> &[Pair] {
        &self.0
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key))
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        // Clusters carry a handful of labels: a scan beats halving on slices this short.
        if self.0.len() <= 8 {
            self.0
                .iter()
                .find(|(k, _)| **k == *key)
                .map(|(_, v)| v.as_str())
        } else {
            self.position(key).ok().map(|i| self.0[i].1.as_str())
        }
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The pairs in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + DoubleEndedIterator {
        self.0.iter().map(as_strs)
    }

    /// How many pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets `key` to `value` and returns the value it replaces (for builders and tests: it
    /// copies the slice).
    pub fn insert(&mut self, key: impl Into<Arc<str>>, value: impl Into<Arc<str>>) -> Option<Text> {
        let key = key.into();
        let value = Text(value.into());
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                let mut pairs = std::mem::take(&mut self.0).into_vec();
                pairs.insert(i, (key, value));
                self.0 = pairs.into_boxed_slice();
                None
            }
        }
    }

    /// Removes `key` and returns its value (for tests: it copies the slice).
    pub fn remove(&mut self, key: &str) -> Option<Text> {
        let i = self.position(key).ok()?;
        let mut pairs = std::mem::take(&mut self.0).into_vec();
        let (_, value) = pairs.remove(i);
        self.0 = pairs.into_boxed_slice();
        Some(value)
    }
}

impl std::ops::Index<&str> for Pairs {
    type Output = Text;

    /// The value of `key`.
    ///
    /// # Panics
    /// If `key` is not set, as a map's index does.
    fn index(&self, key: &str) -> &Text {
        match self.position(key) {
            Ok(i) => &self.0[i].1,
            Err(_) => panic!("no pair with key {key:?}"),
        }
    }
}

/// Later pairs win over earlier ones with the same key, as when collecting into a map.
impl<K: Into<Arc<str>>, V: Into<Arc<str>>> FromIterator<(K, V)> for Pairs {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut pairs: Vec<Pair> = iter
            .into_iter()
            .map(|(k, v)| (k.into(), Text(v.into())))
            .collect();
        // Stable: of equal keys the last given is last, and `dedup_by` moves it forward.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                std::mem::swap(&mut next.1, &mut kept.1);
            }
            same
        });
        Pairs(pairs.into_boxed_slice())
    }
}

impl<'a> IntoIterator for &'a Pairs {
    type Item = (&'a str, &'a str);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Pair>, fn(&'a Pair) -> (&'a str, &'a str)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(as_strs)
    }
}

impl fmt::Debug for Pairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Pairs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BTreeMap::<String, String>::deserialize(deserializer).map(Pairs::from_iter)
    }
}

#[cfg(test)]
mod tests;
