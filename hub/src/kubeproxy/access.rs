//! Who a proxied request acts as on the spoke, decided from the caller's API identity (pure).
//!
//! | role | may | acts on the spoke as |
//! |---|---|---|
//! | read-only | get, list, watch and discovery (and health: no other non-resource path, such as `/metrics`, `/logs`, `/debug/pprof`); not Secrets; of subresources only `log`, `status`, `scale` | the agent |
//! | deployer | any verb | one of its execute-as ServiceAccounts (impersonated): the one it names with `kubectl --as=system:serviceaccount:NS:NAME`, or its only named grant |
//! | admin | any verb | the agent, or whom it names with `--as`/`--as-group` (the agent then impersonates, if the spoke lets it) |
//! | member (grants only, issue 48) | by its grants on the cluster asked for: `admin` on one of its sets as an admin, `view` as read-only, else refused naming the grant | as admin or read-only |
//!
//! A deployer's reach is what its ServiceAccount may do on the spoke (the spoke's RBAC decides,
//! as for its works); a read-only caller cannot read Secrets, which the agent usually may.

use super::request::RequestInfo;
use crate::grants::live::Live;
use crate::grants::{self, Decision, Grant, SetIndexView, Target, Verb};
use crate::grpc::auth::{Identity, Role};
use crate::grpc::guard::{Outcome, audit_line};
use flotilla_api::work::Executor;

/// The subresources a read-only caller may read: each only describes its object. Anything
/// else (`proxy` on pods, services and nodes reaches into workloads and kubelets as the agent,
/// `token` mints credentials) is refused.
pub const READ_ONLY_SUBRESOURCES: [&str; 3] = ["log", "status", "scale"];

/// The identity a request acts as on the spoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// The agent's own identity.
    AsAgent,
    /// Kubernetes impersonation (the agent must be allowed to impersonate).
    Impersonate {
        /// `Impersonate-User`.
        user: String,
        /// `Impersonate-Group` (empty: the API server's own groups for the user).
        groups: Vec<String>,
    },
}

/// What the client asked to impersonate (its `Impersonate-User` and `Impersonate-Group`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    /// `Impersonate-User`.
    pub user: Option<String>,
    /// `Impersonate-Group` headers.
    pub groups: Vec<String>,
}

/// Why a request is refused (a 403 `Status` with this message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

/// Decides whether `identity` may make the request `info`, and as whom, by its fleet role.
pub fn decide(identity: &Identity, info: &RequestInfo, asked: &Asked) -> Result<Act, Refusal> {
    let who = format!("{} ({})", identity.name(), identity.role());
    decide_as(identity, &who, identity.role(), info, asked)
}

