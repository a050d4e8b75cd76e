//! `work.open-cluster-management.io/v1 ManifestWork`.

use super::meta::{Condition, Metadata, conditions};
use crate::v1;
use serde::{Deserialize, Serialize};

/// API group/version of works.
pub const WORK_V1: &str = "work.open-cluster-management.io/v1";

/// ManifestWork in the OCM shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWork {
    /// `work.open-cluster-management.io/v1`.
    pub api_version: String,
    /// `ManifestWork`.
    pub kind: String,
    /// Metadata (namespace = cluster name).
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: WorkSpec,
    /// Status (ignored on input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WorkStatus>,
}

/// ManifestWork spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkSpec {
    /// The manifests.
    #[serde(default)]
    pub workload: Workload,
    /// What happens to resources on deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,
    /// Per-resource options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifest_configs: Vec<ManifestConfig>,
    /// The identity whose rights on the managed cluster bound what the agent applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<Executor>,
}

/// OCM `ManifestWorkExecutor`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Executor {
    /// Who applies.
    #[serde(default)]
    pub subject: ExecutorSubject,
}

/// OCM `ManifestWorkExecutorSubject`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutorSubject {
    /// `ServiceAccount` (the only type).
    #[serde(rename = "type", default)]
    pub type_: String,
    /// The ServiceAccount, for type ServiceAccount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountRef>,
}

/// OCM `ManifestWorkSubjectServiceAccount`: a ServiceAccount on the managed cluster.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServiceAccountRef {
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// The manifests.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Kubernetes objects.
    #[serde(default)]
    pub manifests: Vec<serde_json::Value>,
}

/// Delete option.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteOption {
    /// Foreground, Orphan or SelectivelyOrphan.
    #[serde(default)]
    pub propagation_policy: String,
    /// Rules for SelectivelyOrphan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectively_orphans: Option<SelectivelyOrphans>,
    /// Delete the work this long after it is Complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i64>,
}

/// SelectivelyOrphan rules.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectivelyOrphans {
    /// Resources to keep.
    #[serde(default)]
    pub orphaning_rules: Vec<ResourceIdentifier>,
}

/// Selects a resource by group, resource, namespace and name.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResourceIdentifier {
    /// API group ("" for core).
    #[serde(default)]
    pub group: String,
    /// Plural resource (deployments).
    #[serde(default)]
    pub resource: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// Per-resource options.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestConfig {
    /// Which resource.
    pub resource_identifier: ResourceIdentifier,
    /// Status feedback rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback_rules: Vec<FeedbackRule>,
    /// Update strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Condition rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub condition_rules: Vec<ConditionRule>,
    /// `Poll` (default) or `Watch`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub feedback_scrape_type: String,
}

/// A condition rule (OCM `ConditionRule`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionRule {
    /// The condition type set (`Complete`, or any other).
    #[serde(default)]
    pub condition: String,
    /// `WellKnownConditions` or `CEL`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// CEL expressions over `object`, all of which must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel_expressions: Vec<String>,
    /// The condition's message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// CEL over `object` and `result` giving the message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message_expression: String,
}

/// A feedback rule.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackRule {
    /// WellKnownStatus or JSONPaths.
    #[serde(rename = "type")]
    pub type_: String,
    /// Paths for JSONPaths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_paths: Vec<JsonPath>,
}

/// A named JSONPath.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JsonPath {
    /// Value name.
    pub name: String,
    /// Path.
    pub path: String,
    /// Version of the resource the path applies to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
}

/// Update strategy.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateStrategy {
    /// Update, CreateOnly, ServerSideApply or ReadOnly.
    #[serde(rename = "type")]
    pub type_: String,
    /// Options for ServerSideApply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApply>,
}

/// ServerSideApply options.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerSideApply {
    /// Take ownership of conflicting fields.
    #[serde(default)]
    pub force: bool,
    /// Field manager name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field_manager: String,
    /// Fields not updated when their condition holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_fields: Vec<IgnoreField>,
}

/// OCM `IgnoreField`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IgnoreField {
    /// `OnSpokePresent` (default) or `OnSpokeChange`.
    #[serde(default)]
    pub condition: String,
    /// Field paths (`.spec.replicas`).
    #[serde(default, rename = "jsonPaths", skip_serializing_if = "Vec::is_empty")]
    pub json_paths: Vec<String>,
    /// JSON pointers (`/spec/replicas`).
    #[serde(
        default,
        rename = "jsonPointers",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub json_pointers: Vec<String>,
}

/// ManifestWork status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    /// Work conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Per-manifest status.
    #[serde(default)]
    pub resource_status: ResourceStatus,
}

/// Per-manifest status list.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ResourceStatus {
    /// One entry per manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<ManifestStatus>,
}

