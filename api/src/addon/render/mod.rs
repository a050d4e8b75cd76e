//! An AddOnTemplate, with its variables and AddOnDeploymentConfig, made into the ManifestWork a
//! cluster gets (OCM's template agent, `pkg/addon/templateagent/{values,decorator,template_agent}.go`,
//! and the addon-framework's work builder, `agentdeploy/utils.go`).
//!
//! **Variables** ([`variables`]), lowest to highest precedence: `HUB_KUBECONFIG`
//! (`/managed/hub-kubeconfig/kubeconfig`, only when the template has `registration`), the
//! AddOnDeploymentConfig's `customizedVariables`, then the built-ins `CLUSTER_NAME`,
//! `INSTALL_NAMESPACE` and Flotilla's `HUB_URL` (when the hub knows its URL). Every `{{NAME}}` in a
//! manifest's JSON text is replaced (the tag text is taken verbatim: `{{ NAME }}` names
//! ` NAME `), then the text must parse as JSON.
//!
//! **Decorators** (`decorate.rs`), on every container of each `apps` Deployment and DaemonSet,
//! in OCM's order, then the namespace decorator on every object.
//!
//! **The works**: in the cluster's namespace, labelled [`ADDON_NAME_LABEL`], annotated
//! [`CONFIG_SPEC_HASH_ANNOTATION`] with the configs' spec hashes (a JSON object with sorted keys,
//! as Go writes it; no annotation without configs, as OCM), with the template's
//! `manifestConfigs` and `executor`. Jobs and Pods marked as pre-delete hooks
//! ([`PRE_DELETE_HOOK_ANNOTATION`], [`PRE_DELETE_HOOK_LABEL`]) are left out; [`pre_delete`]
//! renders them into their own work, each with a `WellKnownStatus` feedback rule, as OCM does.
//! Manifests annotated [`DELETION_ORPHAN_ANNOTATION`] make the delete option `SelectivelyOrphan`
//! with one orphaning rule each. With the `WorkStatus` health check ([`crate::addon::health`])
//! every Deployment and DaemonSet gets a `WellKnownStatus` feedback rule (OCM's
//! `WorkloadAvailability` prober does the same). The manifests together must pass
//! [`crate::work::validate`] but for its size limit: they go into `addon-<name>-deploy-0` and,
//! when they are more than [`MAX_MANIFESTS_BYTES`], on into `-deploy-1`, `-deploy-2`, …
//! ([`work_name`]), as OCM's work builder splits them. Each work carries the same labels,
//! annotations and options (OCM sets its options on every work); one manifest larger than a
//! whole work is an error naming it.
//!
//! Deviations from OCM:
//! - An unknown variable is an error naming the manifest and the variable; OCM (fasttemplate)
//!   silently renders it as the empty string. An unclosed `{{` is an error too (OCM panics).
//! - A value substituted inside a JSON string is JSON-escaped (a value with a quote or a
//!   backslash stays one string); OCM pastes it raw and fails to parse, or worse, changes the
//!   object's shape. Outside a string (`"replicas": {{REPLICAS}}`) the value is pasted raw, as
//!   OCM does.
//! - `INSTALL_NAMESPACE` is always defined ([`install_namespace`]); OCM defines it only when an
//!   AddOnDeploymentConfig names `agentInstallNamespace`. `HUB_URL` is Flotilla's.
//! - The ManagedClusterAddOn's `installNamespace` moves the objects when no
//!   AddOnDeploymentConfig names one; OCM ignores it for template add-ons (v1beta1 dropped it).
//! - Without an override the install namespace is that of the template's first Deployment (else
//!   DaemonSet), as OCM reports it in `status.namespace`; the proxy CA ConfigMap goes there, where
//!   OCM puts it in `open-cluster-management-agent-addon`.
//! - Decorators edit the manifest's JSON; OCM round-trips Deployments and DaemonSets through the
//!   typed Go structs, which drops unknown fields and adds empty ones (`creationTimestamp: null`,
//!   `resources: {}`). A Deployment or DaemonSet whose pod template has the wrong shape is an
//!   error; OCM leaves it undecorated.
//! - No hub-kubeconfig or custom-signer secret volumes are mounted: Flotilla add-on agents get
//!   NATS credentials from the cluster agent instead. `HUB_KUBECONFIG` is still defined.
//! - `resourceRequirements` container IDs are matched literally part by part (`*` = any); OCM
//!   compiles each part as a regular expression.
//! - A (Cluster)RoleBinding without `subjects` is left alone; OCM fails the render.
//! - The template's own `deleteOption` and `executor` are kept (OCM's work builder ignores
//!   them); orphaning rules replace the delete option's policy but keep its TTL.
//! - Orphaning rules and feedback identifiers use Flotilla's manifest identity (a namespaced
//!   object without a namespace is in `default`), as the agent matches them.
//! - Hook Jobs also report their `Failed` condition (`JSONPaths`, [`HOOK_JOB_FAILURE_PATHS`]),
//!   so a removal waiting on a failed hook says why.
//! - Generated feedback rules are merged into the template's first `manifestConfigs` entry that
//!   selects the workload (OCM merges only into an identical identifier, and lists its
//!   generated entries first); the template's entries keep their indices.
//! - Manifests are split greedily in manifest order, each work filled up to the limit itself
//!   (the same template renders the same works on any hub, after any history). OCM's work
//!   builder keeps a manifest in the existing work that holds it, puts new ones largest first
//!   into the work with the most room, and fills works to 80 % of its (50 KiB) limit. A manifest
//!   that moves between works is handed over by the hub without being deleted on the way
//!   (`hub/src/addon/rules/works.rs`).
//!
//! [`MAX_MANIFESTS_BYTES`]: crate::work::MAX_MANIFESTS_BYTES
//! [`PRE_DELETE_HOOK_ANNOTATION`]: crate::addon::PRE_DELETE_HOOK_ANNOTATION
//! [`PRE_DELETE_HOOK_LABEL`]: crate::addon::PRE_DELETE_HOOK_LABEL

