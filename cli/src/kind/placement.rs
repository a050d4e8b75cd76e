//! Placements: `get placements` in clusteradm's columns (NAME, STATUS, REASON,
//! SELECTEDCLUSTERS) and `describe placement`, which shows the scheduler's debug view (OCM's
//! `/debug/placements/<ns>/<name>`): for every candidate cluster whether each filter passed and
//! each prioritizer's score.

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use crate::output::{conditions_block, describe_head, indented, kind_table, table};
use flotilla_api::meta;
use flotilla_api::ocm;
use flotilla_api::v1::{ObjectMeta, Placement, PlacementDebug, PlacementDecision};
use serde::Serialize;

impl Kind for Placement {
    type Ocm = ocm::Placement;
    const COLUMNS: &'static [&'static str] = &["NAME", "STATUS", "REASON", "SELECTEDCLUSTERS"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    /// STATUS and REASON of `PlacementSatisfied`, or of `PlacementMisconfigured` when that is
    /// True (STATUS `Misconfigured`).
    fn row(&self) -> Vec<String> {
        let st = self.status.clone().unwrap_or_default();
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
            self.name(),
            status,
            reason,
            st.number_of_selected_clusters.to_string(),
        ]
    }

    fn to_ocm(&self) -> ocm::Placement {
        ocm::Placement::from(self)
    }

    const ACROSS_NAMESPACES: bool = true;

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No placements found.".into())
    }

    /// The named placements of the namespace, or every placement (of the namespace when
    /// given).
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        if query.names.is_empty() {
            let r = flotilla_api::v1::ListPlacementsRequest {
                namespace: query.namespace.clone().unwrap_or_default(),
            };
            return Ok(hub
                .idempotent(async || hub.placements().list_placements(r.clone()).await)
                .await?
                .items);
        }
        let Some(namespace) = &query.namespace else {
            anyhow::bail!("get placements NAME needs --namespace NS");
        };
        let mut items = Vec::new();
        for name in &query.names {
            let r = flotilla_api::v1::PlacementRef {
                namespace: namespace.clone(),
                name: name.clone(),
            };
            items.push(
                hub.idempotent(async || hub.placements().get_placement(r.clone()).await)
                    .await?,
            );
        }
        Ok(items)
    }
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
pub(crate) const FILTERS: [&str; 3] = ["Deleting", "Predicates", "TaintToleration"];

/// A human description of a placement and the scheduler's view of every candidate
/// (`describe placement`).
pub fn describe(d: &PlacementDebug, decisions: &[PlacementDecision]) -> String {
    let p = d.placement.clone().unwrap_or_default();
    let o = ocm::Placement::from(&p);
    let m = &o.metadata;
    let mut s = describe_head(
        &m.name,
        ("Namespace:", &m.namespace),
        m.generation,
        &m.creation_timestamp,
    );
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
    s.push_str(&conditions_block(&status.conditions));
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
    s.push_str(&indented(&table(
        &["INDEX", "NAME", "CLUSTERS", "DECISIONS"],
        &groups,
    )));
    s.push_str("Decisions:\n");
    s.push_str(&indented(&kind_table(decisions)));
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
    s.push_str(&candidates(d));
    s.push_str(&why(d));
    s
}

/// The candidates table: each cluster's selection, rank, filters and raw scores.
fn candidates(d: &PlacementDebug) -> String {
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
    indented(&table(&header_refs, &rows))
}

/// Why each cluster was filtered, ranked after others or not selected (empty when nothing is
/// to say).
fn why(d: &PlacementDebug) -> String {
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
    if notes.is_empty() {
        return String::new();
    }
    let mut s = String::from("Why:\n");
    for n in notes {
        s.push_str(&format!("  {n}\n"));
    }
    s
}

impl Delete for Placement {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::PlacementRef {
            namespace: target.namespace,
            name: target.name,
        };
        let d = hub
            .delete(async || hub.placements().delete_placement(r.clone()).await)
            .await?;
        Ok(Gone::new(
            d,
            format!("placement/{} deleted (namespace {})", r.name, r.namespace),
        ))
    }
}
