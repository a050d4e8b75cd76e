//! The parts of a work's status report built from what the actor observed (pure): a manifest's
//! resource identity, its status feedback as wire values, and the conditions saying someone else
//! changed the work's resources (`Repaired`) or keeps changing them (`Contested`).

use super::drift::{CONTESTED, Fight, REPAIRED, Repair};
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

/// Resources a `Repaired` message names; the rest are counted.
pub const REPAIRED_NAMED: usize = 5;

/// Sets or removes the work's `Repaired` condition: set while the last repair that wrote
/// something back (`last`) is within the drift window, naming what it put back; removed
/// otherwise. A repair within the window that names the same resources keeps the condition's
/// transition time.
pub fn repaired(conditions: &mut Vec<Condition>, last: Option<&Repair>) {
    match last {
        Some(repair) => {
            flotilla_api::meta::set_condition(
                conditions,
                REPAIRED,
                flotilla_api::meta::status::TRUE,
                "DriftRepaired",
                &repaired_message(&repair.resources),
            );
        }
        None => {
            flotilla_api::meta::remove_condition(conditions, REPAIRED);
        }
    }
}

/// "2 resources changed on the cluster were put back: v1 ConfigMap shop/web, …", naming at
/// most [`REPAIRED_NAMED`], cut to the bound of a status message.
fn repaired_message(resources: &[ManifestId]) -> String {
    let n = resources.len();
    let what = if n == 1 { "resource" } else { "resources" };
    let was = if n == 1 { "was" } else { "were" };
    let named: Vec<String> = resources
        .iter()
        .take(REPAIRED_NAMED)
        .map(ManifestId::describe)
        .collect();
    let more = if n > REPAIRED_NAMED {
        format!(" and {} more", n - REPAIRED_NAMED)
    } else {
        String::new()
    };
    let message = format!(
        "{n} {what} changed on the cluster {was} put back: {}{more}",
        named.join(", ")
    );
    flotilla_api::policy::history::cut(&message).into_owned()
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
mod tests;
