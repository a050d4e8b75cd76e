//! Decision groups and PlacementDecision pages (step 6 of the algorithm).
//!
//! Decision order is `spec.sortBy`: cluster name (OCM's default), or with `Score` the recorded
//! score descending, ties by name. Groups are cut from that order, so with `Score` the first
//! groups (a rollout's first steps) hold the best-scored clusters; OCM's API only says the
//! decisions are ordered by score, and its controller does not implement the field yet.
//!
//! Otherwise as OCM: the group size comes from `clustersPerDecisionGroup` (a count, or a percentage of all
//! selected clusters rounded up, at least 1, at most all); each named group, in order, takes the
//! selected clusters its selector matches that no earlier group took, in decision order, cut into
//! chunks of the group size (a large named group becomes several groups of the same name); the
//! clusters left over are cut the same way into unnamed groups. Each group is
//! split into PlacementDecision pages of at most 100 names, named `<placement>-decision-<n>`
//! with `n` counting from 1 across all groups. With nothing selected there is still one empty
//! group with one empty page, so that consumers always find a PlacementDecision.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::error::ErrorKind;
use crate::placement::{ClusterSelector, IntOrString, Placement};
use crate::selector::CompiledSelector;

/// Most cluster names in one PlacementDecision.
pub const MAX_DECISIONS_PER_PAGE: usize = 100;
/// Label naming the placement on each PlacementDecision.
pub const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";
/// Label with the decision group index (from 0).
pub const DECISION_GROUP_INDEX_LABEL: &str =
    "cluster.open-cluster-management.io/decision-group-index";
/// Label with the decision group name (empty for unnamed groups).
pub const DECISION_GROUP_NAME_LABEL: &str =
    "cluster.open-cluster-management.io/decision-group-name";

/// A parsed `clustersPerDecisionGroup`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GroupSize {
    /// At most this many clusters per group (≥ 1).
    Count(usize),
    /// This percentage of the selected clusters, in (0, 100].
    Percent(f64),
}

/// OCM's CRD pattern for a string `clustersPerDecisionGroup`.
pub const GROUP_SIZE_PATTERN: &str = "^((100|[1-9][0-9]{0,1})%|[1-9][0-9]*)$";

/// Whether `s` is a decimal number without sign or leading zero (`[1-9][0-9]*`).
fn plain_count(s: &str) -> bool {
    s.starts_with(|c: char| matches!(c, '1'..='9')) && s.bytes().all(|b| b.is_ascii_digit())
}

impl GroupSize {
    /// Reads `clustersPerDecisionGroup` as OCM does; an error says how OCM treats the value.
    ///
    /// - A number is a count. OCM's CRD sets no minimum, and its controller takes 0 or less as
    ///   "every cluster in one group", so that is what they mean here.
    /// - A string must match OCM's CRD pattern [`GROUP_SIZE_PATTERN`] or the API rejects it
    ///   ([`ErrorKind::Invalid`]): `"N%"` with N from 1 to 100 is a percentage.
    /// - A string count such as `"3"` passes the pattern, but OCM's controller reads strings only
    ///   as percentages and reports the placement misconfigured ([`ErrorKind::Misconfigured`]).
    pub fn parse(value: &IntOrString) -> Result<GroupSize, (ErrorKind, String)> {
        match value {
            IntOrString::Int(n) if *n >= 1 => {
                Ok(GroupSize::Count(usize::try_from(*n).unwrap_or(usize::MAX)))
            }
            IntOrString::Int(_) => Ok(GroupSize::Percent(100.0)),
            IntOrString::String(s) => {
                if let Some(p) = s.strip_suffix('%')
                    && plain_count(p)
                    && let Ok(n) = p.parse::<u8>()
                    && n <= 100
                {
                    Ok(GroupSize::Percent(f64::from(n)))
                } else if plain_count(s) {
                    Err((
                        ErrorKind::Misconfigured,
                        format!(
                            "{s:?} is a string but not a percentage: write {s} without quotes for \
                             a number of clusters, or \"{s}%\" for a percentage"
                        ),
                    ))
                } else {
                    Err((
                        ErrorKind::Invalid,
                        format!(
                            "must be a number of clusters or a percentage from \"1%\" to \
                             \"100%\" (OCM's pattern {GROUP_SIZE_PATTERN}); got {s:?}"
                        ),
                    ))
                }
            }
        }
    }

