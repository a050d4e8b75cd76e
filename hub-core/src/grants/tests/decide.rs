use crate::grants::file::{Builder, group, user};
use crate::grants::{
    Decision, FleetRole, Grant, Grants, Held, NamespaceRole, Principal, Scope, SetIds,
    SetIndexView, SetRole, Target, Verb, Via, decide, sees,
};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// c-0417 in team-b; c-0001 in team-a and global; c-0002 in no set; prod has no cluster.
fn index() -> SetIndexView {
    SetIndexView::build(
        1,
        1,
        ["team-a", "team-b", "global", "prod"],
        [
            ("c-0417", vec!["team-b"]),
            ("c-0001", vec!["team-a", "global"]),
            ("c-0002", vec![]),
        ],
    )
    .unwrap()
}

fn grants() -> Grants {
    Builder::default()
        .set("team-a", SetRole::Admin, group("team-a-sre"))
        .set("team-a", SetRole::Bind, group("team-a-leads"))
        .namespace("team-a-apps", NamespaceRole::View, group("team-a-leads"))
        .namespace("team-a-apps", NamespaceRole::Edit, group("team-a-sre"))
        .set("prod", SetRole::View, user("carol"))
        .set("global", SetRole::View, user("gil"))
        .fleet(FleetRole::View, user("vera"))
        .build()
}

fn who(name: &str, groups: &[&str]) -> Principal {
    Principal::user(name, Via::Token).with_groups(groups)
}

fn scope(p: &Principal) -> Scope {
    Scope::of(&grants(), p, None, index().ids())
}

fn refusal(p: &Principal, verb: Verb, target: Target, action: &str) -> String {
    match decide(&scope(p), &index(), verb, &target) {
        Decision::Missing(m) => m.refusal(p, action),
        Decision::Allowed(g) => panic!("{p} allowed by {g}"),
    }
}

fn allowed(p: &Principal, verb: Verb, target: Target) -> Option<Grant> {
    match decide(&scope(p), &index(), verb, &target) {
        Decision::Allowed(g) => Some(g),
        Decision::Missing(_) => None,
    }
}

fn set(name: &str, role: SetRole) -> Grant {
    Grant::Set {
        name: name.into(),
        role,
    }
}

#[test]
fn refusals_name_every_missing_grant_as_the_cli_prints_them() {
    let alice = who("alice", &["team-a-sre"]);
    assert_eq!(
        refusal(
            &alice,
            Verb::Write,
            Target::Cluster { name: "c-0417" },
            "apply ManifestWork c-0417/web"
        ),
        // A cluster in none of the caller's sets reads as a missing one (review r1 §9).
        "alice (groups team-a-sre) may not apply ManifestWork c-0417/web: it needs admin on a \
         cluster set that contains c-0417; c-0417 is in none of alice's sets"
    );
    // A caller holding a role on one of its sets is told which.
    let gil = who("gil", &[]);
    assert_eq!(
        refusal(
            &gil,
            Verb::Write,
            Target::Cluster { name: "c-0001" },
            "apply ManifestWork c-0001/web"
        ),
        "gil may not apply ManifestWork c-0001/web: it needs admin on one of cluster sets \
         \"global\", \"team-a\" (cluster c-0001 is in global, team-a); gil holds view on \
         cluster set \"global\""
    );
    let bob = who("bob", &["team-a-leads"]);
    assert_eq!(
        refusal(
            &bob,
            Verb::Bind,
            Target::Binding {
                namespace: "team-a-apps",
                set: "team-b"
            },
            "bind cluster set \"team-b\" into namespace \"team-a-apps\""
        ),
        "bob (groups team-a-leads) may not bind cluster set \"team-b\" into namespace \
         \"team-a-apps\": it needs bind on cluster set \"team-b\" (holds none) and edit on \
         namespace \"team-a-apps\" (holds view)"
    );
    let carol = who("carol", &[]);
    assert_eq!(
        refusal(
            &carol,
            Verb::Credentials,
            Target::Set { name: "prod" },
            "create a join credential for cluster set \"prod\""
        ),
        "carol may not create a join credential for cluster set \"prod\": it needs admin on \
         cluster set \"prod\" (holds view)"
    );
    // A cluster the index does not know and one in no set read alike to a team.
    let unknown = refusal(
        &alice,
        Verb::Read,
        Target::Cluster { name: "c-9999" },
        "get cluster c-9999",
    );
    assert_eq!(
        unknown,
        "alice (groups team-a-sre) may not get cluster c-9999: it needs view on a cluster set \
         that contains c-9999; c-9999 is in none of alice's sets"
    );
    let none = refusal(
        &alice,
        Verb::Read,
        Target::Cluster { name: "c-0002" },
        "get cluster c-0002",
    );
    assert_eq!(none, unknown.replace("c-9999", "c-0002"));
    // A cluster that exists, in sets the caller holds nothing on: the same words again.
    let dora = who("dora", &[]);
    assert_eq!(
        refusal(
            &dora,
            Verb::Write,
            Target::Cluster { name: "c-0001" },
            "delete cluster c-0001"
        ),
        "dora may not delete cluster c-0001: it needs admin on a cluster set that contains \
         c-0001; c-0001 is in none of dora's sets"
    );
    let vera = who("vera", &[]);
    assert_eq!(
        refusal(
            &vera,
            Verb::Write,
            Target::Fleet,
            "delete cluster set \"prod\""
        ),
        "vera may not delete cluster set \"prod\": it needs admin on the fleet (holds view)"
    );
}

