//! Floods against the limits (issue 23, attack 5), with bounded counts: the shared bootstrap
//! credential registering thousands of names, and an accepted cluster publishing thousands of
//! work-status subjects the hub never asked for. Each limit holds, each refusal is clear and
//! counted, and legitimate traffic still gets through.

use flotilla_api::v1::RegistrationState;
use flotilla_attacks::fleet::{SOON, accepted, metric_samples_text, metric_sum};
use flotilla_attacks::wire::{self, Registration};
use flotilla_attacks::{
    AgentOptions, Attacker, Fleet, HubOptions, Server, on_every_server, wait_for,
};
use std::time::Duration;

/// The pending-cluster cap the hub is started with.
const PENDING_MAX: usize = 50;
/// Registrations in the flood.
const REGISTRATIONS: usize = 1_000;
/// The unknown-status-subject budget the hub is started with.
const UNKNOWN_MAX: usize = 100;
/// Work-status subjects in the flood.
const STATUS_SUBJECTS: usize = 3_000;
/// The hub's limit-refusal counter.
const LIMIT_REFUSALS: &str = "flotilla_hub_limit_refusals_total";

on_every_server!(a_bootstrap_registration_flood_is_capped_refused_and_counted_and_a_join_credential_still_registers);

/// Attack 5a: 2,000 bootstrap registrations of distinct names at full speed.
async fn a_bootstrap_registration_flood_is_capped_refused_and_counted_and_a_join_credential_still_registers(
    server: Server,
) {
    let mut fleet = Fleet::secure(server).await;
    fleet
        .hub(HubOptions::new().flag("--bootstrap-pending-max", &PENDING_MAX.to_string()))
        .await;
    let attacker = fleet.attacker_with_bootstrap().await;
    // Each answer goes to the inbox a real agent of that name would use.
    let mut replies = match attacker.subscribe("_INBOX_bootstrap.*.flood").await {
        Ok(s) => s,
        Err(e) => fleet.fail(&e.to_string()),
    };
    for i in 0..REGISTRATIONS {
        let name = format!("flood-{i:04}");
        let key = nkeys::KeyPair::new_user().public_key();
        attacker
            .publish(
                &wire::register_subject(&name),
                Some(&format!("_INBOX_bootstrap.{name}.flood")),
                Registration::new(&name, &key).event(),
            )
            .await;
    }
    attacker.flush().await;
    let answers = Attacker::collect(
        &mut replies,
        REGISTRATIONS,
        Duration::from_secs(15),
        Duration::from_secs(60),
    )
    .await;
    let answers: Vec<_> = answers
        .iter()
        .filter_map(|m| wire::registration_response(&m.payload).ok())
        .collect();
    let refused: Vec<_> = answers
        .iter()
        .filter(|a| a.state != RegistrationState::Pending as i32)
        .collect();

    let store = fleet.store().await;
    let stored = match store.subjects("KV_clusters", "$KV.clusters.>").await {
        Ok(s) => s
            .keys()
            .filter(|k| k.starts_with("$KV.clusters.flood-"))
            .count(),
        Err(e) => fleet.fail(&e.to_string()),
    };
    fleet.check(stored <= PENDING_MAX, || {
        format!("{stored} pending clusters stored, over --bootstrap-pending-max {PENDING_MAX}")
    });
    let listed = fleet
        .clusters()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|c| {
            c["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("flood-"))
                && !accepted(c)
        })
        .count();
    fleet.check(listed <= PENDING_MAX, || {
        format!("`get clusters` lists {listed} pending flood clusters, over {PENDING_MAX}")
    });
    // Answers are core NATS (at most once): under a flood at full speed on two shared cores
    // some go missing between the server and the attacker (a real agent asks again). What the
    // hub did is read from its own counters: everything past the cap was refused.
    let hub_counted = metric_sum(&fleet.metrics().await, LIMIT_REFUSALS);
    fleet.check(hub_counted >= (REGISTRATIONS - 2 * PENDING_MAX) as f64, || {
        format!(
            "the hub counted {hub_counted} refusals of {REGISTRATIONS} registrations, with a cap of \
             {PENDING_MAX} ({} answers came, {} of them refusals)",
            answers.len(),
            refused.len()
        )
    });
    fleet.check(refused.len() + PENDING_MAX >= answers.len(), || {
        format!(
            "only {} of {} answered registrations were refused, with a cap of {PENDING_MAX}",
            refused.len(),
            answers.len()
        )
    });
    for a in &refused {
        fleet.check(!a.message.is_empty(), || {
            format!("a refusal without a reason: {a:?}")
        });
    }
    let metrics = fleet.metrics().await;
    let counted = metric_sum(&metrics, LIMIT_REFUSALS);
    fleet.check(counted >= refused.len() as f64, || {
        format!(
            "{} refusals answered but {LIMIT_REFUSALS} counts {counted}: {}",
            refused.len(),
            metric_samples_text(&metrics, LIMIT_REFUSALS)
        )
    });

    // A legitimate agent with a per-cluster join credential still registers.
    let file = fleet
        .join_token("legit", &["--ttl", "1h", "--accept"])
        .await;
    fleet.agent_with("legit", AgentOptions::default().creds(&file));
    fleet.wait_available("legit").await;
}

