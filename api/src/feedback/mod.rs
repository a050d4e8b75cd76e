//! ManifestWork status feedback: rules, the `WellKnownStatus` table and OCM value typing.
//!
//! A manifest's `feedbackRules[]` ask the agent to report values from the applied object's
//! status. `WellKnownStatus` picks a fixed set of paths by the object's group and kind (see
//! [`well_known_paths`]); `JSONPaths` lists named [`jsonpath`](super::jsonpath) expressions.
//!
//! Values are typed as OCM does ([`FieldValue::from_matches`]): one JSON integer, string or
//! boolean keeps its type, anything else becomes compact JSON text (`JsonRaw`, at most
//! [`JSON_RAW_MAX_LEN`] characters). A path that selects nothing, or selects `null`, reports no
//! value; that is not an error.
//!
//! The hub checks rules with [`validate_rules`] when a ManifestWork is created or updated. The
//! agent compiles them once per work generation with [`CompiledRules::new`] and calls
//! [`CompiledRules::evaluate`] at every scrape; [`evaluate`] does both in one call. Evaluation
//! keeps going past a broken rule and lists what failed in [`FeedbackResult::errors`], so the
//! agent can report the other values and set `StatusFeedbackSynced=False` with the message.
//!
//! Compared with OCM (`pkg/work/spoke/statusfeedback`): a path selecting several values reports
//! them all as a JSON array where OCM keeps only the first, the JsonRaw limit counts characters
//! (as the CRD's `maxLength` does) where OCM's agent counts bytes, and a value name produced twice
//! is reported once with an error instead of twice. As in OCM, `WellKnownStatus` on a kind without
//! table entries and a `JSONPaths` entry whose `version` differs from the object's are errors.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

use super::jsonpath::{JsonPath, JsonPathError, parse};

/// Longest `JsonRaw` value, in characters (OCM `JsonRawMaxLength`).
pub const JSON_RAW_MAX_LEN: usize = 1024;

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
    /// several matches (as an array). At most [`JSON_RAW_MAX_LEN`] characters.
    JsonRaw(String),
}

