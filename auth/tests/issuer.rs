//! The issuer and the secure directory without a server: what is signed, by whom, and what is
//! refused.

use flotilla_auth::issuer::AccountJwt;
use flotilla_auth::issuer::IssueError;
use flotilla_auth::jwt::{Account, Claims, Operator, User};
use flotilla_auth::setup::SetupError;
use flotilla_auth::{Creds, InitOptions, Issuer, SecureDir, Subject, Which};
use flotilla_bus::subjects;
use std::time::Duration;

const NOW: i64 = 1_800_000_000;

fn init() -> (tempfile::TempDir, SecureDir) {
    let dir = tempfile::tempdir().unwrap();
    let secure = SecureDir::init(&dir.path().join("secure"), &InitOptions::default()).unwrap();
    (dir, secure)
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn account_of(secure: &SecureDir) -> Claims<Account> {
    let operator =
        Claims::<Operator>::decode_operator(&read(&secure.dir.join("operator.jwt"))).unwrap();
    Claims::<Account>::decode_account(&read(&secure.dir.join("account.jwt")), &operator).unwrap()
}

fn agents_of(secure: &SecureDir) -> Claims<Account> {
    let operator =
        Claims::<Operator>::decode_operator(&read(&secure.dir.join("operator.jwt"))).unwrap();
    Claims::<Account>::decode_account(&read(&secure.dir.join("agents.jwt")), &operator).unwrap()
}

/// The agents account's JWT among pushed ones.
fn agents_jwt(secure: &SecureDir, jwts: &[AccountJwt]) -> String {
    jwts.iter()
        .find(|j| j.account == secure.agents)
        .expect("the agents account is pushed")
        .jwt
        .clone()
}

#[test]
fn init_writes_a_consistent_chain_and_the_conf_the_server_needs() {
    let (_d, secure) = init();
    let operator =
        Claims::<Operator>::decode_operator(&read(&secure.dir.join("operator.jwt"))).unwrap();
    assert_eq!(
        operator.nats.signing_keys,
        vec![secure.operator_signing.public_key()]
    );
    let account = account_of(&secure);
    assert_eq!(account.sub, secure.account);
    assert_eq!(
        account.nats.signing_keys,
        vec![secure.account_signing.public_key()]
    );
    assert_eq!(account.nats.limits.disk_storage, -1, "JetStream enabled");
    let agents = agents_of(&secure);
    assert_eq!(
        agents.nats.limits.disk_storage, 0,
        "no JetStream for spokes"
    );
    assert_eq!(
        agents.nats.signing_keys,
        vec![secure.agents_signing.public_key()]
    );
    // Spokes reach the hub only through service imports (replies remapped by the server).
    assert!(
        agents
            .nats
            .imports
            .iter()
            .any(|i| i.subject == subjects::STATUS_ALL
                && i.kind == flotilla_auth::jwt::ExportKind::Service
                && i.account == secure.account)
    );
    assert!(
        account
            .nats
            .exports
            .iter()
            .all(|e| !e.subject.starts_with('$'))
    );
    let system =
        Claims::<Account>::decode_account(&read(&secure.dir.join("system.jwt")), &operator)
            .unwrap();
    assert_eq!(operator.nats.system_account, system.sub);

    // Every credentials file verifies against its account.
    for (file, acc, keys) in [
        ("hub.creds", &account.sub, &account.nats.signing_keys),
        ("bootstrap.creds", &agents.sub, &agents.nats.signing_keys),
        ("sys.creds", &system.sub, &system.nats.signing_keys),
    ] {
        let creds = Creds::parse(&read(&secure.dir.join(file))).unwrap();
        let user = Claims::<User>::decode_user(&creds.jwt, acc, keys, NOW)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(user.sub, creds.public_key(), "{file}");
        assert_eq!(user.exp, None, "{file} does not expire");
    }
    let boot = Creds::parse(&read(&secure.bootstrap_creds)).unwrap();
    let boot = Claims::<User>::decode(&boot.jwt).unwrap();
    assert_eq!(
        boot.nats.publish.allow,
        vec![subjects::REGISTER_ALL.to_string()]
    );

    let conf = read(&secure.server_conf);
    for want in [
        "listen: \"127.0.0.1:4222\"".to_string(),
        format!("system_account: {}", system.sub),
        "type: full".into(),
        "allow_delete: false".into(),
        format!("{}: \"", account.sub),
        format!("{}: \"", system.sub),
        "jetstream: {".into(),
    ] {
        assert!(conf.contains(&want), "{want:?} missing from\n{conf}");
    }
    assert!(!conf.contains("tls"), "no TLS unless asked");
    for seed_file in std::fs::read_dir(secure.dir.join("keys")).unwrap() {
        let seed = read(&seed_file.unwrap().path());
        assert!(!conf.contains(seed.trim()), "a seed in the server conf");
    }
}

#[test]
fn an_existing_directory_is_kept_unless_forced() {
    let (_d, secure) = init();
    let before = read(&secure.dir.join("keys/account.nk"));
    let err = SecureDir::init(&secure.dir, &InitOptions::default()).unwrap_err();
    assert!(matches!(err, SetupError::Exists(_)), "{err}");
    // A half-written directory (keys, no conf) is not overwritten either.
    std::fs::remove_file(&secure.server_conf).unwrap();
    assert!(matches!(
        SecureDir::init(&secure.dir, &InitOptions::default()),
        Err(SetupError::Exists(_))
    ));
    assert_eq!(read(&secure.dir.join("keys/account.nk")), before);
    let again = SecureDir::init(
        &secure.dir,
        &InitOptions {
            force: true,
            ..InitOptions::default()
        },
    )
    .unwrap();
    assert_ne!(again.account, secure.account, "forced init makes new keys");
}

#[test]
fn a_forced_init_forgets_the_old_keys_revocations() {
    let (_d, secure) = init();
    let issuer = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    let a = nkeys::KeyPair::new_user().public_key();
    issuer.revoke(&[issuer.agent_revoke(&a, NOW)], NOW).unwrap();
    std::fs::write(secure.dir.join("jwt/old.jwt"), "old").unwrap();
    let again = SecureDir::init(
        &secure.dir,
        &InitOptions {
            force: true,
            ..InitOptions::default()
        },
    )
    .unwrap();
    assert!(!again.revocations_file().exists());
    assert!(!secure.dir.join("jwt/old.jwt").exists());
    assert!(secure.dir.join("jwt").is_dir());
    let issuer = Issuer::new(&again, Duration::from_secs(3600)).unwrap();
    assert!(!issuer.is_revoked(&a));
}

#[test]
fn a_directory_of_the_one_account_layout_is_refused_with_what_to_do() {
    let (_d, secure) = init();
    std::fs::remove_file(secure.dir.join("keys/agents.nk")).unwrap();
    let err = SecureDir::load(&secure.dir).unwrap_err().to_string();
    assert!(
        err.contains("older flotilla-hub init") && err.contains("--force"),
        "{err}"
    );
}

#[test]
fn load_names_the_file_that_is_wrong() {
    let (_d, secure) = init();
    SecureDir::load(&secure.dir).unwrap();

    let seed = secure.dir.join("keys/account-signing.nk");
    let good = read(&seed);
    std::fs::write(&seed, "garbage").unwrap();
    let err = SecureDir::load(&secure.dir).unwrap_err().to_string();
    assert!(
        err.contains("account-signing.nk") && err.contains("not an NKey seed"),
        "{err}"
    );

    // Keys of another directory do not match this one's JWTs.
    let (_o, other) = init();
    std::fs::write(&seed, read(&other.dir.join("keys/account-signing.nk"))).unwrap();
    let err = SecureDir::load(&secure.dir).unwrap_err().to_string();
    assert!(
        err.contains("account.jwt") && err.contains("signing key"),
        "{err}"
    );
    std::fs::write(&seed, good).unwrap();

    let jwt = secure.dir.join("account.jwt");
    std::fs::write(&jwt, read(&other.dir.join("account.jwt"))).unwrap();
    let err = SecureDir::load(&secure.dir).unwrap_err().to_string();
    assert!(
        err.contains("account.jwt") && err.contains("not one of its expected issuers"),
        "{err}"
    );
    std::fs::remove_file(&jwt).unwrap();
    let err = SecureDir::load(&secure.dir).unwrap_err().to_string();
    assert!(err.contains("account.jwt"), "{err}");

    let missing = tempfile::tempdir().unwrap();
    let err = SecureDir::load(missing.path()).unwrap_err().to_string();
    assert!(err.contains("operator-signing.nk"), "{err}");
}

#[test]
fn cluster_credentials_are_scoped_signed_and_expire() {
    let (_d, secure) = init();
    let issuer = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    let key = nkeys::KeyPair::new_user();
    let issued = issuer
        .issue(Subject::Cluster("edge-a"), &key.public_key(), NOW)
        .unwrap();
    assert_eq!((issued.issued_at, issued.expires_at), (NOW, NOW + 3600));
    let account = agents_of(&secure);
    let user =
        Claims::<User>::decode_user(&issued.jwt, &account.sub, &account.nats.signing_keys, NOW)
            .unwrap();
    assert_eq!(user.sub, key.public_key());
    assert_eq!(user.iss, secure.agents_signing.public_key());
    assert_eq!(user.nats.issuer_account, secure.agents);
    assert_eq!(user.exp, Some(NOW + 3600));
    assert_eq!(
        user.nats.subscribe.allow,
        vec![
            subjects::to_all("edge-a"),
            subjects::spec("edge-a"),
            subjects::proxy("edge-a"),
            subjects::kubeapi("edge-a"),
            subjects::BROADCAST.to_string(),
            format!("{}.>", subjects::inbox_prefix("edge-a")),
        ]
    );
    let mut publish = subjects::agent_publish("edge-a").to_vec();
    publish.push(flotilla_bus::addons::credentials("edge-a"));
    publish.push(flotilla_bus::peersecrets::subject("edge-a"));
    publish.push(subjects::kubeapi_back_of("edge-a"));
    assert_eq!(user.nats.publish.allow, publish);
    assert!(user.nats.resp.is_some(), "proxy replies allowed");
    assert!(
        Claims::<User>::decode_user(
            &issued.jwt,
            &account.sub,
            &account.nats.signing_keys,
            NOW + 3600
        )
        .is_err()
    );
}

#[test]
fn unusable_keys_and_cluster_names_are_refused() {
    let (_d, secure) = init();
    let issuer = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    let user = nkeys::KeyPair::new_user().public_key();
    for cluster in ["", "*", ">", "a.b", "edge-*", "a b", "spec.>", "a\n"] {
        assert!(
            matches!(
                issuer.issue(Subject::Cluster(cluster), &user, NOW),
                Err(IssueError::BadName { .. })
            ),
            "{cluster:?}"
        );
    }
    let account_key = nkeys::KeyPair::new_account().public_key();
    let mut broken = user.clone();
    broken.replace_range(5..6, if &user[5..6] == "A" { "B" } else { "A" });
    for key in ["", "not-a-key", account_key.as_str(), broken.as_str()] {
        let err = issuer
            .issue(Subject::Cluster("edge-a"), key, NOW)
            .unwrap_err();
        assert!(matches!(err, IssueError::BadKey(_)), "{key}: {err}");
    }
}

#[test]
fn revocations_are_signed_by_the_operator_kept_and_pruned() {
    let (_d, secure) = init();
    let ttl = Duration::from_secs(3600);
    let issuer = Issuer::new(&secure, ttl).unwrap();
    let operator =
        Claims::<Operator>::decode_operator(&read(&secure.dir.join("operator.jwt"))).unwrap();
    let a = nkeys::KeyPair::new_user().public_key();
    let b = nkeys::KeyPair::new_user().public_key();

    issuer.revoke(&[issuer.agent_revoke(&a, NOW)], NOW).unwrap();
    let first = issuer.account_jwts(NOW).unwrap();
    let first = Claims::<Account>::decode_account(&agents_jwt(&secure, &first), &operator).unwrap();
    assert_eq!(first.iss, secure.operator_signing.public_key());
    assert_eq!(first.sub, secure.agents);
    assert_eq!(first.nats.revocations.get(&a), Some(&NOW));
    assert_eq!(
        first.nats.signing_keys,
        vec![secure.agents_signing.public_key()]
    );

    // Every account JWT is issued after the last one, so the resolver takes it.
    issuer.revoke(&[issuer.agent_revoke(&b, NOW)], NOW).unwrap();
    let second = issuer.account_jwts(NOW).unwrap();
    let second =
        Claims::<Account>::decode_account(&agents_jwt(&secure, &second), &operator).unwrap();
    assert!(second.iat > first.iat);
    assert_eq!(second.nats.revocations.len(), 2);

    // A key accepted again is issued after its revocation.
    let again = issuer.issue(Subject::Cluster("edge-a"), &a, NOW).unwrap();
    assert!(again.issued_at > NOW);

    // Kept across restarts.
    let restarted = Issuer::new(&secure, ttl).unwrap();
    assert!(restarted.is_revoked(&a) && restarted.is_revoked(&b));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(secure.revocations_file())
            .unwrap()
            .permissions(),
    ) & 0o777;
    assert_eq!(mode, 0o600);

    // Once every JWT a revocation could refuse has expired, it is dropped.
    let later = NOW + 2 * 3600;
    let c = nkeys::KeyPair::new_user().public_key();
    restarted
        .revoke(&[restarted.agent_revoke(&c, later)], later)
        .unwrap();
    let pruned = restarted.account_jwts(later).unwrap();
    let pruned =
        Claims::<Account>::decode_account(&agents_jwt(&secure, &pruned), &operator).unwrap();
    assert_eq!(pruned.nats.revocations.keys().collect::<Vec<_>>(), vec![&c]);
    assert!(!restarted.is_revoked(&a));
}