use crate::addon::health::{self, Mode};
use crate::addon::{
    ADDON_NAME_LABEL, CONFIG_SPEC_HASH_ANNOTATION, DEFAULT_INSTALL_NAMESPACE,
    DELETION_ORPHAN_ANNOTATION, work_name,
};
use crate::v1;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};

mod decorate;
mod hook;
mod split;

pub use decorate::override_image;
use decorate::{decorate_namespace, decorate_pod, proxy_ca_config_map, requirements};
use hook::is_pre_delete_hook;
pub use hook::{HOOK_JOB_FAILURE_PATHS, may_have_pre_delete_hooks, pre_delete};
use split::split;

/// Value of `HUB_KUBECONFIG` (OCM's `hubKubeconfigPath`).
pub const HUB_KUBECONFIG_PATH: &str = "/managed/hub-kubeconfig/kubeconfig";
/// Mount path of the proxy CA bundle ConfigMap.
pub const PROXY_CA_MOUNT_PATH: &str = "/managed/proxy-ca";
/// Key of the CA bundle in that ConfigMap.
pub const PROXY_CA_KEY: &str = "ca-bundle.crt";

/// Everything a render reads.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The add-on's (ClusterManagementAddOn's) name.
    pub addon: &'a str,
    /// The cluster's name.
    pub cluster: &'a str,
    /// The ManagedClusterAddOn's `spec.installNamespace` (`""` = not given).
    pub install_namespace: &'a str,
    /// The AddOnTemplate among the effective configs.
    pub template: &'a v1::AddOnTemplate,
    /// The AddOnDeploymentConfig among the effective configs (OCM takes the first).
    pub config: Option<&'a v1::AddOnDeploymentConfig>,
    /// Flotilla's `HUB_URL` variable (`""` = not defined).
    pub hub_url: &'a str,
    /// [`crate::addon::hash::config_key`] → spec hash of every effective config (goes into the
    /// work's [`CONFIG_SPEC_HASH_ANNOTATION`]).
    pub config_hashes: &'a BTreeMap<String, String>,
    /// Flotilla's hub: put the install namespace first in the agent's works (unless a manifest
    /// is that Namespace) and orphan it when they go (see the module documentation).
    pub ensure_namespace: bool,
}

