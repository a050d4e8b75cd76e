//! ManifestWork status feedback: rules, the `WellKnownStatus` table and OCM value typing.
//!
//! A manifest's `feedbackRules[]` ask the agent to report values from the applied object's
//! status. `WellKnownStatus` picks a fixed set of paths by the object's group and kind (see
//! [`well_known_paths`]); `JSONPaths` lists named [`jsonpath`](crate::jsonpath) expressions.
//!
//! Values are typed as OCM's work agent does ([`FieldValue::from_matches`]). By default (OCM's
//! feature gate `RawFeedbackJsonString` off) the *first* value a path selects is reported when it
//! is a JSON integer (64-bit), string or boolean; an object, a list or any other number is not
//! reported and is an error (`StatusFeedbackSynced=False`). With [`RawJson::Enabled`] (the gate
//! on; `flotilla-agent --feature-gates RawFeedbackJsonString=true`) a single integer, string or
//! boolean still keeps its type, and anything else — several matches as a list — becomes compact
//! JSON text (`JsonRaw`, at most [`JSON_RAW_MAX_LEN`] characters). Either way a path that
//! selects nothing, or selects `null` first, reports no value; that is not an error.
//!
//! The hub checks rules with [`crate::work::validate`] when a ManifestWork is created or updated
//! (every path parses, names are non-empty and unique, `WellKnownStatus` at most once). The
//! agent compiles them once per work generation with [`CompiledRules::new`] and calls
//! [`CompiledRules::evaluate`] at every scrape; [`evaluate`] does both in one call. Evaluation
//! keeps going past a broken rule and lists what failed in [`FeedbackResult::errors`], so the
//! agent can report the other values and set `StatusFeedbackSynced=False` with the message.
//!
//! Compared with OCM (`pkg/work/spoke/statusfeedback`): the JsonRaw limit counts characters (as
//! the CRD's `maxLength` does) where OCM's agent counts bytes, and a value name produced twice is
//! reported once with an error instead of twice. As in OCM, `WellKnownStatus` on a kind without
//! table entries and a `JSONPaths` entry whose `version` differs from the object's are errors.

use std::sync::OnceLock;

use serde_json::Value;

use crate::jsonpath::{JsonPath, JsonPathError, parse};

/// Longest `JsonRaw` value, in characters (OCM `JsonRawMaxLength`).
pub const JSON_RAW_MAX_LEN: usize = 1024;

/// Name of OCM's work-agent feature gate that turns on [`RawJson::Enabled`].
pub const RAW_FEEDBACK_JSON_STRING: &str = "RawFeedbackJsonString";

/// Whether values other than one integer, string or boolean are reported as JSON text: OCM's
/// work-agent feature gate `RawFeedbackJsonString` (alpha, off by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum RawJson {
    /// The gate off (OCM's default): the first match is reported if it is an integer, a string
    /// or a boolean; anything else is an error.
    #[default]
    Disabled,
    /// The gate on: objects, lists, other numbers and several matches become `JsonRaw`.
    Enabled,
}

/// Result of validating or evaluating feedback rules.
pub type Result<T, E = FeedbackError> = std::result::Result<T, E>;

/// One reported status value, typed as OCM's `FieldValue`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldValue {
    /// A JSON integer that fits in 64 signed bits.
    Integer(i64),
    /// A JSON string.
    String(String),
    /// A JSON boolean.
    Boolean(bool),
    /// Compact JSON for anything else: floats, objects, arrays, integers beyond `i64`, or
    /// several matches (as an array). At most [`JSON_RAW_MAX_LEN`] characters. Only with
    /// [`RawJson::Enabled`].
    JsonRaw(String),
}

