//! ManifestWork rules shared by hub, agent and CLI: manifest identity, kind → resource names,
//! the OCM limits, and validation with errors that name the manifest index and field.

use crate::feedback::FeedbackRuleType;
use crate::v1::{ManifestWork, ManifestWorkSpec, ObjectMeta, ResourceIdentifier};
use serde_json::Value;
use std::collections::HashMap;

/// Largest total size of a work's manifests (OCM: 500 KiB).
pub const MAX_MANIFESTS_BYTES: usize = 500 * 1024;
/// Update strategies.
pub const UPDATE_STRATEGIES: [&str; 4] = ["Update", "CreateOnly", "ServerSideApply", "ReadOnly"];
/// Delete propagation policies.
pub const PROPAGATION_POLICIES: [&str; 3] = ["Foreground", "Orphan", "SelectivelyOrphan"];
/// Condition types of works and manifests.
pub mod conditions {
    /// Every manifest applied.
    pub const APPLIED: &str = "Applied";
    /// Every resource available.
    pub const AVAILABLE: &str = "Available";
    /// Some resource is still converging.
    pub const PROGRESSING: &str = "Progressing";
    /// Some resource failed.
    pub const DEGRADED: &str = "Degraded";
    /// Feedback values were scraped.
    pub const FEEDBACK_SYNCED: &str = "StatusFeedbackSynced";
    /// The work is being deleted.
    pub const DELETING: &str = "Deleting";
    /// The agent keeps writing back what someone else keeps changing (a fight over its
    /// resources; the agent's drift repair).
    pub const CONTESTED: &str = "Contested";
    /// The agent put back what someone changed on the cluster, for one drift window (the hub
    /// shows the cluster `Modified` meanwhile).
    pub const REPAIRED: &str = "Repaired";
}

/// The identity of one manifest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ManifestId {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ManifestId {
    /// The identity of a `kind` object of `api_version` named `name`, as the API server places
    /// it: the group split from the version, a namespaced kind without a namespace (or with an
    /// empty one) in `default`, a cluster-scoped kind in none (whatever `namespace` says).
    pub fn from_parts(
        api_version: &str,
        kind: String,
        name: String,
        namespace: Option<String>,
    ) -> Self {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.to_string()),
        };
        let namespace = if is_cluster_scoped(&group, &kind) {
            String::new()
        } else {
            namespace
                .filter(|ns| !ns.is_empty())
                .unwrap_or_else(|| "default".to_string())
        };
        Self {
            group,
            version,
            kind,
            namespace,
            name,
        }
    }

    /// `group/version Kind namespace/name`, for messages.
    pub fn describe(&self) -> String {
        let gv = if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        if self.namespace.is_empty() {
            format!("{gv} {} {}", self.kind, self.name)
        } else {
            format!("{gv} {} {}/{}", self.kind, self.namespace, self.name)
        }
    }

    /// The lower-case plural resource name of the kind.
    pub fn resource(&self) -> String {
        kind_to_resource(&self.kind)
    }

    /// Whether a manifest config's resource identifier selects this manifest.
    pub fn matches(&self, r: &ResourceIdentifier) -> bool {
        r.group == self.group
            && r.resource.eq_ignore_ascii_case(&self.resource())
            && r.name == self.name
            && (r.namespace == self.namespace || (r.namespace == "*"))
    }
}

/// The only executor subject type OCM defines.
pub const EXECUTOR_SERVICE_ACCOUNT: &str = "ServiceAccount";

/// A work's executor (OCM `spec.executor.subject.serviceAccount`): the ServiceAccount on the
/// managed cluster whose rights bound what the agent applies for the work.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Executor {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub name: String,
}

impl Executor {
    /// The executor a spec names, if any (`None` also when the subject is not a ServiceAccount,
    /// which [`validate`] refuses).
    pub fn of(spec: &crate::v1::ManifestWorkSpec) -> Option<Self> {
        let subject = spec.executor.as_ref()?.subject.as_ref()?;
        if subject.r#type != EXECUTOR_SERVICE_ACCOUNT {
            return None;
        }
        let sa = subject.service_account.as_ref()?;
        Some(Self {
            namespace: sa.namespace.clone(),
            name: sa.name.clone(),
        })
    }

    /// The executor a work names, if any.
    pub fn of_work(work: &ManifestWork) -> Option<Self> {
        work.spec.as_ref().and_then(Self::of)
    }

    /// The Kubernetes user name of the ServiceAccount, `system:serviceaccount:<ns>:<name>`: what
    /// SubjectAccessReviews (and OCM's `execute-as` check) name.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The groups Kubernetes puts a ServiceAccount in.
    pub fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".into(),
        ]
    }
}

