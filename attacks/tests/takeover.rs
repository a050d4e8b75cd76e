//! Takeover and claim rewriting (issue 23, attacks 3 and 4): the shared bootstrap credential
//! registering a name with the attacker's own NKey. A pre-created accepted name gives it no
//! credentials, a pending name keeps its first key and `accept --key` pins that key, an accepted
//! name changes nothing and the refusal is counted, and no claim, capacity or version of an
//! accepted cluster moves.

use flotilla_api::v1::{RegistrationResponse, RegistrationState};
use flotilla_attacks::attacker::{self, Attacker};
use flotilla_attacks::fleet::{
    SOON, accepted, available, metric_samples_text, precreated_cluster_yaml, table_cell,
};
use flotilla_attacks::{
    AgentOptions, Fleet, HubOptions, Registration, Server, on_every_server, wait_for,
};
use serde_json::Value;
use std::time::Duration;

fn state(r: &RegistrationResponse) -> RegistrationState {
    RegistrationState::try_from(r.state).unwrap_or(RegistrationState::Unspecified)
}

/// The keys the hub stores for `name` (raw read of `KV_clusters`): (agent key, requested key).
async fn stored_keys(fleet: &Fleet, name: &str) -> (String, String) {
    match fleet.store().await.cluster(name).await {
        Ok(Some(c)) => c
            .hub
            .map(|h| (h.agent_public_key, h.requested_public_key))
            .unwrap_or_default(),
        Ok(None) => fleet.fail(&format!("{name} is not stored")),
        Err(e) => fleet.fail(&e.to_string()),
    }
}

/// The agent key the hub stores for `name`.
async fn stored_key(fleet: &Fleet, name: &str) -> String {
    stored_keys(fleet, name).await.0
}

/// The key a pending cluster waits with: whichever field the hub keeps it in.
async fn waiting_key(fleet: &Fleet, name: &str) -> (String, String) {
    stored_keys(fleet, name).await
}

/// At least one registration was answered, and no answer carries credentials.
fn check_no_credentials(
    fleet: &Fleet,
    answers: &[Result<RegistrationResponse, attacker::Error>],
    what: &str,
) {
    fleet.check(answers.iter().any(|a| a.is_ok()), || {
        format!("{what}: the hub answered none of the registrations: {answers:?}")
    });
    for a in answers.iter().flatten() {
        fleet.check(a.user_jwt.is_empty(), || {
            format!(
                "{what}: the attacker's key was issued credentials (state {:?})",
                state(a)
            )
        });
    }
}

/// Every answer refuses the attacker's key and says why: neither Accepted (the key is not
/// accepted) nor Pending (it is not waiting for the admin either), with a message.
fn check_refused_with_reason(
    fleet: &Fleet,
    answers: &[Result<RegistrationResponse, attacker::Error>],
    what: &str,
) {
    for a in answers.iter().flatten() {
        fleet.check(
            !matches!(
                state(a),
                RegistrationState::Accepted | RegistrationState::Pending
            ) && !a.message.is_empty(),
            || format!("{what}: the attacker's key was not refused with a reason: {a:?}"),
        );
    }
}

on_every_server!(a_precreated_accepted_name_gives_a_bootstrap_registration_no_credentials);

/// Attack 3a: a cluster created ahead of its agent with `hubAcceptsClient: true` is not
/// handed to the first key that registers its name with the shared bootstrap credentials.
async fn a_precreated_accepted_name_gives_a_bootstrap_registration_no_credentials(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    fleet.hub(HubOptions::new()).await;
    fleet.apply(&precreated_cluster_yaml("edge-pre")).await;
    wait_for!(
        fleet,
        "edge-pre created and accepted",
        SOON,
        fleet.cluster("edge-pre").await.filter(accepted)
    );

    let attacker = fleet.attacker_with_bootstrap().await;
    let key = nkeys::KeyPair::new_user().public_key();
    let answers = attacker
        .register_repeatedly(
            &Registration::new("edge-pre", &key),
            3,
            Duration::from_secs(1),
        )
        .await;
    check_no_credentials(&fleet, &answers, "a pre-created accepted name");
    let stored = stored_key(&fleet, "edge-pre").await;
    fleet.check(stored != key, || {
        "the attacker's key became the pre-created cluster's agent key".into()
    });
    for a in answers.iter().flatten() {
        fleet.check(state(a) != RegistrationState::Accepted, || {
            format!(
                "the attacker's registration of a pre-created name was answered Accepted: {a:?}"
            )
        });
    }
}

on_every_server!(a_pending_name_keeps_its_first_key_and_accept_pins_it_by_fingerprint);

