//! What every gRPC call passes before it reaches a service: names checked by their rules (a
//! name that cannot exist is `INVALID_ARGUMENT` naming the rule, never `NOT_FOUND`), the
//! caller's grants checked on the object it acts on ([`allow`], issue 48: `PERMISSION_DENIED`
//! naming every missing grant), and a count of every rejected call by method and status code,
//! as rejected NATS input is counted.

use super::auth::Identity;
use crate::grants::live::Live;
use crate::grants::{self, Decision, Grant, Scope, SetIndexView, Target, Verb};
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
    let decision = grants::decide(&caller.scope, index, verb, &target);
    audit(caller, verb, action, &decision);
    match decision {
        Decision::Allowed(grant) => Ok(Some(grant)),
        Decision::Missing(missing) => Err(Status::permission_denied(
            missing.refusal(&caller.principal, action),
        )),
    }
}

/// The audit line of a decision (docs/notes/issue-48-design.md §8.5): every write and every
/// refusal. Allowed reads are not logged (volume).
fn audit(caller: &Identity, verb: Verb, action: &str, decision: &Decision) {
    match decision {
        Decision::Allowed(_) if verb == Verb::Read => {}
        Decision::Allowed(grant) => audit_line(&caller.principal, action, Outcome::Allowed(grant)),
        Decision::Missing(missing) => {
            audit_line(&caller.principal, action, Outcome::Refused(missing))
        }
    }
}

/// The audit line of the gate's decision on a call to `path` (the auth layer's): its refusal
/// (`refused`), or an allowed write that no service checks on its object — a fleet-only method
/// (`Need::Fleet`: import policies, mirror peers, the add-on catalogue) or a method of a service
/// that does not check its objects. Writes the services check are audited there.
pub fn audit_gate(
    caller: &Identity,
    table: &super::access::Table,
    path: &str,
    refused: Option<&str>,
) {
    use super::access::{Access, Need};
    let action = format!("call {path}");
    if let Some(why) = refused {
        audit_line(&caller.principal, &action, Outcome::Refused(&why));
        return;
    }
    if !matches!(table.access(path), Access::Write | Access::WriteWork) {
        return;
    }
    if matches!(table.need(path), Some(Need::Fleet(_))) || !table.enforced(path) {
        let grant = match caller.scope.fleet {
            Some(fleet) => Grant::Fleet(fleet).to_string(),
            None => format!("role {}", caller.role()),
        };
        audit_line(&caller.principal, &action, Outcome::Allowed(&grant));
    }
}