/// Why a template could not be rendered; each names the template's (or the config's) field.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    /// A `{{NAME}}` tag names no variable.
    #[error(
        "spec.agentSpec.workload.manifests[{manifest}]: unknown variable {{{{{variable}}}}} (defined: {})",
        .defined.join(", ")
    )]
    UnknownVariable {
        /// Index of the manifest in the template.
        manifest: usize,
        /// The tag's text.
        variable: String,
        /// The variables that are defined, sorted.
        defined: Vec<String>,
    },
    /// A `{{` without a closing `}}`.
    #[error(
        "spec.agentSpec.workload.manifests[{manifest}]: \"{{{{\" at byte {offset} has no closing \"}}}}\""
    )]
    UnclosedTag {
        /// Index of the manifest in the template.
        manifest: usize,
        /// Byte offset of the `{{` in the manifest's JSON text.
        offset: usize,
    },
    /// The manifest is not JSON once its variables are substituted.
    #[error(
        "spec.agentSpec.workload.manifests[{manifest}]: not valid JSON after substituting variables: {message}"
    )]
    InvalidJson {
        /// Index of the manifest in the template.
        manifest: usize,
        /// The parser's message.
        message: String,
    },
    /// The manifest has a shape the decorators cannot work on.
    #[error("spec.agentSpec.workload.manifests[{manifest}]{field}: {message}")]
    Manifest {
        /// Index of the manifest in the template.
        manifest: usize,
        /// The field below the manifest (`.spec.template.spec.containers`), or empty.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The AddOnDeploymentConfig cannot be applied (names its field).
    #[error("AddOnDeploymentConfig {config} {message}")]
    Config {
        /// `namespace/name` of the config.
        config: String,
        /// The field and what is wrong.
        message: String,
    },
    /// The template's health-check annotations are wrong.
    #[error("{0}")]
    HealthCheck(String),
    /// The rendered work fails [`crate::work::validate`]; fields renamed to the template's
    /// (`spec.agentSpec.…`).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// One rendered manifest is larger than a whole work may be: the manifests are split into
    /// works, but one manifest cannot be.
    #[error(
        "{field}: {bytes} bytes once rendered, over the {limit}-byte limit of one ManifestWork \
         (an add-on's manifests are split into works of at most that size, but one manifest \
         cannot be split): make it smaller"
    )]
    TooLarge {
        /// The manifest (`spec.agentSpec.workload.manifests[3]`, or what the render injected).
        field: String,
        /// Its size as rendered (JSON).
        bytes: usize,
        /// [`crate::work::MAX_MANIFESTS_BYTES`].
        limit: usize,
    },
}

/// Where a manifest of a rendered work comes from (errors name it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// The template's manifest of this index.
    Template(usize),
    /// The proxy CA bundle ConfigMap the AddOnDeploymentConfig's proxy settings inject.
    ProxyCa,
    /// The install namespace put first ([`Input::ensure_namespace`]).
    Namespace,
}

impl Origin {
    fn field(self) -> String {
        match self {
            Origin::Template(i) => format!("spec.agentSpec.workload.manifests[{i}]"),
            Origin::ProxyCa => "the injected proxy CA bundle ConfigMap".into(),
            Origin::Namespace => "the install Namespace".into(),
        }
    }
}

/// The variables of a render, by name (see the module documentation for their precedence).
pub fn variables(input: &Input) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    if has_registration(input.template) {
        vars.insert(
            "HUB_KUBECONFIG".to_string(),
            HUB_KUBECONFIG_PATH.to_string(),
        );
    }
    for v in config_spec(input)
        .map(|s| s.customized_variables.as_slice())
        .unwrap_or_default()
    {
        vars.insert(v.name.clone(), v.value.clone());
    }
    for (name, value) in builtins(input) {
        vars.insert(name.to_string(), value);
    }
    vars
}