impl std::fmt::Display for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// OCM's schema for `spec.executor`: a subject of type ServiceAccount whose namespace and name
/// are DNS subdomains (at most 253 characters).
fn validate_executor(executor: &crate::v1::ManifestWorkExecutor, errors: &mut Vec<String>) {
    let Some(subject) = &executor.subject else {
        errors.push("spec.executor.subject: required".into());
        return;
    };
    if subject.r#type != EXECUTOR_SERVICE_ACCOUNT {
        errors.push(format!(
            "spec.executor.subject.type: {:?} is not {EXECUTOR_SERVICE_ACCOUNT} (the only executor type)",
            subject.r#type
        ));
        return;
    }
    let Some(sa) = &subject.service_account else {
        errors.push(
            "spec.executor.subject.serviceAccount: required when the type is ServiceAccount".into(),
        );
        return;
    };
    for (field, value) in [("namespace", &sa.namespace), ("name", &sa.name)] {
        if let Err(e) = crate::names::validate_dns1123_subdomain(
            &format!("spec.executor.subject.serviceAccount.{field}"),
            value,
        ) {
            errors.push(e.to_string());
        }
    }
}

/// The group of an `apiVersion` ("" for the core group's `v1`).
fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// Kinds that are cluster-scoped (everything else is namespaced; its namespace defaults to
/// `default`).
pub fn is_cluster_scoped(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("", "Namespace")
            | ("", "Node")
            | ("", "PersistentVolume")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("rbac.authorization.k8s.io", "ClusterRole")
            | ("rbac.authorization.k8s.io", "ClusterRoleBinding")
            | ("storage.k8s.io", "StorageClass")
            | ("scheduling.k8s.io", "PriorityClass")
            | ("admissionregistration.k8s.io", _)
    )
}

/// The plural resource of a kind, as the API server names it (`Deployment` → `deployments`,
/// `Ingress` → `ingresses`, `NetworkPolicy` → `networkpolicies`).
pub fn kind_to_resource(kind: &str) -> String {
    let k = kind.to_ascii_lowercase();
    if k == "endpoints" {
        return k;
    }
    if k.ends_with('s') || k.ends_with('x') || k.ends_with("ch") || k.ends_with("sh") {
        format!("{k}es")
    } else if k.ends_with('y') && !k.ends_with("ay") && !k.ends_with("ey") && !k.ends_with("oy") {
        format!("{}ies", &k[..k.len() - 1])
    } else {
        format!("{k}s")
    }
}

/// A manifest's identity read from its JSON bytes: the same answer as parsing them and calling
/// [`manifest_id`], without building the object's tree when the manifest is well formed (the
/// hub checks every manifest of every work it is given). Anything unusual — a syntax error, a
/// field of another type, a key given twice — is read the slow way, for the same message.
pub fn read_manifest_id(raw: &[u8]) -> Result<ManifestId, ManifestIdError> {
    if let Some(id) = head::read(raw) {
        return Ok(id);
    }
    let obj: Value = serde_json::from_slice(raw).map_err(ManifestIdError::Json)?;
    manifest_id(&obj).map_err(ManifestIdError::Id)
}

/// Why [`read_manifest_id`] failed.
#[derive(Debug)]
pub enum ManifestIdError {
    /// Not JSON.
    Json(serde_json::Error),
    /// JSON, but no Kubernetes object's identity: the field, and what is wrong with it.
    Id(String),
}

/// The fast path of [`read_manifest_id`]: only `apiVersion`, `kind` and `metadata.name` /
/// `namespace` are read (as raw JSON, then as strings); the rest is checked as JSON and skipped.
mod head {
    use super::ManifestId;
    use serde::Deserialize;
    use serde_json::value::RawValue;

