//! Rendering of every kind: clusteradm's columns, the OCM shapes, and the `describe` texts.

use super::Kind;
use super::placement::{FILTERS, describe, described};
use crate::output::{Format, namespaced_table, render, structured};
use flotilla_api::meta::{self, CLUSTERSET_LABEL, COND_AVAILABLE, COND_CLUSTERSET_EMPTY};
use flotilla_api::ocm;
use flotilla_api::v1::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, ClusterDebug,
    ClusterDecision, Condition, FilterResult, ManagedCluster, ManagedClusterSet,
    ManagedClusterSetStatus, ManagedClusterSetView, ManagedClusterSpec, ManagedClusterStatus,
    ObjectMeta, Placement, PlacementDebug, PlacementDecision, PlacementDecisionStatus,
    PlacementStatus, PrioritizerWeight, ScoreDetail,
};

fn meta(namespace: &str, name: &str) -> Option<ObjectMeta> {
    Some(ObjectMeta {
        name: name.into(),
        namespace: namespace.into(),
        ..Default::default()
    })
}

/// `ManagedCluster` fixtures: `ClusterFixture::new("c1").accepted().available()...build()`.
struct ClusterFixture(ManagedCluster);

impl ClusterFixture {
    fn new(name: &str) -> Self {
        Self(ManagedCluster {
            metadata: meta("", name),
            spec: Some(ManagedClusterSpec {
                lease_duration_seconds: 60,
                ..Default::default()
            }),
            status: Some(ManagedClusterStatus::default()),
            hub: None,
        })
    }

    fn accepted(mut self) -> Self {
        self.0.spec.as_mut().unwrap().hub_accepts_client = true;
        self
    }

    fn available(mut self) -> Self {
        let conditions = &mut self.0.status.as_mut().unwrap().conditions;
        meta::set_condition(
            conditions,
            COND_AVAILABLE,
            "True",
            "ManagedClusterAvailable",
            "",
        );
        self
    }

    fn label(mut self, key: &str, value: &str) -> Self {
        let m = self.0.metadata.as_mut().unwrap();
        m.labels.insert(key.into(), value.into());
        self
    }

    fn capacity(mut self, resource: &str, amount: &str) -> Self {
        let st = self.0.status.as_mut().unwrap();
        st.capacity.insert(resource.into(), amount.into());
        self
    }

    fn resource_version(mut self, rv: u64) -> Self {
        self.0.metadata.as_mut().unwrap().resource_version = rv;
        self
    }

    fn build(self) -> ManagedCluster {
        self.0
    }
}

fn cluster1() -> ManagedCluster {
    ClusterFixture::new("cluster1")
        .accepted()
        .available()
        .label(CLUSTERSET_LABEL, "default")
        .capacity("cpu", "8")
        .capacity("memory", "32Gi")
        .resource_version(7)
        .build()
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        r#type: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        ..Default::default()
    }
}

fn placement(name: &str, selected: i32, conditions: Vec<Condition>) -> Placement {
    Placement {
        metadata: meta("default", name),
        spec: None,
        status: Some(PlacementStatus {
            number_of_selected_clusters: selected,
            decision_groups: vec![],
            conditions,
            last_score_update_time: None,
        }),
    }
}

fn satisfied_placement() -> Placement {
    placement(
        "placement1",
        3,
        vec![condition(
            "PlacementSatisfied",
            "True",
            "AllDecisionsScheduled",
            "",
        )],
    )
}

/// `ClusterDebug` fixtures: one candidate's filter verdicts and scores.
struct CandidateFixture(ClusterDebug);

impl CandidateFixture {
    fn new(name: &str) -> Self {
        Self(ClusterDebug {
            name: name.into(),
            ..Default::default()
        })
    }

    fn filter(mut self, filter: &str, passed: bool, reason: &str) -> Self {
        self.0.filters.push(FilterResult {
            filter: filter.into(),
            passed,
            reason: reason.into(),
        });
        self
    }

    fn passes_all(self) -> Self {
        FILTERS.iter().fold(self, |c, f| c.filter(f, true, ""))
    }

    fn score(mut self, prioritizer: &str, weight: i32, score: i64) -> Self {
        self.0.scores.push(ScoreDetail {
            prioritizer: prioritizer.into(),
            weight,
            score,
        });
        self
    }