    /// Clusters per group when `total` clusters are selected: at least 1, at most `total`.
    pub fn length(self, total: usize) -> usize {
        let n = match self {
            GroupSize::Count(n) => n,
            GroupSize::Percent(p) => (p / 100.0 * total as f64).ceil() as usize,
        };
        n.clamp(1, total.max(1))
    }
}

/// One PlacementDecision object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementDecision {
    /// `<placement>-decision-<n>`.
    pub name: String,
    /// The placement's namespace.
    pub namespace: String,
    /// The placement, decision-group-index and decision-group-name labels.
    pub labels: BTreeMap<String, String>,
    /// Index of the group this page belongs to.
    pub decision_group_index: u32,
    /// `status.decisions`, in the placement's `sortBy` order; at most 100.
    pub decisions: Vec<ClusterDecision>,
}

impl PlacementDecision {
    /// The page's cluster names, in order.
    pub fn cluster_names(&self) -> impl Iterator<Item = &str> {
        self.decisions.iter().map(|d| d.cluster_name.as_str())
    }
}

/// One entry of a PlacementDecision's `status.decisions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    /// The selected cluster.
    pub cluster_name: String,
    /// Its total score over the placement's prioritizers (weights applied), as recorded under
    /// `scoreRateLimit` ([`crate::schedule`]).
    pub score: i64,
}

/// One entry of the placement's `status.decisionGroups`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroupStatus {
    /// From 0.
    pub decision_group_index: u32,
    /// Empty for groups made of left-over clusters.
    pub decision_group_name: String,
    /// Names of the group's PlacementDecision pages.
    pub decisions: Vec<String>,
    /// Clusters in the group.
    pub cluster_count: u32,
}

/// The pages and group statuses of one scheduling result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decisions {
    /// PlacementDecision objects, in name order of `n`.
    pub pages: Vec<PlacementDecision>,
    /// `status.decisionGroups`.
    pub groups: Vec<DecisionGroupStatus>,
}

impl Decisions {
    /// Every decided cluster name, in page order.
    pub fn cluster_names(&self) -> impl Iterator<Item = &str> {
        self.pages.iter().flat_map(PlacementDecision::cluster_names)
    }
}

/// A group selector compiled for matching; an invalid one matches nothing.
struct GroupMatcher {
    labels: Option<CompiledSelector>,
    claims: Option<CompiledSelector>,
}

impl GroupMatcher {
    fn new(sel: &ClusterSelector) -> Self {
        GroupMatcher {
            labels: sel.label_selector.compile().ok(),
            claims: sel.claim_selector.compile().ok(),
        }
    }

    fn matches(&self, c: &Cluster) -> bool {
        match (&self.labels, &self.claims) {
            (Some(l), Some(r)) => l.matches(&c.labels) && r.matches(&c.claims),
            _ => false,
        }
    }
}

/// Groups and pages the selected clusters of `placement`. `selected` may come in any order.
/// A `clustersPerDecisionGroup` that fails validation counts as 100%; a group selector that fails
/// validation matches nothing.
pub fn group_decisions(placement: &Placement, selected: &[&Cluster]) -> Decisions {
    let mut sorted: Vec<&Cluster> = selected.to_vec();
    sorted.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    let matchers: Vec<GroupMatcher> = placement
        .decision_strategy
        .group_strategy
        .decision_groups
        .iter()
        .map(|g| GroupMatcher::new(&g.group_cluster_selector))
        .collect();
    group_sorted(
        placement,
        &sorted,
        |c| (c.name.as_str(), 0),
        |g, c| matchers[g].matches(c),
    )
}