/// Status of one manifest.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManifestStatus {
    /// Which resource.
    pub resource_meta: ResourceMeta,
    /// Feedback values.
    #[serde(default)]
    pub status_feedback: StatusFeedback,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Identity of a manifest in status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ResourceMeta {
    /// Index in the work.
    pub ordinal: i32,
    /// Group.
    #[serde(default)]
    pub group: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Plural resource.
    #[serde(default)]
    pub resource: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// Feedback values.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StatusFeedback {
    /// Values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<FeedbackValue>,
}

/// One feedback value.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    /// Name.
    pub name: String,
    /// Typed value.
    pub field_value: FieldValue,
}

/// A typed value.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FieldValue {
    /// Integer, String, Boolean or JsonRaw.
    #[serde(rename = "type")]
    pub type_: String,
    /// Integer value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integer: Option<i64>,
    /// String value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// Boolean value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boolean: Option<bool>,
    /// Raw JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_raw: Option<String>,
}

impl ManifestWork {
    /// Converts to protobuf; manifests become JSON bytes.
    pub fn to_proto(&self) -> Result<v1::ManifestWork, String> {
        let s = &self.spec;
        let manifests = s
            .workload
            .manifests
            .iter()
            .enumerate()
            .map(|(i, m)| {
                serde_json::to_vec(m)
                    .map(|raw| v1::Manifest { raw })
                    .map_err(|e| format!("spec.workload.manifests[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rid = |r: &ResourceIdentifier| v1::ResourceIdentifier {
            group: r.group.clone(),
            resource: r.resource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        };
        Ok(v1::ManifestWork {
            metadata: Some(self.metadata.to_proto()?),
            spec: Some(v1::ManifestWorkSpec {
                workload: Some(v1::ManifestsTemplate { manifests }),
                delete_option: s.delete_option.as_ref().map(|d| v1::DeleteOption {
                    propagation_policy: d.propagation_policy.clone(),
                    selectively_orphans: d.selectively_orphans.as_ref().map(|so| {
                        v1::SelectivelyOrphan {
                            orphaning_rules: so
                                .orphaning_rules
                                .iter()
                                .map(|r| v1::OrphaningRule {
                                    group: r.group.clone(),
                                    resource: r.resource.clone(),
                                    namespace: r.namespace.clone(),
                                    name: r.name.clone(),
                                })
                                .collect(),
                        }
                    }),
                    ttl_seconds_after_finished: d.ttl_seconds_after_finished,
                }),
                manifest_configs: s
                    .manifest_configs
                    .iter()
                    .map(|c| v1::ManifestConfigOption {
                        resource_identifier: Some(rid(&c.resource_identifier)),
                        feedback_rules: c
                            .feedback_rules
                            .iter()
                            .map(|r| v1::FeedbackRule {
                                r#type: r.type_.clone(),
                                json_paths: r
                                    .json_paths
                                    .iter()
                                    .map(|p| v1::JsonPath {
                                        name: p.name.clone(),
                                        path: p.path.clone(),
                                        version: p.version.clone(),
                                    })
                                    .collect(),
                            })
                            .collect(),
                        update_strategy: c.update_strategy.as_ref().map(|u| v1::UpdateStrategy {
                            r#type: u.type_.clone(),
                            server_side_apply: u.server_side_apply.as_ref().map(|ssa| {
                                v1::ServerSideApplyConfig {
                                    force: ssa.force,
                                    field_manager: ssa.field_manager.clone(),
                                    ignore_fields: ssa
                                        .ignore_fields
                                        .iter()
                                        .map(|f| v1::IgnoreField {
                                            condition: f.condition.clone(),
                                            json_paths: f.json_paths.clone(),
                                            json_pointers: f.json_pointers.clone(),
                                        })
                                        .collect(),
                                }
                            }),
                        }),
                        condition_rules: c
                            .condition_rules
                            .iter()
                            .map(|r| v1::ConditionRule {
                                condition: r.condition.clone(),
                                r#type: r.type_.clone(),
                                cel_expressions: r.cel_expressions.clone(),
                                message: r.message.clone(),
                                message_expression: r.message_expression.clone(),
                            })
                            .collect(),
                        feedback_scrape_type: c.feedback_scrape_type.clone(),
                    })
                    .collect(),
                executor: s.executor.as_ref().map(|e| v1::ManifestWorkExecutor {
                    subject: Some(v1::ManifestWorkExecutorSubject {
                        r#type: e.subject.type_.clone(),
                        service_account: e.subject.service_account.as_ref().map(|sa| {
                            v1::ManifestWorkSubjectServiceAccount {
                                namespace: sa.namespace.clone(),
                                name: sa.name.clone(),
                            }
                        }),
                    }),
                }),
            }),
            status: None,
            hub: None,
        })
    }
}

impl From<&v1::ManifestWork> for ManifestWork {
    fn from(w: &v1::ManifestWork) -> Self {
        let spec = w.spec.clone().unwrap_or_default();
        let rid = |r: &v1::ResourceIdentifier| ResourceIdentifier {
            group: r.group.clone(),
            resource: r.resource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        };
        let status = w.status.as_ref().map(|st| WorkStatus {
            conditions: conditions(&st.conditions),
            resource_status: ResourceStatus {
                manifests: st
                    .resource_status
                    .as_ref()
                    .map(|rs| {
                        rs.manifests
                            .iter()
                            .map(|m| {
                                let rm = m.resource_meta.clone().unwrap_or_default();
                                ManifestStatus {
                                    resource_meta: ResourceMeta {
                                        ordinal: rm.ordinal,
                                        group: rm.group,
                                        version: rm.version,
                                        kind: rm.kind,
                                        resource: rm.resource,
                                        namespace: rm.namespace,
                                        name: rm.name,
                                    },
                                    status_feedback: StatusFeedback {
                                        values: m
                                            .status_feedback
                                            .as_ref()
                                            .map(|f| {
                                                f.values
                                                    .iter()
                                                    .map(|v| {
                                                        let fv = v
                                                            .field_value
                                                            .clone()
                                                            .unwrap_or_default();
                                                        FeedbackValue {
                                                            name: v.name.clone(),
                                                            field_value: FieldValue {
                                                                type_: fv.r#type,
                                                                integer: fv.integer,
                                                                string: fv.string,
                                                                boolean: fv.boolean,
                                                                json_raw: fv.json_raw,
                                                            },
                                                        }
                                                    })
                                                    .collect()
                                            })
                                            .unwrap_or_default(),
                                    },
                                    conditions: conditions(&m.conditions),
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
        });
        Self {
            api_version: WORK_V1.into(),
            kind: "ManifestWork".into(),
            metadata: w.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: WorkSpec {
                workload: Workload {
                    manifests: spec
                        .workload
                        .map(|wl| {
                            wl.manifests
                                .iter()
                                .map(|m| {
                                    serde_json::from_slice(&m.raw)
                                        .unwrap_or(serde_json::Value::Null)
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                },
                delete_option: spec.delete_option.map(|d| DeleteOption {
                    propagation_policy: d.propagation_policy,
                    selectively_orphans: d.selectively_orphans.map(|so| SelectivelyOrphans {
                        orphaning_rules: so
                            .orphaning_rules
                            .iter()
                            .map(|r| ResourceIdentifier {
                                group: r.group.clone(),
                                resource: r.resource.clone(),
                                namespace: r.namespace.clone(),
                                name: r.name.clone(),
                            })
                            .collect(),
                    }),
                    ttl_seconds_after_finished: d.ttl_seconds_after_finished,
                }),
                manifest_configs: spec
                    .manifest_configs
                    .iter()
                    .map(|c| ManifestConfig {
                        resource_identifier: c
                            .resource_identifier
                            .as_ref()
                            .map(rid)
                            .unwrap_or_default(),
                        feedback_rules: c
                            .feedback_rules
                            .iter()
                            .map(|r| FeedbackRule {
                                type_: r.r#type.clone(),
                                json_paths: r
                                    .json_paths
                                    .iter()
                                    .map(|p| JsonPath {
                                        name: p.name.clone(),
                                        path: p.path.clone(),
                                        version: p.version.clone(),
                                    })
                                    .collect(),
                            })
                            .collect(),
                        update_strategy: c.update_strategy.as_ref().map(|u| UpdateStrategy {
                            type_: u.r#type.clone(),
                            server_side_apply: u.server_side_apply.as_ref().map(|s| {
                                ServerSideApply {
                                    force: s.force,
                                    field_manager: s.field_manager.clone(),
                                    ignore_fields: s
                                        .ignore_fields
                                        .iter()
                                        .map(|f| IgnoreField {
                                            condition: f.condition.clone(),
                                            json_paths: f.json_paths.clone(),
                                            json_pointers: f.json_pointers.clone(),
                                        })
                                        .collect(),
                                }
                            }),
                        }),
                        condition_rules: c
                            .condition_rules
                            .iter()
                            .map(|r| ConditionRule {
                                condition: r.condition.clone(),
                                type_: r.r#type.clone(),
                                cel_expressions: r.cel_expressions.clone(),
                                message: r.message.clone(),
                                message_expression: r.message_expression.clone(),
                            })
                            .collect(),
                        feedback_scrape_type: c.feedback_scrape_type.clone(),
                    })
                    .collect(),
                executor: spec.executor.map(|e| {
                    let subject = e.subject.unwrap_or_default();
                    Executor {
                        subject: ExecutorSubject {
                            type_: subject.r#type,
                            service_account: subject.service_account.map(|sa| ServiceAccountRef {
                                namespace: sa.namespace,
                                name: sa.name,
                            }),
                        },
                    }
                }),
            },
            status,
        }
    }
}
