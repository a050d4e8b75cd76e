//! What a proxied request is, from its method, path and query alone (pure): the cluster it is
//! for, and the Kubernetes verb and resource it names — Kubernetes' own `RequestInfo` rules,
//! for access decisions and the audit log.

use std::fmt;
use thiserror::Error;

/// The path prefix of every proxied request: `/clusters/<cluster>/…`.
pub const PREFIX: &str = "/clusters/";

/// A path that is not `/clusters/<cluster>/…`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathError {
    /// Not under `/clusters/`.
    #[error(
        "path {0:?} is not /clusters/<cluster>/…: the hub serves each cluster's API under its name"
    )]
    NotProxied(String),
    /// The path is percent-encoded: the spoke would decode what the hub judged (`%73ecrets`).
    #[error(
        "path {0:?} is percent-encoded: Kubernetes API paths need no escapes, and the hub judges a request by the path the spoke will see"
    )]
    Encoded(String),
    /// The spoke path has an empty, `.` or `..` segment (`/namespaces//secrets`): the API server
    /// keeps empty segments where a filtering parser drops them, so the hub would judge another
    /// request than the spoke serves.
    #[error(
        "path {0:?} has an empty, `.` or `..` segment: Kubernetes API paths have none, and the hub judges a request by the path the spoke will see"
    )]
    Segments(String),
    /// The cluster name is not a valid cluster name.
    #[error("cluster name {name:?} in the path: {reason}")]
    BadCluster {
        /// The name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// Splits `/clusters/<cluster>/<rest>` into the cluster and the spoke path (`/` when empty).
pub fn split(path: &str) -> Result<(&str, &str), PathError> {
    let rest = path
        .strip_prefix(PREFIX)
        .ok_or_else(|| PathError::NotProxied(path.chars().take(200).collect()))?;
    if path.contains('%') {
        return Err(PathError::Encoded(path.chars().take(200).collect()));
    }
    let (cluster, spoke) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    flotilla_api::names::validate_cluster_name(cluster).map_err(|e| PathError::BadCluster {
        name: cluster.chars().take(64).collect(),
        reason: e.to_string(),
    })?;
    if segments(spoke)
        .iter()
        .any(|s| matches!(*s, "" | "." | ".."))
    {
        return Err(PathError::Segments(path.chars().take(200).collect()));
    }
    Ok((cluster, spoke))
}

/// The segments of a spoke path, as Kubernetes splits it: without the leading `/` and one
/// trailing `/`, and with every empty segment kept (`/` has none).
fn segments(path: &str) -> Vec<&str> {
    let path = path.strip_prefix('/').unwrap_or(path);
    let path = path.strip_suffix('/').unwrap_or(path);
    if path.is_empty() {
        Vec::new()
    } else {
        path.split('/').collect()
    }
}

/// The Kubernetes verb of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET with `watch=true` (or the legacy `/watch/` paths).
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// Any other method (OPTIONS, HEAD, CONNECT…).
    Other,
}

impl Verb {
    /// Whether the verb only reads.
    pub fn reads(self) -> bool {
        matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Other => "other",
        })
    }
}

/// What a spoke path names (Kubernetes' `RequestInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The verb.
    pub verb: Verb,
    /// Whether the path names a resource (`/api/…`, `/apis/…` below a version) rather than
    /// discovery, `/version`, `/openapi`, health.
    pub resource_request: bool,
    /// API group (`""` for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace (`""` for cluster-scoped or all namespaces).
    pub namespace: String,
    /// Resource (plural, lower-case).
    pub resource: String,
    /// Subresource (`status`, `scale`, `log`, …).
    pub subresource: String,
    /// Object name.
    pub name: String,
    /// A non-resource request for discovery or health: `/`, `/api`, `/apis`, a group or
    /// version's discovery, `/version`, `/openapi/…`, `/healthz`, `/livez`, `/readyz` (not
    /// `/metrics`, `/logs/…` or `/debug/…`).
    pub discovery: bool,
}

