use super::*;

#[test]
fn the_core_rows_name_only_methods_its_services_have() {
    let described = described();
    assert!(
        described.contains("/flotilla.v1.ClusterService/CreateJoinToken"),
        "the descriptors were read: {described:?}"
    );
    let table = Table::default();
    let stale: Vec<_> = table
        .methods()
        .map(|(p, _, _)| p)
        .filter(|p| !described.contains(*p))
        .collect();
    assert!(
        stale.is_empty(),
        "the core's rows name methods no service has: {stale:?}"
    );
    // Every method of the core's own services has a row (the families' are checked, with the
    // families, in flotilla-hub's controllers tests).
    for (service, _) in CORE {
        let prefix = format!("/{service}/");
        let missing: Vec<_> = described
            .iter()
            .filter(|p| p.starts_with(&prefix) && table.lookup(p).is_none())
            .collect();
        assert!(
            missing.is_empty(),
            "decide who may call {missing:?} in CORE"
        );
    }
}

#[test]
fn a_method_declared_twice_refuses_the_table_naming_both() {
    const AGAIN: &[Rows] = &[("flotilla.v1.WorkService", &[("Proxy", Read, ANY)])];
    let twice = Table::new([("core", CORE), ("sneaky", AGAIN)]).unwrap_err();
    assert_eq!(
        twice,
        Twice {
            path: "/flotilla.v1.WorkService/Proxy".into(),
            first: "core",
            second: "sneaky",
        }
    );
    assert!(
        twice.to_string().contains("by core and by sneaky"),
        "{twice}"
    );
}

#[test]
fn every_core_row_declares_an_object_rule_that_agrees_with_its_column() {
    let table = Table::default();
    for (path, access, _) in table.methods() {
        let need = table.need(path).expect("every row has a need");
        assert!(need.fits(access), "{path}: {access} with {need:?}");
    }
    assert_eq!(
        table.need("/flotilla.v1.ClusterService/CreateJoinToken"),
        Some(SET_CREDENTIALS)
    );
    assert_eq!(
        table.need("/flotilla.v1.WorkService/ApplyWork"),
        Some(CLUSTER_WRITE)
    );
    assert_eq!(
        table.need("/flotilla.v1.WorkService/ListWorks"),
        Some(FILTERED)
    );
    assert_eq!(
        table.need("/flotilla.v1.PlacementService/ListPlacements"),
        None
    );
}

#[test]
fn could_says_whether_any_grant_of_a_scope_might_allow_a_method() {
    use crate::grants::file::{Builder, user};
    use crate::grants::{FleetRole, NamespaceRole, Principal, SetIds, SetRole, Via};
    let grants = Builder::default()
        .set("team-a", SetRole::Admin, user("ana"))
        .set("team-b", SetRole::Bind, user("dev"))
        .namespace("apps", NamespaceRole::View, user("dev"))
        .build();
    let scope = |name: &str| {
        Scope::of(
            &grants,
            &Principal::user(name, Via::Token),
            None,
            &SetIds::default(),
        )
    };
    let (ana, dev, nobody) = (scope("ana"), scope("dev"), scope("nobody"));
    assert!(CLUSTER_WRITE.could(&ana) && SET_CREDENTIALS.could(&ana) && INTO_SET.could(&ana));
    assert!(!CLUSTER_WRITE.could(&dev) && CLUSTER_PROXY_READ.could(&dev));
    assert!(!NAMESPACE_WRITE.could(&ana) && !NAMESPACE_WRITE.could(&dev));
    assert!(NAMESPACE_READ.could(&dev) && !NAMESPACE_READ.could(&ana));
    assert!(!BINDING.could(&dev), "bind without edit anywhere");
    assert!(!FLEET_READ.could(&ana) && !FLEET_WRITE.could(&ana));
    for need in [ANY, FILTERED] {
        assert!(need.could(&nobody));
    }
    assert!(!CLUSTER_PROXY_READ.could(&nobody));
    // Fleet roles: a viewer could read everything and write nothing; an admin anything.
    let view = Scope::fleet(FleetRole::View);
    assert!(FLEET_READ.could(&view) && NAMESPACE_READ.could(&view));
    assert!(!FLEET_WRITE.could(&view) && !CLUSTER_WRITE.could(&view) && !BINDING.could(&view));
    for need in [
        FLEET_WRITE,
        CLUSTER_WRITE,
        INTO_SET,
        SET_CREDENTIALS,
        NAMESPACE_WRITE,
        BINDING,
    ] {
        assert!(need.could(&Scope::all()), "{need:?}");
    }
}

#[test]
fn the_doc_table_says_what_the_core_rows_decide() {
    let decided: BTreeMap<String, Access> = Table::default()
        .methods()
        .map(|(p, a, _)| (p.to_string(), a))
        .collect();
    assert_eq!(
        documented(include_str!("../access.rs")),
        decided,
        "the module doc's table is out of date"
    );
}

#[test]
fn reads_writes_and_unknown_methods_need_what_the_table_says() {
    let table = Table::default();
    assert_eq!(table.access("/grpc.health.v1.Health/Check"), Open);
    assert_eq!(table.access("/flotilla.v1.WorkService/ListWorks"), Read);
    assert_eq!(
        table.access("/flotilla.v1.WorkService/ApplyWork"),
        WriteWork
    );
    assert_eq!(
        table.access("/flotilla.v1.WorkService/DeleteWork"),
        WriteWork
    );
    assert_eq!(table.access("/flotilla.v1.WorkService/Proxy"), Write);
    assert_eq!(
        table.access("/flotilla.v1.ClusterService/CreateJoinToken"),
        Write
    );
    assert_eq!(
        table.access("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
        Read
    );
    // Not by name: a method the table does not know is admin-only, whatever it is called; a
    // family's method is too until the family's rows are in the table.
    for unknown in [
        "/flotilla.v1.ClusterService/GetJoinTokenSeed",
        "/flotilla.v1.WorkService/ListWorks/extra",
        "flotilla.v1.WorkService/ListWorks",
        "/flotilla.v1.WorkService/ListSecrets",
        "/flotilla.v1.PlacementService/ListPlacements",
        "/grpc.health.v1.Health/List",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/evil",
        "",
    ] {
        assert_eq!(table.lookup(unknown), None, "{unknown}");
        assert_eq!(table.access(unknown), Write, "{unknown}");
    }
}
