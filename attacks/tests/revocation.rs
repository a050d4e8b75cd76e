//! Revocation (issue 23, attack 6): a rotated bootstrap credential never comes back — not after
//! a hub restart, not after a later deny pushes the account again, not once its revocation is
//! older than the credential TTL — and a per-cluster join credential is spent once its agent
//! has credentials of its own.

use flotilla_api::v1::RegistrationState;
use flotilla_attacks::fleet::{SOON, run};
use flotilla_attacks::{
    Fleet, HubOptions, Outcome, Registration, Server, on_every_server, wait_for,
};
use std::path::Path;
use std::time::Duration;

/// Moves every Unix timestamp (seconds) in a JSON document back by `by` seconds.
fn age(v: &mut serde_json::Value, by: i64) {
    match v {
        serde_json::Value::Number(n) => {
            if let Some(t) = n.as_i64()
                && (1_000_000_000..100_000_000_000).contains(&t)
            {
                *v = serde_json::Value::from(t - by);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|i| age(i, by)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|i| age(i, by)),
        _ => {}
    }
}

/// Ages the hub's recorded revocations by a day (the hub must be stopped).
fn age_revocations(fleet: &Fleet) {
    let file = fleet.secure.join("revocations.json");
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) => fleet.fail(&format!("reading {}: {e}", file.display())),
    };
    let mut doc: serde_json::Value = match serde_json::from_str(&text) {
        Ok(d) => d,
        Err(e) => fleet.fail(&format!("{} is not JSON: {e}", file.display())),
    };
    let original = doc.clone();
    age(&mut doc, 86_400);
    fleet.check(doc != original, || format!("no timestamp to age in {text}"));
    if let Err(e) = std::fs::write(&file, doc.to_string()) {
        fleet.fail(&format!("writing {}: {e}", file.display()));
    }
}

/// Waits until the server refuses `creds`.
async fn wait_refused(fleet: &Fleet, creds: &Path, what: &str) {
    wait_for!(
        fleet,
        what,
        SOON,
        match fleet.connect_outcome(creds).await {
            Outcome::Refused(_) => Some(()),
            Outcome::Connected => None,
        }
    );
}

/// The server refuses `creds` now.
async fn check_refused(fleet: &Fleet, creds: &Path, when: &str) {
    if let Outcome::Connected = fleet.connect_outcome(creds).await {
        fleet.fail(&format!(
            "{when}: the rotated-out bootstrap credential connects again"
        ));
    }
}

on_every_server!(a_rotated_bootstrap_credential_stays_revoked_after_restart_deny_and_ttl);

