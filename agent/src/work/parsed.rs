//! A work's manifests read for one generation: each manifest's identity and its options
//! (update strategy, feedback rules, condition rules, ignored fields), matched from the spec's
//! `manifestConfigs`. Pure: the actor keeps the result until the next generation.

use crate::backend::Strategy;
use flotilla_api::feedback::{CompiledRules, FeedbackRule, JsonPathRule, RawJson};
use flotilla_api::v1::ManifestWorkSpec;
use flotilla_api::work::{ManifestId, manifest_id};
use serde_json::Value;

/// Field manager used for ServerSideApply when the work names none (OCM's prefix).
pub const DEFAULT_FIELD_MANAGER: &str = "work-agent";

/// A manifest's identity and options, for the held generation. The manifest itself is parsed
/// again from the work's bytes when it is applied (`WorkActor::manifest_object`): an idle
/// work keeps no JSON trees.
pub(super) struct Parsed {
    pub(super) ordinal: usize,
    pub(super) id: Result<ManifestId, String>,
    pub(super) strategy: Strategy,
    pub(super) rules: Option<CompiledRules>,
    /// `conditionRules`, compiled.
    pub(super) condition_rules: Option<super::condition_rules::ConditionRules>,
    /// `serverSideApply.ignoreFields`.
    pub(super) ignore: Option<super::ignore::IgnoreRules>,
}

/// Every manifest of `spec`, with its options (`raw_json`: how feedback rules read raw JSON).
pub(super) fn parse(spec: &ManifestWorkSpec, raw_json: RawJson) -> Vec<Parsed> {
    let manifests = spec
        .workload
        .as_ref()
        .map(|w| w.manifests.as_slice())
        .unwrap_or_default();
    manifests
        .iter()
        .enumerate()
        .map(|(ordinal, m)| {
            let object: Value = serde_json::from_slice(&m.raw).unwrap_or(Value::Null);
            let id = manifest_id(&object);
            let config = id
                .as_ref()
                .ok()
                .and_then(|id| {
                    spec.manifest_configs.iter().find(|c| {
                        c.resource_identifier
                            .as_ref()
                            .is_some_and(|r| id.matches(r))
                    })
                })
                .cloned();
            let ignore = config
                .as_ref()
                .and_then(|c| c.update_strategy.as_ref())
                .filter(|u| u.r#type == "ServerSideApply")
                .and_then(|u| u.server_side_apply.as_ref())
                .and_then(super::ignore::IgnoreRules::new);
            let strategy = match config.as_ref().and_then(|c| c.update_strategy.clone()) {
                None => Strategy::Update,
                Some(us) => match us.r#type.as_str() {
                    "CreateOnly" => Strategy::CreateOnly,
                    "ReadOnly" => Strategy::ReadOnly,
                    "ServerSideApply" => {
                        let ssa = us.server_side_apply.unwrap_or_default();
                        Strategy::ServerSideApply {
                            force: ssa.force,
                            field_manager: if ssa.field_manager.is_empty() {
                                DEFAULT_FIELD_MANAGER.to_string()
                            } else {
                                ssa.field_manager
                            },
                        }
                    }
                    _ => Strategy::Update,
                },
            };
            let condition_rules = config
                .as_ref()
                .and_then(|c| super::condition_rules::ConditionRules::new(&c.condition_rules));
            let rules: Vec<FeedbackRule> = config
                .map(|c| {
                    c.feedback_rules
                        .iter()
                        .filter_map(|r| match r.r#type.as_str() {
                            "WellKnownStatus" => Some(FeedbackRule::WellKnownStatus),
                            "JSONPaths" => Some(FeedbackRule::JsonPaths(
                                r.json_paths
                                    .iter()
                                    .map(|p| JsonPathRule {
                                        name: p.name.clone(),
                                        path: p.path.clone(),
                                        version: p.version.clone(),
                                    })
                                    .collect(),
                            )),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            Parsed {
                ordinal,
                id,
                strategy,
                rules: (!rules.is_empty())
                    .then(|| CompiledRules::new(&rules).with_raw_json(raw_json)),
                condition_rules,
                ignore,
            }
        })
        .collect()
}