/// Where the add-on agent is installed: the AddOnDeploymentConfig's `agentInstallNamespace`,
/// else the ManagedClusterAddOn's `installNamespace`, else the namespace of the template's first
/// Deployment (else DaemonSet) as written (OCM's `TemplateAgentRegistrationNamespaceFunc`; one
/// that holds a `{{variable}}` does not count), else [`DEFAULT_INSTALL_NAMESPACE`].
pub fn install_namespace(input: &Input) -> String {
    if let Some(ns) = override_namespace(input) {
        return ns.to_string();
    }
    let manifests = agent_spec(input.template)
        .and_then(|s| s.workload.as_ref())
        .map(|w| w.manifests.as_slice())
        .unwrap_or_default();
    let mut daemonset = None;
    for m in manifests {
        let Ok(obj) = serde_json::from_slice::<Value>(&m.raw) else {
            continue;
        };
        let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
        if ns.is_empty() || ns.contains("{{") {
            continue;
        }
        match (group_of(&obj), kind_of(&obj)) {
            ("apps", "Deployment") => return ns.to_string(),
            ("apps", "DaemonSet") if daemonset.is_none() => daemonset = Some(ns.to_string()),
            _ => {}
        }
    }
    daemonset.unwrap_or_else(|| DEFAULT_INSTALL_NAMESPACE.to_string())
}

/// Renders the add-on's agent works (see the module documentation): one work, or more when
/// the manifests are more than one work may carry.
pub fn render(input: &Input) -> Result<Vec<v1::ManifestWork>, RenderError> {
    let (work, origins) = agent_work(input)?;
    check(&work, &origins)?;
    split(work, &origins, input.addon)
}

/// The agent's manifests in one work of any size (named [`work_name`] 0), with where each
/// manifest comes from.
fn agent_work(input: &Input) -> Result<(v1::ManifestWork, Vec<Origin>), RenderError> {
    let mode = health::mode_of(input.template).map_err(RenderError::HealthCheck)?;
    let no_spec = v1::ManifestWorkSpec::default();
    let spec = agent_spec(input.template).unwrap_or(&no_spec);
    let AgentManifests {
        mut manifests,
        mut origins,
        orphans,
    } = agent_manifests(input)?;
    let mut delete_option = delete_option_of(spec, orphans);
    if input.ensure_namespace {
        let namespace = install_namespace(input);
        ensure_namespace(&namespace, &mut manifests, &mut origins, &mut delete_option);
    }
    let mut manifest_configs = spec.manifest_configs.clone();
    if mode == Mode::WorkStatus {
        add_workload_feedback(&mut manifest_configs, &manifests);
    }
    let work = v1::ManifestWork {
        metadata: Some(v1::ObjectMeta {
            name: work_name(input.addon, 0),
            namespace: input.cluster.to_string(),
            labels: HashMap::from([(ADDON_NAME_LABEL.to_string(), input.addon.to_string())]),
            annotations: hash_annotations(input.config_hashes),
            ..Default::default()
        }),
        spec: Some(v1::ManifestWorkSpec {
            workload: Some(v1::ManifestsTemplate { manifests }),
            delete_option,
            manifest_configs,
            executor: spec.executor.clone(),
        }),
        status: None,
        hub: None,
    };
    Ok((work, origins))
}

/// The agent's manifests before they become works.
struct AgentManifests {
    manifests: Vec<v1::Manifest>,
    /// Where each manifest comes from.
    origins: Vec<Origin>,
    /// The orphaning rule of each manifest annotated [`DELETION_ORPHAN_ANNOTATION`].
    orphans: Vec<v1::OrphaningRule>,
}