impl FieldValue {
    /// Types what a path selected for the value `name`; `Ok(None)` when there is nothing to
    /// report (no match, or `null` first).
    ///
    /// With [`RawJson::Disabled`] only the first match counts, and it fails unless it is an
    /// integer, a string or a boolean. With [`RawJson::Enabled`] it fails when the `JsonRaw` text
    /// would be longer than [`JSON_RAW_MAX_LEN`] characters.
    pub fn from_matches(name: &str, matches: &[&Value], raw_json: RawJson) -> Result<Option<Self>> {
        if raw_json == RawJson::Disabled {
            let what = match matches.first() {
                None | Some(Value::Null) => return Ok(None),
                Some(Value::String(s)) => return Ok(Some(Self::String(s.clone()))),
                Some(Value::Bool(b)) => return Ok(Some(Self::Boolean(*b))),
                Some(Value::Number(n)) => match n.as_i64() {
                    Some(i) => return Ok(Some(Self::Integer(i))),
                    None => "a number that is not a 64-bit integer",
                },
                Some(Value::Object(_)) => "an object",
                Some(Value::Array(_)) => "a list",
            };
            return Err(FeedbackError::NotScalar {
                name: name.to_owned(),
                what,
            });
        }
        let raw = match matches {
            [] | [Value::Null] => return Ok(None),
            [Value::String(s)] => return Ok(Some(Self::String(s.clone()))),
            [Value::Bool(b)] => return Ok(Some(Self::Boolean(*b))),
            [Value::Number(n)] => match n.as_i64() {
                Some(i) => return Ok(Some(Self::Integer(i))),
                None => serde_json::to_string(n),
            },
            [one] => serde_json::to_string(one),
            several => serde_json::to_string(several),
        };
        let raw = raw.map_err(|source| FeedbackError::Encode {
            name: name.to_owned(),
            source,
        })?;
        // Every character takes at least one byte, so only long texts need counting.
        if raw.len() > JSON_RAW_MAX_LEN {
            let len = raw.chars().count();
            if len > JSON_RAW_MAX_LEN {
                return Err(FeedbackError::ValueTooLong {
                    name: name.to_owned(),
                    len,
                });
            }
        }
        Ok(Some(Self::JsonRaw(raw)))
    }

    /// OCM's name for the value type: `Integer`, `String`, `Boolean` or `JsonRaw`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Integer(_) => "Integer",
            Self::String(_) => "String",
            Self::Boolean(_) => "Boolean",
            Self::JsonRaw(_) => "JsonRaw",
        }
    }
}

/// One named path of a `JSONPaths` rule (OCM `JsonPath`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JsonPathRule {
    /// Name the value is reported under; unique among the manifest's rules.
    pub name: String,
    /// kubectl-style JSONPath evaluated on the whole object, e.g. `.status.readyReplicas`.
    pub path: String,
    /// API version (`v1`, `v1beta1`) the path was written for; empty for any. When set and the
    /// object's `apiVersion` has another version, the path is not evaluated and an error is
    /// reported, as in OCM.
    pub version: String,
}

/// One entry of a manifest's `feedbackRules[]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FeedbackRule {
    /// Report the values of the [`well_known_paths`] table for the object's group and kind.
    WellKnownStatus,
    /// Report each listed path under its name.
    JsonPaths(Vec<JsonPathRule>),
}

impl FeedbackRule {
    /// The rule's `type` as written in the API.
    pub fn rule_type(&self) -> FeedbackRuleType {
        match self {
            Self::WellKnownStatus => FeedbackRuleType::WellKnownStatus,
            Self::JsonPaths(_) => FeedbackRuleType::JsonPaths,
        }
    }
}

/// The `type` field of a feedback rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeedbackRuleType {
    /// `WellKnownStatus`.
    WellKnownStatus,
    /// `JSONPaths`.
    JsonPaths,
}

impl FeedbackRuleType {
    /// Every rule type, in the order error messages list them.
    pub const ALL: [Self; 2] = [Self::WellKnownStatus, Self::JsonPaths];

    /// The API spelling: `WellKnownStatus` or `JSONPaths`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WellKnownStatus => "WellKnownStatus",
            Self::JsonPaths => "JSONPaths",
        }
    }
}

impl std::fmt::Display for FeedbackRuleType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a feedback rule `type`, accepting exactly `WellKnownStatus` and `JSONPaths`
/// (case-sensitive, as the OCM CRD enum is).
pub fn rule_type_from_str(s: &str) -> Result<FeedbackRuleType, String> {
    FeedbackRuleType::ALL
        .into_iter()
        .find(|t| t.as_str() == s)
        .ok_or_else(|| {
            format!(
                "unknown feedback rule type \"{s}\"; valid types are WellKnownStatus, JSONPaths"
            )
        })
}