impl FieldValue {
    /// Types what a path selected for the value `name`; `Ok(None)` when there is nothing to
    /// report (no match, or a single `null`).
    ///
    /// Fails when the `JsonRaw` text would be longer than [`JSON_RAW_MAX_LEN`] characters.
    pub fn from_matches(name: &str, matches: &[&Value]) -> Result<Option<Self>> {
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
    /// Two `JSONPaths` entries with the same name.
    #[error(
        "feedback rule {rule}, JSONPaths entry {entry} \"{name}\": name is already used by rule \
         {first_rule}, entry {first_entry}; names must be unique"
    )]
    DuplicateName {
        /// Index of the rule with the repeated name.
        rule: usize,
        /// Index of the entry with the repeated name.
        entry: usize,
        /// The repeated name.
        name: String,
        /// Index of the rule that used the name first.
        first_rule: usize,
        /// Index of the entry that used the name first.
        first_entry: usize,
    },
    /// `WellKnownStatus` listed more than once.
    #[error("feedback rule {rule}: WellKnownStatus is already requested by rule {first_rule}")]
    DuplicateWellKnownStatus {
        /// Index of the repeated rule.
        rule: usize,
        /// Index of the first `WellKnownStatus` rule.
        first_rule: usize,
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

/// Checks rules before they are accepted: every path parses, every `JSONPaths` name is
/// non-empty and unique across the manifest's rules, and `WellKnownStatus` appears at most once.
///
/// Returns the first problem. Names that collide with the well-known names of the object's kind
/// cannot be checked here (the kind is not known); [`evaluate`] reports those.
pub fn validate_rules(rules: &[FeedbackRule]) -> Result<()> {
    let mut names: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut well_known = None;
    for (rule, r) in rules.iter().enumerate() {
        match r {
            FeedbackRule::WellKnownStatus => match well_known {
                Some(first_rule) => {
                    return Err(FeedbackError::DuplicateWellKnownStatus { rule, first_rule });
                }
                None => well_known = Some(rule),
            },
            FeedbackRule::JsonPaths(entries) => {
                for (entry, e) in entries.iter().enumerate() {
                    if e.name.trim().is_empty() {
                        return Err(FeedbackError::EmptyName { rule, entry });
                    }
                    if let Some(&(first_rule, first_entry)) = names.get(e.name.as_str()) {
                        return Err(FeedbackError::DuplicateName {
                            rule,
                            entry,
                            name: e.name.clone(),
                            first_rule,
                            first_entry,
                        });
                    }
                    names.insert(&e.name, (rule, entry));
                    parse(&e.path).map_err(|source| FeedbackError::InvalidPath {
                        rule,
                        entry,
                        name: e.name.clone(),
                        source,
                    })?;
                }
            }
        }
    }
    Ok(())
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
    /// Parses every path of `rules`.
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
        Self { rules }
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
            match FieldValue::from_matches(name, &matches) {
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
/// `WellKnownStatus` paths); see [`CompiledRules`] to parse the paths once instead of per call.
pub fn evaluate(rules: &[FeedbackRule], group: &str, kind: &str, object: &Value) -> FeedbackResult {
    CompiledRules::new(rules).evaluate(group, kind, object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn paths(entries: &[(&str, &str)]) -> FeedbackRule {
        FeedbackRule::JsonPaths(
            entries
                .iter()
                .map(|&(name, path)| JsonPathRule {
                    name: name.into(),
                    path: path.into(),
                    version: String::new(),
                })
                .collect(),
        )
    }

    fn value_of(object: &Value, path: &str) -> FeedbackResult {
        evaluate(&[paths(&[("v", path)])], "", "ConfigMap", object)
    }

    fn single(object: &Value, path: &str) -> Option<FieldValue> {
        let result = value_of(object, path);
        assert!(result.errors.is_empty(), "{:?}", result.errors);
        result.values.into_iter().next().map(|(_, v)| v)
    }

    fn ints(values: &[(&str, i64)]) -> Vec<(String, FieldValue)> {
        values
            .iter()
            .map(|&(n, v)| (n.to_owned(), FieldValue::Integer(v)))
            .collect()
    }

    // --- WellKnownStatus --------------------------------------------------------------------

    #[test]
    fn well_known_table_matches_ocm() {
        assert_eq!(
            well_known_paths("apps", "Deployment"),
            [
                ("ReadyReplicas", ".status.readyReplicas"),
                ("Replicas", ".status.replicas"),
                ("AvailableReplicas", ".status.availableReplicas"),
            ]
        );
        assert_eq!(
            well_known_paths("apps", "DaemonSet"),
            [
                ("NumberReady", ".status.numberReady"),
                ("DesiredNumberScheduled", ".status.desiredNumberScheduled"),
                ("NumberAvailable", ".status.numberAvailable"),
            ]
        );
        assert_eq!(
            well_known_paths("batch", "Job"),
            [
                (
                    "JobComplete",
                    r#".status.conditions[?(@.type=="Complete")].status"#
                ),
                ("JobSucceeded", ".status.succeeded"),
            ]
        );
        assert_eq!(
            well_known_paths("", "Pod"),
            [
                (
                    "PodReady",
                    r#".status.conditions[?(@.type=="Ready")].status"#
                ),
                ("PodPhase", ".status.phase"),
            ]
        );
    }

    #[test]
    fn well_known_paths_parse_to_their_canonical_form() {
        for (group, kind) in [
            ("apps", "Deployment"),
            ("apps", "DaemonSet"),
            ("batch", "Job"),
            ("", "Pod"),
        ] {
            for &(name, path) in well_known_paths(group, kind) {
                let parsed = parse(path).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(parsed.to_string(), path, "{name}");
            }
        }
    }

    #[test]
    fn well_known_paths_need_exact_group_and_kind() {
        assert!(well_known_paths("apps", "StatefulSet").is_empty());
        assert!(well_known_paths("extensions", "Deployment").is_empty());
        assert!(well_known_paths("core", "Pod").is_empty());
        assert!(well_known_paths("apps", "deployment").is_empty());
        assert!(well_known_paths("", "Job").is_empty());
    }

    #[test]
    fn deployment_well_known_status() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "generation": 3},
            "spec": {"replicas": 3},
            "status": {
                "observedGeneration": 3, "replicas": 3, "updatedReplicas": 3,
                "readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 1,
                "conditions": [
                    {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
                    {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"},
                ],
            },
        });
        let result = evaluate(
            &[FeedbackRule::WellKnownStatus],
            "apps",
            "Deployment",
            &deployment,
        );
        assert_eq!(result.errors, Vec::<String>::new());
        assert_eq!(
            result.values,
            ints(&[
                ("AvailableReplicas", 2),
                ("ReadyReplicas", 2),
                ("Replicas", 3)
            ])
        );
    }

    #[test]
    fn new_deployment_without_ready_replicas_reports_only_present_values() {
        // A fresh Deployment omits zero counters from status.
        let deployment = json!({"status": {"replicas": 1, "unavailableReplicas": 1}});
        let result = evaluate(
            &[FeedbackRule::WellKnownStatus],
            "apps",
            "Deployment",
            &deployment,
        );
        assert!(result.is_synced());
        assert_eq!(result.values, ints(&[("Replicas", 1)]));
    }

    #[test]
    fn daemonset_well_known_status() {
        let daemonset = json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "status": {
                "currentNumberScheduled": 4, "desiredNumberScheduled": 4,
                "numberAvailable": 3, "numberMisscheduled": 0, "numberReady": 3,
                "numberUnavailable": 1, "observedGeneration": 2, "updatedNumberScheduled": 4,
            },
        });
        let result = evaluate(
            &[FeedbackRule::WellKnownStatus],
            "apps",
            "DaemonSet",
            &daemonset,
        );
        assert!(result.is_synced());
        assert_eq!(
            result.values,
            ints(&[
                ("DesiredNumberScheduled", 4),
                ("NumberAvailable", 3),
                ("NumberReady", 3),
            ])
        );
    }

    #[test]
    fn completed_job_well_known_status() {
        let job = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "status": {
                "active": 0, "ready": 0, "succeeded": 1, "terminating": 0,
                "startTime": "2025-01-01T00:00:00Z", "completionTime": "2025-01-01T00:00:09Z",
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True"},
                    {"type": "Complete", "status": "True", "lastProbeTime": "2025-01-01T00:00:09Z"},
                ],
            },
        });
        let result = evaluate(&[FeedbackRule::WellKnownStatus], "batch", "Job", &job);
        assert!(result.is_synced());
        assert_eq!(
            result.values,
            [
                ("JobComplete".to_owned(), FieldValue::String("True".into())),
                ("JobSucceeded".to_owned(), FieldValue::Integer(1)),
            ]
        );
    }

    #[test]
    fn running_job_has_no_job_complete_value() {
        let job = json!({"status": {"active": 1, "ready": 1, "startTime": "2025-01-01T00:00:00Z"}});
        let result = evaluate(&[FeedbackRule::WellKnownStatus], "batch", "Job", &job);
        assert!(result.is_synced());
        assert!(result.values.is_empty());
    }

    #[test]
    fn pod_well_known_status() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.7",
                "conditions": [
                    {"type": "PodReadyToStartContainers", "status": "True"},
                    {"type": "Initialized", "status": "True"},
                    {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
                    {"type": "ContainersReady", "status": "False"},
                    {"type": "PodScheduled", "status": "True"},
                ],
                "containerStatuses": [{"name": "app", "ready": false, "restartCount": 2}],
            },
        });
        let result = evaluate(&[FeedbackRule::WellKnownStatus], "", "Pod", &pod);
        assert!(result.is_synced());
        assert_eq!(
            result.values,
            [
                ("PodPhase".to_owned(), FieldValue::String("Running".into())),
                ("PodReady".to_owned(), FieldValue::String("False".into())),
            ]
        );
    }

    #[test]
    fn well_known_status_on_unknown_kind_is_an_error() {
        let result = evaluate(
            &[FeedbackRule::WellKnownStatus],
            "apps",
            "StatefulSet",
            &json!({"status": {"readyReplicas": 1}}),
        );
        assert!(result.values.is_empty());
        assert_eq!(
            result.errors,
            [
                "feedback rule 0: WellKnownStatus has no values for kind StatefulSet in group \
                 \"apps\"; use JSONPaths for this resource"
            ]
        );
    }

    // --- typing -----------------------------------------------------------------------------

    #[test]
    fn integer_is_integer() {
        let obj = json!({"n": 7, "neg": -3, "max": i64::MAX});
        assert_eq!(single(&obj, ".n"), Some(FieldValue::Integer(7)));
        assert_eq!(single(&obj, ".neg"), Some(FieldValue::Integer(-3)));
        assert_eq!(single(&obj, ".max"), Some(FieldValue::Integer(i64::MAX)));
    }

    #[test]
    fn integer_beyond_i64_is_json_raw() {
        let obj = json!({"n": u64::MAX});
        assert_eq!(
            single(&obj, ".n"),
            Some(FieldValue::JsonRaw(u64::MAX.to_string()))
        );
    }

    #[test]
    fn string_and_boolean_keep_their_type() {
        let obj = json!({"s": "Running", "empty": "", "b": true});
        assert_eq!(
            single(&obj, ".s"),
            Some(FieldValue::String("Running".into()))
        );
        assert_eq!(
            single(&obj, ".empty"),
            Some(FieldValue::String(String::new()))
        );
        assert_eq!(single(&obj, ".b"), Some(FieldValue::Boolean(true)));
    }

    #[test]
    fn float_is_json_raw() {
        let obj = json!({"f": 0.75});
        assert_eq!(single(&obj, ".f"), Some(FieldValue::JsonRaw("0.75".into())));
    }

    #[test]
    fn object_and_array_are_compact_json_raw() {
        let obj = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}});
        assert_eq!(
            single(&obj, ".status.loadBalancer"),
            Some(FieldValue::JsonRaw(
                r#"{"ingress":[{"ip":"192.0.2.1"}]}"#.into()
            ))
        );
        assert_eq!(
            single(&obj, ".status.loadBalancer.ingress"),
            Some(FieldValue::JsonRaw(r#"[{"ip":"192.0.2.1"}]"#.into()))
        );
    }

    #[test]
    fn several_matches_are_a_json_raw_array() {
        let obj = json!({"spec": {"containers": [
            {"name": "app", "image": "nginx:1.27"},
            {"name": "proxy", "image": "envoy:1.30"},
        ]}});
        assert_eq!(
            single(&obj, ".spec.containers[*].image"),
            Some(FieldValue::JsonRaw(r#"["nginx:1.27","envoy:1.30"]"#.into()))
        );
        assert_eq!(
            single(&obj, ".spec.containers[0:1].image"),
            Some(FieldValue::String("nginx:1.27".into()))
        );
    }

    #[test]
    fn missing_field_yields_no_value() {
        let result = value_of(&json!({"status": {}}), ".status.readyReplicas");
        assert!(result.is_synced());
        assert!(result.values.is_empty());
    }

    #[test]
    fn null_yields_no_value() {
        let result = value_of(&json!({"status": {"x": null}}), ".status.x");
        assert!(result.is_synced());
        assert!(result.values.is_empty());
    }

    #[test]
    fn json_raw_at_limit_is_reported() {
        // ["xxx…"] with the quotes and brackets taking 4 characters.
        let s = "x".repeat(JSON_RAW_MAX_LEN - 4);
        let obj = json!({"a": [s]});
        match single(&obj, ".a") {
            Some(FieldValue::JsonRaw(raw)) => assert_eq!(raw.len(), JSON_RAW_MAX_LEN),
            other => panic!("expected JsonRaw, got {other:?}"),
        }
    }

    #[test]
    fn json_raw_over_limit_is_an_error() {
        let obj = json!({"a": ["x".repeat(JSON_RAW_MAX_LEN - 3)]});
        let result = value_of(&obj, ".a");
        assert!(result.values.is_empty());
        assert_eq!(
            result.errors,
            ["value of rule v is 1025 characters, over the 1024 limit"]
        );
    }

    #[test]
    fn json_raw_limit_counts_characters_not_bytes() {
        // 1020 two-byte characters: 2044 bytes but 1024 characters.
        let obj = json!({"a": ["é".repeat(JSON_RAW_MAX_LEN - 4)]});
        assert!(matches!(single(&obj, ".a"), Some(FieldValue::JsonRaw(_))));
    }

    #[test]
    fn long_string_is_not_limited() {
        let obj = json!({"s": "x".repeat(4 * JSON_RAW_MAX_LEN)});
        assert!(matches!(single(&obj, ".s"), Some(FieldValue::String(s)) if s.len() == 4096));
    }

    #[test]
    fn type_names_match_ocm() {
        assert_eq!(FieldValue::Integer(1).type_name(), "Integer");
        assert_eq!(FieldValue::String(String::new()).type_name(), "String");
        assert_eq!(FieldValue::Boolean(true).type_name(), "Boolean");
        assert_eq!(FieldValue::JsonRaw("{}".into()).type_name(), "JsonRaw");
    }

    // --- evaluation ---------------------------------------------------------------------------

    #[test]
    fn values_are_sorted_by_name_across_rules() {
        let deployment = json!({"status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1,
            "conditions": [{"type": "Available", "status": "True"}]}});
        let rules = [
            paths(&[
                ("zeta", ".status.replicas"),
                (
                    "available",
                    r#".status.conditions[?(@.type=="Available")].status"#,
                ),
            ]),
            FeedbackRule::WellKnownStatus,
        ];
        let result = evaluate(&rules, "apps", "Deployment", &deployment);
        assert!(result.is_synced());
        let names: Vec<&str> = result.values.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "AvailableReplicas",
                "ReadyReplicas",
                "Replicas",
                "available",
                "zeta"
            ]
        );
        assert_eq!(result, evaluate(&rules, "apps", "Deployment", &deployment));
    }

    #[test]
    fn invalid_path_is_reported_and_other_rules_still_evaluate() {
        let obj = json!({"status": {"phase": "Running"}});
        let rules = [paths(&[
            ("broken", ".status.conditions[?(@.type==\"Ready\""),
            ("phase", ".status.phase"),
        ])];
        let result = evaluate(&rules, "", "Pod", &obj);
        assert_eq!(
            result.values,
            [("phase".to_owned(), FieldValue::String("Running".into()))]
        );
        assert_eq!(
            result.errors,
            [
                "feedback rule 0, JSONPaths entry 0 \"broken\": invalid JSONPath: path \
                 \".status.conditions[?(@.type==\"Ready\"\": unclosed filter at position 19"
            ]
        );
    }

    #[test]
    fn empty_name_is_reported_at_evaluation() {
        let result = evaluate(&[paths(&[(" ", ".a")])], "", "Pod", &json!({"a": 1}));
        assert!(result.values.is_empty());
        assert_eq!(
            result.errors,
            ["feedback rule 0, JSONPaths entry 0: name is empty; give every path a name"]
        );
    }

    #[test]
    fn duplicate_value_name_keeps_first_rule_and_reports() {
        let deployment = json!({"status": {"replicas": 2, "readyReplicas": 1}});
        let rules = [
            FeedbackRule::WellKnownStatus,
            paths(&[("Replicas", ".status.readyReplicas")]),
        ];
        let result = evaluate(&rules, "apps", "Deployment", &deployment);
        assert_eq!(
            result.values,
            ints(&[("ReadyReplicas", 1), ("Replicas", 2)])
        );
        assert_eq!(
            result.errors,
            [
                "value \"Replicas\" of feedback rule 1 is also produced by rule 0; reporting rule \
                 0's value"
            ]
        );
    }

    #[test]
    fn compiled_rules_evaluate_like_evaluate() {
        let rules = [
            FeedbackRule::WellKnownStatus,
            paths(&[("image", ".spec.containers[0].image"), ("bad", ".a[")]),
        ];
        let compiled = CompiledRules::new(&rules);
        let pod =
            json!({"spec": {"containers": [{"image": "nginx"}]}, "status": {"phase": "Pending"}});
        let result = compiled.evaluate("", "Pod", &pod);
        assert_eq!(result, evaluate(&rules, "", "Pod", &pod));
        assert_eq!(result.values.len(), 2);
        assert_eq!(result.errors.len(), 1);
    }

    #[test]
    fn path_version_must_match_object_version() {
        let rule = |version: &str| {
            FeedbackRule::JsonPaths(vec![JsonPathRule {
                name: "ready".into(),
                path: ".status.readyReplicas".into(),
                version: version.into(),
            }])
        };
        let deployment = json!({"apiVersion": "apps/v1", "status": {"readyReplicas": 1}});
        for version in ["", "v1"] {
            let result = evaluate(&[rule(version)], "apps", "Deployment", &deployment);
            assert!(result.is_synced(), "{version}: {:?}", result.errors);
            assert_eq!(result.values, ints(&[("ready", 1)]));
        }
        let result = evaluate(&[rule("v1beta1")], "apps", "Deployment", &deployment);
        assert!(result.values.is_empty());
        assert_eq!(
            result.errors,
            [
                "feedback rule 0, JSONPaths entry 0 \"ready\": the path is for version \"v1beta1\" \
                 but the object is \"v1\"; fix or clear the version"
            ]
        );
        let pod = json!({"apiVersion": "v1", "status": {"readyReplicas": 1}});
        assert!(evaluate(&[rule("v1")], "", "Pod", &pod).is_synced());
    }

    #[test]
    fn no_rules_report_nothing() {
        let result = evaluate(
            &[],
            "apps",
            "Deployment",
            &json!({"status": {"replicas": 1}}),
        );
        assert_eq!(result, FeedbackResult::default());
        assert!(result.is_synced());
    }

    // --- rule types and validation ------------------------------------------------------------

    #[test]
    fn rule_type_from_str_accepts_exact_names() {
        assert_eq!(
            rule_type_from_str("WellKnownStatus"),
            Ok(FeedbackRuleType::WellKnownStatus)
        );
        assert_eq!(
            rule_type_from_str("JSONPaths"),
            Ok(FeedbackRuleType::JsonPaths)
        );
        assert_eq!(
            FeedbackRule::JsonPaths(vec![]).rule_type().to_string(),
            "JSONPaths"
        );
    }

    #[test]
    fn rule_type_from_str_rejects_others_listing_valid_types() {
        for bad in [
            "jsonpaths",
            "JsonPaths",
            "wellknownstatus",
            "",
            " JSONPaths",
        ] {
            assert_eq!(
                rule_type_from_str(bad),
                Err(format!(
                    "unknown feedback rule type \"{bad}\"; valid types are WellKnownStatus, JSONPaths"
                ))
            );
        }
    }

    #[test]
    fn validate_rules_accepts_valid_rules() {
        let rules = [
            FeedbackRule::WellKnownStatus,
            paths(&[
                ("ready", r#".status.conditions[?(@.type=="Ready")].status"#),
                ("image", "{.spec.containers[0].image}"),
            ]),
            paths(&[("labels", ".metadata.labels['app.kubernetes.io/name']")]),
        ];
        assert!(validate_rules(&rules).is_ok());
        assert!(validate_rules(&[]).is_ok());
    }

    #[test]
    fn validate_rules_rejects_bad_path_with_index_and_name() {
        let rules = [
            paths(&[("ok", ".a")]),
            paths(&[("x", ".a"), ("ready", ".a[")]),
        ];
        let e = validate_rules(&rules).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "feedback rule 1, JSONPaths entry 1 \"ready\": invalid JSONPath: path \".a[\": \
                 unclosed '[' at position 3"
            )
        );
    }

    #[test]
    fn validate_rules_rejects_empty_name() {
        let e = validate_rules(&[paths(&[("a", ".a"), ("", ".b")])]);
        assert!(matches!(
            e,
            Err(FeedbackError::EmptyName { rule: 0, entry: 1 })
        ));
    }

    #[test]
    fn validate_rules_rejects_duplicate_names_across_rules() {
        let rules = [
            paths(&[("ready", ".a")]),
            FeedbackRule::WellKnownStatus,
            paths(&[("ready", ".b")]),
        ];
        let e = validate_rules(&rules).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "feedback rule 2, JSONPaths entry 0 \"ready\": name is already used by rule 0, \
                 entry 0; names must be unique"
            )
        );
    }

    #[test]
    fn validate_rules_rejects_repeated_well_known_status() {
        let rules = [FeedbackRule::WellKnownStatus, FeedbackRule::WellKnownStatus];
        assert_eq!(
            validate_rules(&rules)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("feedback rule 1: WellKnownStatus is already requested by rule 0")
        );
    }

    // --- properties ---------------------------------------------------------------------------

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter_map("finite", serde_json::Number::from_f64)
                .prop_map(Value::Number),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map("\\PC{0,4}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn typing_follows_ocm_rules(v in arb_json()) {
            let obj = json!({"status": {"x": v.clone()}});
            let result = value_of(&obj, ".status.x");
            match (&v, result.values.first().map(|(_, fv)| fv)) {
                (Value::Null, None) => prop_assert!(result.is_synced()),
                (Value::Bool(b), Some(FieldValue::Boolean(got))) => prop_assert_eq!(b, got),
                (Value::String(s), Some(FieldValue::String(got))) => prop_assert_eq!(s, got),
                (Value::Number(n), Some(FieldValue::Integer(got))) => {
                    prop_assert_eq!(n.as_i64(), Some(*got));
                }
                (_, Some(FieldValue::JsonRaw(raw))) => {
                    prop_assert!(!matches!(v, Value::Bool(_) | Value::String(_) | Value::Null));
                    prop_assert!(v.as_i64().is_none());
                    prop_assert!(raw.chars().count() <= JSON_RAW_MAX_LEN);
                    // Compact JSON of the value itself (serde_json's float parsing is not
                    // exact without `float_roundtrip`, so compare the text, then check it is JSON).
                    prop_assert_eq!(Some(raw.clone()), serde_json::to_string(&v).ok());
                    prop_assert!(serde_json::from_str::<Value>(raw).is_ok());
                }
                (_, None) => {
                    prop_assert_eq!(result.errors.len(), 1);
                    prop_assert!(result.errors[0].contains("over the 1024 limit"));
                }
                (v, Some(other)) => {
                    return Err(TestCaseError::fail(format!("{v} typed as {other:?}")));
                }
            }
        }

        #[test]
        fn evaluation_is_sorted_unique_and_never_panics(
            obj in arb_json(),
            rule_paths in proptest::collection::vec("[.\\[\\]?()@*'\"=!<>:0-9a-c-]{0,16}", 0..6),
        ) {
            let entries: Vec<(String, String)> = rule_paths
                .into_iter()
                .enumerate()
                .map(|(i, p)| (format!("r{}", i % 4), p))
                .collect();
            let borrowed: Vec<(&str, &str)> =
                entries.iter().map(|(n, p)| (n.as_str(), p.as_str())).collect();
            let rules = [FeedbackRule::WellKnownStatus, paths(&borrowed)];
            let result = evaluate(&rules, "apps", "Deployment", &obj);
            prop_assert!(result.values.windows(2).all(|w| w[0].0 < w[1].0));
            prop_assert_eq!(result.clone(), evaluate(&rules, "apps", "Deployment", &obj));
        }
    }
}
