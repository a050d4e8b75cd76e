//! What a request's path names, and the identity of a written object (pure): the non-resource
//! documents (`/version`, health, discovery, OpenAPI) and resource paths — group, version,
//! resource, namespace, name, subresource — checked against the resources served; and the
//! name, namespace, kind and `apiVersion` a written object takes from its path.

use crate::resources::Resource;
use crate::status::ApiError;
use serde_json::{Value, json};

/// What a resource path names.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The resource.
    pub resource: Resource,
    /// The namespace (`""`: cluster-scoped, or every namespace for a collection).
    pub namespace: String,
    /// The object's name (`""`: the collection).
    pub name: String,
    /// `status`, `scale`, `log`, … (`""`: the object itself).
    pub subresource: String,
}

impl Target {
    /// The same resource's object `name` in `namespace` (the namespace only when namespaced).
    pub fn named(&self, name: &str, namespace: &str) -> Self {
        Self {
            resource: self.resource.clone(),
            namespace: if self.resource.namespaced {
                namespace.to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
            subresource: self.subresource.clone(),
        }
    }

    /// A 404 of the object `name` (`deployments.apps "web" not found`).
    pub fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.resource, name)
    }
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/readyz`, `/livez`.
    Health,
    /// `/api`: the legacy API's versions.
    Api,
    /// `/apis`: the groups.
    Groups,
    /// `/api/v1` or `/apis/<group>/<version>`: one group version's resources.
    Discovery(String),
    /// `/openapi/v3`.
    OpenApiRoot,
    /// `/openapi/v3/<path>`.
    OpenApi(String),
    /// A resource path.
    Resource(Target),
    /// Nothing served here: the 404's message.
    Unknown(String),
}

/// Where the path `segs` goes, with `resources` served.
pub fn route(segs: &[&str], resources: &[Resource]) -> Route {
    match segs {
        ["version"] => Route::Version,
        ["healthz" | "readyz" | "livez"] => Route::Health,
        ["api"] => Route::Api,
        ["apis"] => Route::Groups,
        ["openapi", "v3"] => Route::OpenApiRoot,
        ["openapi", "v3", rest @ ..] => Route::OpenApi(rest.join("/")),
        ["api", version] => Route::Discovery((*version).to_string()),
        ["apis", group, version] => Route::Discovery(format!("{group}/{version}")),
        _ => resource_route(segs, resources),
    }
}

fn resource_route(segs: &[&str], resources: &[Resource]) -> Route {
    let unknown = |what: String| {
        Route::Unknown(format!(
            "the server could not find the requested resource ({what})"
        ))
    };
    let (group, version, rest) = match segs {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return unknown(format!("/{}", segs.join("/"))),
    };
    // `/api/v1/namespaces/<name>[/status]` is the Namespace object itself.
    let (namespace, rest): (&str, &[&str]) = match rest {
        ["namespaces", _] | ["namespaces", _, "status" | "finalize"] => ("", rest),
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (*ns, tail),
        _ => ("", rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, "", ""),
        [plural, name] => (*plural, *name, ""),
        [plural, name, sub] => (*plural, *name, *sub),
        _ => return unknown(format!("/{}", segs.join("/"))),
    };
    let Some(resource) = resources
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
    else {
        return unknown(format!("{plural} in {group}/{version}"));
    };
    if !resource.namespaced && !namespace.is_empty() {
        return unknown(format!("/{}", segs.join("/")));
    }
    Route::Resource(Target {
        resource: resource.clone(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        subresource: subresource.to_string(),
    })
}

/// Checks that a written object's identity matches its path (`name`: the path's, `""` for a
/// create), filling what the path implies: kind, `apiVersion`, name (a `generateName` prefix
/// and five random characters when there is none), and for a namespaced resource the
/// namespace (`default` when neither names one). Returns the name and namespace.
pub fn identity(
    target: &Target,
    object: &mut Value,
    name: &str,
) -> Result<(String, String), ApiError> {
    let bad = |m: String| ApiError::bad_request(m);
    if !object.is_object() {
        return Err(bad("the request body must be an object".into()));
    }
    let r = &target.resource;
    if object["kind"].as_str().is_some_and(|k| k != r.kind) {
        return Err(bad(format!(
            "the object's kind {} does not match the path's {}",
            object["kind"], r.kind
        )));
    }
    object["kind"] = Value::String(r.kind.clone());
    object["apiVersion"] = Value::String(r.api_version());
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    let body_name = object["metadata"]["name"].as_str().unwrap_or_default();
    let name = match (name, body_name) {
        ("", "") => {
            let prefix = object["metadata"]["generateName"]
                .as_str()
                .unwrap_or_default();
            if prefix.is_empty() {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!(
                        "{} is invalid: metadata.name: Required value: name or generateName is required",
                        r.kind
                    ),
                ));
            }
            format!(
                "{prefix}{}",
                &uuid::Uuid::new_v4().simple().to_string()[..5]
            )
        }
        ("", n) => n.to_string(),
        (p, "") => p.to_string(),
        (p, n) if p == n => p.to_string(),
        (p, n) => {
            return Err(bad(format!(
                "the name of the object ({n}) does not match the name on the URL ({p})"
            )));
        }
    };
    object["metadata"]["name"] = Value::String(name.clone());
    if !r.namespaced {
        if let Some(m) = object["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        return Ok((name, String::new()));
    }
    let body_ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let ns = match (target.namespace.as_str(), body_ns) {
        ("", "") => "default".to_string(),
        ("", n) => n.to_string(),
        (p, "") => p.to_string(),
        (p, n) if p == n => p.to_string(),
        (p, n) => {
            return Err(bad(format!(
                "the namespace of the object ({n}) does not match the namespace on the request ({p})"
            )));
        }
    };
    object["metadata"]["namespace"] = Value::String(ns.clone());
    Ok((name, ns))
}