    fn selected(mut self, rank: u32, total: i64) -> Self {
        self.0.selected = true;
        self.0.rank = Some(rank);
        self.0.total = Some(total);
        self
    }

    fn build(self) -> ClusterDebug {
        self.0
    }
}

#[test]
fn cluster_table_uses_clusteradm_columns() {
    let out = render(Format::Table, &[cluster1()], false).unwrap();
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "NAME       ACCEPTED   AVAILABLE   CLUSTERSET   CPU   MEMORY   KUBERNETES VERSION"
    );
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("cluster1   true       True        default      8     32Gi")
    );
}

#[test]
fn a_cluster_without_conditions_is_unknown_and_not_accepted() {
    let row = ClusterFixture::new("fresh").build().row();
    assert_eq!(row[..3], ["fresh", "false", "Unknown"]);
}

#[test]
fn lists_print_as_kind_list_in_the_ocm_shape() {
    let items = vec![ocm::ManagedCluster::from(&cluster1())];
    let yaml = structured(Format::Yaml, items.clone(), false).unwrap();
    assert!(
        yaml.starts_with("apiVersion: v1\nkind: List\nitems:"),
        "{yaml}"
    );
    assert!(yaml.contains("kind: ManagedCluster"));
    assert!(yaml.contains("hubAcceptsClient: true"));
    assert!(yaml.contains("resourceVersion: '7'"), "{yaml}");
    let json = structured(Format::Json, items, true).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["apiVersion"], "cluster.open-cluster-management.io/v1");
    assert_eq!(v["status"]["conditions"][0]["type"], COND_AVAILABLE);
}

#[test]
fn a_single_named_object_prints_alone_and_several_print_as_a_list() {
    let one = render(Format::Json, &[cluster1()], true).unwrap();
    let v: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert_eq!(v["kind"], "ManagedCluster");
    let two = render(Format::Json, &[cluster1(), cluster1()], true).unwrap();
    let v: serde_json::Value = serde_json::from_str(&two).unwrap();
    assert_eq!(v["kind"], "List");
    assert_eq!(v["items"].as_array().unwrap().len(), 2);
}

#[test]
fn cluster_set_status_is_the_empty_conditions_message() {
    let view = ManagedClusterSetView {
        set: Some(ManagedClusterSet {
            metadata: meta("", "prod"),
            status: Some(ManagedClusterSetStatus {
                conditions: vec![condition(
                    COND_CLUSTERSET_EMPTY,
                    "False",
                    "ClustersSelected",
                    "2 ManagedClusters selected",
                )],
            }),
            ..Default::default()
        }),
        bound_namespaces: vec!["default".into(), "team-a".into()],
        members: vec![],
    };
    assert_eq!(
        view.row(),
        ["prod", "default,team-a", "2 ManagedClusters selected"]
    );
    assert_eq!(view.to_ocm().metadata.name, "prod");
}