#[test]
fn an_account_jwt_after_a_restart_is_newer_than_the_last_revocation() {
    let (_d, secure) = init();
    let operator =
        Claims::<Operator>::decode_operator(&read(&secure.dir.join("operator.jwt"))).unwrap();
    let issuer = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    let a = nkeys::KeyPair::new_user().public_key();
    issuer.revoke(&[issuer.agent_revoke(&a, NOW)], NOW).unwrap();
    let before = issuer.account_jwts(NOW).unwrap();
    let before =
        Claims::<Account>::decode_account(&agents_jwt(&secure, &before), &operator).unwrap();
    let restarted = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    let after = restarted.account_jwts(NOW).unwrap();
    let after = Claims::<Account>::decode_account(&agents_jwt(&secure, &after), &operator).unwrap();
    assert!(after.iat > before.iat, "{} <= {}", after.iat, before.iat);
    assert_eq!(after.nats.revocations, before.nats.revocations);
}

#[test]
fn no_seed_in_debug_output() {
    let (_d, secure) = init();
    let issuer = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    let shown = format!("{secure:?} {issuer:?}");
    for f in std::fs::read_dir(secure.dir.join("keys")).unwrap() {
        let seed = read(&f.unwrap().path());
        assert!(!shown.contains(seed.trim()), "a seed in {shown}");
    }
    for file in [
        &secure.hub_creds,
        &secure.sys_creds,
        &secure.bootstrap_creds,
    ] {
        let creds = Creds::parse(&read(file)).unwrap();
        let shown = format!("{creds:?}");
        assert!(!shown.contains(creds.seed.expose()), "{shown}");
        assert!(shown.contains("<redacted>"));
    }
}

