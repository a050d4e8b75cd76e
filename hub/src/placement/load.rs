//! What [`super::Placements::start`] reads back from the buckets, put in order: decision pages
//! grouped by the placement whose key they carry, each stored placement paired with its pages,
//! and the pages left without a placement. Pure (the start reads and purges).

use crate::keys::ObjectRef;
use flotilla_api::v1::{Placement, PlacementDecision};
use std::collections::BTreeMap;

/// A stored decision page: its number (from 1), the page, its revision.
type StoredPage = (usize, PlacementDecision, u64);

/// Stored decision pages by the placement their key names.
pub(super) type Pages = BTreeMap<ObjectRef, Vec<StoredPage>>;

/// The placement and page number of a decision page's KV key, `<ns>.<placement>.<n>`:
/// namespaces have no dots, `n` is the last token, the placement what lies between (a
/// placement name may have dots). `None` for a key of another shape.
pub(super) fn page_key(key: &str) -> Option<(ObjectRef, usize)> {
    let (ns, rest) = key.split_once('.')?;
    let (placement, n) = rest.rsplit_once('.')?;
    Some((ObjectRef::new(ns, placement), n.parse().ok()?))
}

/// The decision pages as loaded (`(key, page, revision)`), each carrying its revision as its
/// `resourceVersion`, grouped by placement. Keys of another shape are skipped.
pub(super) fn group_pages(loaded: Vec<(String, PlacementDecision, u64)>) -> Pages {
    let mut pages = Pages::new();
    for (key, mut d, rev) in loaded {
        let Some((placement, n)) = page_key(&key) else {
            continue;
        };
        if let Some(m) = d.metadata.as_mut() {
            m.resource_version = rev;
        }
        pages.entry(placement).or_default().push((n, d, rev));
    }
    pages
}

/// A stored placement and its decision pages, as its actor starts from them.
pub(super) struct Stored {
    /// Which placement.
    pub(super) key: ObjectRef,
    /// The placement, its revision as its `resourceVersion`.
    pub(super) placement: Placement,
    /// Its revision in the bucket.
    pub(super) revision: u64,
    /// Its pages in order (page 1 first).
    pub(super) pages: Vec<PlacementDecision>,
}

/// Pairs each stored placement (`(key, placement, revision)` as loaded) with its pages, taken
/// out of `pages`: what is left there belongs to no stored placement.
pub(super) fn pair(loaded: Vec<(String, Placement, u64)>, pages: &mut Pages) -> Vec<Stored> {
    loaded
        .into_iter()
        .map(|(_, mut placement, revision)| {
            let m = placement.metadata.get_or_insert_with(Default::default);
            m.resource_version = revision;
            let key = ObjectRef::new(m.namespace.as_str(), m.name.as_str());
            let mut ps = pages.remove(&key).unwrap_or_default();
            ps.sort_by_key(|(n, _, _)| *n);
            Stored {
                key,
                placement,
                revision,
                pages: ps.into_iter().map(|(_, d, _)| d).collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::ObjectMeta;

    fn page(name: &str) -> PlacementDecision {
        PlacementDecision {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn placement(ns: &str, name: &str) -> Placement {
        Placement {
            metadata: Some(ObjectMeta {
                namespace: ns.into(),
                name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_page_key_is_namespace_placement_and_number_and_the_placement_may_have_dots() {
        assert_eq!(page_key("ns.p.2"), Some((ObjectRef::new("ns", "p"), 2)));
        assert_eq!(
            page_key("ns.web.v2.10"),
            Some((ObjectRef::new("ns", "web.v2"), 10))
        );
        assert_eq!(page_key("ns.p"), None, "no page number");
        assert_eq!(page_key("ns.p.x"), None, "a page number that is no number");
    }

    #[test]
    fn placements_get_their_pages_in_order_and_orphans_are_left() {
        let mut pages = group_pages(vec![
            ("ns.p.2".into(), page("p-decision-2"), 7),
            ("ns.p.1".into(), page("p-decision-1"), 5),
            ("ns.gone.1".into(), page("gone-decision-1"), 3),
            ("junk".into(), page("junk"), 1),
        ]);
        let stored = pair(vec![("ns.p".into(), placement("ns", "p"), 9)], &mut pages);
        assert_eq!(stored.len(), 1);
        let s = &stored[0];
        assert_eq!(s.key, ObjectRef::new("ns", "p"));
        assert_eq!(s.revision, 9);
        assert_eq!(s.placement.metadata.as_ref().unwrap().resource_version, 9);
        let names: Vec<_> = s
            .pages
            .iter()
            .map(|d| {
                let m = d.metadata.as_ref().unwrap();
                (m.name.as_str(), m.resource_version)
            })
            .collect();
        assert_eq!(names, [("p-decision-1", 5), ("p-decision-2", 7)]);
        let orphans: Vec<_> = pages.keys().cloned().collect();
        assert_eq!(orphans, [ObjectRef::new("ns", "gone")]);
    }
}