/// Attack 6a: `flotilla-hub rotate bootstrap` revokes the old bootstrap key for good.
async fn a_rotated_bootstrap_credential_stays_revoked_after_restart_deny_and_ttl(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    fleet
        .hub(HubOptions::new().flag("--credentials-ttl-seconds", "120"))
        .await;
    fleet.accepted_agent("edge-1").await;
    fleet.accepted_agent("edge-2").await;
    let old = fleet.dir().join("old-bootstrap.creds");
    let edge1 = fleet.dir().join("edge-1.creds");
    let edge2 = fleet.dir().join("edge-2.creds");
    for (from, to) in [
        (fleet.bootstrap_creds(), old.clone()),
        (
            fleet.state_dir("edge-1").join("cluster.creds"),
            edge1.clone(),
        ),
        (
            fleet.state_dir("edge-2").join("cluster.creds"),
            edge2.clone(),
        ),
    ] {
        if let Err(e) = std::fs::copy(&from, &to) {
            fleet.fail(&format!("copying {}: {e}", from.display()));
        }
    }
    let outcome = fleet.connect_outcome(&old).await;
    fleet.check(outcome == Outcome::Connected, || {
        format!("the bootstrap credential does not connect before rotation: {outcome:?}")
    });

    let mut rotate = tokio::process::Command::new(flotilla_testkit::binary("flotilla-hub"));
    // `flotilla-hub rotate bootstrap --secure-dir D` reaching the server at the fleet's URL:
    // given as the hub's top-level flag and its environment variable, which reach a `rotate`
    // with the hub's NATS flags and one with flags of its own alike.
    rotate
        .args(["--nats-url", &fleet.nats_url()])
        .args(["rotate", "bootstrap", "--secure-dir"])
        .arg(&fleet.secure)
        .env("FLOTILLA_NATS_URL", fleet.nats_url());
    // Longer than rotate's own 30 s patience with the server, so its error is the one seen.
    let out = run(rotate, None, SOON + std::time::Duration::from_secs(15)).await;
    fleet.check(out.ok(), || {
        format!(
            "`flotilla-hub rotate bootstrap` failed (exit {:?}): {}{}",
            out.code, out.stderr, out.stdout
        )
    });
    let rotated = std::fs::read(fleet.bootstrap_creds()).unwrap_or_default();
    fleet.check(rotated != std::fs::read(&old).unwrap_or_default(), || {
        "rotate left bootstrap.creds as it was".into()
    });
    wait_refused(&fleet, &old, "the old bootstrap credential to be refused").await;
    let fresh = fleet
        .attacker_with(&fleet.bootstrap_creds(), "_INBOX_bootstrap.rotated")
        .await;
    let key = nkeys::KeyPair::new_user().public_key();
    let answer = fresh.register(&Registration::new("edge-new", &key)).await;
    fleet.check(answer.is_ok(), || {
        format!("the new bootstrap credential cannot register: {answer:?}")
    });

    fleet.restart_hub().await;
    check_refused(&fleet, &old, "after a hub restart").await;

    fleet.cli_ok(&["deny", "edge-1"]).await;
    wait_refused(&fleet, &edge1, "edge-1's key revoked by the deny").await;
    check_refused(&fleet, &old, "after a deny pushed the account again").await;

    // The revocation ages past the credential TTL (120 s + slack) while the hub is down.
    // The aged time lies before the old credential's issue time: a NATS revocation refuses
    // JWTs issued at or before its time, so only a revocation that is not a moment — a
    // rotated-out key is never issued again, so every JWT of it, past and future, may be
    // refused — still refuses it. That is what "never un-revokes" asks of it.
    fleet.kill_hub();
    age_revocations(&fleet);
    fleet.restart_hub().await;
    check_refused(
        &fleet,
        &old,
        "after its revocation aged past the TTL and a restart",
    )
    .await;
    fleet.cli_ok(&["deny", "edge-2"]).await;
    wait_refused(&fleet, &edge2, "edge-2's key revoked by the deny").await;
    check_refused(
        &fleet,
        &old,
        "after its revocation aged past the TTL and a deny",
    )
    .await;
}

on_every_server!(a_join_credential_is_spent_once_its_agent_has_its_own_credentials);

/// Attack 6b: a join credential (`flotilla join-token NAME --accept`) is spent once the
/// agent that used it has its own credentials.
async fn a_join_credential_is_spent_once_its_agent_has_its_own_credentials(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    fleet.hub(HubOptions::new()).await;
    let join = fleet
        .join_token("edge-j", &["--ttl", "1h", "--accept"])
        .await;
    fleet.agent_with(
        "edge-j",
        flotilla_attacks::AgentOptions::default().creds(&join),
    );
    fleet.wait_available("edge-j").await;
    let own = fleet.state_dir("edge-j").join("cluster.creds");
    wait_for!(
        fleet,
        "edge-j's own credentials",
        SOON,
        own.is_file().then_some(())
    );
    let real = match fleet.store().await.cluster("edge-j").await {
        Ok(Some(c)) => c.hub.map(|h| h.agent_public_key).unwrap_or_default(),
        other => fleet.fail(&format!("edge-j is not stored: {other:?}")),
    };

    // A second use of the spent credential: refused, or unable to register.
    if let Outcome::Connected = fleet.connect_outcome(&join).await {
        let again = fleet.attacker_with(&join, "_INBOX_bootstrap.edge-j").await;
        let key = nkeys::KeyPair::new_user().public_key();
        let answers = again
            .register_repeatedly(
                &Registration::new("edge-j", &key),
                2,
                Duration::from_secs(1),
            )
            .await;
        for a in answers.iter().flatten() {
            let state =
                RegistrationState::try_from(a.state).unwrap_or(RegistrationState::Unspecified);
            fleet.check(
                a.user_jwt.is_empty()
                    && matches!(
                        state,
                        RegistrationState::Rejected | RegistrationState::Denied
                    ),
                || format!("the spent join credential registered again: {a:?}"),
            );
        }
    }
    let stored = match fleet.store().await.cluster("edge-j").await {
        Ok(Some(c)) => c.hub.map(|h| h.agent_public_key).unwrap_or_default(),
        other => fleet.fail(&format!("edge-j is not stored: {other:?}")),
    };
    fleet.check(stored == real, || {
        "the spent join credential changed edge-j's key".into()
    });
}

