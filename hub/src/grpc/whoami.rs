//! `flotilla.v1.AccessService`: who this hub takes a caller for (`flotilla whoami`, issue 48) —
//! the identity its authentication layer put in the call and every role that identity holds
//! under the grants in force, each with whence (the token's role, the user, which group). Every
//! hub answers from its own token file, issuer and grants file: the call is never forwarded,
//! and the answer carries the hub's id and its grants' digest.

use crate::grants::{Grant, Grants, Subject, Via};
use crate::grpc::auth::Identity;
use crate::grpc::guard::Teams;
use flotilla_api::v1::access_service_server::AccessService;
use flotilla_api::v1::{HeldRole, WhoAmIRequest, WhoAmIResponse};
use tonic::{Request, Response, Status};

/// The service.
pub struct AccessApi {
    hub_id: String,
}

impl AccessApi {
    /// The service of the hub `hub_id`.
    pub fn new(hub_id: &str) -> Self {
        Self {
            hub_id: hub_id.into(),
        }
    }
}

#[tonic::async_trait]
impl AccessService for AccessApi {
    async fn who_am_i(
        &self,
        request: Request<WhoAmIRequest>,
    ) -> Result<Response<WhoAmIResponse>, Status> {
        let (teams, caller) = Teams::of(&request);
        let grants = teams
            .live()
            .map(|live| live.current().grants.clone())
            .unwrap_or_default();
        // An open hub authenticates nobody: no identity in the call.
        let caller = caller.unwrap_or_else(Identity::open);
        let mut answer = answer(&caller, &grants);
        answer.hub_id = self.hub_id.clone();
        Ok(Response::new(answer))
    }
}

/// What `caller` is and holds under `grants` (pure): its fleet role first (the token's role or
/// the grants file's, the higher, each source that gives it), then its cluster sets and
/// namespaces by name.
pub fn answer(caller: &Identity, grants: &Grants) -> WhoAmIResponse {
    let p = &caller.principal;
    let (issuer, expires_unix) = match &p.via {
        Via::Oidc { issuer, expires } => (
            issuer.to_string(),
            i64::try_from(*expires).unwrap_or(i64::MAX),
        ),
        _ => (String::new(), 0),
    };
    let open = matches!(p.via, Via::Open);
    let token_role = match &caller.legacy {
        Some(legacy) if !open => legacy.role.to_string(),
        _ => String::new(),
    };
    let sources = grants.sources(p);
    let base = caller.base();
    let file_fleet = sources.iter().find_map(|s| match s.grant {
        Grant::Fleet(role) => Some(role),
        _ => None,
    });
    let mut roles = Vec::new();
    if let Some(fleet) = base.max(file_fleet) {
        let mut from = Vec::new();
        if open {
            from.push("an open hub (no token file, no issuer)".to_string());
        } else if base == Some(fleet) {
            from.push(format!("token role {token_role}"));
        }
        let by_file = sources.iter().filter(|s| s.grant == Grant::Fleet(fleet));
        from.extend(by_file.flat_map(|s| s.from.iter().map(subject)));
        roles.push(HeldRole {
            scope: "fleet".into(),
            name: String::new(),
            role: fleet.to_string(),
            from,
        });
    }
    for s in &sources {
        let (scope, name, role) = match &s.grant {
            Grant::Fleet(_) => continue,
            Grant::Set { name, role } => ("clusterset", name, role.to_string()),
            Grant::Namespace { name, role } => ("namespace", name, role.to_string()),
        };
        roles.push(HeldRole {
            scope: scope.into(),
            name: name.to_string(),
            role,
            from: s.from.iter().map(subject).collect(),
        });
    }
    WhoAmIResponse {
        user: p.user.to_string(),
        groups: p.groups.iter().map(|g| g.to_string()).collect(),
        via: p.via.to_string(),
        issuer,
        expires_unix,
        token_role,
        execute_as: caller
            .execute_as()
            .iter()
            .map(ToString::to_string)
            .collect(),
        roles,
        hub_id: String::new(),
        grants_digest: grants.digest_hex(),
    }
}

