use super::*;
use flotilla_api::meta;
use flotilla_api::v1::{
    AddOnHealth, HubClusterState, ManagedClusterStatus, ManifestWork, ObjectMeta,
};

/// A work of `addon`'s naming on `cluster`, labelled as the add-on's unless told otherwise.
struct Work(ManifestWork);

impl Work {
    fn test(cluster: &str, name: &str) -> Self {
        Self(ManifestWork {
            metadata: Some(ObjectMeta {
                name: name.into(),
                namespace: cluster.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn label(mut self, addon: &str) -> Self {
        if let Some(m) = self.0.metadata.as_mut() {
            m.labels
                .insert(addon::ADDON_NAME_LABEL.to_string(), addon.to_string());
        }
        self
    }

    fn key(&self) -> String {
        let m = self.0.metadata.as_ref().expect("metadata");
        format!("{}/{}", m.namespace, m.name)
    }
}

/// A cluster whose Available condition says `status` (with `reason` and `message`).
struct Cluster(ManagedCluster);

impl Cluster {
    fn test(name: &str) -> Self {
        Self(ManagedCluster {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn available(mut self, status: &str, reason: &str, message: &str) -> Self {
        self.0.status = Some(ManagedClusterStatus {
            conditions: vec![flotilla_api::v1::Condition {
                r#type: meta::COND_AVAILABLE.into(),
                status: status.into(),
                reason: reason.into(),
                message: message.into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        self
    }

    fn label(mut self, k: &str, v: &str) -> Self {
        if let Some(m) = self.0.metadata.as_mut() {
            m.labels.insert(k.into(), v.into());
        }
        self
    }

    fn spoke_lease(mut self, addon: &str, status: &str) -> Self {
        self.0
            .hub
            .get_or_insert_with(HubClusterState::default)
            .addon_health
            .push(AddOnHealth {
                addon: addon.into(),
                status: status.into(),
                ..Default::default()
            });
        self
    }
}

fn config(resource: &str, namespace: &str, name: &str) -> AddOnConfig {
    AddOnConfig {
        group: addon::GROUP.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn template(name: &str) -> Read {
    Read::of(&config(addon::TEMPLATES, "", name)).expect("a template is read")
}

fn deployment_config(namespace: &str, name: &str) -> Read {
    Read::of(&config(addon::DEPLOYMENT_CONFIGS, namespace, name)).expect("a config is read")
}

#[test]
fn nothing_changed_keeps_every_installation() {
    let dirty = Dirty::default();
    assert!(!dirty.touches("c1", &[template("t1")]));
    assert!(!dirty.is_everything());
}

#[test]
fn a_work_of_the_add_on_makes_its_clusters_installation_stale_and_no_other() {
    let mut dirty = Dirty::default();
    let w = Work::test("c1", &addon::work_name("a", 1)).label("a");
    assert!(dirty.work("a", &w.key(), w.0.metadata.as_ref()));
    assert!(dirty.touches("c1", &[]));
    assert!(!dirty.touches("c2", &[]));
}

#[test]
fn an_agent_work_is_the_add_ons_by_its_name_even_without_the_label() {
    // The round finds the works by name (`addon-<name>-deploy-<i>`): so does the change.
    let mut dirty = Dirty::default();
    let w = Work::test("c1", &addon::work_name("a", 0));
    assert!(dirty.work("a", &w.key(), w.0.metadata.as_ref()));
    assert!(dirty.touches("c1", &[]));
}

#[test]
fn another_add_ons_works_and_unrelated_works_change_nothing() {
    let mut dirty = Dirty::default();
    let theirs = Work::test("c1", &addon::work_name("b", 0)).label("b");
    let app = Work::test("c1", "hello");
    // "a" is a prefix of "ab": its works are not "a"'s.
    let prefixed = Work::test("c1", &addon::work_name("ab", 0));
    for w in [&theirs, &app, &prefixed] {
        assert!(!dirty.work("a", &w.key(), w.0.metadata.as_ref()));
    }
    assert!(!dirty.touches("c1", &[]));
}

#[test]
fn a_changed_template_makes_stale_the_installations_that_read_it() {
    let mut dirty = Dirty::default();
    dirty.template("t2");
    assert!(dirty.touches("c1", &[template("t2"), deployment_config("ns", "d1")]));
    assert!(!dirty.touches("c1", &[template("t1"), deployment_config("ns", "d1")]));
}

#[test]
fn a_changed_deployment_config_is_told_from_a_template_of_the_same_name() {
    let mut dirty = Dirty::default();
    dirty.config("ns/x");
    assert!(dirty.touches("c1", &[deployment_config("ns", "x")]));
    assert!(!dirty.touches("c1", &[template("x")]));
    assert!(!dirty.touches("c1", &[deployment_config("other", "x")]));
}

#[test]
fn a_config_read_but_not_found_makes_its_installation_stale_when_it_is_created() {
    // The keys match the views' change keys: a template by name, a config by namespace/name.
    let mut dirty = Dirty::default();
    dirty.template("late");
    dirty.config("ns/late");
    assert_eq!(template("late"), Read::Template("late".into()));
    assert!(dirty.touches("c1", &[template("late")]));
    assert!(dirty.touches("c1", &[deployment_config("ns", "late")]));
}

#[test]
fn a_config_of_a_kind_the_hub_never_resolves_is_read_by_nothing() {
    let other = AddOnConfig {
        group: "example.com".into(),
        ..config(addon::TEMPLATES, "", "t1")
    };
    assert_eq!(Read::of(&other), None);
}

#[test]
fn everything_is_stale_after_a_new_spec_or_a_lagging_feed() {
    let mut dirty = Dirty::default();
    dirty.everything();
    assert!(dirty.is_everything());
    assert!(dirty.touches("any", &[]));
    // Marking a cluster on top changes nothing.
    dirty.cluster("c1");
    assert!(dirty.touches("c2", &[]));
}

#[test]
fn a_cluster_added_or_deleted_makes_its_installation_stale() {
    for kind in [ChangeKind::Added, ChangeKind::Deleted] {
        let mut dirty = Dirty::default();
        assert!(dirty.cluster_changed(kind, "c1", false));
        assert!(dirty.touches("c1", &[]));
        assert!(!dirty.touches("c2", &[]));
    }
}

#[test]
fn a_cluster_modified_is_stale_only_when_what_its_installation_reads_changed() {
    let mut dirty = Dirty::default();
    assert!(!dirty.cluster_changed(ChangeKind::Modified, "c1", false));
    assert!(!dirty.touches("c1", &[]));
    assert!(dirty.cluster_changed(ChangeKind::Modified, "c1", true));
    assert!(dirty.touches("c1", &[]));
}

#[test]
fn the_cluster_view_follows_availability_and_the_spoke_lease_not_other_changes() {
    let up = Cluster::test("c1").available("True", "Joined", "ok");
    let view = cluster_view(&up.0, "a");
    let relabelled = Cluster::test("c1")
        .available("True", "Joined", "ok")
        .label("env", "prod");
    assert_eq!(cluster_view(&relabelled.0, "a"), view);
    // Available True: its message is not what the installations read.
    let reworded = Cluster::test("c1").available("True", "Joined", "still ok");
    assert_eq!(cluster_view(&reworded.0, "a"), view);
    let down = Cluster::test("c1").available("False", "Gone", "no");
    assert_ne!(cluster_view(&down.0, "a"), view);
    let spoke = Cluster::test("c1")
        .available("True", "Joined", "ok")
        .spoke_lease("a", "True");
    assert_ne!(cluster_view(&spoke.0, "a"), view);
    let others = Cluster::test("c1")
        .available("True", "Joined", "ok")
        .spoke_lease("b", "True");
    assert_eq!(cluster_view(&others.0, "a"), view);
}

#[test]
fn an_unknown_clusters_reason_and_message_are_in_its_view() {
    // The installations repeat them in their Available condition.
    let lost = Cluster::test("c1").available("Unknown", "LeaseExpired", "no lease for 60 s");
    let later = Cluster::test("c1").available("Unknown", "LeaseExpired", "no lease for 120 s");
    assert_ne!(cluster_view(&lost.0, "a"), cluster_view(&later.0, "a"));
}