/// The agent key the store holds for `cluster`.
async fn agent_key(fleet: &Fleet, cluster: &str) -> String {
    match fleet.store().await.cluster(cluster).await {
        Ok(Some(c)) => c.hub.map(|h| h.agent_public_key).unwrap_or_default(),
        other => fleet.fail(&format!("{cluster} is not stored: {other:?}")),
    }
}

on_every_server!(a_key_revoked_through_one_hub_is_refused_by_every_hub);

/// Attack 6c: with several hubs, a key revoked through one of them stays revoked whichever hub
/// pushes the accounts next. Each hub has its own copy of the secure directory (as on its own
/// machine), so its revocations file knows only what it revoked itself: were that all it
/// pushed, the next push from another hub would bring a denied agent back.
async fn a_key_revoked_through_one_hub_is_refused_by_every_hub(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    let options = HubOptions::new()
        .flag("--shard-lease-ttl-seconds", "3")
        .flag("--shard-lease-renew-seconds", "1");
    fleet.hub(options.clone()).await;
    let mut creds = Vec::new();
    for name in ["edge-1", "edge-2", "edge-3"] {
        fleet.accepted_agent(name).await;
        let copy = fleet.dir().join(format!("{name}.creds"));
        if let Err(e) = std::fs::copy(fleet.state_dir(name).join("cluster.creds"), &copy) {
            fleet.fail(&format!("copying {name}'s credentials: {e}"));
        }
        creds.push(copy);
    }
    let edge1_key = agent_key(&fleet, "edge-1").await;
    let edge2_key = agent_key(&fleet, "edge-2").await;

    // The second machine's copy of the secure directory, made before any revocation.
    let other_secure = fleet.secure_copy("secure-b");
    fleet.cli_ok(&["deny", "edge-1"]).await;
    wait_refused(
        &fleet,
        &creds[0],
        "edge-1's key revoked by the deny through hub a",
    )
    .await;

    // Hub b starts knowing nothing of it on disk: it reads the shared revocations.
    let b = fleet.other_hub(&other_secure, &options).await;
    let b_file = other_secure.join("revocations.json");
    let knows = |key: &str| std::fs::read_to_string(&b_file).is_ok_and(|text| text.contains(key));
    fleet.check(knows(&edge1_key), || {
        "hub b started without edge-1's revocation from the shared bucket".into()
    });
    // A revocation through hub a while both run reaches hub b by its watch.
    fleet.cli_ok(&["deny", "edge-2"]).await;
    wait_refused(
        &fleet,
        &creds[1],
        "edge-2's key revoked by the deny through hub a",
    )
    .await;
    wait_for!(
        fleet,
        "hub b to learn edge-2's revocation",
        SOON,
        knows(&edge2_key).then_some(())
    );

    // Hub a is gone; hub b takes its shards and pushes the accounts on its own.
    fleet.kill_hub();
    let denied = wait_for!(
        fleet,
        "hub b to deny edge-3 once it holds the shards",
        SOON,
        {
            let out = fleet.cli_at(&b, &["deny", "edge-3"]).await;
            out.ok().then_some(out)
        }
    );
    fleet.check(denied.ok(), || "deny edge-3 through hub b failed".into());
    wait_refused(
        &fleet,
        &creds[2],
        "edge-3's key revoked by the deny through hub b",
    )
    .await;
    for (i, name) in ["edge-1", "edge-2"].iter().enumerate() {
        if let Outcome::Connected = fleet.connect_outcome(&creds[i]).await {
            fleet.fail(&format!(
                "{name}'s key, revoked through hub a, connects again after hub b pushed the accounts"
            ));
        }
    }
    // And hub b refuses to readmit edge-1 quietly.
    let accept = fleet.cli_at(&b, &["accept", "edge-1"]).await;
    fleet.check(
        !accept.ok() && accept.stderr.contains("was revoked"),
        || {
            format!(
                "accepting edge-1 through hub b without naming its key: exit {:?}, {}{}",
                accept.code, accept.stderr, accept.stdout
            )
        },
    );
}
