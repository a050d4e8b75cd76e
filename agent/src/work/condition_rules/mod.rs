//! OCM condition rules (`manifestConfigs[].conditionRules`): conditions the agent sets on a
//! manifest from its observed object, and their aggregate on the work — as OCM's work agent.
//!
//! - `WellKnownConditions`: `Complete` for a Job (its `Complete` or `Failed` condition is True)
//!   and a Pod (phase `Succeeded` or `Failed`); other kinds and conditions get no condition.
//! - `CEL`: every expression over `object` (the observed resource) must be `true`; the message
//!   is `messageExpression` (over `object` and `result`), else `message`, else "Manifest is
//!   (not) <condition>".
//!
//! Reasons are OCM's: `ConditionRuleEvaluated`, `ConditionRuleExpressionError` (an expression
//! that does not compile, fails, or is not a boolean — the condition is False),
//! `ConditionRuleInvalid`. Expressions compile once per spec through the same checks as
//! placement CEL (size, cost, only the declared variables).
//!
//! On the work, every condition type a rule produced is aggregated as OCM does: False if any
//! manifest's is False, Unknown if any is Unknown or none is True, else True (reason
//! `ConditionRulesAggregated`). A work Complete=True is what `ttlSecondsAfterFinished` counts
//! from at the hub.

use cel::{Context, Program, Value as CelValue};
use flotilla_api::meta;
use flotilla_api::v1::{Condition, ConditionRule, ManifestWorkStatus};
use flotilla_api::work::ManifestId;
use serde_json::Value;
use std::sync::OnceLock;

/// Reason of a rule evaluated without error.
pub const EVALUATED: &str = "ConditionRuleEvaluated";
/// Reason of an expression that failed to compile or evaluate.
pub const EXPRESSION_ERROR: &str = "ConditionRuleExpressionError";
/// Reason of a rule that cannot be evaluated (unknown type).
pub const INVALID: &str = "ConditionRuleInvalid";
/// Prefix of every reason a rule sets (how generated conditions are told apart).
pub const REASON_PREFIX: &str = "ConditionRule";
/// Reason of a work condition aggregated from the manifests' rule conditions.
pub const AGGREGATED: &str = "ConditionRulesAggregated";
/// The condition that stops updates of a manifest once True.
pub const COMPLETE: &str = "Complete";

const JOB_COMPLETE: &str = "has(object.status) && has(object.status.conditions) && \
     object.status.conditions.exists(c, (c.type == 'Complete' || c.type == 'Failed') && c.status == 'True')";
const JOB_MESSAGE: &str = "result ? 'Job is finished' : 'Job is not finished'";
const POD_COMPLETE: &str = "has(object.status) && has(object.status.phase) && \
     object.status.phase in ['Succeeded', 'Failed']";
const POD_MESSAGE: &str = "'Pod is in phase ' + \
     (has(object.status) && has(object.status.phase) ? object.status.phase : 'Unknown')";

/// How one rule is evaluated.
enum Kind {
    /// OCM's hard-coded rules (Job and Pod `Complete`).
    WellKnown,
    /// The rule's own expressions, or why they cannot run.
    Cel(Result<Vec<Program>, String>),
    /// An unknown rule type.
    Invalid(String),
}

/// One rule, compiled.
struct Rule {
    condition: String,
    kind: Kind,
    message: String,
    message_program: Option<Result<Program, String>>,
}

/// A well-known rule: its expressions and its default message.
struct WellKnown {
    programs: Vec<Program>,
    message: Program,
}

fn well_known(id: &ManifestId, condition: &str) -> Option<&'static WellKnown> {
    static JOB: OnceLock<Option<WellKnown>> = OnceLock::new();
    static POD: OnceLock<Option<WellKnown>> = OnceLock::new();
    let build = |expr: &str, message: &str| {
        Some(WellKnown {
            programs: compile(&[expr.to_string()]).ok()?,
            message: flotilla_placement::cel::compile_checked(message, &["object", "result"])
                .ok()?,
        })
    };
    if condition != COMPLETE {
        return None;
    }
    match (id.group.as_str(), id.kind.as_str()) {
        ("batch", "Job") => JOB
            .get_or_init(|| build(JOB_COMPLETE, JOB_MESSAGE))
            .as_ref(),
        ("", "Pod") => POD
            .get_or_init(|| build(POD_COMPLETE, POD_MESSAGE))
            .as_ref(),
        _ => None,
    }
}