/// [`decide`] for `identity` acting with `role` (what its grants give it on the cluster), named
/// `who` in refusals.
fn decide_as(
    identity: &Identity,
    who: &str,
    role: Role,
    info: &RequestInfo,
    asked: &Asked,
) -> Result<Act, Refusal> {
    let what = || {
        if info.resource_request {
            format!("{} {}", info.verb, info.resource_label())
        } else {
            format!("{} on a non-resource path", info.verb)
        }
    };
    match role {
        Role::Admin => Ok(match &asked.user {
            Some(user) => Act::Impersonate {
                user: user.clone(),
                groups: asked.groups.clone(),
            },
            None if asked.groups.is_empty() => Act::AsAgent,
            None => {
                return Err(Refusal(
                    "Impersonate-Group needs Impersonate-User (kubectl --as with --as-group)"
                        .into(),
                ));
            }
        }),
        Role::ReadOnly => {
            if asked.user.is_some() || !asked.groups.is_empty() {
                return Err(Refusal(format!("{who} may not impersonate")));
            }
            if !info.verb.reads() {
                return Err(Refusal(format!(
                    "{who} may only get, list and watch through the cluster proxy; {} refused",
                    what()
                )));
            }
            if !info.resource_request && !info.discovery {
                return Err(Refusal(format!(
                    "{who} may read only discovery and health paths through the cluster proxy \
                     (/api, /apis, /version, /openapi, /healthz, /livez, /readyz): other \
                     non-resource paths (/metrics, /logs, /debug) are read as the agent and need \
                     admin"
                )));
            }
            if info.resource_request && info.group.is_empty() && info.resource == "secrets" {
                return Err(Refusal(format!(
                    "{who} may not read Secrets through the cluster proxy (it acts as the agent)"
                )));
            }
            if info.resource_request
                && !info.subresource.is_empty()
                && !READ_ONLY_SUBRESOURCES.contains(&info.subresource.as_str())
            {
                return Err(Refusal(format!(
                    "{who} may read only the {} subresources through the cluster proxy (it acts \
                     as the agent); {} refused",
                    READ_ONLY_SUBRESOURCES.join(", "),
                    what()
                )));
            }
            Ok(Act::AsAgent)
        }
        Role::Member => Err(Refusal(format!(
            "{who} may not use the cluster proxy: it serves identities with a fleet role \
             (read-only, deployer or admin) until it checks the grants of each cluster"
        ))),
        Role::Deployer => {
            if !asked.groups.is_empty() {
                return Err(Refusal(format!(
                    "{who} may not choose groups: a ServiceAccount gets its groups from the spoke"
                )));
            }
            let executor = match &asked.user {
                Some(user) => {
                    let executor = parse_service_account(user).ok_or_else(|| {
                        Refusal(format!(
                            "{who} may act only as its execute-as ServiceAccounts ({}); {user:?} \
                             is not system:serviceaccount:NAMESPACE:NAME",
                            identity.grants()
                        ))
                    })?;
                    if !identity.execute_as().iter().any(|g| g.covers(&executor)) {
                        return Err(Refusal(format!(
                            "{who} may not act as {user}; its execute-as grants are {}",
                            identity.grants()
                        )));
                    }
                    executor
                }
                None => match identity.execute_as() {
                    [only] if only.name.is_some() => Executor {
                        namespace: only.namespace.clone(),
                        name: only.name.clone().unwrap_or_default(),
                    },
                    _ => {
                        return Err(Refusal(format!(
                            "{who} has execute-as grants {}: name the ServiceAccount to act as \
                             with kubectl --as=system:serviceaccount:NAMESPACE:NAME",
                            identity.grants()
                        )));
                    }
                },
            };
            Ok(Act::Impersonate {
                user: executor.username(),
                groups: Vec::new(),
            })
        }
    }
}

/// What the caller's grants give it on the one cluster a request is for (issue 48,
/// docs/notes/issue-48-design.md §5.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnCluster {
    /// `admin` on one of the cluster's sets (or the fleet): today's admin.
    Admin(Grant),
    /// `view` on one of its sets (or the fleet): today's read-only.
    View(Grant),
    /// Neither: the refusal, naming the grants it needs.
    Refused(String),
}

/// What `identity` holds on `cluster`, by the set index's `index`.
pub fn on_cluster(identity: &Identity, index: &SetIndexView, cluster: &str) -> OnCluster {
    let target = Target::Cluster { name: cluster };
    if let Decision::Allowed(grant) =
        grants::decide(&identity.scope, index, Verb::ProxyWrite, &target)
    {
        return OnCluster::Admin(grant);
    }
    match grants::decide(&identity.scope, index, Verb::ProxyRead, &target) {
        Decision::Allowed(grant) => OnCluster::View(grant),
        Decision::Missing(missing) => OnCluster::Refused(format!(
            "{} (to read; admin to write)",
            missing.refusal(
                &identity.principal,
                &format!("reach cluster {cluster} through the cluster proxy")
            )
        )),
    }
}

/// [`decide`] for one cluster: a fleet `admin` and a CSV deployer as before; anyone else by
/// what its grants give it on the cluster (`on`, from [`on_cluster`]) — `admin` on one of its
/// sets acts as an admin, `view` as a read-only caller (its refusals name the grant it reads
/// by), neither is refused naming the grant.
pub fn decide_on(
    identity: &Identity,
    on: &OnCluster,
    info: &RequestInfo,
    asked: &Asked,
) -> Result<Act, Refusal> {
    match (identity.role(), on) {
        (Role::Admin | Role::Deployer, OnCluster::Refused(_) | OnCluster::View(_))
        | (Role::ReadOnly, OnCluster::View(_)) => decide(identity, info, asked),
        (_, OnCluster::Admin(grant)) => {
            let who = format!("{} ({grant})", identity.name());
            decide_as(identity, &who, Role::Admin, info, asked)
        }
        (_, OnCluster::View(grant)) => {
            let who = format!("{} ({grant})", identity.name());
            decide_as(identity, &who, Role::ReadOnly, info, asked)
        }
        (_, OnCluster::Refused(why)) => Err(Refusal(why.clone())),
    }
}

