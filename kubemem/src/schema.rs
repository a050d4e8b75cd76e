//! Strict field validation of the built-in kinds (pure): which fields of an object its kind does
//! not define, as an API server asked for `fieldValidation=Strict` names them, and the texts it
//! answers with.
//!
//! The field trees are the Kubernetes API's own types as `k8s-openapi` generates them from the
//! API server's OpenAPI document (one Kubernetes release, the workspace's `v1_30`): an object
//! is decoded into its kind's type and encoded again, and every field the round trip dropped is
//! unknown — what the API server's strict decoder reports, at the same paths
//! (`spec.template.spec.containers[0].imagePullPolice`). Nothing is hand-written, so a field
//! is known exactly when Kubernetes 1.30 defines it. Kinds without a type here (CRDs, the beta
//! versions 1.30 no longer has, kinds outside [`crate::resources`]' table) are not validated:
//! [`unknown_fields`] answers `None`, as for an object that does not decode as its kind at all
//! (a string where a number goes), which the API server refuses for reasons other than
//! strictness.
//!
//! Fields are listed depth first in key order: the order of the JSON every Go client (kubectl,
//! client-go's unstructured objects) and this crate's clients send, in which the API server
//! reports them.

use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use serde::Deserialize;
use serde_json::Value;

/// The paths of the fields of `object` that the built-in kind `kind` of `api_version` does not
/// define (empty: none); `None` when there is no schema for that kind or the object does not
/// decode as one.
pub fn unknown_fields(api_version: &str, kind: &str, object: &Value) -> Option<Vec<String>> {
    let kept = round_trip(api_version, kind, object)?;
    let mut out = Vec::new();
    dropped(object, &kept, "", &mut out);
    Some(out)
}

/// Decodes `object` into the type of `kind` in `api_version` and encodes it again.
fn round_trip(api_version: &str, kind: &str, object: &Value) -> Option<Value> {
    fn typed<'a, T: Deserialize<'a> + serde::Serialize>(object: &'a Value) -> Option<Value> {
        T::deserialize(object)
            .ok()
            .and_then(|t| serde_json::to_value(t).ok())
    }
    use api::{apps, autoscaling, batch, coordination, core, discovery, events, networking};
    use api::{policy, rbac};
    Some(match (api_version, kind) {
        ("v1", "Namespace") => typed::<core::v1::Namespace>(object)?,
        ("v1", "Node") => typed::<core::v1::Node>(object)?,
        ("v1", "ConfigMap") => typed::<core::v1::ConfigMap>(object)?,
        ("v1", "Secret") => typed::<core::v1::Secret>(object)?,
        ("v1", "Service") => typed::<core::v1::Service>(object)?,
        ("v1", "ServiceAccount") => typed::<core::v1::ServiceAccount>(object)?,
        ("v1", "Pod") => typed::<core::v1::Pod>(object)?,
        ("v1", "PersistentVolumeClaim") => typed::<core::v1::PersistentVolumeClaim>(object)?,
        ("v1", "PersistentVolume") => typed::<core::v1::PersistentVolume>(object)?,
        ("v1", "LimitRange") => typed::<core::v1::LimitRange>(object)?,
        ("v1", "ResourceQuota") => typed::<core::v1::ResourceQuota>(object)?,
        ("v1", "Endpoints") => typed::<core::v1::Endpoints>(object)?,
        ("v1", "Event") => typed::<core::v1::Event>(object)?,
        ("apps/v1", "Deployment") => typed::<apps::v1::Deployment>(object)?,
        ("apps/v1", "StatefulSet") => typed::<apps::v1::StatefulSet>(object)?,
        ("apps/v1", "DaemonSet") => typed::<apps::v1::DaemonSet>(object)?,
        ("apps/v1", "ReplicaSet") => typed::<apps::v1::ReplicaSet>(object)?,
        ("batch/v1", "Job") => typed::<batch::v1::Job>(object)?,
        ("batch/v1", "CronJob") => typed::<batch::v1::CronJob>(object)?,
        ("coordination.k8s.io/v1", "Lease") => typed::<coordination::v1::Lease>(object)?,
        ("rbac.authorization.k8s.io/v1", "Role") => typed::<rbac::v1::Role>(object)?,
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => typed::<rbac::v1::RoleBinding>(object)?,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => typed::<rbac::v1::ClusterRole>(object)?,
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            typed::<rbac::v1::ClusterRoleBinding>(object)?
        }
        ("networking.k8s.io/v1", "Ingress") => typed::<networking::v1::Ingress>(object)?,
        ("networking.k8s.io/v1", "NetworkPolicy") => {
            typed::<networking::v1::NetworkPolicy>(object)?
        }
        ("policy/v1", "PodDisruptionBudget") => typed::<policy::v1::PodDisruptionBudget>(object)?,
        ("autoscaling/v1", "HorizontalPodAutoscaler") => {
            typed::<autoscaling::v1::HorizontalPodAutoscaler>(object)?
        }
        ("autoscaling/v2", "HorizontalPodAutoscaler") => {
            typed::<autoscaling::v2::HorizontalPodAutoscaler>(object)?
        }
        ("discovery.k8s.io/v1", "EndpointSlice") => typed::<discovery::v1::EndpointSlice>(object)?,
        ("events.k8s.io/v1", "Event") => typed::<events::v1::Event>(object)?,
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            typed::<apiextensions::v1::CustomResourceDefinition>(object)?
        }
        _ => return None,
    })
}