/// Why feedback rules are invalid or a value could not be reported.
///
/// `rule` is the index in `feedbackRules[]`, `entry` the index in that rule's `jsonPaths[]`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FeedbackError {
    /// A `JSONPaths` entry without a name: its value could not be reported.
    #[error("feedback rule {rule}, JSONPaths entry {entry}: name is empty; give every path a name")]
    EmptyName {
        /// Index of the rule.
        rule: usize,
        /// Index of the entry in the rule.
        entry: usize,
    },
    /// A path that does not parse.
    #[error("feedback rule {rule}, JSONPaths entry {entry} \"{name}\": invalid JSONPath: {source}")]
    InvalidPath {
        /// Index of the rule.
        rule: usize,
        /// Index of the entry in the rule.
        entry: usize,
        /// Name of the entry.
        name: String,
        /// What is wrong with the path.
        #[source]
        source: JsonPathError,
    },
    /// A `JSONPaths` entry whose `version` is not the object's; OCM skips it with an error too.
    #[error(
        "feedback rule {rule}, JSONPaths entry {entry} \"{name}\": the path is for version \
         \"{version}\" but the object is \"{object_version}\"; fix or clear the version"
    )]
    VersionMismatch {
        /// Index of the rule.
        rule: usize,
        /// Index of the entry in the rule.
        entry: usize,
        /// Name of the entry.
        name: String,
        /// The entry's `version`.
        version: String,
        /// Version part of the object's `apiVersion` (empty when it has none).
        object_version: String,
    },
    /// `WellKnownStatus` on an object the table has no entry for (OCM reports this too).
    #[error(
        "feedback rule {rule}: WellKnownStatus has no values for kind {kind} in group \"{group}\"; \
         use JSONPaths for this resource"
    )]
    NoWellKnownStatus {
        /// Index of the rule.
        rule: usize,
        /// The object's API group (`""` for the core group).
        group: String,
        /// The object's kind.
        kind: String,
    },
    /// Two rules produced a value with the same name; the first one is reported.
    #[error(
        "value \"{name}\" of feedback rule {rule} is also produced by rule {first_rule}; \
         reporting rule {first_rule}'s value"
    )]
    DuplicateValue {
        /// The value name.
        name: String,
        /// Index of the rule whose value was dropped.
        rule: usize,
        /// Index of the rule whose value was kept.
        first_rule: usize,
    },
    /// Without `RawFeedbackJsonString`, the first value a path selects is not an integer, a
    /// string or a boolean (OCM reports such values only with the gate on).
    #[error(
        "value of rule {name} is {what}; only integers, strings and booleans are reported: \
         select a scalar field, or start flotilla-agent with \
         --feature-gates {RAW_FEEDBACK_JSON_STRING}=true to report it as JSON"
    )]
    NotScalar {
        /// The value name.
        name: String,
        /// What was selected: "an object", "a list", "a number that is not a 64-bit integer".
        what: &'static str,
    },
    /// A `JsonRaw` value over [`JSON_RAW_MAX_LEN`] characters.
    #[error("value of rule {name} is {len} characters, over the {JSON_RAW_MAX_LEN} limit")]
    ValueTooLong {
        /// The value name.
        name: String,
        /// Its length in characters.
        len: usize,
    },
    /// The selected value could not be written as JSON.
    #[error("value of rule {name} could not be encoded as JSON: {source}")]
    Encode {
        /// The value name.
        name: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
}

const DEPLOYMENT: &[(&str, &str)] = &[
    ("ReadyReplicas", ".status.readyReplicas"),
    ("Replicas", ".status.replicas"),
    ("AvailableReplicas", ".status.availableReplicas"),
];

const DAEMON_SET: &[(&str, &str)] = &[
    ("NumberReady", ".status.numberReady"),
    ("DesiredNumberScheduled", ".status.desiredNumberScheduled"),
    ("NumberAvailable", ".status.numberAvailable"),
];

const JOB: &[(&str, &str)] = &[
    (
        "JobComplete",
        r#".status.conditions[?(@.type=="Complete")].status"#,
    ),
    ("JobSucceeded", ".status.succeeded"),
];