#[test]
fn set_roles_reach_the_clusters_of_the_set_by_the_role_table() {
    let sre = who("s", &["team-a-sre"]);
    let lead = who("l", &["team-a-leads"]);
    let gil = who("gil", &[]);
    let c1 = Target::Cluster { name: "c-0001" };
    // admin ⊇ bind ⊇ view on team-a's cluster.
    for verb in [
        Verb::Read,
        Verb::Write,
        Verb::Credentials,
        Verb::ProxyRead,
        Verb::ProxyWrite,
    ] {
        assert_eq!(
            allowed(&sre, verb, c1),
            Some(set("team-a", SetRole::Admin)),
            "{verb:?}"
        );
    }
    assert_eq!(
        allowed(&lead, Verb::Read, c1),
        Some(set("team-a", SetRole::Bind))
    );
    assert_eq!(
        allowed(&lead, Verb::ProxyRead, c1),
        Some(set("team-a", SetRole::Bind))
    );
    for verb in [Verb::Write, Verb::Credentials, Verb::ProxyWrite] {
        assert_eq!(allowed(&lead, verb, c1), None, "{verb:?}");
    }
    // A view of global sees c-0001 (in global) but not c-0417 (not in global).
    assert_eq!(
        allowed(&gil, Verb::Read, c1),
        Some(set("global", SetRole::View))
    );
    assert_eq!(
        allowed(&gil, Verb::Read, Target::Cluster { name: "c-0417" }),
        None
    );
    // Nothing of team-a reaches team-b's cluster.
    for verb in [Verb::Read, Verb::Write, Verb::ProxyRead] {
        assert_eq!(
            allowed(&sre, verb, Target::Cluster { name: "c-0417" }),
            None
        );
    }
    // Set targets: admin updates and mints join credentials; bind binds; view reads.
    let team_a = Target::Set { name: "team-a" };
    assert!(allowed(&sre, Verb::Credentials, team_a).is_some());
    assert!(allowed(&lead, Verb::Bind, team_a).is_some());
    assert!(allowed(&lead, Verb::Write, team_a).is_none());
    assert!(allowed(&lead, Verb::Read, team_a).is_some());
}

#[test]
fn bindings_need_bind_on_the_set_and_edit_on_the_namespace() {
    let sre = who("s", &["team-a-sre"]);
    let lead = who("l", &["team-a-leads"]);
    let both = who("b", &["team-a-sre", "team-a-leads"]);
    let binding = Target::Binding {
        namespace: "team-a-apps",
        set: "team-a",
    };
    // admin ⊇ bind, and edit on the namespace: allowed, by the set grant.
    assert_eq!(
        allowed(&sre, Verb::Bind, binding),
        Some(set("team-a", SetRole::Admin))
    );
    assert_eq!(
        allowed(&both, Verb::Bind, binding),
        Some(set("team-a", SetRole::Admin))
    );
    // bind without edit: refused naming only the namespace grant.
    let Decision::Missing(m) = decide(&scope(&lead), &index(), Verb::Bind, &binding) else {
        panic!("bind without edit was allowed")
    };
    assert_eq!(
        m.to_string(),
        "needs edit on namespace \"team-a-apps\" (holds view)"
    );
    // Reading bindings is reading the namespace.
    assert_eq!(
        allowed(&lead, Verb::Read, binding),
        Some(Grant::Namespace {
            name: "team-a-apps".into(),
            role: NamespaceRole::View
        })
    );
}