    // Each field as given, `null` included (`Option` alone would read a `null` as absent).
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(rename = "apiVersion", borrow, default, deserialize_with = "given")]
        api_version: Option<&'a RawValue>,
        #[serde(borrow, default, deserialize_with = "given")]
        kind: Option<&'a RawValue>,
        #[serde(borrow, default, deserialize_with = "given")]
        metadata: Option<&'a RawValue>,
    }

    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(borrow, default, deserialize_with = "given")]
        name: Option<&'a RawValue>,
        #[serde(borrow, default, deserialize_with = "given")]
        namespace: Option<&'a RawValue>,
    }

    fn given<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
        <&RawValue>::deserialize(d).map(Some)
    }

    /// A non-empty JSON string.
    fn text(raw: Option<&RawValue>) -> Option<String> {
        serde_json::from_str::<String>(raw?.get())
            .ok()
            .filter(|s| !s.is_empty())
    }

    /// The identity of a well-formed manifest; `None` for anything else.
    pub(super) fn read(raw: &[u8]) -> Option<ManifestId> {
        // From a `str`: the parts skipped are then UTF-8 too (`from_slice` does not check the
        // bytes of what it skips, and the tree would refuse them).
        let head: Head = serde_json::from_str(std::str::from_utf8(raw).ok()?).ok()?;
        let meta: Meta = serde_json::from_str(head.metadata?.get()).ok()?;
        let api_version = text(head.api_version)?;
        let kind = text(head.kind)?;
        let name = text(meta.name)?;
        // A namespace that is not a string leaves the slow path to decide (it is an error
        // only for a namespaced kind).
        let namespace = match meta.namespace {
            None => None,
            Some(ns) => Some(serde_json::from_str::<String>(ns.get()).ok()?),
        };
        Some(ManifestId::from_parts(&api_version, kind, name, namespace))
    }
}

/// Reads a manifest's identity, naming the missing field.
pub fn manifest_id(obj: &Value) -> Result<ManifestId, String> {
    let Some(map) = obj.as_object() else {
        return Err("must be a Kubernetes object (a map), not a list or scalar".into());
    };
    let api_version = match map.get("apiVersion") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("apiVersion: must be a non-empty string".into()),
        None => return Err("apiVersion: required".into()),
    };
    let kind = match map.get("kind") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("kind: must be a non-empty string".into()),
        None => return Err("kind: required".into()),
    };
    let meta = map.get("metadata").and_then(Value::as_object);
    let name = match meta.and_then(|m| m.get("name")) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("metadata.name: must be a non-empty string".into()),
        None => return Err("metadata.name: required".into()),
    };
    let namespace = match meta.and_then(|m| m.get("namespace")) {
        Some(Value::String(s)) => Some(s.clone()),
        None => None,
        Some(_) if is_cluster_scoped(group_of(&api_version), &kind) => None,
        Some(_) => return Err("metadata.namespace: must be a string".into()),
    };
    Ok(ManifestId::from_parts(&api_version, kind, name, namespace))
}

/// Checks one manifest's `feedbackRules[]`: known types, at most one `WellKnownStatus`, named
/// paths with names unique across the manifest's rules, and every path in the kubectl JSONPath
/// dialect ([`crate::jsonpath`]) the agent evaluates. A path error names the manifest, the rule
/// and the character position.
fn validate_feedback_rules(
    field: &str,
    resource: &ResourceIdentifier,
    rules: &[crate::v1::FeedbackRule],
    errors: &mut Vec<String>,
) {
    let mut names: HashMap<&str, String> = HashMap::new();
    let mut well_known: Option<usize> = None;
    let manifest = describe_resource(resource);
    for (j, r) in rules.iter().enumerate() {
        let rf = format!("{field}.feedbackRules[{j}]");
        match crate::feedback::rule_type_from_str(&r.r#type) {
            Err(e) => errors.push(format!("{rf}.type: {e}")),
            Ok(FeedbackRuleType::WellKnownStatus) => {
                if let Some(first) = well_known.replace(j) {
                    errors.push(format!(
                        "{rf}.type: WellKnownStatus is already requested by feedbackRules[{first}]"
                    ));
                }
            }
            Ok(FeedbackRuleType::JsonPaths) => {
                if r.json_paths.is_empty() {
                    errors.push(format!(
                        "{rf}.jsonPaths: at least one path is required for type JSONPaths"
                    ));
                }
                for (k, p) in r.json_paths.iter().enumerate() {
                    let pf = format!("{rf}.jsonPaths[{k}]");
                    if p.name.trim().is_empty() {
                        errors.push(format!("{pf}.name: required"));
                    } else if let Some(first) = names.get(p.name.as_str()) {
                        errors.push(format!(
                            "{pf}.name: {:?} is already used by {first}; names must be unique \
                             within a manifest",
                            p.name
                        ));
                    } else {
                        names.insert(&p.name, pf.clone());
                    }
                    if p.path.is_empty() {
                        errors.push(format!("{pf}.path: required"));
                    } else if let Err(e) = crate::jsonpath::parse(&p.path) {
                        errors.push(format!(
                            "{pf}.path: rule {:?} of manifest {manifest}: invalid JSONPath: {e}",
                            p.name
                        ));
                    }
                }
            }
        }
    }
}