/// Collects the paths under `path` of the fields of `sent` that `kept` lacks. A field sent as
/// `null` is no field (the decoder leaves it unset, known or not).
fn dropped(sent: &Value, kept: &Value, path: &str, out: &mut Vec<String>) {
    match (sent, kept) {
        (Value::Object(sent), Value::Object(kept)) => {
            for (key, value) in sent {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match kept.get(key) {
                    Some(k) => dropped(value, k, &at, out),
                    None if value.is_null() => {}
                    None => out.push(at),
                }
            }
        }
        (Value::Array(sent), Value::Array(kept)) => {
            for (i, (value, k)) in sent.iter().zip(kept).enumerate() {
                dropped(value, k, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// `strict decoding error: unknown field "spec.replcas", unknown field "…"`: the part of the API
/// server's refusal that names the fields (what OCM looks for in it).
pub fn strict_decoding_error(fields: &[String]) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    format!("strict decoding error: {}", fields.join(", "))
}

/// The API server's refusal of a create or update whose body has `fields` its kind does not
/// define (400 BadRequest): `Deployment in version "v1" cannot be handled as a Deployment:
/// strict decoding error: unknown field "spec.replcas"`.
pub fn refused_body(kind: &str, version: &str, fields: &[String]) -> String {
    format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: {}",
        strict_decoding_error(fields)
    )
}

/// The API server's refusal of a patch (422 Invalid) that leaves `fields` its kind does not
/// define: ` "" is invalid: patch: Invalid value: "map[spec:map[replcas:3]]": strict decoding
/// error: unknown field "spec.replcas"` — the patch printed as Go prints the map it decoded.
pub fn refused_patch(patch: &Value, fields: &[String]) -> String {
    format!(
        " \"\" is invalid: patch: Invalid value: {:?}: {}",
        go_value(patch),
        strict_decoding_error(fields)
    )
}

/// A JSON value as Go's `%+v` prints what `encoding/json` decoded it into (maps sorted by key,
/// integral numbers as integers, as Kubernetes' JSON decoding keeps them).
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) => go_float(f),
            (None, None) => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_value(v)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

/// A float as Go's `%v` prints it: the shortest form, with an exponent (`1e+06`, `1e-05`) below
/// 10⁻⁴ and from 10⁶ on.
fn go_float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return format!("{f}");
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let s = format!("{f:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!(
        "{mantissa}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

#[cfg(test)]
mod tests;
