use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use serde::de::value::{Error as ValueError, MapDeserializer};

use super::*;

fn pairs(entries: &[(&str, &str)]) -> Pairs {
    entries.iter().copied().collect()
}

#[test]
fn reads_like_the_map_it_replaces() {
    let p = pairs(&[("zone", "a"), ("env", "prod"), ("gpu", "")]);
    assert_eq!(p.len(), 3);
    assert!(!p.is_empty());
    assert_eq!(p.get("env"), Some("prod"));
    assert_eq!(p.get("gpu"), Some(""), "an empty value is a value");
    assert_eq!(p.get("nope"), None);
    assert!(p.contains_key("gpu"));
    assert!(!p.contains_key("nope"));
    assert_eq!(p["env"], "prod");
    assert_eq!(p["zone"].as_str(), "a");
    assert_eq!(
        p.iter().collect::<Vec<_>>(),
        [("env", "prod"), ("gpu", ""), ("zone", "a")],
        "key order"
    );
    assert_eq!((&p).into_iter().next_back(), Some(("zone", "a")));
    assert!(Pairs::new().is_empty());
    assert_eq!(
        format!("{p:?}"),
        r#"{"env": "prod", "gpu": "", "zone": "a"}"#
    );
}

#[test]
#[should_panic(expected = "no pair with key \"nope\"")]
fn indexing_an_unset_key_panics_as_a_map_does() {
    let _ = &pairs(&[("env", "prod")])["nope"];
}

#[test]
fn the_last_of_equal_keys_wins_as_in_a_map() {
    let p = pairs(&[("b", "1"), ("a", "x"), ("b", "2"), ("a", "y"), ("b", "3")]);
    assert_eq!(p.iter().collect::<Vec<_>>(), [("a", "y"), ("b", "3")]);
}

#[test]
fn insert_and_remove_keep_keys_sorted_and_unique() {
    let mut p = Pairs::new();
    assert_eq!(p.insert("m", "1"), None);
    assert_eq!(p.insert("a", String::from("2")), None);
    assert_eq!(p.insert("z", "3"), None);
    assert_eq!(p.insert("m", "4"), Some(Text::from("1")));
    assert_eq!(
        p.iter().collect::<Vec<_>>(),
        [("a", "2"), ("m", "4"), ("z", "3")]
    );
    assert_eq!(p.remove("m"), Some(Text::from("4")));
    assert_eq!(p.remove("m"), None);
    assert_eq!(p, pairs(&[("z", "3"), ("a", "2")]));
}

#[test]
fn long_lists_are_searched_by_halving() {
    let owned: Vec<(String, String)> = (0..20)
        .map(|i| (format!("k{i:02}"), format!("v{i}")))
        .collect();
    let p: Pairs = owned
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    for (k, v) in &owned {
        assert_eq!(p.get(k), Some(v.as_str()));
        assert_eq!(p[k.as_str()], *v);
    }
    assert_eq!(p.get("k20"), None);
    assert_eq!(p.get("a"), None);
}

#[test]
fn text_compares_with_strings_and_prints_as_one() {
    let t = Text::from("prod");
    assert_eq!(t, "prod");
    assert_eq!(t, *"prod");
    assert_eq!(t, String::from("prod"));
    assert_eq!(&*t, "prod");
    assert_eq!(t.to_string(), "prod");
    assert_eq!(format!("{t:?}"), r#""prod""#);
    assert_eq!(t.as_ref(), "prod");
}

#[test]
fn serializes_as_a_map() {
    let p = pairs(&[("env", "prod"), ("zone", "a")]);
    let expected: HashMap<String, cel::Value> = [("env", "prod"), ("zone", "a")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), cel::Value::String(Arc::new(v.to_owned()))))
        .collect();
    assert_eq!(cel::to_value(&p).unwrap(), cel::Value::from(expected));
}

#[test]
fn deserializes_from_a_map() {
    let map = MapDeserializer::<_, ValueError>::new(
        [("zone", "a"), ("env", "dev"), ("env", "prod")].into_iter(),
    );
    let p = Pairs::deserialize(map).unwrap();
    assert_eq!(p, pairs(&[("env", "prod"), ("zone", "a")]));
}