impl RequestInfo {
    /// Parses a spoke path (from `/`) with its method and raw query.
    pub fn parse(method: &http::Method, path: &str, query: &str) -> Self {
        let watch_param = query.split('&').any(|kv| {
            matches!(
                kv.split_once('=').unwrap_or((kv, "")),
                ("watch", "true" | "1")
            )
        });
        let mut info = RequestInfo {
            verb: Verb::Other,
            resource_request: false,
            group: String::new(),
            version: String::new(),
            namespace: String::new(),
            resource: String::new(),
            subresource: String::new(),
            name: String::new(),
            discovery: false,
        };
        // No segment is dropped: `split` refuses paths with empty ones, and were one let
        // through it would stay where the API server sees it.
        let parts = segments(path);
        let rest: &[&str] = match parts.as_slice() {
            ["api", version, rest @ ..] => {
                info.version = (*version).to_string();
                rest
            }
            ["apis", group, version, rest @ ..] => {
                info.group = (*group).to_string();
                info.version = (*version).to_string();
                rest
            }
            _ => {
                info.verb = match *method {
                    http::Method::GET | http::Method::HEAD => Verb::Get,
                    _ => Verb::Other,
                };
                info.discovery = matches!(
                    parts.as_slice(),
                    [] | ["api"]
                        | ["apis"]
                        | ["apis", _]
                        | ["version"]
                        | ["openapi", ..]
                        | ["healthz" | "livez" | "readyz", ..]
                );
                return info;
            }
        };
        let mut rest = rest;
        let mut legacy_watch = false;
        if let ["watch", tail @ ..] = rest {
            legacy_watch = true;
            rest = tail;
        }
        if let ["namespaces", ns, tail @ ..] = rest
            && !tail.is_empty()
        {
            info.namespace = (*ns).to_string();
            rest = tail;
        }
        match rest {
            [] => {
                // /api/v1 or /apis/g/v: discovery of a version.
                info.verb = if *method == http::Method::GET {
                    Verb::Get
                } else {
                    Verb::Other
                };
                info.discovery = !legacy_watch;
                return info;
            }
            [resource] => info.resource = (*resource).to_string(),
            [resource, name] => {
                info.resource = (*resource).to_string();
                info.name = (*name).to_string();
            }
            [resource, name, sub, ..] => {
                info.resource = (*resource).to_string();
                info.name = (*name).to_string();
                info.subresource = (*sub).to_string();
            }
        }
        info.resource_request = true;
        let collection = info.name.is_empty();
        info.verb = match *method {
            http::Method::GET | http::Method::HEAD if legacy_watch || watch_param => Verb::Watch,
            http::Method::GET | http::Method::HEAD if collection => Verb::List,
            http::Method::GET | http::Method::HEAD => Verb::Get,
            http::Method::POST => Verb::Create,
            http::Method::PUT => Verb::Update,
            http::Method::PATCH => Verb::Patch,
            http::Method::DELETE if collection => Verb::DeleteCollection,
            http::Method::DELETE => Verb::Delete,
            _ => Verb::Other,
        };
        // A pod's exec, attach and port-forward are `create` whatever the method (GET for a
        // WebSocket, POST for SPDY), as Kubernetes authorizes them
        // (`AuthorizePodWebsocketUpgradeCreatePermission`): never a read.
        if info.group.is_empty()
            && info.resource == "pods"
            && matches!(info.subresource.as_str(), "exec" | "attach" | "portforward")
        {
            info.verb = Verb::Create;
        }
        info
    }