#[test]
fn namespace_roles_decide_workspace_objects() {
    let sre = who("s", &["team-a-sre"]);
    let lead = who("l", &["team-a-leads"]);
    let apps = Target::Namespace {
        name: "team-a-apps",
    };
    assert!(allowed(&sre, Verb::Write, apps).is_some());
    assert!(allowed(&lead, Verb::Read, apps).is_some());
    assert!(allowed(&lead, Verb::Write, apps).is_none());
    assert!(
        allowed(
            &sre,
            Verb::Read,
            Target::Namespace {
                name: "team-b-apps"
            }
        )
        .is_none()
    );
}

#[test]
fn moving_a_cluster_needs_admin_on_the_set_it_leaves_and_the_one_it_joins() {
    let g = Builder::default()
        .set("team-a", SetRole::Admin, user("ana"))
        .set("team-b", SetRole::Admin, user("ana"))
        .set("team-a", SetRole::Admin, user("abe"))
        .build();
    let index = index();
    let scope_of = |u: &str| Scope::of(&g, &who(u, &[]), None, index.ids());
    let into_b = Target::ClusterIntoSet {
        name: "c-0001",
        set: "team-b",
    };
    assert_eq!(
        decide(&scope_of("ana"), &index, Verb::Write, &into_b),
        Decision::Allowed(set("team-b", SetRole::Admin))
    );
    let Decision::Missing(m) = decide(&scope_of("abe"), &index, Verb::Write, &into_b) else {
        panic!("abe moved a cluster into a set it does not administer")
    };
    assert_eq!(m.wants.len(), 1, "{m}");
    // Taking c-0417 out of team-b needs team-b: abe holds neither side.
    let Decision::Missing(m) = decide(
        &scope_of("abe"),
        &index,
        Verb::Write,
        &Target::ClusterIntoSet {
            name: "c-0417",
            set: "prod",
        },
    ) else {
        panic!("allowed")
    };
    assert_eq!(m.wants.len(), 2, "{m}");
    // A new cluster (unknown to the index) needs the target set only.
    let new = Target::ClusterIntoSet {
        name: "c-new",
        set: "team-a",
    };
    assert!(decide(&scope_of("abe"), &index, Verb::Write, &new).allowed());
}

#[test]
fn fleet_roles_decide_everything_they_cover() {
    let admin = Scope::all();
    let view = Scope::fleet(FleetRole::View);
    let index = index();
    let targets = [
        Target::Fleet,
        Target::Cluster { name: "c-9999" },
        Target::Set { name: "x" },
        Target::Namespace { name: "n" },
        Target::Binding {
            namespace: "n",
            set: "x",
        },
    ];
    for target in targets {
        for verb in [
            Verb::Read,
            Verb::Write,
            Verb::Bind,
            Verb::Credentials,
            Verb::ProxyWrite,
        ] {
            assert_eq!(
                decide(&admin, &index, verb, &target),
                Decision::Allowed(Grant::Fleet(FleetRole::Admin))
            );
        }
        assert!(decide(&view, &index, Verb::Read, &target).allowed());
        assert!(decide(&view, &index, Verb::ProxyRead, &target).allowed());
        assert!(!decide(&view, &index, Verb::Write, &target).allowed());
        assert!(sees(&view, &index, &target));
    }
    // A CSV role is the base: grants add to it, never take from it.
    let csv_admin = Scope::of(
        &grants(),
        &who("alice", &[]),
        Some(FleetRole::Admin),
        index.ids(),
    );
    assert_eq!(csv_admin.fleet, Some(FleetRole::Admin));
    let viewer_with_grants = Scope::of(
        &grants(),
        &who("x", &["team-a-sre"]),
        Some(FleetRole::View),
        index.ids(),
    );
    assert_eq!(viewer_with_grants.fleet, Some(FleetRole::View));
    assert_eq!(viewer_with_grants.set_role("team-a"), Some(SetRole::Admin));
}

/// Random fleets: `sets` sets, clusters with random memberships, a principal with random roles
/// on random sets.
fn fleet() -> impl Strategy<Value = (usize, Vec<Vec<bool>>, BTreeMap<usize, SetRole>)> {
    (1usize..8).prop_flat_map(|sets| {
        let role = prop_oneof![
            Just(SetRole::View),
            Just(SetRole::Bind),
            Just(SetRole::Admin)
        ];
        (
            Just(sets),
            prop::collection::vec(prop::collection::vec(any::<bool>(), sets), 0..12),
            // Roles on the fleet's sets and on sets the fleet does not have (granted early).
            prop::collection::btree_map(0..sets + 2, role, 0..4),
        )
    })
}