fn arb_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map("[a-l]{0,2}", "[xy]{0,2}", 0..14)
}

proptest! {
    #[test]
    fn pairs_answer_as_the_map_they_were_built_from(map in arb_map(), key in "[a-l]{0,2}") {
        let p: Pairs = map.clone().into_iter().collect();
        prop_assert_eq!(p.len(), map.len());
        prop_assert_eq!(Labels::get(&p, &key), Labels::get(&map, &key));
        prop_assert_eq!(Labels::contains_key(&p, &key), map.contains_key(&key));
        prop_assert!(p.iter().eq(map.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
    }

    #[test]
    fn inserts_and_removes_keep_up_with_a_map(
        map in arb_map(),
        edits in prop::collection::vec(("[a-l]{0,2}", prop::option::of("[xy]{0,2}")), 0..10),
    ) {
        let mut p: Pairs = map.clone().into_iter().collect();
        let mut map = map;
        for (k, v) in edits {
            match v {
                Some(v) => prop_assert_eq!(
                    p.insert(k.as_str(), v.as_str()).map(|t| t.to_string()),
                    map.insert(k, v)
                ),
                None => prop_assert_eq!(p.remove(&k).map(|t| t.to_string()), map.remove(&k)),
            }
        }
        prop_assert_eq!(p, map.into_iter().collect::<Pairs>());
    }
}

/// What glibc's malloc takes for an allocation of `n` bytes (an 8-byte header, 16-byte chunks,
/// 32 at least), as `hub-core`'s stored-work size test counts.
fn chunk(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n + 8).div_ceil(16).max(2) * 16
    }
}

/// The heap of a `BTreeMap<String, String>` of at most 11 entries: one leaf node (parent
/// pointer, two `u16`s, 11 keys and 11 values) and every key and value as its own `String`.
fn map_heap(map: &BTreeMap<String, String>) -> usize {
    assert!(map.len() <= 11, "one leaf node");
    let leaf = (8 + 2 + 2 + 11 * 2 * std::mem::size_of::<String>()).next_multiple_of(8);
    let strings: usize = map
        .iter()
        .map(|(k, v)| chunk(k.len()) + chunk(v.len()))
        .sum();
    if map.is_empty() {
        0
    } else {
        chunk(leaf) + strings
    }
}

/// The heap a cluster's `Pairs` takes of its own once its strings are the fleet's interned
/// ones (which the fleet holds whether or not the scheduler keeps a copy).
fn pairs_heap(p: &Pairs) -> usize {
    chunk(std::mem::size_of_val(p.entries()))
}

/// A regression guard on the representation, computed (not timed): the scheduler's copy of a
/// typical cluster's labels and claims takes under a fifth of the heap the two maps took.
#[test]
fn a_typical_clusters_labels_and_claims_take_under_a_fifth_of_the_maps_heap() {
    let labels: BTreeMap<String, String> = [
        ("cluster.open-cluster-management.io/clusterset", "default"),
        ("env", "prod"),
        ("purpose", "serve"),
        ("region", "eu-west-1"),
        ("name", "sim-004217"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let claims: BTreeMap<String, String> = [
        ("id.k8s.io", "3f0b8c1e-4a5d-4e8b-9c7a-2d6e5f1a0b9c"),
        ("kubeversion.open-cluster-management.io", "v1.30.4"),
        ("region.open-cluster-management.io", "eu-west-1"),
        ("site.flotilla.io", "site-17"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let before = map_heap(&labels) + map_heap(&claims);
    let (l, c): (Pairs, Pairs) = (
        labels.clone().into_iter().collect(),
        claims.clone().into_iter().collect(),
    );
    let after = pairs_heap(&l) + pairs_heap(&c);
    eprintln!(
        "typical cluster (5 labels, 4 claims): {before} B as two BTreeMaps, {after} B as Pairs \
         of interned strings ({} B saved)",
        before - after
    );
    assert!(
        after * 5 < before,
        "{after} B as Pairs vs {before} B as maps"
    );
}