#[test]
fn placement_rows_use_clusteradm_columns() {
    let out = render(Format::Table, &[satisfied_placement()], false).unwrap();
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
fn a_misconfigured_placement_shows_misconfigured_over_satisfied() {
    let p = placement(
        "odd",
        0,
        vec![
            condition("PlacementSatisfied", "False", "NoDecisions", ""),
            condition("PlacementMisconfigured", "True", "UnknownPrioritizer", ""),
        ],
    );
    assert_eq!(p.row(), ["odd", "Misconfigured", "UnknownPrioritizer", "0"]);
}

#[test]
fn placements_across_namespaces_lead_with_a_namespace_column() {
    let out = namespaced_table(&[satisfied_placement()]);
    let mut lines = out.lines();
    assert!(lines.next().unwrap().starts_with("NAMESPACE   NAME"));
    assert!(lines.next().unwrap().starts_with("default     placement1"));
}

#[test]
fn decision_rows_count_and_list_their_clusters() {
    let mut m = meta("default", "placement1-decision-1").unwrap();
    m.labels.insert(
        "cluster.open-cluster-management.io/decision-group-index".into(),
        "0".into(),
    );
    let d = PlacementDecision {
        metadata: Some(m),
        status: Some(PlacementDecisionStatus {
            decisions: ["c1", "c2"]
                .iter()
                .map(|c| ClusterDecision {
                    cluster_name: (*c).into(),
                    reason: String::new(),
                    score: 0,
                })
                .collect(),
        }),
    };
    assert_eq!(d.row(), ["placement1-decision-1", "0", "", "2", "c1,c2"]);
}

#[test]
fn scores_without_an_expiry_never_expire() {
    let s = AddOnPlacementScore {
        metadata: meta("cluster2", "default"),
        status: Some(AddOnPlacementScoreStatus {
            scores: vec![AddOnPlacementScoreItem {
                name: "cpuratio".into(),
                value: 66,
            }],
            ..Default::default()
        }),
    };
    assert_eq!(
        s.row(),
        ["cluster2", "default", "cpuratio=66", "never expires"]
    );
}

#[test]
fn describe_shows_each_filter_and_score_per_candidate() {
    let d = PlacementDebug {
        placement: Some(satisfied_placement()),
        eligible_sets: vec!["prod".into()],
        prioritizers: vec![PrioritizerWeight {
            prioritizer: "Balance".into(),
            weight: 1,
        }],
        clusters: vec![
            CandidateFixture::new("c1")
                .passes_all()
                .score("Balance", 1, 100)
                .selected(0, 100)
                .build(),
            CandidateFixture::new("c2")
                .filter("Deleting", true, "")
                .filter("Predicates", false, "no predicate matched")
                .build(),
        ],
        error: String::new(),
    };
    let text = describe(&d, &[]);
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

#[test]
fn describe_of_an_unschedulable_placement_says_why_and_stops() {
    let d = PlacementDebug {
        placement: Some(satisfied_placement()),
        error: "spec.clusterSets: no such set".into(),
        clusters: vec![CandidateFixture::new("c1").passes_all().build()],
        ..Default::default()
    };
    let text = describe(&d, &[]);
    assert!(
        text.trim_end()
            .ends_with("Not scheduled: spec.clusterSets: no such set"),
        "{text}"
    );
    assert!(!text.contains("Candidates"), "{text}");
}

#[test]
fn describe_cluster_lists_managed_namespaces_with_their_condition() {
    let mut c = cluster1();
    let ready = flotilla_api::v1::ClusterSetManagedNamespaceConfig {
        name: "app-frontend".into(),
        cluster_set: "app-team".into(),
        conditions: vec![condition(
            meta::COND_NAMESPACE_AVAILABLE,
            "True",
            meta::REASON_NAMESPACE_APPLIED,
            "Namespace successfully applied and managed",
        )],
    };
    let failed = flotilla_api::v1::ClusterSetManagedNamespaceConfig {
        name: "locked".into(),
        cluster_set: "app-team".into(),
        conditions: vec![condition(
            meta::COND_NAMESPACE_AVAILABLE,
            "False",
            meta::REASON_NAMESPACE_APPLY_FAILED,
            "Failed to apply namespace: forbidden",
        )],
    };
    let waiting = flotilla_api::v1::ClusterSetManagedNamespaceConfig {
        name: "new-ns".into(),
        cluster_set: "global".into(),
        conditions: vec![],
    };
    c.status
        .get_or_insert_with(Default::default)
        .managed_namespaces = vec![ready, failed, waiting];
    let text = super::cluster::describe(&c);
    assert!(
        text.contains(
            "Managed namespaces:\n  app-frontend (set app-team): NamespaceAvailable=True (NamespaceApplied)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  locked (set app-team): NamespaceAvailable=False (NamespaceApplyFailed): Failed to apply namespace: forbidden\n"),
        "{text}"
    );
    assert!(
        text.contains("  new-ns (set global): waiting for the agent\n"),
        "{text}"
    );
    let yaml = render(Format::Yaml, &[c], true).unwrap();
    assert!(yaml.contains("managedNamespaces:"), "{yaml}");
    assert!(yaml.contains("clusterSet: app-team"), "{yaml}");
}

// ---- add-ons ----

use super::addon::fixtures::{Cma, Mca, Progression, deployment_config, template};

#[test]
fn managed_cluster_addon_rows_show_their_condition_statuses() {
    let healthy = Mca::new("cluster1", "hello").healthy().build();
    let fresh = Mca::new("cluster2", "hello")
        .condition("Available", "Unknown", "WaitingForLease", "")
        .build();
    let out = render(Format::Table, &[healthy, fresh], false).unwrap();
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "NAME    NAMESPACE   AVAILABLE   DEGRADED   PROGRESSING"
    );
    assert_eq!(
        lines.next().unwrap(),
        "hello   cluster1    True        False      False"
    );
    // Absent conditions are empty cells.
    assert_eq!(lines.next().unwrap(), "hello   cluster2    Unknown");
}

#[test]
fn a_managed_cluster_addon_prints_in_its_ocm_shape() {
    let a = Mca::new("cluster1", "hello").healthy().build();
    let json = render(Format::Json, &[a], true).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["apiVersion"], "addon.open-cluster-management.io/v1alpha1");
    assert_eq!(v["kind"], "ManagedClusterAddOn");
    assert_eq!(v["metadata"]["namespace"], "cluster1");
    assert_eq!(v["status"]["conditions"][0]["type"], "Available");
}