#[test]
fn addon_credentials_reach_only_the_addons_own_subjects_on_its_cluster() {
    let (_d, secure) = init();
    let issuer = Issuer::new(&secure, Duration::from_secs(600)).unwrap();
    let key = nkeys::KeyPair::new_user();
    let issued = issuer
        .issue(
            Subject::AddOn {
                addon: "fleet-metrics",
                cluster: "edge-a",
            },
            &key.public_key(),
            NOW,
        )
        .unwrap();
    let account = agents_of(&secure);
    let user =
        Claims::<User>::decode_user(&issued.jwt, &account.sub, &account.nats.signing_keys, NOW)
            .unwrap();
    assert_eq!(user.sub, key.public_key());
    assert_eq!(user.exp, Some(NOW + 600));
    assert_eq!(
        user.nats.publish.allow,
        vec!["flotilla.addon.fleet-metrics.edge-a.>".to_string()]
    );
    assert_eq!(
        user.nats.subscribe.allow,
        vec![
            "flotilla.addon.fleet-metrics.edge-a.>".to_string(),
            format!("{}.addon.fleet-metrics.>", subjects::inbox_prefix("edge-a")),
        ]
    );
    assert!(user.nats.resp.is_none(), "an add-on answers no requests");
    // Tokens that would widen the subjects are refused.
    for (addon, cluster) in [
        ("fleet.metrics", "edge-a"),
        ("fleet-metrics", "edge-*"),
        ("", "edge-a"),
    ] {
        assert!(
            issuer
                .issue(Subject::AddOn { addon, cluster }, &key.public_key(), NOW)
                .is_err(),
            "{addon}/{cluster}"
        );
    }
}