/// [`group_decisions`] for items already in decision order (by name, or by score for
/// `sortBy: Score`): `decision` gives an item's cluster name and score, `matches(g, item)`
/// whether decision group `g`'s selector matches it.
pub(crate) fn group_sorted<'a, T: Copy>(
    placement: &Placement,
    sorted: &[T],
    decision: impl Fn(T) -> (&'a str, i64),
    matches: impl Fn(usize, T) -> bool,
) -> Decisions {
    let gs = &placement.decision_strategy.group_strategy;
    let size =
        GroupSize::parse(&gs.clusters_per_decision_group).unwrap_or(GroupSize::Percent(100.0));
    let length = size.length(sorted.len());

    let mut groups: Vec<(&str, Vec<T>)> = Vec::new();
    let mut taken = vec![false; sorted.len()];
    for (g, group) in gs.decision_groups.iter().enumerate() {
        let mut members = Vec::new();
        for (i, &item) in sorted.iter().enumerate() {
            if !taken[i] && matches(g, item) {
                taken[i] = true;
                members.push(item);
            }
        }
        for chunk in members.chunks(length) {
            groups.push((group.group_name.as_str(), chunk.to_vec()));
        }
    }
    let rest: Vec<T> = sorted
        .iter()
        .zip(&taken)
        .filter(|&(_, &t)| !t)
        .map(|(&item, _)| item)
        .collect();
    for chunk in rest.chunks(length) {
        groups.push(("", chunk.to_vec()));
    }
    if groups.is_empty() {
        groups.push(("", Vec::new()));
    }

    let mut out = Decisions::default();
    let mut page_number = 1usize;
    for (index, (name, members)) in groups.into_iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let mut status = DecisionGroupStatus {
            decision_group_index: index,
            decision_group_name: name.to_owned(),
            decisions: Vec::new(),
            cluster_count: u32::try_from(members.len()).unwrap_or(u32::MAX),
        };
        let mut chunks: Vec<&[T]> = members.chunks(MAX_DECISIONS_PER_PAGE).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for chunk in chunks {
            let page_name = format!("{}-decision-{page_number}", placement.name);
            page_number += 1;
            let labels = BTreeMap::from([
                (PLACEMENT_LABEL.to_owned(), placement.name.clone()),
                (DECISION_GROUP_INDEX_LABEL.to_owned(), index.to_string()),
                (DECISION_GROUP_NAME_LABEL.to_owned(), name.to_owned()),
            ]);
            status.decisions.push(page_name.clone());
            out.pages.push(PlacementDecision {
                name: page_name,
                namespace: placement.namespace.clone(),
                labels,
                decision_group_index: index,
                decisions: chunk
                    .iter()
                    .map(|&item| {
                        let (name, score) = decision(item);
                        ClusterDecision {
                            cluster_name: name.to_owned(),
                            score,
                        }
                    })
                    .collect(),
            });
        }
        out.groups.push(status);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::LabelSelector;

    fn clusters(n: usize, labelled: usize) -> Vec<Cluster> {
        (0..n)
            .map(|i| {
                let c = Cluster::new(format!("c{i:03}"));
                if i < labelled {
                    c.label("canary", "true")
                } else {
                    c
                }
            })
            .collect()
    }

    fn names(page: &PlacementDecision) -> Vec<&str> {
        page.cluster_names().collect()
    }

    fn refs(cs: &[Cluster]) -> Vec<&Cluster> {
        cs.iter().collect()
    }

    #[test]
    fn group_size_parses_counts_and_percentages_as_ocm() {
        let parse = |v: IntOrString| GroupSize::parse(&v);
        let s = |v: &str| IntOrString::String(v.to_owned());
        assert_eq!(parse(IntOrString::Int(150)), Ok(GroupSize::Count(150)));
        assert_eq!(parse(s("25%")), Ok(GroupSize::Percent(25.0)));
        assert_eq!(parse(s("1%")), Ok(GroupSize::Percent(1.0)));
        assert_eq!(parse(s("100%")), Ok(GroupSize::Percent(100.0)));
        // No minimum for numbers in OCM's CRD; its controller then puts everything in one group.
        assert_eq!(parse(IntOrString::Int(0)), Ok(GroupSize::Percent(100.0)));
        assert_eq!(parse(IntOrString::Int(-3)), Ok(GroupSize::Percent(100.0)));
    }

    #[test]
    fn a_string_count_is_misconfigured_and_strings_off_the_crd_pattern_are_invalid() {
        let kind = |v: &str| GroupSize::parse(&IntOrString::String(v.to_owned())).map_err(|e| e.0);
        for misconfigured in ["3", "150", "1000"] {
            assert_eq!(
                kind(misconfigured),
                Err(ErrorKind::Misconfigured),
                "{misconfigured}"
            );
        }
        for invalid in [
            "0%", "101%", "100.5%", "12.5%", "05%", "-5%", "x%", "ten", "", " 3", "03",
        ] {
            assert_eq!(kind(invalid), Err(ErrorKind::Invalid), "{invalid:?}");
        }
        let (_, message) = GroupSize::parse(&IntOrString::String("3".into())).unwrap_err();
        assert_eq!(
            message,
            "\"3\" is a string but not a percentage: write 3 without quotes for a number of \
             clusters, or \"3%\" for a percentage"
        );
    }

    #[test]
    fn percentage_rounds_up_with_minimum_one() {
        assert_eq!(GroupSize::Percent(25.0).length(10), 3);
        assert_eq!(GroupSize::Percent(1.0).length(10), 1);
        assert_eq!(GroupSize::Percent(100.0).length(7), 7);
        assert_eq!(
            GroupSize::Count(500).length(7),
            7,
            "never larger than the selection"
        );
        assert_eq!(GroupSize::Percent(50.0).length(0), 1);
    }

    #[test]
    fn default_is_one_group_paged_by_100() {
        let cs = clusters(250, 0);
        let d = group_decisions(&Placement::new("ns", "p"), &refs(&cs));
        assert_eq!(d.groups.len(), 1);
        assert_eq!(d.groups[0].cluster_count, 250);
        assert_eq!(
            d.groups[0].decisions,
            ["p-decision-1", "p-decision-2", "p-decision-3"]
        );
        let sizes: Vec<usize> = d.pages.iter().map(|p| p.decisions.len()).collect();
        assert_eq!(sizes, [100, 100, 50]);
    }

    #[test]
    fn named_groups_take_matching_clusters_first_and_only_once() {
        let cs = clusters(6, 3);
        let p = Placement::new("ns", "p")
            .decision_group(
                "canary",
                ClusterSelector::labels(LabelSelector::default().exists("canary")),
            )
            .decision_group(
                "again",
                ClusterSelector::labels(LabelSelector::default().exists("canary")),
            );
        let d = group_decisions(&p, &refs(&cs));
        let summary: Vec<(&str, u32)> = d
            .groups
            .iter()
            .map(|g| (g.decision_group_name.as_str(), g.cluster_count))
            .collect();
        assert_eq!(
            summary,
            [("canary", 3), ("", 3)],
            "an empty named group produces no group"
        );
        assert_eq!(names(&d.pages[0]), ["c000", "c001", "c002"]);
    }

    #[test]
    fn large_named_group_is_chunked_like_ocm() {
        let cs = clusters(5, 5);
        let p = Placement::new("ns", "p")
            .decision_group(
                "canary",
                ClusterSelector::labels(LabelSelector::default().exists("canary")),
            )
            .clusters_per_decision_group(IntOrString::Int(2));
        let d = group_decisions(&p, &refs(&cs));
        let counts: Vec<(u32, &str, u32)> = d
            .groups
            .iter()
            .map(|g| {
                (
                    g.decision_group_index,
                    g.decision_group_name.as_str(),
                    g.cluster_count,
                )
            })
            .collect();
        assert_eq!(
            counts,
            [(0, "canary", 2), (1, "canary", 2), (2, "canary", 1)]
        );
    }

    #[test]
    fn empty_selection_still_has_one_empty_page() {
        let d = group_decisions(&Placement::new("ns", "p"), &[]);
        assert_eq!(d.groups.len(), 1);
        assert_eq!(d.groups[0].cluster_count, 0);
        assert_eq!(d.pages.len(), 1);
        assert_eq!(d.pages[0].name, "p-decision-1");
        assert!(d.pages[0].decisions.is_empty());
    }

    #[test]
    fn pages_carry_placement_and_group_labels() {
        let cs = clusters(2, 1);
        let p = Placement::new("ns", "p").decision_group(
            "canary",
            ClusterSelector::labels(LabelSelector::default().exists("canary")),
        );
        let d = group_decisions(&p, &refs(&cs));
        assert_eq!(d.pages[1].labels[PLACEMENT_LABEL], "p");
        assert_eq!(d.pages[1].labels[DECISION_GROUP_INDEX_LABEL], "1");
        assert_eq!(d.pages[1].labels[DECISION_GROUP_NAME_LABEL], "");
        assert_eq!(d.pages[0].labels[DECISION_GROUP_NAME_LABEL], "canary");
        assert_eq!(d.pages[0].namespace, "ns");
    }

    #[test]
    fn names_inside_pages_are_sorted_whatever_the_input_order() {
        let cs = clusters(5, 0);
        let mut r = refs(&cs);
        r.reverse();
        let d = group_decisions(&Placement::new("ns", "p"), &r);
        assert_eq!(names(&d.pages[0]), ["c000", "c001", "c002", "c003", "c004"]);
    }
}
