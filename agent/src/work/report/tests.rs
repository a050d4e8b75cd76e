use super::*;
use std::time::Instant;

fn config_map(name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "shop".into(),
        name: name.into(),
    }
}

#[test]
fn a_manifest_that_did_not_parse_is_reported_by_its_ordinal_alone() {
    let meta = resource_meta(3, None);
    assert_eq!(meta.ordinal, 3);
    assert!(meta.kind.is_empty() && meta.name.is_empty());
}

#[test]
fn the_contested_condition_follows_the_fight() {
    let mut conditions = Vec::new();
    let fight = Fight {
        repairs: 4,
        backoff: Duration::from_secs(20),
    };
    contested(&mut conditions, Some(fight), Duration::from_secs(300));
    assert_eq!(conditions.len(), 1);
    assert!(
        conditions[0]
            .message
            .contains("written back 4 times in the last 300 s")
    );
    contested(&mut conditions, None, Duration::from_secs(300));
    assert!(conditions.is_empty());
}

#[test]
fn feedback_values_keep_their_type() {
    let f = FeedbackResult {
        values: vec![("replicas".into(), Fv::Integer(3))],
        errors: vec![],
    };
    let values = feedback_values(Some(f));
    assert_eq!(values[0].name, "replicas");
    let v = values[0].field_value.as_ref().expect("a value");
    assert_eq!(v.integer, Some(3));
    assert!(feedback_values(None).is_empty());
}

#[test]
fn the_repaired_condition_names_what_was_put_back_and_goes_with_the_repair() {
    let mut conditions = Vec::new();
    let deployment = ManifestId {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
        namespace: "shop".into(),
        name: "web".into(),
    };
    let repair = Repair {
        at: Instant::now(),
        resources: vec![deployment, config_map("web-config")],
    };
    repaired(&mut conditions, Some(&repair));
    assert_eq!(conditions.len(), 1);
    let c = &conditions[0];
    assert_eq!((c.r#type.as_str(), c.status.as_str()), ("Repaired", "True"));
    assert_eq!(c.reason, "DriftRepaired");
    assert_eq!(
        c.message,
        "2 resources changed on the cluster were put back: \
         apps/v1 Deployment shop/web, v1 ConfigMap shop/web-config"
    );
    repaired(&mut conditions, None);
    assert!(conditions.is_empty());
}

#[test]
fn a_repair_of_many_resources_names_five_and_stays_within_a_status_message() {
    let long = "n".repeat(253);
    let resources: Vec<ManifestId> = (0..40)
        .map(|i| config_map(&format!("{long}-{i}")))
        .collect();
    let message = repaired_message(&resources);
    assert!(message.starts_with("40 resources changed on the cluster were put back: "));
    assert!(message.ends_with(" and 35 more"), "{message}");
    assert_eq!(message.matches("v1 ConfigMap").count(), 5);
    assert!(message.len() <= flotilla_api::policy::history::MAX_MESSAGE);
    let one = repaired_message(&[config_map("web")]);
    assert_eq!(
        one,
        "1 resource changed on the cluster was put back: v1 ConfigMap shop/web"
    );
}