/// How a decision came out, for its audit line.
#[derive(Clone, Copy)]
pub enum Outcome<'a> {
    /// Allowed by this grant (its wording: `admin on cluster set "team-a"`).
    Allowed(&'a dyn std::fmt::Display),
    /// Refused: the grants missing, or why.
    Refused(&'a dyn std::fmt::Display),
}

/// One audit line on the `flotilla::audit` tracing target (docs/notes/issue-48-design.md
/// §8.5): who (user, groups, how authenticated), what (`action` names the object: "apply
/// ManifestWork c1/web", "proxy create core/configmaps default/x on cluster a1"), and the
/// grant that allowed it or what was missing. Never a token, a body or a Secret's data.
pub fn audit_line(who: &crate::grants::Principal, action: &str, outcome: Outcome<'_>) {
    let groups: Vec<&str> = who.groups.iter().map(|g| &**g).collect();
    let groups = groups.join(",");
    match outcome {
        Outcome::Allowed(grant) => tracing::info!(
            target: "flotilla::audit",
            user = %who.user, groups, via = %who.via, action, %grant, outcome = "allowed",
            "audit"
        ),
        Outcome::Refused(missing) => tracing::info!(
            target: "flotilla::audit",
            user = %who.user, groups, via = %who.via, action, %missing, outcome = "refused",
            "audit"
        ),
    }
}

/// The grants a service checks its objects against: the hub's [`Live`] grants and set index,
/// or none on an open hub (every caller may do everything).
#[derive(Clone, Debug, Default)]
pub struct Teams(Option<Live>);

impl Teams {
    /// The grants a call is checked by and its caller, as the authentication layer put them in
    /// its extensions (none: an open hub, where every caller may do everything).
    pub fn of<T>(req: &tonic::Request<T>) -> (Self, Option<Identity>) {
        let teams = req.extensions().get::<Teams>().cloned().unwrap_or_default();
        (teams, req.extensions().get::<Identity>().cloned())
    }

    /// Checks by `live`; `None` for an open hub.
    pub fn new(live: Option<Live>) -> Self {
        Self(live)
    }

    /// The grants in force, if any.
    pub fn live(&self) -> Option<&Live> {
        self.0.as_ref()
    }

    /// [`allow`] against the current set index: the grant that allows `caller` to do `verb` to
    /// `target`, or `PERMISSION_DENIED` naming `action` and every grant missing.
    pub fn allow(
        &self,
        caller: Option<&Identity>,
        verb: Verb,
        target: Target<'_>,
        action: &str,
    ) -> Result<Option<Grant>, Status> {
        let Some(live) = &self.0 else {
            return Ok(None);
        };
        allow(caller, &live.index().current(), verb, target, action)
    }

    /// [`Teams::allow`]'s decision without its audit line (`None` on an open hub): for a write
    /// another rule may still allow (a CSV deployer's execute-as grants), whose caller writes
    /// the final outcome's line ([`audit_line`]).
    pub fn decide(&self, caller: &Identity, verb: Verb, target: &Target<'_>) -> Option<Decision> {
        let live = self.0.as_ref()?;
        Some(grants::decide(
            &caller.scope,
            &live.index().current(),
            verb,
            target,
        ))
    }

    /// `caller` under the grants in force now (its scope as a new call would get it): what a
    /// long stream checks each item by, so that a reload reaches it (review r1 §6).
    pub fn rescoped(&self, caller: Option<&Identity>) -> Option<Identity> {
        let caller = caller?.clone();
        Some(match &self.0 {
            Some(live) => caller.scoped(live),
            None => caller,
        })
    }

    /// Reloads of the grants, for a stream whose `caller` sees by them (none on an open hub,
    /// for no caller, and for a CSV role, which no reload changes): a stream that cannot
    /// re-filter what it sent ends when this changes.
    pub fn reloads(
        &self,
        caller: Option<&Identity>,
    ) -> Option<tokio::sync::watch::Receiver<Arc<crate::grants::live::Current>>> {
        let (live, caller) = (self.0.as_ref()?, caller?);
        caller.base().is_none().then(|| live.subscribe())
    }

    /// The sets `cluster` would be in with its labels, by the current set index (none on an
    /// open hub): what [`Target::ClusterInto`] checks a write of it against.
    pub fn sets_for(&self, cluster: &flotilla_api::v1::ManagedCluster) -> Vec<Arc<str>> {
        self.0
            .as_ref()
            .map(|live| live.index().current().sets_for(cluster))
            .unwrap_or_default()
    }

    /// `INVALID_ARGUMENT` when a new cluster would take the name of a namespace the grants
    /// name: a cluster's namespace is read by its sets' viewers, a workspace by its own grants,
    /// and one name must not be both (review r1 §5).
    pub fn cluster_name_free(&self, field: &str, name: &str) -> Result<(), Status> {
        match &self.0 {
            Some(live) if live.current().grants.names_namespace(name) => {
                Err(Status::invalid_argument(format!(
                    "{field}: {name:?} is a workspace namespace in the grants file; a cluster \
                     may not take a workspace's name"
                )))
            }
            _ => Ok(()),
        }
    }

    /// What `caller` may see now: lists test each item against it.
    pub fn visibility(&self, caller: Option<&Identity>) -> Visibility {
        let (Some(live), Some(caller)) = (&self.0, caller) else {
            return Visibility::All;
        };
        // A CSV role no reload changes; a fleet role from the grants file is decided by the
        // grants in force now, not by the scope of the call's start (a watch outlives reloads:
        // review r1 §6).
        if caller.base().is_some() {
            return Visibility::All;
        }
        let index = live.index().current();
        // The scope's masks against this view's set table (cached per table).
        let scope = live.scope_in(&caller.principal, caller.base(), &index);
        if scope.fleet.is_some() {
            return Visibility::All;
        }
        Visibility::Scoped { scope, index }
    }
}

/// [`Teams::allow`] for the caller of `req`, by the grants its extensions carry.
pub fn check<T>(
    req: &tonic::Request<T>,
    verb: Verb,
    target: Target<'_>,
    action: &str,
) -> Result<(), Status> {
    let (teams, caller) = Teams::of(req);
    teams.allow(caller.as_ref(), verb, target, action).map(drop)
}

/// [`Teams::visibility`] for the caller of `req`.
pub fn visibility<T>(req: &tonic::Request<T>) -> Visibility {
    let (teams, caller) = Teams::of(req);
    teams.visibility(caller.as_ref())
}

/// What one caller may see, fixed for a list or until a watch's next change of the grants or
/// the set index (docs/notes/issue-48-design.md §6.2): a cluster costs a hash lookup and a few
/// word ANDs, a namespace one lookup.
#[derive(Clone, Debug)]
pub enum Visibility {
    /// Everything: an open hub, or a fleet role.
    All,
    /// What the scope sees, by the set index's view.
    Scoped {
        /// The caller's scope, its masks built against `index`'s sets.
        scope: Arc<Scope>,
        /// The set index's view.
        index: Arc<SetIndexView>,
    },
}

impl Visibility {
    /// Whether the caller sees `target`.
    pub fn sees(&self, target: &Target<'_>) -> bool {
        match self {
            Visibility::All => true,
            Visibility::Scoped { scope, index } => grants::sees(scope, index, target),
        }
    }

    /// Whether the caller sees cluster `name` (and the objects of its namespace).
    pub fn cluster(&self, name: &str) -> bool {
        self.sees(&Target::Cluster { name })
    }

    /// Whether the caller sees namespace `name`'s objects.
    pub fn namespace(&self, name: &str) -> bool {
        self.sees(&Target::Namespace { name })
    }

    /// Whether it sees everything (a list need not test its items).
    pub fn is_all(&self) -> bool {
        matches!(self, Visibility::All)
    }

    /// The generation of the set index's view it decides by (0 for everything).
    pub fn index_generation(&self) -> u64 {
        match self {
            Visibility::All => 0,
            Visibility::Scoped { index, .. } => index.generation(),
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

    /// The audit lines written while `f` runs, each as its fields (`action=… outcome=… …`).
    fn audited(f: impl FnOnce()) -> Vec<String> {
        use tracing_subscriber::layer::SubscriberExt;
        #[derive(Clone, Default)]
        struct Lines(Arc<std::sync::Mutex<Vec<String>>>);
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                self.0.push_str(&format!("{}={value} ", field.name()));
            }
        }
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Lines {
            fn on_event(
                &self,
                event: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                if event.metadata().target() == "flotilla::audit" {
                    let mut fields = Fields(String::new());
                    event.record(&mut fields);
                    self.0.lock().unwrap().push(fields.0);
                }
            }
        }
        let lines = Lines::default();
        let subscriber = tracing_subscriber::registry().with(lines.clone());
        tracing::subscriber::with_default(subscriber, f);
        lines.0.lock().unwrap().clone()
    }

    #[test]
    fn the_gate_audits_its_refusals_and_the_writes_no_service_checks() {
        // Review r1 §11: fleet-only writes are decided by the gate alone.
        use crate::grpc::access::need::{FILTERED, FLEET_WRITE};
        use crate::grpc::access::{Access, Rows, Table};
        use crate::grpc::auth::Role;
        const ROWS: &[Rows] = &[(
            "flotilla.v1.PolicyService",
            &[
                ("ImportPolicy", Access::Write, FLEET_WRITE),
                ("ListImportPolicies", Access::Read, FILTERED),
            ],
        )];
        let table = Table::new([("test", ROWS)]).unwrap();
        let import = "/flotilla.v1.PolicyService/ImportPolicy";
        let admin = Identity::token("alice", Role::Admin, Vec::new());
        let lines = audited(|| {
            audit_gate(&admin, &table, import, None);
            audit_gate(
                &admin,
                &table,
                "/flotilla.v1.PolicyService/ListImportPolicies",
                None,
            );
            audit_gate(&admin, &table, import, Some("alice may not"));
        });
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains(&format!("action=call {import}"))
                && lines[0].contains("grant=admin on the fleet")
                && lines[0].contains("outcome=allowed"),
            "{lines:?}"
        );
        assert!(
            lines[1].contains("missing=alice may not") && lines[1].contains("outcome=refused"),
            "{lines:?}"
        );
    }

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
