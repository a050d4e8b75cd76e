//! How the simulated API server writes an object under each update strategy: functions of the
//! stored object, the desired one, the writing field manager and the new resourceVersion.

use super::{Managers, SimObject, content, now_ms, set_path};
use crate::backend::{ApplyOutcome, BackendError};
use serde_json::{Value, json};

/// `Update`: the desired object replaces the stored one, keeping its uid and creationTimestamp;
/// the generation moves when the spec changed, and every field becomes `manager`'s.
pub(super) fn update(
    existing: &mut SimObject,
    mut desired: Value,
    manager: &str,
    rv: u64,
) -> ApplyOutcome {
    let stored = existing.value();
    if content(&stored) == content(&desired) {
        return ApplyOutcome::Unchanged;
    }
    let meta = &stored["metadata"];
    let generation = meta["generation"].as_i64().unwrap_or(1);
    let spec_changed = stored.get("spec") != desired.get("spec");
    for f in ["uid", "creationTimestamp"] {
        set_path(&mut desired, &format!("metadata.{f}"), meta[f].clone());
    }
    let generation = if spec_changed {
        generation + 1
    } else {
        generation
    };
    set_path(&mut desired, "metadata.generation", json!(generation));
    set_path(
        &mut desired,
        "metadata.resourceVersion",
        json!(rv.to_string()),
    );
    existing.managers = Managers::Sole(manager.to_string());
    existing.set_value(&desired);
    if spec_changed {
        existing.changed_at_ms = now_ms();
    }
    ApplyOutcome::Updated
}

/// `ServerSideApply`: the applied fields merge into the stored object and become `manager`'s. A
/// field another manager owns, applied with another value, is a conflict unless `force`.
pub(super) fn server_side_apply(
    existing: &mut SimObject,
    desired: &Value,
    manager: &str,
    force: bool,
    rv: u64,
) -> Result<ApplyOutcome, BackendError> {
    let mut merged = existing.value();
    let current = content(&merged);
    let applied = content(desired);
    let conflicts: Vec<String> = applied
        .iter()
        .filter(|(path, value)| {
            existing
                .managers
                .owner(path, &current)
                .is_some_and(|owner| owner != manager)
                && current.get(*path) != Some(*value)
        })
        .map(|(p, _)| p.clone())
        .collect();
    if !conflicts.is_empty() && !force {
        let owner = existing
            .managers
            .owner(&conflicts[0], &current)
            .unwrap_or_default()
            .to_string();
        return Err(BackendError::Conflict {
            fields: conflicts,
            manager: owner,
        });
    }
    let spec_before = merged.get("spec").cloned();
    existing.managers.take(manager, applied.keys(), &current);
    for (path, value) in applied {
        set_path(&mut merged, &path, value);
    }
    if content(&merged) == current {
        return Ok(ApplyOutcome::Unchanged);
    }
    if merged.get("spec") != spec_before.as_ref() {
        let generation = merged["metadata"]["generation"].as_i64().unwrap_or(1);
        set_path(&mut merged, "metadata.generation", json!(generation + 1));
        existing.changed_at_ms = now_ms();
    }
    set_path(
        &mut merged,
        "metadata.resourceVersion",
        json!(rv.to_string()),
    );
    existing.set_value(&merged);
    Ok(ApplyOutcome::Updated)
}

/// A new object: a uid, the creation time, generation 1; every field `manager`'s.
pub(super) fn create(mut desired: Value, manager: &str, rv: u64) -> SimObject {
    set_path(
        &mut desired,
        "metadata.uid",
        json!(uuid::Uuid::new_v4().to_string()),
    );
    set_path(
        &mut desired,
        "metadata.creationTimestamp",
        json!(flotilla_api::meta::rfc3339(&flotilla_api::meta::now())),
    );
    set_path(&mut desired, "metadata.generation", json!(1));
    set_path(
        &mut desired,
        "metadata.resourceVersion",
        json!(rv.to_string()),
    );
    SimObject::new(&desired, now_ms(), Managers::Sole(manager.to_string()))
}
