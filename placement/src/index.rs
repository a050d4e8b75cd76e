//! Interned labels and claims, so that the hot path matches selectors by comparing integers in
//! one contiguous array instead of chasing `String`s through `BTreeMap` nodes.
//!
//! Every label/claim key and value in the fleet gets a `u32` id; each cluster's labels become a
//! slice of `(key, value)` id pairs sorted by key. A selector is compiled against the ids once
//! per scheduling run: a key or value that no cluster has is resolved right away (`In` of an
//! unknown value can never match, `NotIn` of it always does).
//!
//! The table's strings are the ones the fleet's clusters hold: adding a cluster's pairs returns
//! them pointing at the interned `Arc<str>`s ([`Pairs`]), and a string the table does not have
//! yet joins it without a copy. A label value carried by every cluster is held once.

use std::collections::HashMap;
use std::sync::Arc;

use crate::pairs::{Pairs, Text};
use crate::selector::{LabelSelector, Operator, SelectorError};

/// String ↔ id table shared by label and claim keys and values. Append-only: ids stay valid
/// while the fleet is updated. `Arc<str>` so that cloning a fleet does not copy every string.
#[derive(Debug, Clone, Default)]
pub(crate) struct Strings {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
}

impl Strings {
    /// The id of `s` and the table's shared copy of it; a string the table does not have yet
    /// is added as `s` itself (no copy).
    fn intern(&mut self, s: &Arc<str>) -> (u32, Arc<str>) {
        if let Some(&id) = self.ids.get(&**s) {
            return (id, self.names[id as usize].clone());
        }
        let id = u32::try_from(self.names.len()).expect("more than u32::MAX distinct strings");
        self.ids.insert(s.clone(), id);
        self.names.push(s.clone());
        (id, s.clone())
    }

    pub(crate) fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    pub(crate) fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
}

/// Per cluster, its `(key, value)` pairs sorted by key id.
#[derive(Debug, Clone, Default)]
pub(crate) struct PairTable {
    spans: Vec<(u32, u32)>,
    pairs: Vec<(u32, u32)>,
    /// Pairs no span points at any more (left behind by [`PairTable::replace`]).
    garbage: usize,
}

impl PairTable {
    /// Appends `given`'s pairs as ids; returns their span and `given` pointing at the interned
    /// strings (what the fleet's copy of the cluster keeps).
    fn append(&mut self, strings: &mut Strings, given: &Pairs) -> ((u32, u32), Pairs) {
        let start = self.pairs.len();
        let mut shared = Vec::with_capacity(given.len());
        for (k, v) in given.entries() {
            let (k_id, k) = strings.intern(k);
            let (v_id, v) = strings.intern(v.arc());
            self.pairs.push((k_id, v_id));
            shared.push((k, Text::from(v)));
        }
        self.pairs[start..].sort_unstable();
        let len = self.pairs.len() - start;
        let span = (
            u32::try_from(start).expect("label table overflow"),
            u32::try_from(len).expect("label table overflow"),
        );
        (span, Pairs::from_sorted(shared))
    }

    /// Adds the next cluster's pairs; returns them pointing at the interned strings.
    pub(crate) fn push(&mut self, strings: &mut Strings, given: &Pairs) -> Pairs {
        let (span, shared) = self.append(strings, given);
        self.spans.push(span);
        shared
    }

    /// Replaces cluster `idx`'s pairs; returns them pointing at the interned strings. The old
    /// ones become garbage, compacted away once they outnumber the live ones.
    pub(crate) fn replace(&mut self, idx: u32, strings: &mut Strings, given: &Pairs) -> Pairs {
        let old = self.spans[idx as usize];
        self.garbage += old.1 as usize;
        let (span, shared) = self.append(strings, given);
        self.spans[idx as usize] = span;
        if self.garbage > 1024 && self.garbage * 2 > self.pairs.len() {
            self.compact();
        }
        shared
    }

    fn compact(&mut self) {
        let mut pairs = Vec::with_capacity(self.pairs.len() - self.garbage);
        for span in &mut self.spans {
            let (start, len) = *span;
            let new_start = u32::try_from(pairs.len()).expect("label table overflow");
            pairs.extend_from_slice(&self.pairs[start as usize..(start + len) as usize]);
            *span = (new_start, len);
        }
        self.pairs = pairs;
        self.garbage = 0;
    }

    /// The value id of `key` on cluster `idx`.
    #[inline]
    pub(crate) fn get(&self, idx: u32, key: u32) -> Option<u32> {
        let (start, len) = self.spans[idx as usize];
        let slice = &self.pairs[start as usize..(start + len) as usize];
        if slice.len() <= 8 {
            slice.iter().find(|p| p.0 == key).map(|p| p.1)
        } else {
            slice
                .binary_search_by_key(&key, |p| p.0)
                .ok()
                .map(|i| slice[i].1)
        }
    }
}

#[derive(Debug, Clone)]
enum IdReq {
    Equals(u32, u32),
    In(u32, Vec<u32>),
    NotIn(u32, Vec<u32>),
    Exists(u32),
    DoesNotExist(u32),
    Never,
}

/// A selector compiled against a fleet's interned strings.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdSelector {
    reqs: Vec<IdReq>,
}