/// The cluster proxy's decision for an API caller's request `info` to `cluster` (what
/// `server.rs` asks): with grants in force (`live`, every hub with API tokens), by what they
/// give `identity` on that cluster ([`on_cluster`], [`decide_on`]); on an open hub by its role.
/// Each request, allowed or refused, is an audit line: who, its groups, the request and the
/// grant that allowed it or why it was refused.
pub fn decide_at(
    identity: &Identity,
    live: Option<&Live>,
    cluster: &str,
    info: &RequestInfo,
    asked: &Asked,
) -> Result<Act, Refusal> {
    let on = live.map(|live| on_cluster(identity, &live.index().current(), cluster));
    let decided = match &on {
        Some(on) => decide_on(identity, on, info, asked),
        None => decide(identity, info, asked),
    };
    let action = action(cluster, info);
    match (&decided, &on) {
        (Err(refusal), _) => audit_line(&identity.principal, &action, Outcome::Refused(&refusal.0)),
        (Ok(act), on) => {
            let grant = allowed_by(identity, on.as_ref(), act);
            audit_line(&identity.principal, &action, Outcome::Allowed(&grant));
        }
    }
    decided
}

/// The audit line of a request a ManagedServiceAccount's token makes: the spoke authenticates
/// the token and its RBAC decides, which is the grant.
pub fn audit_service_account(owner: &crate::serviceaccount::TokenOwner, info: &RequestInfo) {
    let principal = crate::grants::Principal::user(
        &format!("managedserviceaccount:{}/{}", owner.cluster, owner.name),
        crate::grants::Via::Token,
    );
    let grant = format!(
        "a token of ManagedServiceAccount {}/{} (the spoke's RBAC decides)",
        owner.cluster, owner.name
    );
    audit_line(
        &principal,
        &action(&owner.cluster, info),
        Outcome::Allowed(&grant),
    );
}

/// The audit line of a request refused before anyone was authenticated — no bearer, a token
/// that is neither the hub's nor a current ManagedServiceAccount's, an ID token refused (expired,
/// another audience, a key the issuer does not publish) — from `source`: the request as an
/// accepted one's line names it, and why ([`crate::grpc::auth::audit_unauthenticated`]: bounded
/// per source).
pub fn audit_unauthenticated(
    source: Option<std::net::IpAddr>,
    cluster: &str,
    info: &RequestInfo,
    why: &str,
) {
    crate::grpc::auth::audit_unauthenticated(source, &action(cluster, info), why);
}

/// A proxied request in an audit line: `proxy get core/pods default/web on cluster a1`.
fn action(cluster: &str, info: &RequestInfo) -> String {
    let object = match (info.namespace.as_str(), info.name.as_str()) {
        ("", "") => String::new(),
        ("", name) => format!(" {name}"),
        (ns, "") => format!(" in {ns}"),
        (ns, name) => format!(" {ns}/{name}"),
    };
    if info.resource_request {
        format!(
            "proxy {} {}{object} on cluster {cluster}",
            info.verb,
            info.resource_label()
        )
    } else {
        format!(
            "proxy {} a non-resource path on cluster {cluster}",
            info.verb
        )
    }
}

/// The grant an allowed request went through, as its audit line says it.
fn allowed_by(identity: &Identity, on: Option<&OnCluster>, act: &Act) -> String {
    match (identity.role(), on, act) {
        (Role::Deployer, _, Act::Impersonate { user, .. }) => {
            format!(
                "deployer acting as {user} (execute-as {})",
                identity.grants()
            )
        }
        (_, Some(OnCluster::Admin(grant) | OnCluster::View(grant)), _) => grant.to_string(),
        (role, _, _) => format!("{role} (open hub)"),
    }
}