/// Attack 3b: under a pending name the first key stays; another key is refused; the admin
/// accepts the first key by the fingerprint `get clusters -o wide` shows, and an accept
/// naming another key is refused.
async fn a_pending_name_keeps_its_first_key_and_accept_pins_it_by_fingerprint(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    fleet.hub(HubOptions::new()).await;
    let attacker = fleet.attacker_with_bootstrap().await;
    let first = nkeys::KeyPair::new_user().public_key();
    let second = nkeys::KeyPair::new_user().public_key();

    let answer = attacker
        .register(&Registration::new("edge-p", &first))
        .await;
    fleet.check(
        answer
            .as_ref()
            .is_ok_and(|a| state(a) == RegistrationState::Pending),
        || format!("the first key's registration is not pending: {answer:?}"),
    );
    wait_for!(fleet, "edge-p pending", SOON, fleet.cluster("edge-p").await);
    let (agent, requested) = waiting_key(&fleet, "edge-p").await;
    fleet.check(agent == first || requested == first, || {
        format!("the first key is not the one stored: agent {agent:?}, requested {requested:?}")
    });

    let answers = attacker
        .register_repeatedly(
            &Registration::new("edge-p", &second),
            2,
            Duration::from_secs(1),
        )
        .await;
    let (agent, requested) = waiting_key(&fleet, "edge-p").await;
    fleet.check(
        (agent == first || requested == first) && agent != second && requested != second,
        || "a second key replaced the pending cluster's first key (last key wins)".into(),
    );
    check_no_credentials(&fleet, &answers, "a second key for a pending name");
    check_refused_with_reason(&fleet, &answers, "a second key for a pending name");

    let wide = fleet.cli_ok(&["get", "clusters", "-o", "wide"]).await;
    let Some(fingerprint) = table_cell(&wide, "edge-p", "KEY").filter(|f| !f.is_empty()) else {
        fleet.fail(&format!(
            "`get clusters -o wide` shows no KEY for edge-p:\n{wide}"
        ));
    };
    let wrong = fleet.cli(&["accept", "edge-p", "--key", &second]).await;
    fleet.check(!wrong.ok(), || {
        format!(
            "`accept --key <a key that is not waiting>` was taken: {}",
            wrong.stdout
        )
    });
    let c = fleet.cluster("edge-p").await;
    fleet.check(!c.as_ref().is_some_and(accepted), || {
        "a refused accept --key accepted the cluster".into()
    });
    fleet
        .cli_ok(&["accept", "edge-p", "--key", &fingerprint])
        .await;
    wait_for!(
        fleet,
        "edge-p accepted",
        SOON,
        fleet.cluster("edge-p").await.filter(accepted)
    );
    let stored = stored_key(&fleet, "edge-p").await;
    fleet.check(stored == first, || "accept --key pinned another key".into());
    let issued = attacker
        .register(&Registration::new("edge-p", &first))
        .await;
    let subject = issued
        .as_ref()
        .ok()
        .and_then(|a| flotilla_attacks::wire::jwt_subject(&a.user_jwt));
    fleet.check(subject.as_deref() == Some(first.as_str()), || {
        format!("the accepted first key got no credentials of its own: {issued:?}")
    });
}

on_every_server!(another_key_under_an_accepted_name_changes_nothing_and_is_counted);

/// Attack 3c: another key registering an accepted cluster's name changes nothing, gets no
/// credentials, and the refusal is counted by reason on /metrics.
async fn another_key_under_an_accepted_name_changes_nothing_and_is_counted(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    fleet.hub(HubOptions::new()).await;
    fleet.accepted_agent("edge-1").await;
    let real = stored_key(&fleet, "edge-1").await;

    let attacker = fleet.attacker_with_bootstrap().await;
    let key = nkeys::KeyPair::new_user().public_key();
    let answers = attacker
        .register_repeatedly(
            &Registration::new("edge-1", &key),
            2,
            Duration::from_secs(1),
        )
        .await;
    check_no_credentials(&fleet, &answers, "another key for an accepted name");
    let stored = stored_key(&fleet, "edge-1").await;
    fleet.check(stored == real, || {
        "the accepted cluster's key changed".into()
    });
    let c = fleet.wait_available("edge-1").await;
    fleet.check(accepted(&c) && available(&c), || {
        format!("edge-1 changed: {c}")
    });

    let metric = "flotilla_hub_registration_refusals_total";
    let text = wait_for!(fleet, format!("{metric} counted"), SOON, {
        let text = fleet.metrics().await;
        (flotilla_attacks::fleet::metric_sum(&text, metric) >= 1.0).then_some(text)
    });
    let samples = metric_samples_text(&text, metric);
    fleet.check(samples.contains("reason=\""), || {
        format!("{metric} has no reason label: {samples}")
    });
    check_refused_with_reason(&fleet, &answers, "another key for an accepted name");
}

/// What a registration could rewrite on a cluster.
fn claims_capacity_version(c: &Value) -> Value {
    serde_json::json!({
        "labels": c["metadata"]["labels"],
        "claims": c["status"]["clusterClaims"],
        "capacity": c["status"]["capacity"],
        "allocatable": c["status"]["allocatable"],
        "version": c["status"]["version"],
    })
}

on_every_server!(a_registration_with_another_key_cannot_rewrite_an_accepted_clusters_claims);

