//! Placement output: `get placements` (clusteradm's NAME, STATUS, REASON, SELECTEDCLUSTERS),
//! `get decisions`, `get addonplacementscores`, and `describe placement`, which shows the
//! scheduler's debug view (OCM's `/debug/placements/<ns>/<name>`): for every candidate cluster
//! whether each filter passed and each prioritizer's score.

use crate::output::table;
use flotilla_api::meta;
use flotilla_api::ocm;
use flotilla_api::v1::{AddOnPlacementScore, Placement, PlacementDebug, PlacementDecision};
use serde::Serialize;

/// Label of a PlacementDecision naming its decision group index.
const GROUP_INDEX_LABEL: &str = "cluster.open-cluster-management.io/decision-group-index";
/// Label of a PlacementDecision naming its decision group.
const GROUP_NAME_LABEL: &str = "cluster.open-cluster-management.io/decision-group-name";

/// `get placements` columns (clusteradm).
pub const PLACEMENT_COLUMNS: [&str; 4] = ["NAME", "STATUS", "REASON", "SELECTEDCLUSTERS"];

/// One `get placements` row: STATUS and REASON of `PlacementSatisfied` (or of
/// `PlacementMisconfigured` when that is True).
pub fn placement_row(p: &Placement) -> Vec<String> {
    let m = p.metadata.clone().unwrap_or_default();
    let st = p.status.clone().unwrap_or_default();
    let misconfigured = meta::find_condition(&st.conditions, "PlacementMisconfigured")
        .filter(|c| c.status == meta::status::TRUE);
    let shown =
        misconfigured.or_else(|| meta::find_condition(&st.conditions, "PlacementSatisfied"));
    let (status, reason) = shown.map_or((String::new(), String::new()), |c| {
        let status = if c.r#type == "PlacementMisconfigured" {
            "Misconfigured".to_string()
        } else {
            c.status.clone()
        };
        (status, c.reason.clone())
    });
    vec![
        m.name,
        status,
        reason,
        st.number_of_selected_clusters.to_string(),
    ]
}

/// `get decisions` columns.
pub const DECISION_COLUMNS: [&str; 5] = ["NAME", "GROUP INDEX", "GROUP NAME", "COUNT", "CLUSTERS"];

/// One `get decisions` row.
pub fn decision_row(d: &PlacementDecision) -> Vec<String> {
    let m = d.metadata.clone().unwrap_or_default();
    let clusters: Vec<&str> = d
        .status
        .iter()
        .flat_map(|s| s.decisions.iter().map(|c| c.cluster_name.as_str()))
        .collect();
    vec![
        m.name.clone(),
        m.labels.get(GROUP_INDEX_LABEL).cloned().unwrap_or_default(),
        m.labels.get(GROUP_NAME_LABEL).cloned().unwrap_or_default(),
        clusters.len().to_string(),
        clusters.join(","),
    ]
}

/// `get addonplacementscores` columns.
pub const SCORE_COLUMNS: [&str; 4] = ["CLUSTER", "NAME", "SCORES", "VALID UNTIL"];

/// One `get addonplacementscores` row.
pub fn score_row(s: &AddOnPlacementScore) -> Vec<String> {
    let o = ocm::AddOnPlacementScore::from(s);
    let scores: Vec<String> = o
        .status
        .scores
        .iter()
        .map(|i| format!("{}={}", i.name, i.value))
        .collect();
    vec![
        o.metadata.namespace,
        o.metadata.name,
        scores.join(","),
        if o.status.valid_until.is_empty() {
            "never expires".into()
        } else {
            o.status.valid_until
        },
    ]
}

/// `describe placement` as JSON/YAML: the placement in its OCM shape plus the debug view.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Described {
    /// The placement (OCM shape).
    pub placement: ocm::Placement,
    /// Sets the placement may draw from.
    pub eligible_sets: Vec<String>,
    /// Prioritizers that ran and their weights.
    pub prioritizers: Vec<Weighted>,
    /// Every candidate cluster.
    pub clusters: Vec<Candidate>,
    /// Why nothing was scheduled (misconfigured spec).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// A prioritizer and its weight.
#[derive(Debug, Serialize)]
pub struct Weighted {
    /// OCM name.
    pub prioritizer: String,
    /// Weight.
    pub weight: i32,
}

/// One candidate cluster.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// Cluster name.
    pub name: String,
    /// Filter verdicts in order.
    pub filters: Vec<FilterVerdict>,
    /// Raw scores per prioritizer.
    pub scores: Vec<Score>,
    /// Σ weight × score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// Rank among feasible clusters (0 = best).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// In the decisions.
    pub selected: bool,
    /// Why a feasible cluster was not selected.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub not_selected_reason: String,
}