#[test]
fn revocations_of_credentials_that_never_expire_are_never_pruned() {
    let (_d, secure) = init();
    let ttl = Duration::from_secs(60);
    let issuer = Issuer::new(&secure, ttl).unwrap();
    let old_bootstrap = Creds::parse(&read(&secure.bootstrap_creds))
        .unwrap()
        .public_key();
    issuer.rotate(Which::Agents, NOW).unwrap();
    let new_bootstrap = Creds::parse(&read(&secure.bootstrap_creds))
        .unwrap()
        .public_key();
    assert_ne!(old_bootstrap, new_bootstrap);
    // A day later a cluster is denied: the pruning of expired revocations keeps the bootstrap's.
    let later = NOW + 86_400;
    let c = nkeys::KeyPair::new_user().public_key();
    Issuer::new(&secure, ttl)
        .unwrap()
        .revoke(&[issuer.agent_revoke(&c, later)], later)
        .unwrap();
    let jwts = Issuer::new(&secure, ttl)
        .unwrap()
        .account_jwts(later)
        .unwrap();
    let operator =
        Claims::<Operator>::decode_operator(&read(&secure.dir.join("operator.jwt"))).unwrap();
    let agents = Claims::<Account>::decode_account(&agents_jwt(&secure, &jwts), &operator).unwrap();
    assert!(
        agents.nats.revocations.contains_key(&old_bootstrap),
        "the old bootstrap came back"
    );
    assert!(agents.nats.revocations.contains_key(&c));
    assert!(!agents.nats.revocations.contains_key(&new_bootstrap));
}