/// Attack 4: a registration of an accepted name with another key and other claims,
/// capacity, version and labels changes none of them.
async fn a_registration_with_another_key_cannot_rewrite_an_accepted_clusters_claims(
    server: Server,
) {
    let mut fleet = Fleet::secure(server).await;
    fleet.hub(HubOptions::new()).await;
    fleet.agent_with(
        "edge-1",
        AgentOptions::default().flag("--claim", "region=eu"),
    );
    wait_for!(
        fleet,
        "edge-1 registered",
        SOON,
        fleet.cluster("edge-1").await
    );
    fleet.cli_ok(&["accept", "edge-1"]).await;
    let c = fleet.wait_available("edge-1").await;
    // Its own reports would repair a rewrite within a second: the agent is stopped.
    fleet.stop_agent("edge-1");
    let before = claims_capacity_version(&c);
    let attacker = fleet.attacker_with_bootstrap().await;
    let mut reg = Registration::new("edge-1", &nkeys::KeyPair::new_user().public_key());
    reg.claims = vec![
        ("region".into(), "us".into()),
        ("platform.open-cluster-management.io".into(), "AWS".into()),
    ];
    reg.capacity = vec![
        ("cpu".into(), "1000".into()),
        ("memory".into(), "4096Gi".into()),
    ];
    reg.kubernetes_version = "v9.9.9".into();
    reg.labels = vec![("owner".into(), "attacker".into())];
    let answers = attacker
        .register_repeatedly(&reg, 2, Duration::from_secs(1))
        .await;
    check_no_credentials(&fleet, &answers, "a rewriting registration");

    // The rewrite lands within moments of the answer, if at all: watch for two seconds.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while tokio::time::Instant::now() < deadline {
        let Some(now) = fleet.cluster("edge-1").await else {
            fleet.fail("edge-1 vanished");
        };
        let after = claims_capacity_version(&now);
        fleet.check(after == before, || {
            format!("the attacker rewrote the accepted cluster:\nbefore {before}\nafter  {after}")
        });
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The account a credentials file's user belongs to (its JWT's `issuer_account`).
fn issuer_account(creds: &std::path::Path) -> String {
    let text = std::fs::read_to_string(creds).unwrap_or_default();
    let jwt = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("eyJ"))
        .unwrap_or_default();
    let claims = jwt.split('.').nth(1).unwrap_or_default();
    let bytes = data_encoding::BASE64URL_NOPAD
        .decode(claims.trim_end_matches('=').as_bytes())
        .unwrap_or_default();
    let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    v["nats"]["issuer_account"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

on_every_server!(a_forged_identity_header_does_not_pass_for_the_names_join_credential);

/// Servers before 2.14 replace only the first `Nats-Request-Info` header a requester sets and
/// append their own: a bootstrap holder sending two copies that name the join credential of a
/// pre-approved name must not be taken for that credential.
async fn a_forged_identity_header_does_not_pass_for_the_names_join_credential(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    fleet.hub(HubOptions::new()).await;
    let join = fleet.join_token("edge-j", &["--accept"]).await;
    let join_key = match flotilla_attacks::attacker::creds_key(&join) {
        Some(k) => k.public_key(),
        None => fleet.fail("the join credential holds no seed"),
    };
    let agents = issuer_account(&fleet.bootstrap_creds());
    fleet.check(agents.starts_with('A'), || {
        format!("no agents account in bootstrap.creds: {agents:?}")
    });
    let attacker = fleet.attacker_with_bootstrap().await;
    let mine = nkeys::KeyPair::new_user().public_key();
    let forged = format!(r#"{{"acc":"{agents}","user":"{join_key}","kind":"Client"}}"#);
    let mut headers = flotilla_attacks::wire::headers();
    headers.append("Nats-Request-Info", forged.as_str());
    headers.append("Nats-Request-Info", forged.as_str());
    let reply = attacker.reply_for("edge-j");
    let mut sub = match attacker.client.subscribe(reply.clone()).await {
        Ok(s) => s,
        Err(e) => fleet.fail(&format!("subscribing to {reply}: {e}")),
    };
    if let Err(e) = attacker
        .client
        .publish_with_reply_and_headers(
            flotilla_attacks::wire::register_subject("edge-j"),
            reply,
            headers,
            Registration::new("edge-j", &mine).event(),
        )
        .await
    {
        fleet.fail(&format!("publishing the forged registration: {e}"));
    }
    attacker.flush().await;
    let answer =
        Attacker::collect(&mut sub, 1, Duration::from_secs(5), Duration::from_secs(10)).await;
    let answer = answer
        .first()
        .and_then(|m| flotilla_attacks::wire::registration_response(&m.payload).ok());
    // 2.9 keeps the forged copy: the hub refuses the request. 2.15 replaces every copy: the
    // request is then the bootstrap credential's, and its key may only wait for the admin.
    fleet.check(
        answer
            .as_ref()
            .is_some_and(|a| state(a) != RegistrationState::Accepted && a.user_jwt.is_empty()),
        || format!("a forged identity header was answered {answer:?}"),
    );
    let (agent, _) = stored_keys(&fleet, "edge-j").await;
    fleet.check(agent != mine, || {
        "the forged registration bound its key as the join credential's".to_string()
    });
    let c = fleet.cluster("edge-j").await;
    fleet.check(!c.as_ref().is_some_and(accepted), || {
        format!("the forged registration got edge-j accepted: {c:?}")
    });
}