/// `deployments.apps default/web` for a manifest config's resource identifier.
fn describe_resource(r: &ResourceIdentifier) -> String {
    let resource = if r.group.is_empty() {
        r.resource.clone()
    } else {
        format!("{}.{}", r.resource, r.group)
    };
    if r.namespace.is_empty() {
        format!("{resource} {}", r.name)
    } else {
        format!("{resource} {}/{}", r.namespace, r.name)
    }
}

/// Validates a work: names, manifests (each an object with apiVersion, kind and name; no
/// duplicates; total size within [`MAX_MANIFESTS_BYTES`]), update strategies, feedback rule
/// types, delete options. Returns every problem, each naming its field.
pub fn validate(work: &ManifestWork) -> Vec<String> {
    checks(work, Some(MAX_MANIFESTS_BYTES))
}

/// [`validate`] without the limit on the manifests' total size: for manifests that are split
/// into works of at most [`MAX_MANIFESTS_BYTES`] each afterwards (an add-on's agent works,
/// [`crate::addon::render`]).
pub fn validate_unsized(work: &ManifestWork) -> Vec<String> {
    checks(work, None)
}

fn checks(work: &ManifestWork, limit: Option<usize>) -> Vec<String> {
    let mut errors = Vec::new();
    let no_meta = ObjectMeta::default();
    let meta = work.metadata.as_ref().unwrap_or(&no_meta);
    if let Err(e) = crate::names::validate_dns1123_label("metadata.namespace", &meta.namespace) {
        errors.push(format!(
            "{e} (the namespace of a ManifestWork is its cluster's name)"
        ));
    }
    if let Err(e) = crate::names::validate_dns1123_subdomain("metadata.name", &meta.name) {
        errors.push(e.to_string());
    }
    let no_spec = ManifestWorkSpec::default();
    let spec = work.spec.as_ref().unwrap_or(&no_spec);
    let manifests = spec
        .workload
        .as_ref()
        .map(|w| w.manifests.as_slice())
        .unwrap_or_default();
    if manifests.is_empty() {
        errors.push("spec.workload.manifests: at least one manifest is required".into());
    }
    let total: usize = manifests.iter().map(|m| m.raw.len()).sum();
    if let Some(limit) = limit
        && total > limit
    {
        errors.push(format!(
            "spec.workload.manifests: {total} bytes in total, over the {limit}-byte limit; split the work"
        ));
    }
    let mut seen: HashMap<ManifestId, usize> = HashMap::new();
    for (i, m) in manifests.iter().enumerate() {
        let field = format!("spec.workload.manifests[{i}]");
        match read_manifest_id(&m.raw) {
            Ok(id) => match seen.entry(id) {
                std::collections::hash_map::Entry::Occupied(first) => errors.push(format!(
                    "{field}: duplicate resource {} (also manifests[{}])",
                    first.key().describe(),
                    first.get()
                )),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(i);
                }
            },
            Err(ManifestIdError::Json(e)) => errors.push(format!("{field}: not valid JSON: {e}")),
            Err(ManifestIdError::Id(e)) => errors.push(format!("{field}.{e}")),
        }
    }
    for (i, c) in spec.manifest_configs.iter().enumerate() {
        let field = format!("spec.manifestConfigs[{i}]");
        let rid = c.resource_identifier.clone().unwrap_or_default();
        if rid.resource.is_empty() {
            errors.push(format!("{field}.resourceIdentifier.resource: required"));
        }
        if rid.name.is_empty() {
            errors.push(format!("{field}.resourceIdentifier.name: required"));
        }
        if let Some(us) = &c.update_strategy
            && !UPDATE_STRATEGIES.contains(&us.r#type.as_str())
        {
            errors.push(format!(
                "{field}.updateStrategy.type: {:?} is not one of {}",
                us.r#type,
                UPDATE_STRATEGIES.join(", ")
            ));
        }
        validate_feedback_rules(&field, &rid, &c.feedback_rules, &mut errors);
        validate_condition_rules(&field, &c.condition_rules, &mut errors);
        if let Some(ssa) = c
            .update_strategy
            .as_ref()
            .and_then(|u| u.server_side_apply.as_ref())
        {
            validate_ignore_fields(&field, &ssa.ignore_fields, &mut errors);
        }
        if !["", "Poll", "Watch"].contains(&c.feedback_scrape_type.as_str()) {
            errors.push(format!(
                "{field}.feedbackScrapeType: {:?} is not one of Poll, Watch",
                c.feedback_scrape_type
            ));
        }
    }
    if let Some(d) = &spec.delete_option {
        if !d.propagation_policy.is_empty()
            && !PROPAGATION_POLICIES.contains(&d.propagation_policy.as_str())
        {
            errors.push(format!(
                "spec.deleteOption.propagationPolicy: {:?} is not one of {}",
                d.propagation_policy,
                PROPAGATION_POLICIES.join(", ")
            ));
        }
        if let Some(so) = &d.selectively_orphans {
            for (i, r) in so.orphaning_rules.iter().enumerate() {
                if r.resource.is_empty() || r.name.is_empty() {
                    errors.push(format!(
                        "spec.deleteOption.selectivelyOrphans.orphaningRules[{i}]: resource and name are required"
                    ));
                }
            }
        }
        if d.ttl_seconds_after_finished.is_some_and(|t| t < 0) {
            errors.push("spec.deleteOption.ttlSecondsAfterFinished: must not be negative".into());
        }
    }
    if let Some(executor) = &spec.executor {
        validate_executor(executor, &mut errors);
    }
    errors
}

