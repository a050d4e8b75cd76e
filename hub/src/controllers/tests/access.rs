//! The hub's access table, built from the core's rows and the list's families.

use super::before::BEFORE;
use crate::controllers;
use flotilla_hub_core::grpc::access::{self, Access, Table};
use std::collections::{BTreeMap, BTreeSet};

fn config() -> crate::Config {
    crate::Config::new("nats://127.0.0.1:4222")
}

/// The table the hub builds from its list (no method declared twice).
fn table() -> Table {
    controllers::access(&config()).expect("no method is declared twice")
}

#[test]
fn every_served_method_has_one_row_from_the_core_or_a_family() {
    let table = table();
    let described = access::described();
    assert!(
        described.contains("/flotilla.v1.AddOnService/EnableAddOn"),
        "the descriptors were read: {described:?}"
    );
    let missing: Vec<_> = described
        .iter()
        .filter(|p| table.lookup(p).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "decide who may call these: in the ACCESS of the family serving them (its family.rs, \
         and its doc table), or in hub-core's grpc::access::CORE for the core's services: \
         {missing:?}"
    );
    let stale: Vec<_> = table
        .methods()
        .map(|(p, _, _)| p)
        .filter(|p| !described.contains(*p))
        .collect();
    assert!(
        stale.is_empty(),
        "the table names methods no service has: {stale:?}"
    );
}

#[test]
fn every_method_declares_an_object_rule_that_fits_its_access() {
    // Issue 48: each row says which object of the request decides (or that its items are
    // filtered); nothing that writes is left to the coarse column alone.
    let table = table();
    let unfit: Vec<_> = table
        .methods()
        .filter_map(|(path, a, who)| {
            let need = table.need(path).expect("every row has a need");
            (!need.fits(a)).then(|| format!("{path} ({who}): {a} with {need:?}"))
        })
        .collect();
    assert!(unfit.is_empty(), "{unfit:#?}");
}

#[test]
fn moving_the_rows_into_the_families_changed_no_ones_access() {
    // Every method of the table before the move needs the same access now. With the test
    // above (no served method without a row, no row without a method) and the table before
    // having held exactly the served methods, the two tables are equal; a method added since
    // is decided where it is served.
    let table = table();
    let mut compared = 0;
    for (service, rows) in BEFORE {
        for (method, before) in *rows {
            let path = format!("/{service}/{method}");
            assert_eq!(table.lookup(&path), Some(*before), "{path}");
            compared += 1;
        }
    }
    assert_eq!(compared, 92, "the table before the move had 92 methods");
    assert_eq!(
        BEFORE
            .iter()
            .map(|(s, _)| *s)
            .collect::<BTreeSet<_>>()
            .len(),
        12,
        "in 12 services"
    );
}

#[test]
fn each_family_declares_the_rows_of_exactly_the_services_it_serves() {
    let list = controllers::families(&config());
    let table = table();
    for family in &list {
        let (_, health) = tonic_health::server::health_reporter();
        let api = family.serve(flotilla_hub_core::grpc::api::Api::new(health).unwrap());
        let served: BTreeSet<&str> = api.names().iter().copied().collect();
        let declared: BTreeSet<&str> = family.access().iter().map(|(s, _)| *s).collect();
        assert_eq!(served, declared, "{}", family.name());
        for (service, _) in family.access() {
            let prefix = format!("/{service}/");
            for (path, _, who) in table.methods().filter(|(p, _, _)| p.starts_with(&prefix)) {
                assert_eq!(who, family.name(), "{path}");
            }
        }
    }
    // The core's services are the core's: no family serves them.
    for (path, _, who) in table.methods() {
        let core = access::CORE
            .iter()
            .any(|(s, _)| path.starts_with(&format!("/{s}/")));
        assert_eq!(core, who == "core", "{path} declared by {who}");
    }
}

#[test]
fn each_familys_doc_table_says_what_its_rows_decide() {
    // Every family folder's family.rs documents its rows in its module doc's table.
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut documented = BTreeMap::new();
    for dir in std::fs::read_dir(&src).unwrap() {
        let file = dir.unwrap().path().join("family.rs");
        if let Ok(text) = std::fs::read_to_string(&file) {
            let rows = access::documented(&text);
            assert!(!rows.is_empty(), "{} has no doc table", file.display());
            for (path, need) in rows {
                let again = documented.insert(path.clone(), need);
                assert!(again.is_none(), "{path} is documented twice");
            }
        }
    }
    let decided: BTreeMap<String, Access> = table()
        .methods()
        .filter(|(_, _, who)| *who != "core")
        .map(|(p, a, _)| (p.to_string(), a))
        .collect();
    assert_eq!(
        documented, decided,
        "a family.rs doc table is out of date with its ACCESS"
    );
}

#[test]
fn reads_writes_and_unknown_methods_of_the_families_need_what_their_rows_say() {
    let table = table();
    use Access::{Read, Write, WriteWork};
    for (path, need) in [
        ("/flotilla.v1.PlacementService/DebugPlacement", Read),
        ("/flotilla.v1.ClusterSetService/ListClusterSets", Read),
        ("/flotilla.v1.ReplicaSetService/Rollout", Write),
        (
            "/flotilla.v1.ServiceAccountService/GetManagedServiceAccountToken",
            WriteWork,
        ),
        ("/flotilla.v1.AddOnService/EnableAddOn", Write),
        ("/flotilla.v1.WorkService/ApplyWork", WriteWork),
    ] {
        assert_eq!(table.access(path), need, "{path}");
    }
    for unknown in [
        "/flotilla.v1.PlacementService/GetPlacementSecrets",
        "/flotilla.v1.AddOnService/ListCredentials",
    ] {
        assert_eq!(table.lookup(unknown), None, "{unknown}");
        assert_eq!(table.access(unknown), Write, "{unknown}");
    }
}