impl IdSelector {
    /// Compiles `sel`; fails exactly when [`LabelSelector::compile`] does.
    pub(crate) fn new(strings: &Strings, sel: &LabelSelector) -> Result<Self, SelectorError> {
        sel.compile()?;
        let mut reqs = Vec::new();
        for (k, v) in &sel.match_labels {
            reqs.push(match (strings.get(k), strings.get(v)) {
                (Some(k), Some(v)) => IdReq::Equals(k, v),
                _ => IdReq::Never,
            });
        }
        for r in &sel.match_expressions {
            let key = strings.get(&r.key);
            let mut values: Vec<u32> = r.values.iter().filter_map(|v| strings.get(v)).collect();
            values.sort_unstable();
            values.dedup();
            // `None`: the requirement holds for every cluster and is dropped.
            let req = match (&r.operator, key) {
                (Operator::In, Some(k)) if !values.is_empty() => Some(IdReq::In(k, values)),
                (Operator::In, _) | (Operator::Exists, None) => Some(IdReq::Never),
                (Operator::NotIn, Some(k)) if !values.is_empty() => Some(IdReq::NotIn(k, values)),
                (Operator::NotIn, _) | (Operator::DoesNotExist, None) => None,
                (Operator::Exists, Some(k)) => Some(IdReq::Exists(k)),
                (Operator::DoesNotExist, Some(k)) => Some(IdReq::DoesNotExist(k)),
                (Operator::Unknown(op), _) => {
                    return Err(SelectorError::UnknownOperator(op.clone()));
                }
            };
            reqs.extend(req);
        }
        Ok(IdSelector { reqs })
    }

    /// Whether cluster `idx` satisfies every requirement in `table`.
    #[inline]
    pub(crate) fn matches(&self, table: &PairTable, idx: u32) -> bool {
        self.reqs.iter().all(|r| match r {
            IdReq::Equals(k, v) => table.get(idx, *k) == Some(*v),
            IdReq::In(k, vs) => table
                .get(idx, *k)
                .is_some_and(|v| vs.binary_search(&v).is_ok()),
            IdReq::NotIn(k, vs) => table
                .get(idx, *k)
                .is_none_or(|v| vs.binary_search(&v).is_err()),
            IdReq::Exists(k) => table.get(idx, *k).is_some(),
            IdReq::DoesNotExist(k) => table.get(idx, *k).is_none(),
            IdReq::Never => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::selector::Requirement;

    fn table(maps: &[&[(&str, &str)]]) -> (Strings, PairTable) {
        let mut strings = Strings::default();
        let mut t = PairTable::default();
        for m in maps {
            let pairs: Pairs = m.iter().copied().collect();
            t.push(&mut strings, &pairs);
        }
        (strings, t)
    }

    #[test]
    fn interned_matching_agrees_with_string_matching() {
        let maps: Vec<&[(&str, &str)]> = vec![
            &[],
            &[("env", "prod")],
            &[("env", "dev"), ("zone", "a")],
            &[("gpu", ""), ("zone", "b"), ("env", "prod")],
        ];
        let (strings, t) = table(&maps);
        let selectors = [
            LabelSelector::default(),
            LabelSelector::default().label("env", "prod"),
            LabelSelector::default().label("env", "unknown-value"),
            LabelSelector::default().label("unknown-key", "prod"),
            LabelSelector::default().in_values("zone", ["a", "nowhere"]),
            LabelSelector::default().in_values("zone", ["nowhere"]),
            LabelSelector::default().not_in("zone", ["a"]),
            LabelSelector::default().not_in("zone", ["nowhere"]),
            LabelSelector::default().not_in("nokey", ["x"]),
            LabelSelector::default().exists("gpu"),
            LabelSelector::default().exists("nokey"),
            LabelSelector::default().does_not_exist("gpu"),
            LabelSelector::default().does_not_exist("nokey"),
        ];
        for sel in &selectors {
            let ids = IdSelector::new(&strings, sel).unwrap();
            for (i, m) in maps.iter().enumerate() {
                let map: BTreeMap<String, String> = m
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                assert_eq!(
                    ids.matches(&t, i as u32),
                    sel.matches(&map),
                    "{sel} on {map:?}"
                );
            }
        }
    }

    #[test]
    fn pushed_pairs_share_the_tables_strings() {
        let mut strings = Strings::default();
        let mut t = PairTable::default();
        let a: Pairs = [("env", "prod"), ("zone", "a")].into_iter().collect();
        let b: Pairs = [("env", "prod"), ("site", "prod")].into_iter().collect();
        let a_key = a.entries()[0].0.clone();
        let a = t.push(&mut strings, &a);
        let b = t.replace(0, &mut strings, &b);
        assert_eq!(
            b.iter().collect::<Vec<_>>(),
            [("env", "prod"), ("site", "prod")]
        );
        assert!(
            Arc::ptr_eq(&a.entries()[0].0, &a_key),
            "a new string joins as given"
        );
        assert!(Arc::ptr_eq(&a.entries()[0].0, &b.entries()[0].0), "env");
        let prod = a.entries()[0].1.arc();
        assert!(Arc::ptr_eq(prod, b.entries()[0].1.arc()));
        assert!(
            Arc::ptr_eq(prod, b.entries()[1].1.arc()),
            "one string for every pair that carries it"
        );
        assert_eq!(t.get(0, strings.get("site").unwrap()), strings.get("prod"));
    }

    #[test]
    fn invalid_selector_fails_to_compile() {
        let (strings, _) = table(&[]);
        let bad = LabelSelector::default().expression(Requirement::new("k", "Nope", ["v"]));
        assert!(IdSelector::new(&strings, &bad).is_err());
    }

    #[test]
    fn long_label_lists_use_binary_search() {
        let pairs: Vec<(String, String)> = (0..20)
            .map(|i| (format!("k{i:02}"), format!("v{i}")))
            .collect();
        let refs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let (strings, t) = table(&[&refs]);
        for (k, v) in &refs {
            assert_eq!(t.get(0, strings.get(k).unwrap()), strings.get(v));
        }
        assert_eq!(strings.name(strings.get("k03").unwrap()), "k03");
    }
}
