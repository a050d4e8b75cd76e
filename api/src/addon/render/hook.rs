//! The add-on's pre-delete hooks (Jobs and Pods marked [`PRE_DELETE_HOOK_ANNOTATION`] or
//! [`PRE_DELETE_HOOK_LABEL`]) rendered into their own work (OCM's `BuildHookWork`).

use super::{
    Input, Origin, RenderError, agent_spec, check, has_annotation, kind_of, rendered_objects,
    to_manifest, well_known_config,
};
use crate::addon::{
    ADDON_NAME_LABEL, PRE_DELETE_HOOK_ANNOTATION, PRE_DELETE_HOOK_LABEL, pre_delete_work_name,
};
use crate::v1;
use serde_json::Value;
use std::collections::HashMap;

/// Feedback of a hook Job's failure, by value name (Flotilla: OCM's hook work reports only
/// completion, so a removal waiting on a failed Job could not say why).
pub const HOOK_JOB_FAILURE_PATHS: [(&str, &str); 2] = [
    (
        "JobFailed",
        r#".status.conditions[?(@.type=="Failed")].status"#,
    ),
    (
        "JobFailedReason",
        r#".status.conditions[?(@.type=="Failed")].reason"#,
    ),
];

/// Renders the add-on's pre-delete hooks (Jobs and Pods marked with
/// [`PRE_DELETE_HOOK_ANNOTATION`] or [`PRE_DELETE_HOOK_LABEL`]) into the work
/// [`pre_delete_work_name`], each with a `WellKnownStatus` feedback rule (OCM's
/// `BuildHookWork`), Jobs also with the `JSONPaths` of [`HOOK_JOB_FAILURE_PATHS`]; `None` when
/// the template has none.
pub fn pre_delete(input: &Input) -> Result<Option<v1::ManifestWork>, RenderError> {
    let mut manifests = Vec::new();
    let mut origins = Vec::new();
    let mut manifest_configs = Vec::new();
    for (i, obj) in rendered_objects(input)?
        .into_iter()
        .filter(|(_, o)| is_pre_delete_hook(o))
    {
        if let Ok(id) = crate::work::manifest_id(&obj) {
            let mut config = well_known_config(&id.group, &id.resource(), &id.namespace, &id.name);
            if id.group == "batch" && id.kind == "Job" {
                config.feedback_rules.push(job_failure_rule());
            }
            manifest_configs.push(config);
        }
        manifests.push(to_manifest(&obj));
        origins.push(Origin::Template(i));
    }
    if manifests.is_empty() {
        return Ok(None);
    }
    let work = v1::ManifestWork {
        metadata: Some(v1::ObjectMeta {
            name: pre_delete_work_name(input.addon),
            namespace: input.cluster.to_string(),
            labels: HashMap::from([(ADDON_NAME_LABEL.to_string(), input.addon.to_string())]),
            ..Default::default()
        }),
        spec: Some(v1::ManifestWorkSpec {
            workload: Some(v1::ManifestsTemplate { manifests }),
            manifest_configs,
            ..Default::default()
        }),
        status: None,
        hub: None,
    };
    check(&work, &origins)?;
    Ok(Some(work))
}

pub(super) fn is_pre_delete_hook(obj: &Value) -> bool {
    matches!(kind_of(obj), "Job" | "Pod")
        && (has_annotation(obj, PRE_DELETE_HOOK_ANNOTATION)
            || obj["metadata"]["labels"]
                .get(PRE_DELETE_HOOK_LABEL)
                .is_some())
}

fn job_failure_rule() -> v1::FeedbackRule {
    v1::FeedbackRule {
        r#type: "JSONPaths".into(),
        json_paths: HOOK_JOB_FAILURE_PATHS
            .iter()
            .map(|(name, path)| v1::JsonPath {
                name: name.to_string(),
                path: path.to_string(),
                version: String::new(),
            })
            .collect(),
    }
}

/// Whether a template may have pre-delete hooks: a manifest names
/// [`PRE_DELETE_HOOK_ANNOTATION`] or [`PRE_DELETE_HOOK_LABEL`] anywhere in its text. For when
/// it cannot be rendered: removing an add-on whose hooks cannot be rendered must wait, one
/// without hooks need not.
pub fn may_have_pre_delete_hooks(template: &v1::AddOnTemplate) -> bool {
    // The annotation key ends with the label key.
    let key = PRE_DELETE_HOOK_LABEL.as_bytes();
    agent_spec(template)
        .and_then(|s| s.workload.as_ref())
        .is_some_and(|w| {
            w.manifests
                .iter()
                .any(|m| m.raw.windows(key.len()).any(|x| x == key))
        })
}
