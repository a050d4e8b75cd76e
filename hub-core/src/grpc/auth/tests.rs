use super::*;

const FILE: &str = "# operators\n\
    0123456789abcdef-admin,alice,admin\n\
    \n\
    0123456789abcdef-view,bob,read-only\n";

#[test]
fn roles_are_enforced_and_unknown_tokens_refused() {
    let t = Tokens::parse("tokens.csv", FILE).unwrap();
    let write = "/flotilla.v1.WorkService/ApplyWork";
    let read = "/flotilla.v1.WorkService/ListWorks";
    assert_eq!(
        t.authorize(write, Some("Bearer 0123456789abcdef-admin"))
            .unwrap()
            .unwrap()
            .name(),
        "alice"
    );
    assert!(
        t.authorize(read, Some("Bearer 0123456789abcdef-view"))
            .is_ok()
    );
    let denied = t
        .authorize(write, Some("Bearer 0123456789abcdef-view"))
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
    assert!(denied.message().contains("bob"), "{}", denied.message());
    for header in [
        None,
        Some("Bearer "),
        Some("Basic x"),
        Some("Bearer nope-nope-nope-nope"),
    ] {
        let e = t.authorize(read, header).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{header:?}");
    }
    assert!(t.authorize("/grpc.health.v1.Health/Check", None).is_ok());
}

fn executor(namespace: &str, name: &str) -> flotilla_api::work::Executor {
    flotilla_api::work::Executor {
        namespace: namespace.into(),
        name: name.into(),
    }
}

#[test]
fn deployers_write_works_only_as_the_executors_they_are_granted() {
    let t = Tokens::parse(
        "tokens.csv",
        &format!("{FILE}0123456789abcdef-ci,ci,deployer,default/executor1 team-a/*\n"),
    )
    .unwrap();
    let ci = "Bearer 0123456789abcdef-ci";
    // A deployer reaches the work service's apply and delete, and nothing else that writes.
    let deployer = t
        .authorize("/flotilla.v1.WorkService/ApplyWork", Some(ci))
        .unwrap()
        .unwrap();
    assert_eq!(deployer.role(), Role::Deployer);
    assert!(
        t.authorize("/flotilla.v1.WorkService/DeleteWork", Some(ci))
            .is_ok()
    );
    assert!(
        t.authorize("/flotilla.v1.WorkService/ListWorks", Some(ci))
            .is_ok()
    );
    for admin_only in [
        "/flotilla.v1.WorkService/Proxy",
        "/flotilla.v1.ClusterService/AcceptClusters",
        "/flotilla.v1.ReplicaSetService/ApplyReplicaSet",
    ] {
        let e = t.authorize(admin_only, Some(ci)).unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{admin_only}");
    }
    // A read-only identity still cannot apply works.
    let e = t
        .authorize(
            "/flotilla.v1.WorkService/ApplyWork",
            Some("Bearer 0123456789abcdef-view"),
        )
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);

    // Its grants: one ServiceAccount, and a whole namespace.
    assert!(
        deployer
            .may_execute_as(Some(&executor("default", "executor1")))
            .is_ok()
    );
    assert!(
        deployer
            .may_execute_as(Some(&executor("team-a", "anyone")))
            .is_ok()
    );
    let denied = deployer
        .may_execute_as(Some(&executor("default", "root")))
        .unwrap_err()
        .to_string();
    assert!(denied.starts_with("spec.executor:"), "{denied}");
    assert!(denied.contains("ci (deployer)"), "{denied}");
    assert!(
        denied.contains("system:serviceaccount:default:root"),
        "{denied}"
    );
    // Without an executor the agent's own identity would apply: admins only.
    let nil = deployer.may_execute_as(None).unwrap_err().to_string();
    assert!(nil.starts_with("spec.executor:"), "{nil}");
    let alice = t.identify("0123456789abcdef-admin").unwrap();
    assert!(alice.may_execute_as(None).is_ok());
    assert!(
        alice
            .may_execute_as(Some(&executor("default", "root")))
            .is_ok()
    );
}

#[test]
fn a_vouched_caller_needs_no_token_but_is_held_to_its_role() {
    let view = Identity::token("bob", Role::ReadOnly, Vec::new());
    let table = Table::default();
    let read = "/flotilla.v1.ClusterService/ListClusters";
    let write = "/flotilla.v1.ClusterService/AcceptClusters";
    assert_eq!(
        vouch(&table, read, view.clone()).unwrap(),
        Some(view.clone())
    );
    let e = vouch(&table, write, view).unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    assert!(e.message().contains("bob (read-only)"), "{}", e.message());
}