/// Condition rule types (OCM's enum).
pub const CONDITION_RULE_TYPES: [&str; 2] = ["WellKnownConditions", "CEL"];

/// OCM's schema for `conditionRules`: a condition is required and unique per manifest (the
/// list's map key), the type is an enum, a CEL rule has expressions. Whether the expressions
/// compile is the agent's to report, as a condition with reason `ConditionRuleExpressionError`,
/// as OCM does.
fn validate_condition_rules(
    field: &str,
    rules: &[crate::v1::ConditionRule],
    errors: &mut Vec<String>,
) {
    let mut seen = std::collections::HashSet::new();
    for (j, r) in rules.iter().enumerate() {
        let at = format!("{field}.conditionRules[{j}]");
        if r.condition.is_empty() {
            errors.push(format!("{at}.condition: required"));
        } else if !seen.insert(r.condition.as_str()) {
            errors.push(format!(
                "{at}.condition: {:?} appears twice in this manifest's rules",
                r.condition
            ));
        }
        if !CONDITION_RULE_TYPES.contains(&r.r#type.as_str()) {
            errors.push(format!(
                "{at}.type: {:?} is not one of {}",
                r.r#type,
                CONDITION_RULE_TYPES.join(", ")
            ));
        }
        if r.r#type == "CEL" && r.cel_expressions.is_empty() {
            errors.push(format!(
                "{at}.celExpressions: a CEL rule needs at least one expression"
            ));
        }
    }
}

/// `ignoreFields` conditions (OCM's enum).
pub const IGNORE_CONDITIONS: [&str; 2] = ["OnSpokePresent", "OnSpokeChange"];

/// The field path (segments) an ignoreFields entry names: `.spec.replicas` or
/// `/spec/replicas` (RFC 6901, `~1` for `/` and `~0` for `~`).
pub fn ignore_path(entry: &str) -> Result<Vec<String>, String> {
    let segments: Vec<String> = if let Some(rest) = entry.strip_prefix('/') {
        rest.split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect()
    } else if let Some(rest) = entry.strip_prefix('.') {
        rest.split('.').map(str::to_string).collect()
    } else {
        return Err(format!(
            "{entry:?} is neither a field path (.spec.replicas) nor a JSON pointer (/spec/replicas)"
        ));
    };
    if segments
        .iter()
        .any(|s| s.is_empty() || s.contains(['[', ']', '*', '?', '@']))
    {
        return Err(format!(
            "{entry:?}: only plain field paths are served (no filters, wildcards or list indexes)"
        ));
    }
    Ok(segments)
}

fn validate_ignore_fields(field: &str, rules: &[crate::v1::IgnoreField], errors: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    for (j, r) in rules.iter().enumerate() {
        let at = format!("{field}.updateStrategy.serverSideApply.ignoreFields[{j}]");
        let condition = if r.condition.is_empty() {
            "OnSpokePresent"
        } else {
            r.condition.as_str()
        };
        if !IGNORE_CONDITIONS.contains(&condition) {
            errors.push(format!(
                "{at}.condition: {:?} is not one of {}",
                r.condition,
                IGNORE_CONDITIONS.join(", ")
            ));
        } else if !seen.insert(condition) {
            errors.push(format!("{at}.condition: {condition:?} appears twice"));
        }
        for (k, p) in r.json_paths.iter().enumerate() {
            if let Err(e) = ignore_path(p) {
                errors.push(format!("{at}.jsonPaths[{k}]: {e}"));
            }
        }
        for (k, p) in r.json_pointers.iter().enumerate() {
            if let Err(e) = ignore_path(p).and_then(|s| {
                if p.starts_with('/') {
                    Ok(s)
                } else {
                    Err(format!("{p:?} is not a JSON pointer"))
                }
            }) {
                errors.push(format!("{at}.jsonPointers[{k}]: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests;