/// The agent's manifests (pre-delete hooks left out) and the injected proxy CA ConfigMap.
fn agent_manifests(input: &Input) -> Result<AgentManifests, RenderError> {
    let mut out = AgentManifests {
        manifests: Vec::new(),
        origins: Vec::new(),
        orphans: Vec::new(),
    };
    for (i, obj) in rendered_objects(input)?
        .into_iter()
        .filter(|(_, o)| !is_pre_delete_hook(o))
    {
        if has_annotation(&obj, DELETION_ORPHAN_ANNOTATION)
            && let Ok(id) = crate::work::manifest_id(&obj)
        {
            out.orphans.push(v1::OrphaningRule {
                group: id.group.clone(),
                resource: id.resource(),
                namespace: id.namespace.clone(),
                name: id.name.clone(),
            });
        }
        out.manifests.push(to_manifest(&obj));
        out.origins.push(Origin::Template(i));
    }
    if let Some(cm) = proxy_ca_config_map(input) {
        out.manifests.push(to_manifest(&cm));
        out.origins.push(Origin::ProxyCa);
    }
    Ok(out)
}

/// The template's delete option, made `SelectivelyOrphan` with `orphans` when there are any
/// (the template's TTL kept).
fn delete_option_of(
    spec: &v1::ManifestWorkSpec,
    orphans: Vec<v1::OrphaningRule>,
) -> Option<v1::DeleteOption> {
    if orphans.is_empty() {
        return spec.delete_option.clone();
    }
    Some(v1::DeleteOption {
        propagation_policy: "SelectivelyOrphan".into(),
        selectively_orphans: Some(v1::SelectivelyOrphan {
            orphaning_rules: orphans,
        }),
        ttl_seconds_after_finished: spec
            .delete_option
            .as_ref()
            .and_then(|d| d.ttl_seconds_after_finished),
    })
}

/// The [`CONFIG_SPEC_HASH_ANNOTATION`] of the configs' hashes (none without configs, as OCM).
fn hash_annotations(config_hashes: &BTreeMap<String, String>) -> HashMap<String, String> {
    let mut annotations = HashMap::new();
    if !config_hashes.is_empty() {
        let map: Map<String, Value> = config_hashes
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        annotations.insert(
            CONFIG_SPEC_HASH_ANNOTATION.to_string(),
            crate::addon::hash::go_json(&Value::Object(map)),
        );
    }
    annotations
}

/// Puts the install namespace first among the manifests (the agent applies in order), unless
/// one of them is that Namespace, and keeps it when the works go: other add-ons may run there
/// (OCM's registration agent creates it on the spoke and never deletes it).
fn ensure_namespace(
    namespace: &str,
    manifests: &mut Vec<v1::Manifest>,
    origins: &mut Vec<Origin>,
    delete_option: &mut Option<v1::DeleteOption>,
) {
    let has = manifests.iter().any(|m| {
        serde_json::from_slice::<Value>(&m.raw).is_ok_and(|v| {
            v["kind"] == "Namespace"
                && v["apiVersion"] == "v1"
                && v["metadata"]["name"] == namespace
        })
    });
    if !has {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        manifests.insert(0, to_manifest(&ns));
        origins.insert(0, Origin::Namespace);
    }
    let rule = v1::OrphaningRule {
        group: String::new(),
        resource: "namespaces".into(),
        namespace: String::new(),
        name: namespace.to_string(),
    };
    let option = delete_option.get_or_insert_with(Default::default);
    match option.propagation_policy.as_str() {
        "Orphan" => {}
        "" | "Foreground" => {
            option.propagation_policy = "SelectivelyOrphan".into();
            option.selectively_orphans = Some(v1::SelectivelyOrphan {
                orphaning_rules: vec![rule],
            });
        }
        _ => {
            let rules = &mut option
                .selectively_orphans
                .get_or_insert_with(Default::default)
                .orphaning_rules;
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
}

// ---- variables ----

fn agent_spec(template: &v1::AddOnTemplate) -> Option<&v1::ManifestWorkSpec> {
    template.spec.as_ref()?.agent_spec.as_ref()
}

fn has_registration(template: &v1::AddOnTemplate) -> bool {
    template
        .spec
        .as_ref()
        .is_some_and(|s| !s.registration.is_empty())
}

fn config_spec<'a>(input: &Input<'a>) -> Option<&'a v1::AddOnDeploymentConfigSpec> {
    input.config?.spec.as_ref()
}