#[test]
fn csv_tokens_keep_their_role_as_a_fleet_role_and_gain_their_names_grants() {
    use crate::grants::file::{Builder, user};
    use crate::grants::{SetRole, Via};
    let t = Tokens::parse("tokens.csv", FILE).unwrap();
    // Without a grants file: the CSV role alone, as a fleet role.
    let alice = t.identify("0123456789abcdef-admin").unwrap();
    assert_eq!(alice.scope.fleet, Some(FleetRole::Admin));
    assert_eq!(alice.principal.via, Via::Token);
    let bob = t.identify("0123456789abcdef-view").unwrap();
    assert_eq!(bob.scope.fleet, Some(FleetRole::View));
    assert_eq!((bob.name(), bob.role()), ("bob", Role::ReadOnly));

    let grants = Builder::default()
        .set("team-a", SetRole::Admin, user("bob"))
        .build();
    let t = t.with_grants(Arc::new(grants));
    let bob = t.identify("0123456789abcdef-view").unwrap();
    assert_eq!(
        bob.scope.fleet,
        Some(FleetRole::View),
        "grants never take away"
    );
    assert_eq!(bob.scope.set_role("team-a"), Some(SetRole::Admin));
    assert_eq!(bob.role(), Role::ReadOnly);
    // The gate lets through what some grant could allow (the service checks the cluster)
    // on the services that check; the others still decide by the CSV role.
    let write = "/flotilla.v1.ClusterService/AcceptClusters";
    assert!(
        t.authorize(write, Some("Bearer 0123456789abcdef-view"))
            .is_ok()
    );
    let unchecked = "/flotilla.v1.ReplicaSetService/ApplyReplicaSet";
    assert!(
        t.authorize(unchecked, Some("Bearer 0123456789abcdef-view"))
            .is_err()
    );

    // A fleet admin by the file is an admin on every surface.
    let grants = Builder::default()
        .fleet(FleetRole::Admin, user("bob"))
        .build();
    let t = t.with_grants(Arc::new(grants));
    let bob = t
        .authorize(write, Some("Bearer 0123456789abcdef-view"))
        .unwrap()
        .unwrap();
    assert_eq!(bob.role(), Role::Admin);
    // A caller another hub vouches for is scoped by this hub's grants.
    let vouched = Identity::token("bob", Role::ReadOnly, Vec::new()).under(&t.grants());
    assert_eq!(vouched.role(), Role::Admin);
    assert_eq!(Identity::open().role(), Role::Admin);
    assert!(Identity::open().may_execute_as(None).is_ok());
}

#[test]
fn bad_token_files_name_the_line_and_never_show_a_token() {
    for (text, line, what) in [
        ("abc,short,admin\n", 1, "shorter"),
        ("0123456789abcdef,x\n", 1, "3 or 4 fields"),
        ("#\n0123456789abcdef,x,root\n", 2, "ROLE"),
        (
            "0123456789abcdef,x,admin\n0123456789abcdef,y,admin\n",
            2,
            "twice",
        ),
        ("# nothing\n", 0, "no tokens"),
        ("0123456789abcdef,ci,deployer\n", 1, "needs EXECUTE_AS"),
        ("0123456789abcdef,ci,deployer,apps\n", 1, "NAMESPACE/NAME"),
        ("0123456789abcdef,ci,deployer,apps/Web\n", 1, "DNS-1123"),
        ("0123456789abcdef,ci,admin,apps/web\n", 1, "for deployers"),
        ("0123456789abcdef,a,b,c,d\n", 1, "3 or 4 fields"),
    ] {
        let e = Tokens::parse("t.csv", text).unwrap_err().to_string();
        assert!(e.starts_with(&format!("t.csv:{line}:")), "{e}");
        assert!(e.contains(what), "{e}");
        assert!(!e.contains("0123456789abcdef"), "a token leaked: {e}");
    }
    let t = Tokens::parse("t.csv", FILE).unwrap();
    assert!(!format!("{t:?}").contains("0123"));
}

/// An issuer that names whoever the token says, `user|group,group`, as an OIDC principal.
struct Issuer;

impl BearerVerifier for Issuer {
    fn verify(&self, token: &str) -> Verified {
        let Some(claims) = token.strip_prefix("jwt.") else {
            return Verified::NotMine;
        };
        let (user, groups) = claims.split_once('|').unwrap_or((claims, ""));
        let via = Via::Oidc {
            issuer: "https://idp".into(),
            expires: 1_900_000_000,
        };
        Verified::Principal(
            Principal::user(user, via).with_groups(groups.split(',').filter(|g| !g.is_empty())),
        )
    }
}

#[test]
fn an_issuers_user_named_as_a_token_is_refused_here_and_when_another_hub_vouches_for_it() {
    // Review r3 §1: an unprefixed OIDC username equal to a CSV NAME took that token's grants
    // (and, forwarded, its CSV role).
    use crate::grants::file::{Builder, group, user};
    use crate::grants::{NamespaceRole, SetRole};
    let grants = Builder::default()
        .set("team-a", SetRole::Admin, group("team-a-sre"))
        .namespace("team-a-apps", NamespaceRole::Edit, user("alice"))
        .build();
    let t = Tokens::parse("tokens.csv", FILE)
        .unwrap()
        .with_grants(Arc::new(grants))
        .with_bearer(Arc::new(Issuer));
    let list = "/flotilla.v1.ClusterService/ListClusters";
    let e = t
        .authorize(list, Some("Bearer jwt.alice|team-a-sre"))
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    assert!(
        e.message()
            .contains("the OIDC user \"alice\" has the name of one of this hub's tokens"),
        "{}",
        e.message()
    );
    // Another name is the issuer's user: its groups' grants, no CSV role.
    let ana = t.authenticate("jwt.ana|team-a-sre").unwrap();
    assert_eq!((ana.role(), ana.legacy.is_none()), (Role::Member, true));
    assert_eq!(ana.scope.set_role("team-a"), Some(SetRole::Admin));

    // Vouched for by another hub (whose token file may lack the name): the same refusal,
    // never this hub's token of that name.
    let mut forwarded = ana.clone();
    forwarded.principal.user = "alice".into();
    let e = t.vouched(forwarded).unwrap_err();
    assert!(
        e.contains("has the name of one of this hub's tokens"),
        "{e}"
    );
    // The issuer's user keeps its groups and gets no role from the forwarding hub.
    let vouched = t.vouched(ana.clone()).unwrap();
    assert_eq!(vouched.principal, ana.principal);
    assert_eq!(vouched.scope.set_role("team-a"), Some(SetRole::Admin));
    assert_eq!(vouched.role(), Role::Member);
    // A token's caller is this hub's token of that name, whatever role was forwarded.
    let alice = t
        .vouched(Identity::token("alice", Role::Member, Vec::new()))
        .unwrap();
    assert_eq!(alice.role(), Role::Admin);
}