/// The compiled condition rules of one manifest.
pub struct ConditionRules {
    rules: Vec<Rule>,
}

fn compile(sources: &[String]) -> Result<Vec<Program>, String> {
    sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            flotilla_placement::cel::compile_checked(s, &["object"])
                .map_err(|e| format!("celExpressions[{i}]: {e}"))
        })
        .collect()
}

fn compile_message(source: &str) -> Option<Result<Program, String>> {
    (!source.is_empty()).then(|| {
        flotilla_placement::cel::compile_checked(source, &["object", "result"])
            .map_err(|e| format!("messageExpression: {e}"))
    })
}

impl ConditionRules {
    /// Compiles a manifest's rules (none: `None`).
    pub fn new(rules: &[ConditionRule]) -> Option<Self> {
        if rules.is_empty() {
            return None;
        }
        let rules = rules
            .iter()
            .map(|r| Rule {
                condition: r.condition.clone(),
                kind: match r.r#type.as_str() {
                    "WellKnownConditions" => Kind::WellKnown,
                    "CEL" => Kind::Cel(compile(&r.cel_expressions)),
                    other => Kind::Invalid(format!("unrecognized condition rule type {other:?}")),
                },
                message: r.message.clone(),
                message_program: compile_message(&r.message_expression),
            })
            .collect();
        Some(Self { rules })
    }

    /// The conditions the rules give manifest `id` whose observed object is `object` (None:
    /// it does not exist, so each rule's condition is Unknown). A well-known rule for a kind it
    /// does not know gives no condition, as in OCM.
    pub fn evaluate(&self, id: &ManifestId, object: Option<&Value>) -> Vec<Condition> {
        // The object becomes a CEL value once for every rule of the manifest.
        let object = object.map(|o| cel::to_value(o).map_err(|e| e.to_string()));
        let object = object.as_ref();
        self.rules
            .iter()
            .filter_map(|rule| match &rule.kind {
                Kind::Invalid(e) => Some(condition(
                    &rule.condition,
                    meta::status::UNKNOWN,
                    INVALID,
                    e.clone(),
                )),
                Kind::Cel(Err(e)) => Some(condition(
                    &rule.condition,
                    meta::status::FALSE,
                    EXPRESSION_ERROR,
                    e.clone(),
                )),
                Kind::Cel(Ok(programs)) => Some(evaluate_rule(rule, programs, None, object)),
                Kind::WellKnown => well_known(id, &rule.condition)
                    .map(|w| evaluate_rule(rule, &w.programs, Some(&w.message), object)),
            })
            .collect()
    }
}

fn condition(type_: &str, status: &str, reason: &str, message: String) -> Condition {
    Condition {
        r#type: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        ..Default::default()
    }
}