const POD: &[(&str, &str)] = &[
    (
        "PodReady",
        r#".status.conditions[?(@.type=="Ready")].status"#,
    ),
    ("PodPhase", ".status.phase"),
];

/// The table [`well_known_paths`] serves, in the order of [`well_known_index`].
const WELL_KNOWN: [&[(&str, &str)]; 4] = [DEPLOYMENT, DAEMON_SET, JOB, POD];

fn well_known_index(group: &str, kind: &str) -> Option<usize> {
    match (group, kind) {
        ("apps", "Deployment") => Some(0),
        ("apps", "DaemonSet") => Some(1),
        ("batch", "Job") => Some(2),
        ("", "Pod") => Some(3),
        _ => None,
    }
}

/// `(value name, JSONPath)` pairs that `WellKnownStatus` reports for an object of this API group
/// (`""` for the core group) and kind; empty for kinds OCM has no entry for.
///
/// Keyed by group and kind only: apps/v1 Deployment, apps/v1 DaemonSet, batch/v1 Job and v1 Pod
/// are the only served versions today (recent OCM keys the table by the full group/version/kind).
pub fn well_known_paths(group: &str, kind: &str) -> &'static [(&'static str, &'static str)] {
    well_known_index(group, kind).map_or(&[], |i| WELL_KNOWN[i])
}

type CompiledTable = Vec<(&'static str, Result<JsonPath, JsonPathError>)>;

/// [`well_known_paths`] parsed once per process.
fn well_known_compiled(group: &str, kind: &str) -> Option<&'static CompiledTable> {
    static COMPILED: [OnceLock<CompiledTable>; 4] = [const { OnceLock::new() }; 4];
    let i = well_known_index(group, kind)?;
    Some(COMPILED[i].get_or_init(|| {
        WELL_KNOWN[i]
            .iter()
            .map(|&(name, path)| (name, parse(path)))
            .collect()
    }))
}

/// What one evaluation reports for one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedbackResult {
    /// `(name, value)` sorted by name, each name once; values whose paths matched nothing are
    /// absent.
    pub values: Vec<(String, FieldValue)>,
    /// One message per rule, entry or value that could not be evaluated, in rule order. Not
    /// empty means `StatusFeedbackSynced=False`.
    pub errors: Vec<String>,
}