#[test]
fn cluster_management_addon_rows_sum_their_placements() {
    let cma = Cma::new("hello")
        .display_name("Hello Agent")
        .template("hello-v1")
        .placement("default", "edge")
        .placement("default", "core")
        .progression(Progression::new("default", "edge", 3, 1).progressing(
            "True",
            "Progressing",
            "",
        ))
        .progression(Progression::new("default", "core", 2, 2).progressing(
            "False",
            "Completed",
            "",
        ))
        .build();
    let out = render(Format::Table, &[cma], false).unwrap();
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "NAME    DISPLAY NAME   INSTALL STRATEGY   MANAGED BY   CLUSTERS   UPDATED   PROGRESSING"
    );
    assert_eq!(
        lines.next().unwrap(),
        "hello   Hello Agent    Placements         hub          5          3         Progressing"
    );
}

#[test]
fn a_hand_installed_addon_is_manual_without_progress() {
    let cma = Cma::new("manual").template("manual-v1").build();
    assert_eq!(cma.row(), ["manual", "", "Manual", "hub", "0", "0", "-"]);
    let yaml = render(Format::Yaml, &[cma.clone(), cma], false).unwrap();
    assert!(yaml.starts_with("apiVersion: v1\nkind: List\n"), "{yaml}");
    assert!(yaml.contains("kind: ClusterManagementAddOn"), "{yaml}");
}

#[test]
fn the_managed_by_column_tells_external_and_self_managed_add_ons() {
    // OCM's helloworld shape: no AddOnTemplate, someone else deploys the agent.
    assert_eq!(Cma::new("helloworld").build().row()[3], "external");
    let own = Cma::new("hello")
        .template("hello-v1")
        .lifecycle("self")
        .build();
    assert_eq!(own.row()[3], "self");
}

#[test]
fn addon_template_rows_count_their_manifests() {
    let t = template("hello-v1", "hello", 2);
    assert_eq!(t.row(), ["hello-v1", "hello", "2"]);
    let out = render(Format::Table, std::slice::from_ref(&t), false).unwrap();
    assert!(
        out.starts_with("NAME       ADDON NAME   MANIFESTS\n"),
        "{out}"
    );
    let json = render(Format::Json, &[t], true).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["kind"], "AddOnTemplate");
    assert_eq!(v["spec"]["addonName"], "hello");
    assert_eq!(
        v["spec"]["agentSpec"]["workload"]["manifests"][1]["metadata"]["name"],
        "cm1"
    );
}

#[test]
fn deployment_config_rows_lead_with_a_namespace_across_namespaces() {
    let c = deployment_config(
        "team-a",
        "hello-config",
        &[("LOG_LEVEL", "debug"), ("GREETING", "hi")],
        "hello-agent",
    );
    assert_eq!(c.row(), ["hello-config", "2", "hello-agent"]);
    let out = namespaced_table(std::slice::from_ref(&c));
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "NAMESPACE   NAME           VARIABLES   INSTALL NAMESPACE"
    );
    assert_eq!(
        lines.next().unwrap(),
        "team-a      hello-config   2           hello-agent"
    );
    let yaml = render(Format::Yaml, &[c], true).unwrap();
    assert!(yaml.contains("kind: AddOnDeploymentConfig"), "{yaml}");
    assert!(
        yaml.contains("agentInstallNamespace: hello-agent"),
        "{yaml}"
    );
}
