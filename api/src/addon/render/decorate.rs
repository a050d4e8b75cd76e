//! The **decorators**, on every container (not init containers) of each `apps` Deployment and
//! DaemonSet, in OCM's order: the preset variables as env vars (`HUB_KUBECONFIG` first, then the
//! built-ins sorted; customized variables are not added); `nodePlacement` (nodeSelector and
//! tolerations replace the pod's, and — OCM's quirk — only when a nodeSelector was given); image
//! registries (for each mirror whose `source` prefixes the image, that prefix is replaced by the
//! mirror, the last match winning; an empty source keeps only the image's last path segment
//! under the mirror); the proxy (`HTTP_PROXY`/`http_proxy`, `HTTPS_PROXY`/`https_proxy`,
//! `NO_PROXY`/`no_proxy` env vars when set, and with a CA bundle the `CA_BUNDLE_FILE_PATH` env
//! var, a `proxy-ca-bundle` volume and mount, and an injected ConfigMap `<addon>-proxy-ca`);
//! `resourceRequirements` (the last entry whose `<kind>:<name>:<container>` matches, kind
//! `deployments` or `daemonsets`, `*` matching any part, replaces the container's resources).
//! Then the namespace decorator on every object: when the AddOnDeploymentConfig or the
//! ManagedClusterAddOn names an install namespace, each object with a non-empty
//! `metadata.namespace` moves to it (objects without one are left as they are, cluster-scoped
//! or not, as OCM does), a Namespace object is renamed to it, and every subject of a
//! (Cluster)RoleBinding gets it as its namespace.

use super::{
    Input, PROXY_CA_KEY, PROXY_CA_MOUNT_PATH, RenderError, config_spec, install_namespace, kind_of,
};
use crate::v1;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// A field error inside a manifest: (field below the manifest, message).
pub(super) type FieldError = (String, String);

/// One `resourceRequirements` entry, its container ID split.
pub(super) struct Requirement {
    kind: String,
    name: String,
    container: String,
    resources: Value,
}

pub(super) fn requirements(input: &Input) -> Result<Vec<Requirement>, RenderError> {
    let Some(spec) = config_spec(input) else {
        return Ok(Vec::new());
    };
    spec.resource_requirements
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let parts: Vec<&str> = r.container_id.split(':').collect();
            let [kind, name, container] = parts.as_slice() else {
                return Err(RenderError::Config {
                    config: config_key(input),
                    message: format!(
                        "spec.resourceRequirements[{i}].containerID: {:?} is not \
                         <kind>:<name>:<container>",
                        r.container_id
                    ),
                });
            };
            let res = r.resources.clone().unwrap_or_default();
            let mut resources = Map::new();
            if !res.limits.is_empty() {
                resources.insert("limits".into(), string_map(&res.limits));
            }
            if !res.requests.is_empty() {
                resources.insert("requests".into(), string_map(&res.requests));
            }
            Ok(Requirement {
                kind: kind.to_string(),
                name: name.to_string(),
                container: container.to_string(),
                resources: Value::Object(resources),
            })
        })
        .collect()
}

fn config_key(input: &Input) -> String {
    input
        .config
        .and_then(|c| c.metadata.as_ref())
        .map(crate::meta::object_key)
        .unwrap_or_default()
}

fn string_map(m: &HashMap<String, String>) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

fn part_matches(pattern: &str, value: &str) -> bool {
    pattern == "*" || pattern == value
}