impl FeedbackResult {
    /// Whether every rule was evaluated (`StatusFeedbackSynced=True`).
    pub fn is_synced(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Feedback rules with their paths parsed once, for evaluation at every scrape.
///
/// Building never fails: a path that does not parse is reported by every
/// [`evaluate`](Self::evaluate), as OCM does, so one bad entry does not hide the other values.
#[derive(Debug, Clone)]
pub struct CompiledRules {
    rules: Vec<CompiledRule>,
    raw_json: RawJson,
}

#[derive(Debug, Clone)]
enum CompiledRule {
    WellKnownStatus,
    JsonPaths(Vec<CompiledPath>),
}

#[derive(Debug, Clone)]
struct CompiledPath {
    name: String,
    version: String,
    path: Result<JsonPath, JsonPathError>,
}

/// A value found during evaluation, before sorting and de-duplication.
struct Found {
    name: String,
    value: FieldValue,
    rule: usize,
}

impl CompiledRules {
    /// Parses every path of `rules`; values are typed with [`RawJson::Disabled`] (OCM's default)
    /// unless [`with_raw_json`](Self::with_raw_json) says otherwise.
    pub fn new(rules: &[FeedbackRule]) -> Self {
        let rules = rules
            .iter()
            .map(|rule| match rule {
                FeedbackRule::WellKnownStatus => CompiledRule::WellKnownStatus,
                FeedbackRule::JsonPaths(entries) => CompiledRule::JsonPaths(
                    entries
                        .iter()
                        .map(|e| CompiledPath {
                            name: e.name.clone(),
                            version: e.version.clone(),
                            path: parse(&e.path),
                        })
                        .collect(),
                ),
            })
            .collect();
        Self {
            rules,
            raw_json: RawJson::Disabled,
        }
    }

    /// Sets how values other than one integer, string or boolean are treated.
    pub fn with_raw_json(mut self, raw_json: RawJson) -> Self {
        self.raw_json = raw_json;
        self
    }

    /// Evaluates the rules on `object`, whose API group (`""` for core) and kind select the
    /// `WellKnownStatus` paths and whose `apiVersion` is checked against `JSONPaths` versions.
    /// Deterministic: the same inputs give the same result.
    pub fn evaluate(&self, group: &str, kind: &str, object: &Value) -> FeedbackResult {
        let object_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .map_or("", |api_version| {
                api_version.rsplit('/').next().unwrap_or(api_version)
            });
        let mut found = Vec::new();
        let mut errors = Vec::new();
        // One match buffer for every path of this object.
        let mut matches = Vec::new();
        let mut extract = |rule: usize, name: &str, path: &JsonPath, errors: &mut Vec<String>| {
            matches.clear();
            path.eval_into(object, &mut matches);
            match FieldValue::from_matches(name, &matches, self.raw_json) {
                Ok(Some(value)) => found.push(Found {
                    name: name.to_owned(),
                    value,
                    rule,
                }),
                Ok(None) => {}
                Err(e) => errors.push(e.to_string()),
            }
        };
        for (rule, compiled) in self.rules.iter().enumerate() {
            match compiled {
                CompiledRule::WellKnownStatus => {
                    let Some(table) = well_known_compiled(group, kind) else {
                        errors.push(
                            FeedbackError::NoWellKnownStatus {
                                rule,
                                group: group.to_owned(),
                                kind: kind.to_owned(),
                            }
                            .to_string(),
                        );
                        continue;
                    };
                    for (entry, (name, path)) in table.iter().enumerate() {
                        match path {
                            Ok(path) => extract(rule, name, path, &mut errors),
                            Err(e) => errors.push(invalid_path(rule, entry, name, e)),
                        }
                    }
                }
                CompiledRule::JsonPaths(entries) => {
                    for (entry, compiled) in entries.iter().enumerate() {
                        let CompiledPath {
                            name,
                            version,
                            path,
                        } = compiled;
                        if name.trim().is_empty() {
                            errors.push(FeedbackError::EmptyName { rule, entry }.to_string());
                            continue;
                        }
                        if !version.is_empty() && version != object_version {
                            let mismatch = FeedbackError::VersionMismatch {
                                rule,
                                entry,
                                name: name.clone(),
                                version: version.clone(),
                                object_version: object_version.to_owned(),
                            };
                            errors.push(mismatch.to_string());
                            continue;
                        }
                        match path {
                            Ok(path) => extract(rule, name, path, &mut errors),
                            Err(e) => errors.push(invalid_path(rule, entry, name, e)),
                        }
                    }
                }
            }
        }

        // Stable: among equal names the earliest rule comes first and is the one kept.
        found.sort_by(|a, b| a.name.cmp(&b.name));
        let mut values: Vec<(String, FieldValue)> = Vec::with_capacity(found.len());
        let mut kept_rule = 0;
        for f in found {
            match values.last() {
                Some((last, _)) if *last == f.name => errors.push(
                    FeedbackError::DuplicateValue {
                        name: f.name,
                        rule: f.rule,
                        first_rule: kept_rule,
                    }
                    .to_string(),
                ),
                _ => {
                    kept_rule = f.rule;
                    values.push((f.name, f.value));
                }
            }
        }
        FeedbackResult { values, errors }
    }
}

fn invalid_path(rule: usize, entry: usize, name: &str, source: &JsonPathError) -> String {
    FeedbackError::InvalidPath {
        rule,
        entry,
        name: name.to_owned(),
        source: source.clone(),
    }
    .to_string()
}

/// Evaluates `rules` on `object` (API `group`, `""` for core, and `kind` select the
/// `WellKnownStatus` paths) with OCM's default typing ([`RawJson::Disabled`]); see
/// [`CompiledRules`] to parse the paths once instead of per call, or to enable raw JSON.
pub fn evaluate(rules: &[FeedbackRule], group: &str, kind: &str, object: &Value) -> FeedbackResult {
    CompiledRules::new(rules).evaluate(group, kind, object)
}

#[cfg(test)]
mod tests;
