//! The parts of a work's status report built from what the actor observed (pure): a manifest's
//! resource identity, its status feedback as wire values, and the condition saying someone else
//! keeps changing the work's resources.

use super::drift::{CONTESTED, Fight};
use flotilla_api::feedback::{FeedbackResult, FieldValue as Fv};
use flotilla_api::v1::{Condition, FeedbackValue, FieldValue, ResourceMeta};
use flotilla_api::work::ManifestId;
use std::time::Duration;

/// The identity of manifest `ordinal`, as the status reports it (`id` when it parsed).
pub fn resource_meta(ordinal: usize, id: Option<&ManifestId>) -> ResourceMeta {
    let ordinal = ordinal as i32;
    match id {
        Some(id) => ResourceMeta {
            ordinal,
            group: id.group.clone(),
            version: id.version.clone(),
            kind: id.kind.clone(),
            resource: id.resource(),
            namespace: id.namespace.clone(),
            name: id.name.clone(),
        },
        None => ResourceMeta {
            ordinal,
            ..Default::default()
        },
    }
}

/// The feedback's values on the wire (none without feedback rules).
pub fn feedback_values(feedback: Option<FeedbackResult>) -> Vec<FeedbackValue> {
    feedback
        .map(|f| {
            f.values
                .into_iter()
                .map(|(name, v)| FeedbackValue {
                    name,
                    field_value: Some(field_value(v)),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Sets or removes the work's `Contested` condition: set while its resources are fought over
/// (`fight`, repairs within `window`), removed otherwise.
pub fn contested(conditions: &mut Vec<Condition>, fight: Option<Fight>, window: Duration) {
    match fight {
        Some(fight) => {
            flotilla_api::meta::set_condition(
                conditions,
                CONTESTED,
                flotilla_api::meta::status::TRUE,
                "ChangedByOthers",
                &format!(
                    "someone else keeps changing this work's resources on the cluster: \
                 written back {} times in the last {} s; repairs now wait {} s",
                    fight.repairs,
                    window.as_secs(),
                    fight.backoff.as_secs()
                ),
            );
        }
        None => {
            flotilla_api::meta::remove_condition(conditions, CONTESTED);
        }
    }
}

fn field_value(v: Fv) -> FieldValue {
    let mut out = FieldValue {
        r#type: v.type_name().to_string(),
        ..Default::default()
    };
    match v {
        Fv::Integer(i) => out.integer = Some(i),
        Fv::String(s) => out.string = Some(s),
        Fv::Boolean(b) => out.boolean = Some(b),
        Fv::JsonRaw(s) => out.json_raw = Some(s),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
