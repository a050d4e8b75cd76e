use super::*;
use flotilla_api::v1::IgnoreField;
use serde_json::json;

fn rules(condition: &str, paths: &[&str]) -> IgnoreRules {
    IgnoreRules::new(&ServerSideApplyConfig {
        ignore_fields: vec![IgnoreField {
            condition: condition.into(),
            json_paths: paths.iter().map(|p| (*p).to_string()).collect(),
            json_pointers: vec![],
        }],
        ..Default::default()
    })
    .unwrap()
}

fn deploy(replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": replicas, "paused": false}})
}

#[test]
fn on_spoke_present_sets_the_field_at_creation_and_then_keeps_the_spokes_value() {
    let r = rules("OnSpokePresent", &[".spec.replicas"]);
    let mut last = HashMap::new();
    assert_eq!(
        r.shape(&deploy(2), None, &mut last),
        deploy(2),
        "created as the work says"
    );
    let scaled_by_hpa = deploy(7);
    let out = r.shape(&deploy(3), Some(&scaled_by_hpa), &mut last);
    assert_eq!(out["spec"]["replicas"], 7, "the spoke's value stays");
    assert_eq!(
        out["spec"]["paused"], false,
        "other fields still follow the work"
    );
}

#[test]
fn on_spoke_change_follows_the_work_until_someone_else_changes_the_field() {
    let r = rules("OnSpokeChange", &[".spec.replicas"]);
    let mut last = HashMap::new();
    assert_eq!(r.shape(&deploy(2), None, &mut last)["spec"]["replicas"], 2);
    // Unchanged on the spoke: a new value in the work is applied.
    assert_eq!(
        r.shape(&deploy(3), Some(&deploy(2)), &mut last)["spec"]["replicas"],
        3
    );
    // Someone scaled it to 9: kept, even when the work changes again.
    assert_eq!(
        r.shape(&deploy(4), Some(&deploy(9)), &mut last)["spec"]["replicas"],
        9
    );
    assert_eq!(
        r.shape(&deploy(5), Some(&deploy(9)), &mut last)["spec"]["replicas"],
        9
    );
}

#[test]
fn pointers_and_paths_name_the_same_field_and_missing_parents_are_created() {
    let mut v = json!({"spec": {}});
    let p = flotilla_api::work::ignore_path("/spec/template/replicas").unwrap();
    put(&mut v, &p, Some(json!(3)));
    assert_eq!(v["spec"]["template"]["replicas"], 3);
    assert_eq!(
        get(
            &v,
            &flotilla_api::work::ignore_path(".spec.template.replicas").unwrap()
        ),
        Some(&json!(3))
    );
    put(&mut v, &p, None);
    assert_eq!(v["spec"]["template"], json!({}));
}