proptest! {
    #[test]
    fn sees_equals_the_naive_rule((sets, members, roles) in fleet()) {
        let names: Vec<String> = (0..sets).map(|i| format!("s{i}")).collect();
        let index = SetIndexView::build(
            7,
            3,
            names.iter().map(String::as_str),
            members.iter().enumerate().map(|(c, m)| {
                let of: Vec<&str> = names
                    .iter()
                    .zip(m)
                    .filter(|(_, inside)| **inside)
                    .map(|(n, _)| n.as_str())
                    .collect();
                (format!("c{c}"), of)
            }),
        )
        .unwrap();
        let held = Held {
            sets: roles.iter().map(|(i, r)| (Arc::from(format!("s{i}")), *r)).collect(),
            ..Held::default()
        };
        let by_mask = Scope::from_held(held.clone(), None, index.ids());
        prop_assert!(by_mask.sees_mask(index.ids()).is_some());
        let by_name = Scope::from_held(held, None, &SetIds::default());
        prop_assert!(by_name.sees_mask(index.ids()).is_none());
        for c in 0..members.len() + 1 {
            let name = format!("c{c}");
            let target = Target::Cluster { name: &name };
            let in_sets: Vec<usize> = members
                .get(c)
                .map(|m| (0..sets).filter(|i| m[*i]).collect())
                .unwrap_or_default();
            let naive = in_sets.iter().any(|i| roles.contains_key(i));
            prop_assert_eq!(sees(&by_mask, &index, &target), naive, "mask, {}", name);
            prop_assert_eq!(sees(&by_name, &index, &target), naive, "names, {}", name);
            prop_assert_eq!(decide(&by_mask, &index, Verb::Read, &target).allowed(), naive);
            let writes = in_sets.iter().any(|i| roles.get(i) == Some(&SetRole::Admin));
            prop_assert_eq!(decide(&by_mask, &index, Verb::Write, &target).allowed(), writes);
        }
    }
}

#[test]
fn a_cluster_s_write_needs_admin_on_every_set_its_labels_make_it_join() {
    use crate::grants::members::Membership;
    use flotilla_api::v1::{
        LabelSelector, ManagedCluster, ManagedClusterSelector, ManagedClusterSet,
        ManagedClusterSetSpec, ObjectMeta,
    };
    let labelled = |name: &str, labels: &[(&str, &str)]| ManagedCluster {
        metadata: Some(ObjectMeta {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let set_of = |name: &str, selector: Option<(&str, &str)>| ManagedClusterSet {
        metadata: Some(ObjectMeta {
            name: name.into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSetSpec {
            cluster_selector: selector.map(|(k, v)| ManagedClusterSelector {
                selector_type: flotilla_api::clusterset::LABEL_SELECTOR.into(),
                label_selector: Some(LabelSelector {
                    match_labels: [(k.to_string(), v.to_string())].into(),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    let label = flotilla_api::meta::CLUSTERSET_LABEL;
    let a1 = labelled("a1", &[(label, "team-a")]);
    let (team_a, prod) = (
        set_of("team-a", None),
        set_of("prod", Some(("env", "prod"))),
    );
    let index = Membership::new([&team_a, &prod], [&a1]).unwrap().view();
    let g = Builder::default()
        .set("team-a", SetRole::Admin, user("ana"))
        .build();
    let ana = Scope::of(&g, &who("ana", &[]), None, index.ids());
    let write = |c: &ManagedCluster| {
        let sets = index.sets_for(c);
        decide(
            &ana,
            &index,
            Verb::Write,
            &Target::ClusterInto {
                name: name(c),
                sets: &sets,
            },
        )
    };
    fn name(c: &ManagedCluster) -> &str {
        c.metadata.as_ref().map_or("", |m| m.name.as_str())
    }
    // `global` holds every cluster: joining it is no move.
    assert!(index.holds_every_cluster("global") && !index.holds_every_cluster("prod"));
    assert_eq!(
        write(&labelled("a1", &[(label, "team-a"), ("tier", "web")])),
        Decision::Allowed(set("team-a", SetRole::Admin))
    );
    let Decision::Missing(m) = write(&labelled("a1", &[(label, "team-a"), ("env", "prod")])) else {
        panic!("ana labelled her cluster into prod")
    };
    assert_eq!(
        m.to_string(),
        "needs admin on cluster set \"prod\" (holds none)"
    );
    // A new cluster: the sets it enters; one that enters only `global` needs the fleet.
    assert!(write(&labelled("a9", &[(label, "team-a")])).allowed());
    assert!(!write(&labelled("a9", &[(label, "team-a"), ("env", "prod")])).allowed());
    let Decision::Missing(m) = write(&labelled("a9", &[])) else {
        panic!("a cluster of no set of ana's")
    };
    assert_eq!(m.to_string(), "needs admin on the fleet (holds none)");
}