/// The namespace the ADC or, failing that, the MCA names.
fn override_namespace<'a>(input: &Input<'a>) -> Option<&'a str> {
    config_spec(input)
        .map(|s| s.agent_install_namespace.as_str())
        .filter(|ns| !ns.is_empty())
        .or_else(|| Some(input.install_namespace).filter(|ns| !ns.is_empty()))
}

/// The built-in variables, sorted by name.
fn builtins(input: &Input) -> Vec<(&'static str, String)> {
    let mut b = vec![
        ("CLUSTER_NAME", input.cluster.to_string()),
        ("INSTALL_NAMESPACE", install_namespace(input)),
    ];
    if !input.hub_url.is_empty() {
        b.insert(1, ("HUB_URL", input.hub_url.to_string()));
    }
    b
}

/// The env vars every workload container gets: the default variable, then the built-ins, each
/// with its final value (OCM's `presetValues`).
fn preset_env(input: &Input, vars: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut names: Vec<&str> = Vec::new();
    if has_registration(input.template) {
        names.push("HUB_KUBECONFIG");
    }
    names.push("CLUSTER_NAME");
    if !input.hub_url.is_empty() {
        names.push("HUB_URL");
    }
    names.push("INSTALL_NAMESPACE");
    names
        .into_iter()
        .map(|n| (n.to_string(), vars.get(n).cloned().unwrap_or_default()))
        .collect()
}

/// Replaces every `{{NAME}}` of a manifest's JSON text; values inside a JSON string are
/// escaped for it.
fn substitute(
    manifest: usize,
    text: &str,
    vars: &BTreeMap<String, String>,
) -> Result<String, RenderError> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let (mut pos, mut copied) = (0, 0);
    while pos < bytes.len() {
        if bytes[pos..].starts_with(b"{{") {
            let Some(len) = text[pos + 2..].find("}}") else {
                return Err(RenderError::UnclosedTag {
                    manifest,
                    offset: pos,
                });
            };
            let name = &text[pos + 2..pos + 2 + len];
            let Some(value) = vars.get(name) else {
                return Err(RenderError::UnknownVariable {
                    manifest,
                    variable: name.to_string(),
                    defined: vars.keys().cloned().collect(),
                });
            };
            out.push_str(&text[copied..pos]);
            if in_string {
                crate::addon::hash::escape_into(&mut out, value);
            } else {
                out.push_str(value);
            }
            pos += 2 + len + 2;
            copied = pos;
            escaped = false;
            continue;
        }
        let b = bytes[pos];
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        }
        pos += 1;
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

// ---- rendering and decorating ----

/// Every template manifest substituted, parsed and decorated, with its index.
fn rendered_objects(input: &Input) -> Result<Vec<(usize, Value)>, RenderError> {
    let vars = variables(input);
    let env = preset_env(input, &vars);
    let requirements = requirements(input)?;
    let target = override_namespace(input).map(|_| vars["INSTALL_NAMESPACE"].clone());
    let manifests = agent_spec(input.template)
        .and_then(|s| s.workload.as_ref())
        .map(|w| w.manifests.as_slice())
        .unwrap_or_default();
    let mut objects = Vec::with_capacity(manifests.len());
    for (i, m) in manifests.iter().enumerate() {
        let text = std::str::from_utf8(&m.raw).map_err(|e| RenderError::InvalidJson {
            manifest: i,
            message: format!("not UTF-8: {e}"),
        })?;
        let text = substitute(i, text, &vars)?;
        let mut obj: Value = serde_json::from_str(&text).map_err(|e| RenderError::InvalidJson {
            manifest: i,
            message: e.to_string(),
        })?;
        if !obj.is_object() {
            return Err(RenderError::Manifest {
                manifest: i,
                field: String::new(),
                message: "must be a Kubernetes object (a map)".into(),
            });
        }
        let workload = match (group_of(&obj), kind_of(&obj)) {
            ("apps", "Deployment") => Some("deployments"),
            ("apps", "DaemonSet") => Some("daemonsets"),
            _ => None,
        };
        if let Some(resource) = workload {
            decorate_pod(input, &env, &requirements, resource, &mut obj).map_err(
                |(field, message)| RenderError::Manifest {
                    manifest: i,
                    field,
                    message,
                },
            )?;
        }
        if let Some(ns) = &target {
            decorate_namespace(ns, &mut obj);
        }
        objects.push((i, obj));
    }
    Ok(objects)
}