fn evaluate_rule(
    rule: &Rule,
    programs: &[Program],
    default_message: Option<&Program>,
    object: Option<&Result<CelValue, String>>,
) -> Condition {
    let Some(object) = object else {
        return condition(
            &rule.condition,
            meta::status::UNKNOWN,
            EVALUATED,
            "the resource does not exist".into(),
        );
    };
    let cel_object = match object {
        Ok(v) => v.clone(),
        Err(e) => {
            return condition(&rule.condition, meta::status::UNKNOWN, INVALID, e.clone());
        }
    };
    let mut context = Context::with_env(flotilla_placement::cel::env().clone());
    context.add_variable_from_value("object", cel_object);
    let mut result = true;
    for (i, p) in programs.iter().enumerate() {
        match p.execute(&context) {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => {
                result = false;
                break;
            }
            Ok(other) => {
                return condition(
                    &rule.condition,
                    meta::status::FALSE,
                    EXPRESSION_ERROR,
                    format!("celExpressions[{i}]: expected a bool result, got {other:?}"),
                );
            }
            Err(e) => {
                return condition(
                    &rule.condition,
                    meta::status::FALSE,
                    EXPRESSION_ERROR,
                    format!("celExpressions[{i}]: {e}"),
                );
            }
        }
    }
    context.add_variable_from_value("result", CelValue::Bool(result));
    let program = match &rule.message_program {
        Some(Ok(p)) => Some(p),
        Some(Err(_)) => None,
        None => default_message,
    };
    let message = program
        .and_then(|p| match p.execute(&context) {
            Ok(CelValue::String(s)) if !s.is_empty() => Some(s.to_string()),
            _ => None,
        })
        .or_else(|| (!rule.message.is_empty()).then(|| rule.message.clone()))
        .unwrap_or_else(|| {
            if result {
                format!("Manifest is {}", rule.condition)
            } else {
                format!("Manifest is not {}", rule.condition)
            }
        });
    condition(
        &rule.condition,
        if result {
            meta::status::TRUE
        } else {
            meta::status::FALSE
        },
        EVALUATED,
        message,
    )
}

/// Whether a condition was set by a rule.
pub fn from_rule(c: &Condition) -> bool {
    c.reason.starts_with(REASON_PREFIX)
}

/// Puts a manifest's rule conditions in place: the new ones set (keeping their transition
/// times when unchanged), rule conditions no rule produces any more removed.
pub fn merge(conditions: &mut Vec<Condition>, produced: &[Condition]) -> bool {
    let before = conditions.len();
    conditions.retain(|c| !from_rule(c) || produced.iter().any(|p| p.r#type == c.r#type));
    let mut changed = conditions.len() != before;
    for p in produced {
        changed |= meta::set_condition(conditions, &p.r#type, &p.status, &p.reason, &p.message);
    }
    changed
}

/// Drops every condition the rules set, on the manifests and on the work: they were about the
/// previous spec (OCM prunes them when the generation changes).
pub fn clear(status: &mut ManifestWorkStatus) {
    for m in status
        .resource_status
        .iter_mut()
        .flat_map(|rs| rs.manifests.iter_mut())
    {
        m.conditions.retain(|c| !from_rule(c));
    }
    status.conditions.retain(|c| c.reason != AGGREGATED);
}

/// Aggregates the rule conditions of every manifest on the work, as OCM does.
pub fn aggregate(work: &mut Vec<Condition>, manifests: &[&[Condition]]) -> bool {
    let mut types: Vec<&str> = manifests
        .iter()
        .flat_map(|cs| {
            cs.iter()
                .filter(|c| from_rule(c))
                .map(|c| c.r#type.as_str())
        })
        .collect();
    types.sort_unstable();
    types.dedup();
    let before = work.len();
    work.retain(|c| c.reason != AGGREGATED || types.contains(&c.r#type.as_str()));
    let mut changed = work.len() != before;
    for t in types {
        let (mut yes, mut no, mut unknown, mut message) = (0, 0, 0, String::new());
        for c in manifests.iter().flat_map(|cs| cs.iter()) {
            if c.r#type != t || !from_rule(c) {
                continue;
            }
            match c.status.as_str() {
                meta::status::TRUE => yes += 1,
                meta::status::FALSE => no += 1,
                _ => unknown += 1,
            }
            if !c.message.is_empty() {
                message = c.message.clone();
            }
        }
        let status = if no > 0 {
            meta::status::FALSE
        } else if unknown > 0 || yes == 0 {
            meta::status::UNKNOWN
        } else {
            meta::status::TRUE
        };
        let total = yes + no + unknown;
        let message = if total == 1 && !message.is_empty() {
            message
        } else {
            format!("Aggregated from {total} manifest conditions")
        };
        changed |= meta::set_condition(work, t, status, AGGREGATED, &message);
    }
    changed
}

#[cfg(test)]
mod tests;