/// `system:serviceaccount:<ns>:<name>` as an executor.
fn parse_service_account(user: &str) -> Option<Executor> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then(|| Executor {
        namespace: namespace.into(),
        name: name.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::auth::ExecuteAs;
    use http::Method;

    fn identity(role: Role, grants: &[&str]) -> Identity {
        Identity::token(
            "someone",
            role,
            grants
                .iter()
                .map(|g| ExecuteAs::parse(g).unwrap())
                .collect(),
        )
    }

    fn info(m: Method, path: &str) -> RequestInfo {
        RequestInfo::parse(&m, path, "")
    }

    #[test]
    fn read_only_callers_read_as_the_agent_and_nothing_else() {
        let viewer = identity(Role::ReadOnly, &[]);
        let none = Asked::default();
        assert_eq!(
            decide(&viewer, &info(Method::GET, "/api/v1/pods"), &none),
            Ok(Act::AsAgent)
        );
        assert_eq!(
            decide(&viewer, &info(Method::GET, "/apis"), &none),
            Ok(Act::AsAgent)
        );
        let refused = decide(
            &viewer,
            &info(Method::POST, "/api/v1/namespaces/a/configmaps"),
            &none,
        )
        .unwrap_err();
        assert!(refused.0.contains("create core/configmaps"), "{refused:?}");
        assert!(
            decide(
                &viewer,
                &info(Method::GET, "/api/v1/namespaces/a/secrets"),
                &none
            )
            .is_err()
        );
        let asked = Asked {
            user: Some("admin".into()),
            groups: vec![],
        };
        assert!(decide(&viewer, &info(Method::GET, "/api/v1/pods"), &asked).is_err());
    }

    #[test]
    fn read_only_callers_reach_only_the_allowed_subresources() {
        let viewer = identity(Role::ReadOnly, &[]);
        let none = Asked::default();
        for path in [
            "/api/v1/namespaces/a/pods/p/log",
            "/api/v1/namespaces/a/pods/p/status",
            "/apis/apps/v1/namespaces/a/deployments/d/scale",
        ] {
            assert_eq!(
                decide(&viewer, &info(Method::GET, path), &none),
                Ok(Act::AsAgent),
                "{path}"
            );
        }
        for path in [
            "/api/v1/namespaces/a/pods/p/proxy",
            "/api/v1/namespaces/a/pods/p/proxy/metrics",
            "/api/v1/namespaces/a/services/s/proxy",
            "/api/v1/namespaces/a/services/https:s:443/proxy/x",
            "/api/v1/nodes/n/proxy/configz",
            "/api/v1/namespaces/a/serviceaccounts/sa/token",
            "/api/v1/namespaces/a/pods/p/ephemeralcontainers",
        ] {
            let refused = decide(&viewer, &info(Method::GET, path), &none).unwrap_err();
            assert!(refused.0.contains("subresources"), "{path}: {refused:?}");
        }
        // Admins keep every subresource.
        let admin = identity(Role::Admin, &[]);
        let proxy = info(Method::GET, "/api/v1/nodes/n/proxy/configz");
        assert_eq!(decide(&admin, &proxy, &none), Ok(Act::AsAgent));
    }

    #[test]
    fn read_only_callers_reach_discovery_and_health_not_other_non_resource_paths() {
        // Review r4 §10: a set's viewer (read-only here) reads non-resource paths as the agent.
        let viewer = identity(Role::ReadOnly, &[]);
        let none = Asked::default();
        for path in [
            "/",
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3/apis/apps/v1",
            "/healthz",
            "/livez/ping",
            "/readyz",
        ] {
            assert_eq!(
                decide(&viewer, &info(Method::GET, path), &none),
                Ok(Act::AsAgent),
                "{path}"
            );
        }
        for path in [
            "/metrics",
            "/logs/kube-apiserver.log",
            "/debug/pprof/profile",
            "/metrics/slis",
        ] {
            let refused = decide(&viewer, &info(Method::GET, path), &none).unwrap_err();
            assert!(
                refused
                    .0
                    .contains("may read only discovery and health paths"),
                "{path}: {refused:?}"
            );
        }
        let admin = identity(Role::Admin, &[]);
        let pprof = info(Method::GET, "/debug/pprof/profile");
        assert_eq!(decide(&admin, &pprof, &none), Ok(Act::AsAgent));
    }

    #[test]
    fn deployers_act_as_their_granted_service_accounts_only() {
        let one = identity(Role::Deployer, &["default/executor1"]);
        let get = info(Method::GET, "/api/v1/pods");
        assert_eq!(
            decide(&one, &get, &Asked::default()),
            Ok(Act::Impersonate {
                user: "system:serviceaccount:default:executor1".into(),
                groups: vec![]
            })
        );
        let many = identity(Role::Deployer, &["default/executor1", "team-a/*"]);
        assert!(decide(&many, &get, &Asked::default()).is_err());
        let as_ = |u: &str| Asked {
            user: Some(u.into()),
            groups: vec![],
        };
        assert_eq!(
            decide(&many, &get, &as_("system:serviceaccount:team-a:deployer")),
            Ok(Act::Impersonate {
                user: "system:serviceaccount:team-a:deployer".into(),
                groups: vec![]
            })
        );
        assert!(decide(&many, &get, &as_("system:serviceaccount:kube-system:admin")).is_err());
        assert!(decide(&many, &get, &as_("system:admin")).is_err());
        assert!(decide(&many, &get, &as_("system:serviceaccount:team-a:x:y")).is_err());
        let with_group = Asked {
            user: Some("system:serviceaccount:team-a:d".into()),
            groups: vec!["system:masters".into()],
        };
        assert!(decide(&many, &get, &with_group).is_err());
    }

    #[test]
    fn admins_act_as_the_agent_or_whom_they_name() {
        let admin = identity(Role::Admin, &[]);
        let del = info(Method::DELETE, "/api/v1/namespaces/a/pods/p");
        assert_eq!(decide(&admin, &del, &Asked::default()), Ok(Act::AsAgent));
        let asked = Asked {
            user: Some("jane".into()),
            groups: vec!["devs".into()],
        };
        assert_eq!(
            decide(&admin, &del, &asked),
            Ok(Act::Impersonate {
                user: "jane".into(),
                groups: vec!["devs".into()]
            })
        );
        let groups_only = Asked {
            user: None,
            groups: vec!["devs".into()],
        };
        assert!(decide(&admin, &del, &groups_only).is_err());
    }

    #[test]
    fn per_cluster_a_sets_admin_acts_as_admin_its_viewer_reads_and_others_are_refused() {
        use crate::grants::file::{Builder, group};
        use crate::grants::{NamespaceRole, SetRole};
        let grants = Builder::default()
            .set("team-a", SetRole::Admin, group("team-a-sre"))
            .set("team-a", SetRole::View, group("team-a-dev"))
            .namespace("apps", NamespaceRole::Edit, group("team-b-sre"))
            .build();
        let index = SetIndexView::build(
            1,
            1,
            ["team-a", "team-b"],
            [("a1", vec!["team-a"]), ("b1", vec!["team-b"])],
        )
        .unwrap();
        let member = |name: &str, group: &str| {
            let mut id = Identity::token(name, Role::Member, Vec::new());
            id.principal = id.principal.with_groups([group]);
            id.under(&grants)
        };
        let (ana, cleo, ben) = (
            member("ana", "team-a-sre"),
            member("cleo", "team-a-dev"),
            member("ben", "team-b-sre"),
        );
        let none = Asked::default();
        let write = info(Method::POST, "/api/v1/namespaces/a/configmaps");
        let secrets = info(Method::GET, "/api/v1/namespaces/a/secrets");
        let pods = info(Method::GET, "/api/v1/pods");

        let on = on_cluster(&ana, &index, "a1");
        assert!(matches!(on, OnCluster::Admin(_)), "{on:?}");
        assert_eq!(decide_on(&ana, &on, &write, &none), Ok(Act::AsAgent));
        assert_eq!(decide_on(&ana, &on, &secrets, &none), Ok(Act::AsAgent));

        let on = on_cluster(&cleo, &index, "a1");
        assert!(matches!(on, OnCluster::View(_)), "{on:?}");
        assert_eq!(decide_on(&cleo, &on, &pods, &none), Ok(Act::AsAgent));
        assert!(decide_on(&cleo, &on, &secrets, &none).is_err());
        assert!(decide_on(&cleo, &on, &write, &none).is_err());

        let on = on_cluster(&ana, &index, "b1");
        let refused = decide_on(&ana, &on, &pods, &none).unwrap_err();
        assert_eq!(
            refused.0,
            "ana (groups team-a-sre) may not reach cluster b1 through the cluster proxy: it \
             needs view on a cluster set that contains b1; b1 is in none of ana's sets (to \
             read; admin to write)"
        );
        // A namespace grant reaches no cluster.
        let on = on_cluster(&ben, &index, "b1");
        assert!(matches!(on, OnCluster::Refused(_)), "{on:?}");
        // CSV roles are unchanged by the cluster's grants.
        let viewer = identity(Role::ReadOnly, &[]).under(&grants);
        let on = on_cluster(&viewer, &index, "b1");
        assert!(matches!(on, OnCluster::View(_)));
        assert!(decide_on(&viewer, &on, &write, &none).is_err());
        let admin = identity(Role::Admin, &[]);
        let on = on_cluster(&admin, &index, "b1");
        assert_eq!(decide_on(&admin, &on, &write, &none), Ok(Act::AsAgent));
    }
}