    /// `group/resource[/subresource]` for logs (`core` for the core group), or the path kind
    /// for non-resource requests.
    pub fn resource_label(&self) -> String {
        if !self.resource_request {
            return "-".into();
        }
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        if self.subresource.is_empty() {
            format!("{group}/{}", self.resource)
        } else {
            format!("{group}/{}/{}", self.resource, self.subresource)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn the_cluster_comes_from_the_first_path_token() {
        assert_eq!(
            split("/clusters/edge-1/api/v1/pods"),
            Ok(("edge-1", "/api/v1/pods"))
        );
        assert_eq!(split("/clusters/edge-1"), Ok(("edge-1", "/")));
        assert!(matches!(split("/api/v1"), Err(PathError::NotProxied(_))));
        assert!(matches!(
            split("/clusters/Bad_Name/api"),
            Err(PathError::BadCluster { .. })
        ));
        assert!(matches!(
            split("/clusters/edge.one/api"),
            Err(PathError::BadCluster { .. })
        ));
        assert!(matches!(
            split("/clusters//api"),
            Err(PathError::BadCluster { .. })
        ));
        assert!(matches!(
            split("/clusters/edge-1/api/v1/namespaces/a/%73ecrets"),
            Err(PathError::Encoded(_))
        ));
    }

    #[test]
    fn empty_dot_and_dot_dot_segments_are_refused() {
        for path in [
            "/clusters/edge-1/api/v1/namespaces//secrets",
            "/clusters/edge-1//api/v1/pods",
            "/clusters/edge-1/api/v1/namespaces/./secrets",
            "/clusters/edge-1/api/v1/namespaces/a/pods/../secrets",
            "/clusters/edge-1/api/v1/pods//",
            "/clusters/edge-1/..",
        ] {
            assert!(
                matches!(split(path), Err(PathError::Segments(_))),
                "{path}: {:?}",
                split(path)
            );
        }
        assert_eq!(split("/clusters/edge-1/"), Ok(("edge-1", "/")));
        assert_eq!(
            split("/clusters/edge-1/api/v1/pods/"),
            Ok(("edge-1", "/api/v1/pods/"))
        );
        // Were one let through, the parse keeps it where the API server does: a list of
        // Secrets, not a get of a namespace.
        let i = RequestInfo::parse(&Method::GET, "/api/v1/namespaces//secrets", "");
        assert_eq!((i.verb, i.resource.as_str()), (Verb::List, "secrets"));
    }

    #[test]
    fn verbs_and_resources_follow_kubernetes_request_info() {
        let p = |m: Method, path: &str, q: &str| RequestInfo::parse(&m, path, q);
        let i = p(Method::GET, "/api/v1/namespaces/ns/pods", "");
        assert_eq!(
            (i.verb, i.namespace.as_str(), i.resource.as_str()),
            (Verb::List, "ns", "pods")
        );
        let i = p(
            Method::GET,
            "/api/v1/namespaces/ns/pods/p1/log",
            "follow=true",
        );
        assert_eq!(
            (i.verb, i.name.as_str(), i.subresource.as_str()),
            (Verb::Get, "p1", "log")
        );
        assert_eq!(i.resource_label(), "core/pods/log");
        let i = p(Method::GET, "/apis/apps/v1/deployments", "watch=true&rv=1");
        assert_eq!((i.verb, i.group.as_str()), (Verb::Watch, "apps"));
        let i = p(Method::GET, "/api/v1/watch/namespaces/ns/configmaps", "");
        assert_eq!((i.verb, i.resource.as_str()), (Verb::Watch, "configmaps"));
        let i = p(
            Method::PATCH,
            "/apis/apps/v1/namespaces/ns/deployments/d",
            "",
        );
        assert_eq!(i.verb, Verb::Patch);
        let i = p(Method::DELETE, "/api/v1/namespaces/ns/configmaps", "");
        assert_eq!(i.verb, Verb::DeleteCollection);
        let i = p(Method::GET, "/api/v1/namespaces/ns", "");
        assert_eq!(
            (i.verb, i.resource.as_str(), i.name.as_str()),
            (Verb::Get, "namespaces", "ns")
        );
        let i = p(Method::POST, "/api/v1/namespaces", "");
        assert_eq!((i.verb, i.resource.as_str()), (Verb::Create, "namespaces"));
        for path in ["/api", "/apis", "/version", "/openapi/v3", "/apis/apps/v1"] {
            let i = p(Method::GET, path, "");
            assert!(!i.resource_request, "{path}");
            assert_eq!(i.verb, Verb::Get, "{path}");
        }
        assert_eq!(p(Method::POST, "/version", "").verb, Verb::Other);
    }
}