/// `user ana`, `group team-a-sre`.
fn subject(s: &Subject) -> String {
    match s {
        Subject::User(name) => format!("user {name}"),
        Subject::Group(name) => format!("group {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::file::{Builder, group, user};
    use crate::grants::{FleetRole, NamespaceRole, Principal, SetRole};
    use crate::grpc::auth::Role;

    fn grants() -> Grants {
        Builder::default()
            .fleet(FleetRole::View, user("vera"))
            .set("team-a", SetRole::Admin, group("team-a-sre"))
            .set("team-a", SetRole::View, user("ana"))
            .set("team-b", SetRole::View, user("ana"))
            .namespace("team-a-apps", NamespaceRole::Edit, group("team-a-sre"))
            .namespace("team-a-apps", NamespaceRole::Edit, user("ana"))
            .build()
    }

    fn rows(a: &WhoAmIResponse) -> Vec<String> {
        a.roles
            .iter()
            .map(|r| format!("{} {} {} <- {}", r.scope, r.name, r.role, r.from.join(", ")))
            .collect()
    }

    #[test]
    fn each_role_says_whence_the_highest_on_a_target_wins() {
        let mut ana = Identity::token("ana", Role::Member, Vec::new());
        ana.principal = Principal::user("ana", Via::Token).with_groups(["team-a-sre"]);
        let a = answer(&ana, &grants());
        assert_eq!((a.user.as_str(), a.via.as_str()), ("ana", "token"));
        assert_eq!(
            (a.token_role.as_str(), a.groups.as_slice()),
            ("member", &["team-a-sre".to_string()][..])
        );
        assert_eq!(
            rows(&a),
            [
                "clusterset team-a admin <- group team-a-sre",
                "clusterset team-b view <- user ana",
                "namespace team-a-apps edit <- user ana, group team-a-sre",
            ]
        );
        assert_eq!(a.grants_digest, grants().digest_hex());
    }

    #[test]
    fn a_token_role_is_a_fleet_role_and_the_file_may_raise_it() {
        let view = Identity::token("vera", Role::ReadOnly, Vec::new());
        assert_eq!(
            rows(&answer(&view, &grants())),
            ["fleet  view <- token role read-only, user vera"]
        );
        let deployer = Identity::token(
            "dep",
            Role::Deployer,
            vec![crate::grpc::auth::ExecuteAs::parse("apps/*").unwrap()],
        );
        let a = answer(&deployer, &grants());
        assert_eq!(rows(&a), ["fleet  view <- token role deployer"]);
        assert_eq!(a.execute_as, ["apps/*"]);
        let open = answer(&Identity::open(), &Grants::none());
        assert_eq!((open.via.as_str(), open.token_role.as_str()), ("open", ""));
        assert_eq!(
            rows(&open),
            ["fleet  admin <- an open hub (no token file, no issuer)"]
        );
    }

    #[test]
    fn an_issuers_user_says_its_issuer_and_expiry_and_holds_only_what_the_file_gives() {
        let principal = Principal::user(
            "https://idp.example#ana",
            Via::Oidc {
                issuer: "https://idp.example".into(),
                expires: 1_800_000_000,
            },
        )
        .with_groups(["team-a-sre"]);
        let ana = Identity {
            principal,
            legacy: None,
            scope: Default::default(),
        };
        let a = answer(&ana, &grants());
        assert_eq!(
            (
                a.via.as_str(),
                a.issuer.as_str(),
                a.expires_unix,
                a.token_role.as_str()
            ),
            ("oidc", "https://idp.example", 1_800_000_000, "")
        );
        assert_eq!(
            rows(&a),
            [
                "clusterset team-a admin <- group team-a-sre",
                "namespace team-a-apps edit <- group team-a-sre",
            ]
        );
    }
}