// ---- the work ----

fn group_of(obj: &Value) -> &str {
    obj["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map(|(g, _)| g)
        .unwrap_or_default()
}

fn kind_of(obj: &Value) -> &str {
    obj["kind"].as_str().unwrap_or_default()
}

fn has_annotation(obj: &Value, key: &str) -> bool {
    obj["metadata"]["annotations"].get(key).is_some()
}

fn to_manifest(obj: &Value) -> v1::Manifest {
    v1::Manifest {
        raw: serde_json::to_vec(obj).expect("a JSON value serializes"),
    }
}

fn well_known_config(
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> v1::ManifestConfigOption {
    v1::ManifestConfigOption {
        resource_identifier: Some(v1::ResourceIdentifier {
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }),
        feedback_rules: vec![well_known_rule()],
        ..Default::default()
    }
}

fn well_known_rule() -> v1::FeedbackRule {
    v1::FeedbackRule {
        r#type: "WellKnownStatus".into(),
        json_paths: vec![],
    }
}

/// Asks for `WellKnownStatus` feedback of every Deployment and DaemonSet (OCM's
/// `WorkloadAvailability` manifest configs), merged into the first template entry that selects
/// the workload.
fn add_workload_feedback(configs: &mut Vec<v1::ManifestConfigOption>, manifests: &[v1::Manifest]) {
    for w in health::workloads_of(manifests) {
        let id = crate::work::ManifestId {
            group: "apps".into(),
            version: String::new(),
            kind: if w.resource == "deployments" {
                "Deployment".into()
            } else {
                "DaemonSet".into()
            },
            namespace: w.namespace.clone(),
            name: w.name.clone(),
        };
        let existing = configs.iter_mut().find(|c| {
            c.resource_identifier
                .as_ref()
                .is_some_and(|r| id.matches(r))
        });
        match existing {
            Some(c) => {
                if !c
                    .feedback_rules
                    .iter()
                    .any(|r| r.r#type == "WellKnownStatus")
                {
                    c.feedback_rules.push(well_known_rule());
                }
            }
            None => configs.push(well_known_config("apps", w.resource, &w.namespace, &w.name)),
        }
    }
}

/// [`crate::work::validate_unsized`] (the size is [`split`]'s) with the fields renamed to the
/// template's.
fn check(work: &v1::ManifestWork, origins: &[Origin]) -> Result<(), RenderError> {
    let errors = crate::work::validate_unsized(work);
    if errors.is_empty() {
        return Ok(());
    }
    Err(RenderError::Invalid(
        errors.iter().map(|e| rename_field(e, origins)).collect(),
    ))
}

fn rename_field(error: &str, origins: &[Origin]) -> String {
    const MANIFESTS: &str = "spec.workload.manifests[";
    if let Some(rest) = error.strip_prefix(MANIFESTS)
        && let Some((index, tail)) = rest.split_once(']')
        && let Ok(k) = index.parse::<usize>()
        && let Some(origin) = origins.get(k)
    {
        return format!("{}{tail}", origin.field());
    }
    match error.strip_prefix("spec.") {
        Some(rest) => format!("spec.agentSpec.{rest}"),
        None => error.to_string(),
    }
}

#[cfg(test)]
mod tests;