/// The pod decorators of a Deployment or DaemonSet (OCM's order).
pub(super) fn decorate_pod(
    input: &Input,
    env: &[(String, String)],
    requirements: &[Requirement],
    resource: &str,
    obj: &mut Value,
) -> Result<(), FieldError> {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let config = config_spec(input);
    let Some(pod) = child_object(obj, &["spec", "template", "spec"])? else {
        return Ok(());
    };
    let field = ".spec.template.spec";

    // Preset variables.
    for_each_container(pod, field, |c, at| append_env(c, at, env))?;

    // Node placement (tolerations only with a nodeSelector, as OCM).
    if let Some(np) = config.and_then(|c| c.node_placement.as_ref())
        && np.has_node_selector
    {
        set_or_remove(pod, "nodeSelector", string_map(&np.node_selector));
        let tolerations: Vec<Value> = np.tolerations.iter().map(toleration).collect();
        set_or_remove(pod, "tolerations", Value::Array(tolerations));
    }

    // Image registries.
    if let Some(registries) = config.map(|c| c.registries.as_slice())
        && !registries.is_empty()
    {
        for_each_container(pod, field, |c, at| {
            if let Some(image) = c.get("image") {
                let Some(image) = image.as_str() else {
                    return Err((format!("{at}.image"), "must be a string".into()));
                };
                let new = override_image(registries, image);
                c.insert("image".into(), Value::String(new));
            }
            Ok(())
        })?;
    }

    // Proxy.
    if let Some(proxy) = config.and_then(|c| c.proxy_config.as_ref()) {
        let mut vars = Vec::new();
        for (upper, lower, value) in [
            ("HTTP_PROXY", "http_proxy", &proxy.http_proxy),
            ("HTTPS_PROXY", "https_proxy", &proxy.https_proxy),
            ("NO_PROXY", "no_proxy", &proxy.no_proxy),
        ] {
            if !value.is_empty() {
                vars.push((upper.to_string(), value.clone()));
                vars.push((lower.to_string(), value.clone()));
            }
        }
        if !vars.is_empty() {
            for_each_container(pod, field, |c, at| append_env(c, at, &vars))?;
            if !proxy.ca_bundle.is_empty() {
                let ca = [(
                    "CA_BUNDLE_FILE_PATH".to_string(),
                    format!("{PROXY_CA_MOUNT_PATH}/{PROXY_CA_KEY}"),
                )];
                let mount = json!({"name": "proxy-ca-bundle", "mountPath": PROXY_CA_MOUNT_PATH});
                for_each_container(pod, field, |c, at| {
                    append_env(c, at, &ca)?;
                    push_to_list(c, "volumeMounts", mount.clone())
                        .map_err(|m| (format!("{at}.volumeMounts"), m))
                })?;
                let volume = json!({
                    "name": "proxy-ca-bundle",
                    "configMap": {"name": proxy_ca_name(input.addon)},
                });
                push_to_list(pod, "volumes", volume)
                    .map_err(|m| (format!("{field}.volumes"), m))?;
            }
        }
    }

    // Resource requirements: the last matching entry wins.
    if !requirements.is_empty() {
        for_each_container(pod, field, |c, _| {
            let container = c.get("name").and_then(Value::as_str).unwrap_or_default();
            if let Some(r) = requirements.iter().rev().find(|r| {
                part_matches(&r.kind, resource)
                    && part_matches(&r.name, &name)
                    && part_matches(&r.container, container)
            }) {
                c.insert("resources".into(), r.resources.clone());
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// The object at `path` below `obj`; `None` when some step is missing (or null).
fn child_object<'v>(
    obj: &'v mut Value,
    path: &[&str],
) -> Result<Option<&'v mut Map<String, Value>>, FieldError> {
    let mut cur = obj;
    let mut at = String::new();
    for key in path {
        at.push('.');
        at.push_str(key);
        let next = match cur.get_mut(*key) {
            None | Some(Value::Null) => return Ok(None),
            Some(v) if v.is_object() => v,
            Some(_) => return Err((at, "must be an object".into())),
        };
        cur = next;
    }
    Ok(cur.as_object_mut())
}

/// Calls `f` on every container (`containers[]`, not `initContainers`) of a pod spec.
fn for_each_container(
    pod: &mut Map<String, Value>,
    field: &str,
    mut f: impl FnMut(&mut Map<String, Value>, &str) -> Result<(), FieldError>,
) -> Result<(), FieldError> {
    let Some(containers) = pod.get_mut("containers") else {
        return Ok(());
    };
    if containers.is_null() {
        return Ok(());
    }
    let Value::Array(list) = containers else {
        return Err((format!("{field}.containers"), "must be a list".into()));
    };
    for (j, c) in list.iter_mut().enumerate() {
        let at = format!("{field}.containers[{j}]");
        let Value::Object(c) = c else {
            return Err((at, "must be an object".into()));
        };
        f(c, &at)?;
    }
    Ok(())
}

fn append_env(
    c: &mut Map<String, Value>,
    at: &str,
    vars: &[(String, String)],
) -> Result<(), FieldError> {
    for (name, value) in vars {
        push_to_list(c, "env", json!({"name": name, "value": value}))
            .map_err(|m| (format!("{at}.env"), m))?;
    }
    Ok(())
}

fn push_to_list(map: &mut Map<String, Value>, key: &str, item: Value) -> Result<(), String> {
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    match slot {
        Value::Array(list) => {
            list.push(item);
            Ok(())
        }
        _ => Err("must be a list".into()),
    }
}

/// Sets `key`, or removes it when the value is empty (Go's `omitempty`).
fn set_or_remove(map: &mut Map<String, Value>, key: &str, value: Value) {
    let empty = match &value {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    if empty {
        map.remove(key);
    } else {
        map.insert(key.to_string(), value);
    }
}

fn toleration(t: &v1::Toleration) -> Value {
    let mut m = Map::new();
    for (k, v) in [
        ("key", &t.key),
        ("operator", &t.operator),
        ("value", &t.value),
        ("effect", &t.effect),
    ] {
        if !v.is_empty() {
            m.insert(k.into(), Value::String(v.clone()));
        }
    }
    if let Some(s) = t.toleration_seconds {
        m.insert("tolerationSeconds".into(), json!(s));
    }
    Value::Object(m)
}

/// OCM's `OverrideImage`: every mirror that changes the image is applied to the original image,
/// the last one winning.
pub fn override_image(registries: &[v1::ImageMirror], image: &str) -> String {
    let mut result = image.to_string();
    for r in registries {
        let name = override_image_directly(&r.source, &r.mirror, image);
        if name != image {
            result = name;
        }
    }
    result
}

/// OCM's `overrideImageDirectly`.
fn override_image_directly(source: &str, mirror: &str, image: &str) -> String {
    let source = source.strip_suffix('/').unwrap_or(source);
    let mirror = mirror.strip_suffix('/').unwrap_or(mirror);
    if source.is_empty() {
        let last = image.rsplit('/').next().unwrap_or(image);
        return if mirror.is_empty() {
            last.to_string()
        } else {
            format!("{mirror}/{last}")
        };
    }
    match image.strip_prefix(source) {
        Some(rest) => format!("{mirror}{rest}"),
        None => image.to_string(),
    }
}

/// OCM's namespace decorator.
pub(super) fn decorate_namespace(ns: &str, obj: &mut Value) {
    let kind = kind_of(obj).to_string();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if meta
            .get("namespace")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty())
        {
            meta.insert("namespace".into(), Value::String(ns.to_string()));
        }
        if kind == "Namespace" {
            meta.insert("name".into(), Value::String(ns.to_string()));
        }
    }
    if kind == "ClusterRoleBinding" || kind == "RoleBinding" {
        match obj.get_mut("subjects") {
            Some(Value::Array(subjects)) => {
                for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
                    s.insert("namespace".into(), Value::String(ns.to_string()));
                }
            }
            Some(Value::Object(s)) => {
                s.insert("namespace".into(), Value::String(ns.to_string()));
            }
            _ => {}
        }
    }
}

fn proxy_ca_name(addon: &str) -> String {
    format!("{addon}-proxy-ca")
}

/// The ConfigMap holding the proxy CA bundle, when the config has one (OCM's proxy injector),
/// in the install namespace.
pub(super) fn proxy_ca_config_map(input: &Input) -> Option<Value> {
    let proxy = config_spec(input)?.proxy_config.as_ref()?;
    if proxy.ca_bundle.is_empty() {
        return None;
    }
    Some(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": proxy_ca_name(input.addon), "namespace": install_namespace(input)},
        "data": {PROXY_CA_KEY: String::from_utf8_lossy(&proxy.ca_bundle)},
    }))
}