#[test]
fn a_rotation_by_another_process_is_merged_not_overwritten() {
    let (_d, secure) = init();
    let ttl = Duration::from_secs(3600);
    let running_hub = Issuer::new(&secure, ttl).unwrap();
    let old_hub = Creds::parse(&read(&secure.hub_creds)).unwrap().public_key();
    // `flotilla-hub rotate hub` runs beside the hub.
    Issuer::new(&secure, ttl)
        .unwrap()
        .rotate(Which::Hub, NOW)
        .unwrap();
    // The running hub then revokes a cluster key: the rotation's revocation stays.
    let a = nkeys::KeyPair::new_user().public_key();
    running_hub
        .revoke(&[running_hub.agent_revoke(&a, NOW + 1)], NOW + 1)
        .unwrap();
    let jwts = running_hub.account_jwts(NOW + 1).unwrap();
    let operator =
        Claims::<Operator>::decode_operator(&read(&secure.dir.join("operator.jwt"))).unwrap();
    let hub_account = jwts.iter().find(|j| j.account == secure.account).unwrap();
    let hub_account = Claims::<Account>::decode_account(&hub_account.jwt, &operator).unwrap();
    assert!(hub_account.nats.revocations.contains_key(&old_hub));
    assert!(
        !hub_account.nats.revocations.contains_key(&a),
        "a cluster key is an agents' key"
    );
    let new = Creds::parse(&read(&secure.hub_creds)).unwrap();
    let account = account_of(&secure);
    Claims::<User>::decode_user(&new.jwt, &account.sub, &account.nats.signing_keys, NOW)
        .expect("the new hub credentials verify");
}

#[test]
fn a_revocation_that_cannot_be_recorded_fails_and_revokes_nothing() {
    let (_d, secure) = init();
    let issuer = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    // The revocations file's place is taken by a directory: it cannot be written.
    std::fs::create_dir(secure.revocations_file()).unwrap();
    let a = nkeys::KeyPair::new_user().public_key();
    assert!(issuer.revoke(&[issuer.agent_revoke(&a, NOW)], NOW).is_err());
    assert!(
        !issuer.is_revoked(&a),
        "nothing is revoked in memory either"
    );
}

#[test]
fn join_credentials_may_only_register_their_one_name_and_expire() {
    let (_d, secure) = init();
    let issuer = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    let (creds, issued) = issuer
        .mint_join("edge-7", Duration::from_secs(600), NOW)
        .unwrap();
    assert_eq!(issued.expires_at, NOW + 600);
    let agents = agents_of(&secure);
    let user = Claims::<User>::decode_user(&creds.jwt, &agents.sub, &agents.nats.signing_keys, NOW)
        .unwrap();
    assert_eq!(user.sub, creds.public_key());
    assert_eq!(user.nats.publish.allow, vec![subjects::register("edge-7")]);
    assert_eq!(
        user.nats.subscribe.allow,
        vec![format!("{}.>", subjects::bootstrap_inbox_prefix("edge-7"))]
    );
    assert!(
        issuer
            .mint_join("edge-*", Duration::from_secs(600), NOW)
            .is_err()
    );
}