/// One filter's verdict.
#[derive(Debug, Serialize)]
pub struct FilterVerdict {
    /// Filter name.
    pub filter: String,
    /// Passed?
    pub passed: bool,
    /// Why (not).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// One raw score.
#[derive(Debug, Serialize)]
pub struct Score {
    /// Prioritizer.
    pub prioritizer: String,
    /// Weight it ran with.
    pub weight: i32,
    /// Raw score in [-100, 100].
    pub score: i64,
}

/// The structured form of a debug view.
pub fn described(d: &PlacementDebug) -> Described {
    Described {
        placement: ocm::Placement::from(&d.placement.clone().unwrap_or_default()),
        eligible_sets: d.eligible_sets.clone(),
        prioritizers: d
            .prioritizers
            .iter()
            .map(|w| Weighted {
                prioritizer: w.prioritizer.clone(),
                weight: w.weight,
            })
            .collect(),
        clusters: d
            .clusters
            .iter()
            .map(|c| Candidate {
                name: c.name.clone(),
                filters: c
                    .filters
                    .iter()
                    .map(|f| FilterVerdict {
                        filter: f.filter.clone(),
                        passed: f.passed,
                        reason: f.reason.clone(),
                    })
                    .collect(),
                scores: c
                    .scores
                    .iter()
                    .map(|s| Score {
                        prioritizer: s.prioritizer.clone(),
                        weight: s.weight,
                        score: s.score,
                    })
                    .collect(),
                total: c.total,
                rank: c.rank,
                selected: c.selected,
                not_selected_reason: c.not_selected_reason.clone(),
            })
            .collect(),
        error: d.error.clone(),
    }
}

/// Filters in the order the scheduler applies them.
const FILTERS: [&str; 3] = ["Deleting", "Predicates", "TaintToleration"];

/// A human description of a placement and the scheduler's view of every candidate
/// (`describe placement`).
pub fn describe_placement(d: &PlacementDebug, decisions: &[PlacementDecision]) -> String {
    let p = d.placement.clone().unwrap_or_default();
    let o = ocm::Placement::from(&p);
    let mut s = String::new();
    s.push_str(&format!("Name:          {}\n", o.metadata.name));
    s.push_str(&format!("Namespace:     {}\n", o.metadata.namespace));
    s.push_str(&format!("Generation:    {}\n", o.metadata.generation));
    s.push_str(&format!(
        "Created:       {}\n",
        o.metadata.creation_timestamp
    ));
    let spec_yaml = serde_yaml::to_string(&o.spec).unwrap_or_default();
    s.push_str("Spec:\n");
    for line in spec_yaml.lines().filter(|l| *l != "{}") {
        s.push_str(&format!("  {line}\n"));
    }
    let status = o.status.unwrap_or_default();
    s.push_str(&format!(
        "Selected clusters: {}\n",
        status.number_of_selected_clusters
    ));
    s.push_str(&crate::output::conditions_block(&status.conditions));
    let groups: Vec<Vec<String>> = status
        .decision_groups
        .iter()
        .map(|g| {
            vec![
                g.decision_group_index.to_string(),
                g.decision_group_name.clone(),
                g.cluster_count.to_string(),
                g.decisions.join(","),
            ]
        })
        .collect();
    s.push_str("Decision groups:\n");
    for line in table(&["INDEX", "NAME", "CLUSTERS", "DECISIONS"], &groups).lines() {
        s.push_str(&format!("  {line}\n"));
    }
    s.push_str("Decisions:\n");
    for line in table(
        &DECISION_COLUMNS,
        &decisions.iter().map(decision_row).collect::<Vec<_>>(),
    )
    .lines()
    {
        s.push_str(&format!("  {line}\n"));
    }
    if !d.error.is_empty() {
        s.push_str(&format!("Not scheduled: {}\n", d.error));
        return s;
    }
    s.push_str(&format!("Eligible sets: {}\n", d.eligible_sets.join(", ")));
    let weights: Vec<String> = d
        .prioritizers
        .iter()
        .map(|w| format!("{}={}", w.prioritizer, w.weight))
        .collect();
    s.push_str(&format!("Prioritizers (weight): {}\n", weights.join(", ")));
    s.push_str("Candidates (filters: + passed, - failed, . not reached; scores are raw, in [-100, 100]):\n");
    let mut header: Vec<String> = vec!["CLUSTER".into(), "SELECTED".into(), "RANK".into()];
    header.extend(FILTERS.iter().map(|f| f.to_uppercase()));
    header.extend(d.prioritizers.iter().map(|w| w.prioritizer.clone()));
    header.push("TOTAL".into());
    let rows: Vec<Vec<String>> = d
        .clusters
        .iter()
        .map(|c| {
            let mut row = vec![
                c.name.clone(),
                if c.selected { "yes" } else { "no" }.to_string(),
                c.rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
            ];
            for f in FILTERS {
                row.push(
                    match c.filters.iter().find(|x| x.filter == f) {
                        Some(x) if x.passed => "+",
                        Some(_) => "-",
                        None => ".",
                    }
                    .to_string(),
                );
            }
            for w in &d.prioritizers {
                row.push(
                    c.scores
                        .iter()
                        .find(|x| x.prioritizer == w.prioritizer)
                        .map(|x| x.score.to_string())
                        .unwrap_or_else(|| "-".into()),
                );
            }
            row.push(c.total.map(|t| t.to_string()).unwrap_or_else(|| "-".into()));
            row
        })
        .collect();
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    for line in table(&header_refs, &rows).lines() {
        s.push_str(&format!("  {line}\n"));
    }
    let notes: Vec<String> = d
        .clusters
        .iter()
        .flat_map(|c| {
            let mut v: Vec<String> = c
                .filters
                .iter()
                .filter(|f| !f.reason.is_empty())
                .map(|f| format!("{}: {}: {}", c.name, f.filter, f.reason))
                .collect();
            if c.prefer_no_select_penalty {
                v.push(format!(
                    "{}: ranked after untainted clusters (untolerated PreferNoSelect taint)",
                    c.name
                ));
            }
            if !c.not_selected_reason.is_empty() {
                v.push(format!(
                    "{}: not selected: {}",
                    c.name, c.not_selected_reason
                ));
            }
            v
        })
        .collect();
    if !notes.is_empty() {
        s.push_str("Why:\n");
        for n in notes {
            s.push_str(&format!("  {n}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{
        ClusterDebug, Condition, FilterResult, ObjectMeta, PlacementStatus, PrioritizerWeight,
        ScoreDetail,
    };

    fn placement() -> Placement {
        Placement {
            metadata: Some(ObjectMeta {
                name: "placement1".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            spec: None,
            status: Some(PlacementStatus {
                number_of_selected_clusters: 3,
                decision_groups: vec![],
                conditions: vec![Condition {
                    r#type: "PlacementSatisfied".into(),
                    status: "True".into(),
                    reason: "AllDecisionsScheduled".into(),
                    ..Default::default()
                }],
            }),
        }
    }

    #[test]
    fn placement_rows_use_clusteradm_columns() {
        let out = table(&PLACEMENT_COLUMNS, &[placement_row(&placement())]);
        let mut lines = out.lines();
        assert_eq!(
            lines.next().unwrap(),
            "NAME         STATUS   REASON                  SELECTEDCLUSTERS"
        );
        assert_eq!(
            lines.next().unwrap(),
            "placement1   True     AllDecisionsScheduled   3"
        );
    }

    #[test]
    fn describe_shows_each_filter_and_score_per_candidate() {
        let d = PlacementDebug {
            placement: Some(placement()),
            eligible_sets: vec!["prod".into()],
            prioritizers: vec![PrioritizerWeight {
                prioritizer: "Balance".into(),
                weight: 1,
            }],
            clusters: vec![
                ClusterDebug {
                    name: "c1".into(),
                    filters: FILTERS
                        .iter()
                        .map(|f| FilterResult {
                            filter: (*f).into(),
                            passed: true,
                            reason: String::new(),
                        })
                        .collect(),
                    scores: vec![ScoreDetail {
                        prioritizer: "Balance".into(),
                        weight: 1,
                        score: 100,
                    }],
                    total: Some(100),
                    rank: Some(0),
                    selected: true,
                    ..Default::default()
                },
                ClusterDebug {
                    name: "c2".into(),
                    filters: vec![
                        FilterResult {
                            filter: "Deleting".into(),
                            passed: true,
                            reason: String::new(),
                        },
                        FilterResult {
                            filter: "Predicates".into(),
                            passed: false,
                            reason: "no predicate matched".into(),
                        },
                    ],
                    ..Default::default()
                },
            ],
            error: String::new(),
        };
        let text = describe_placement(&d, &[]);
        let c1 = text
            .lines()
            .find(|l| l.trim_start().starts_with("c1 "))
            .unwrap();
        assert!(c1.contains("yes"), "{c1}");
        assert!(c1.contains("+"), "{c1}");
        assert!(c1.trim_end().ends_with("100"), "{c1}");
        let c2 = text
            .lines()
            .find(|l| l.trim_start().starts_with("c2 "))
            .unwrap();
        assert!(c2.contains(" - "), "{c2}");
        assert!(
            text.contains("c2: Predicates: no predicate matched"),
            "{text}"
        );
        let json = serde_json::to_value(described(&d)).unwrap();
        assert_eq!(json["clusters"][1]["filters"][1]["passed"], false);
        assert_eq!(json["placement"]["kind"], "Placement");
    }
}