on_every_server!(
    a_cluster_flooding_unknown_work_status_subjects_is_capped_and_other_status_still_flows
);

/// Attack 5b: an accepted cluster publishes 3,000 distinct work-status subjects with random
/// resource ids.
async fn a_cluster_flooding_unknown_work_status_subjects_is_capped_and_other_status_still_flows(
    server: Server,
) {
    let mut fleet = Fleet::secure(server).await;
    fleet
        .hub(HubOptions::new().flag("--status-unknown-max", &UNKNOWN_MAX.to_string()))
        .await;
    fleet.accepted_agent("victim").await;
    fleet.apply_work("victim", "hello", "one").await;
    fleet.accepted_agent("mallory").await;
    fleet.stop_agent("mallory");
    let attacker = fleet.attacker_as("mallory").await;
    let flood = (0..STATUS_SUBJECTS)
        .map(|i| {
            let id = uuid::Uuid::new_v4().to_string();
            (
                wire::status_subject("mallory", "work", Some(&id)),
                wire::work_status("mallory", &id, i as u64 + 1),
            )
        })
        .collect();
    // Acknowledged (or refused) one by one: the stream has seen all of them before it is
    // counted.
    let (stored, refused) = attacker.publish_acked(flood).await;
    fleet.check(stored + refused == STATUS_SUBJECTS, || {
        format!("{stored} + {refused} acknowledgements for {STATUS_SUBJECTS} messages")
    });

    let store = fleet.store().await;
    let filter = format!("flotilla.status.{}.mallory.work.>", wire::shard("mallory"));
    let deadline = tokio::time::Instant::now() + SOON;
    let last = loop {
        // A read may time out while the server is busy removing the flood: try again until
        // the deadline.
        let n = match store.status_subjects(&filter).await {
            Ok(n) => n,
            Err(e) if tokio::time::Instant::now() >= deadline => fleet.fail(&e.to_string()),
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        if n <= UNKNOWN_MAX || tokio::time::Instant::now() >= deadline {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    fleet.check(last <= UNKNOWN_MAX, || {
        format!(
            "the status stream still holds {last} of mallory's unknown work subjects after {SOON:?}, over --status-unknown-max {UNKNOWN_MAX}"
        )
    });

    // The victim's work status still flows: a change is Applied at its new generation.
    fleet.apply_work("victim", "hello", "two").await;
    let counted = wait_for!(fleet, format!("{LIMIT_REFUSALS} counted"), SOON, {
        let n = metric_sum(&fleet.metrics().await, LIMIT_REFUSALS);
        (n > 0.0).then_some(n)
    });
    fleet.check(counted > 0.0, || format!("{LIMIT_REFUSALS} is {counted}"));
}