#[test]
fn a_burst_of_revocations_is_signed_once_and_no_restart_signs_an_older_account() {
    let (_d, secure) = init();
    let operator =
        Claims::<Operator>::decode_operator(&read(&secure.dir.join("operator.jwt"))).unwrap();
    let iat = |jwts: &[AccountJwt]| {
        Claims::<Account>::decode_account(&agents_jwt(&secure, jwts), &operator)
            .unwrap()
            .iat
    };
    let issuer = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    for _ in 0..100 {
        let k = nkeys::KeyPair::new_user().public_key();
        issuer.revoke(&[issuer.agent_revoke(&k, NOW)], NOW).unwrap();
    }
    let first = iat(&issuer.account_jwts(NOW).unwrap());
    assert_eq!(
        first, NOW,
        "a hundred revocations, one push: no iat run ahead of the clock"
    );
    let second = iat(&issuer.account_jwts(NOW).unwrap());
    assert!(second > first);
    // A restart (or `flotilla-hub rotate` in another process) signs later still, even with a
    // clock that went back: the server keeps only the newer of two account JWTs.
    let restarted = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    assert!(iat(&restarted.account_jwts(NOW - 600).unwrap()) > second);
    let third = iat(&restarted.account_jwts(NOW).unwrap());
    assert!(
        iat(&issuer.account_jwts(NOW).unwrap()) > third,
        "the file is the shared clock"
    );
}

#[test]
fn revocations_stop_at_what_one_account_jwt_can_carry() {
    let (_d, secure) = init();
    let issuer = Issuer::new(&secure, Duration::from_secs(3600)).unwrap();
    let keys: Vec<String> = (0..flotilla_auth::issuer::MAX_REVOCATIONS)
        .map(|_| nkeys::KeyPair::new_user().public_key())
        .collect();
    let revokes: Vec<_> = keys.iter().map(|k| issuer.agent_revoke(k, NOW)).collect();
    issuer.revoke(&revokes, NOW).unwrap();
    let jwts = issuer.account_jwts(NOW).unwrap();
    assert!(
        agents_jwt(&secure, &jwts).len() < 1024 * 1024,
        "it still fits in one message"
    );
    let one_more = nkeys::KeyPair::new_user().public_key();
    let err = issuer
        .revoke(&[issuer.agent_revoke(&one_more, NOW)], NOW)
        .unwrap_err();
    assert!(matches!(err, IssueError::TooMany(_)), "{err}");
    assert!(!issuer.is_revoked(&one_more));
}

/// A directory written before the one-subscription wire: its account JWTs lack the prefix's
/// crossings. Loaded by this version, the accounts the hub signs and pushes carry them.
#[test]
fn accounts_of_a_directory_written_before_the_prefix_are_pushed_with_its_crossings() {
    let (_d, secure) = init();
    let crossings = [
        subjects::TO_SPEC_ALL,
        subjects::TO_KUBEAPI_ALL,
        subjects::TO_PROXY_ALL,
    ];
    for (file, claims) in [
        ("account.jwt", account_of(&secure)),
        ("agents.jwt", agents_of(&secure)),
    ] {
        let mut older = claims;
        older
            .nats
            .exports
            .retain(|e| !e.subject.starts_with("flotilla.to."));
        older
            .nats
            .imports
            .retain(|i| !i.subject.starts_with("flotilla.to."));
        let jwt = older.encode(&secure.operator_signing).unwrap();
        std::fs::write(secure.dir.join(file), jwt).unwrap();
    }
    let files = [account_of(&secure), agents_of(&secure)];
    for c in &files {
        let prefixed = |s: &str| s.starts_with("flotilla.to.");
        assert!(
            !c.nats.exports.iter().any(|e| prefixed(&e.subject))
                && !c.nats.imports.iter().any(|i| prefixed(&i.subject)),
            "the files lack the crossings"
        );
    }
    let loaded = SecureDir::load(&secure.dir).unwrap();
    let issuer = Issuer::new(&loaded, Duration::from_secs(3600)).unwrap();
    let operator =
        Claims::<Operator>::decode_operator(&read(&secure.dir.join("operator.jwt"))).unwrap();
    let pushed: Vec<Claims<Account>> = issuer
        .account_jwts(NOW)
        .unwrap()
        .iter()
        .map(|j| Claims::<Account>::decode_account(&j.jwt, &operator).unwrap())
        .collect();
    for subject in crossings {
        let exported = pushed
            .iter()
            .any(|a| a.nats.exports.iter().any(|e| e.subject == subject));
        let imported = pushed
            .iter()
            .any(|a| a.nats.imports.iter().any(|i| i.subject == subject));
        assert!(exported && imported, "{subject} crosses after the push");
    }
}
