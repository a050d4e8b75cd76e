//! What every gRPC call passes before it reaches a service: names checked by their rules (a
//! name that cannot exist is `INVALID_ARGUMENT` naming the rule, never `NOT_FOUND`), the
//! caller's grants checked on the object it acts on ([`allow`], issue 48: `PERMISSION_DENIED`
//! naming every missing grant), and a count of every rejected call by method and status code,
//! as rejected NATS input is counted.

use super::auth::Identity;
use crate::grants::{self, Decision, Grant, SetIndexView, Target, Verb};
use crate::metrics::Metrics;
use flotilla_api::names;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::Status;

/// A cluster name (a DNS-1123 label); empty only where `optional` (a list filter).
pub fn cluster(field: &str, name: &str, optional: bool) -> Result<(), Status> {
    if optional && name.is_empty() {
        return Ok(());
    }
    names::validate_dns1123_label(field, name).map_err(|e| Status::invalid_argument(e.to_string()))
}

/// A namespace (a DNS-1123 label); empty only where `optional` (a list filter).
pub fn namespace(field: &str, name: &str, optional: bool) -> Result<(), Status> {
    cluster(field, name, optional)
}

/// An object name (a DNS-1123 subdomain: works, placements, sets, scores).
pub fn object(field: &str, name: &str) -> Result<(), Status> {
    names::validate_dns1123_subdomain(field, name)
        .map_err(|e| Status::invalid_argument(e.to_string()))
}

/// Whether `caller` may do `verb` to `target` under its grants, with `index` saying which sets
/// each cluster is in: the grant that allows it (`None` on an open hub, where every caller
/// may), or `PERMISSION_DENIED` naming the caller, `action` ("apply ManifestWork c1/web") and
/// every grant it lacks — the same words the CLI prints.
pub fn allow(
    caller: Option<&Identity>,
    index: &SetIndexView,
    verb: Verb,
    target: Target<'_>,
    action: &str,
) -> Result<Option<Grant>, Status> {
    let Some(caller) = caller else {
        return Ok(None);
    };
    match grants::decide(&caller.scope, index, verb, &target) {
        Decision::Allowed(grant) => Ok(Some(grant)),
        Decision::Missing(missing) => {
            tracing::info!(caller = %caller.name(), action, %missing, "refused by the grants");
            Err(Status::permission_denied(
                missing.refusal(&caller.principal, action),
            ))
        }
    }
}

/// A tower layer counting calls answered with a non-OK status in
/// `flotilla_hub_api_rejected_total{method, code}`.
#[derive(Clone)]
pub struct CountRejections {
    metrics: Arc<Metrics>,
}

impl CountRejections {
    /// The layer.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }
}

impl<S> tower::Layer<S> for CountRejections {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Counted {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service [`CountRejections`] wraps around the gRPC router.
#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

/// The method label: known service paths as they are, anything else as `other` (a client
/// cannot grow the label set).
fn method_label(path: &str) -> String {
    let known = ["/flotilla.v1.", "/grpc.health.v1.", "/grpc.reflection."];
    let bounded = path.len() <= 96
        && known.iter().any(|p| path.starts_with(p))
        && path[1..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '/' || c == '_');
    if bounded {
        path.to_string()
    } else {
        "other".into()
    }
}

impl<S, B, R> tower::Service<http::Request<B>> for Counted<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = method_label(req.uri().path());
        let metrics = self.metrics.clone();
        let call = self.inner.call(req);
        Box::pin(async move {
            let response = call.await?;
            // Errors of unary calls come back as trailers-only responses: the status is in the
            // headers. (A stream that fails later is not counted here.)
            if let Some(code) = response
                .headers()
                .get("grpc-status")
                .and_then(|v| v.to_str().ok())
                .filter(|c| *c != "0")
            {
                let code = tonic::Code::from_bytes(code.as_bytes());
                metrics.api_rejected(&method, code);
                tracing::debug!(method, ?code, "gRPC call rejected");
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_labels_are_bounded() {
        assert_eq!(
            method_label("/flotilla.v1.WorkService/ApplyWork"),
            "/flotilla.v1.WorkService/ApplyWork"
        );
        assert_eq!(method_label("/evil/../x"), "other");
        assert_eq!(
            method_label(&format!("/flotilla.v1.{}", "a".repeat(200))),
            "other"
        );
    }

    #[test]
    fn objects_outside_the_callers_grants_are_permission_denied_naming_the_grant() {
        use crate::grants::file::{Builder, group};
        use crate::grants::{SetRole, Via};
        use crate::grpc::auth::Role;
        let grants = Builder::default()
            .set("team-a", SetRole::Admin, group("team-a-sre"))
            .build();
        let index =
            SetIndexView::build(1, 1, ["team-a", "team-b"], [("c1", vec!["team-b"])]).unwrap();
        let mut ana = Identity::token("ana", Role::ReadOnly, Vec::new());
        ana.principal = ana.principal.with_groups(["team-a-sre"]);
        let ana = ana.under(&grants);
        let e = allow(
            Some(&ana),
            &index,
            Verb::Write,
            Target::Cluster { name: "c1" },
            "apply ManifestWork c1/web",
        )
        .unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
        assert_eq!(
            e.message(),
            "ana (groups team-a-sre) may not apply ManifestWork c1/web: it needs admin on \
             cluster set \"team-b\" (cluster c1 is in team-b); ana holds view on the fleet, admin \
             on cluster set \"team-a\""
        );
        let granted = allow(
            Some(&ana),
            &index,
            Verb::Credentials,
            Target::Set { name: "team-a" },
            "create a join credential for cluster set \"team-a\"",
        )
        .unwrap();
        assert_eq!(
            granted,
            Some(Grant::Set {
                name: "team-a".into(),
                role: SetRole::Admin
            })
        );
        // Reads are allowed by the CSV role's fleet view.
        assert!(
            allow(
                Some(&ana),
                &index,
                Verb::Read,
                Target::Cluster { name: "c1" },
                "get"
            )
            .is_ok()
        );
        // An open hub: everyone may.
        let open = allow(None, &index, Verb::Write, Target::Fleet, "delete").unwrap();
        assert_eq!(open, None);
        assert_eq!(ana.principal.via, Via::Token);
    }

    #[test]
    fn impossible_names_are_invalid_argument_naming_the_rule() {
        let e = object("name", "bad name").unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("name"), "{}", e.message());
        assert!(cluster("cluster", "", true).is_ok());
        assert!(cluster("cluster", "", false).is_err());
        assert!(cluster("cluster", "Edge_1", false).is_err());
    }
}
