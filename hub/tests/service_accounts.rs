//! ManagedServiceAccounts end to end on a real nats-server: a hub, agents on simulated
//! clusters (which issue tokens like a TokenRequest, optionally capped like a cloud), the
//! sealed token in KV, rotation at a fraction of the lifetime the cluster granted,
//! `ttlSecondsAfterCreation`, deletion, hostile reports, and kubectl through the cluster
//! proxy with the account's token.

mod common;

use common::kubectl::Kubectl;
use common::*;
use flotilla_agent::backend::Backend;
use flotilla_agent::backend::sim::{SimBackend, SimConfig};
use flotilla_api::v1::{ManagedServiceAccount, ServiceAccountTokenReport};
use flotilla_api::work::ManifestId;
use flotilla_bus::envelope::{Event, headers};
use flotilla_bus::serviceaccounts as msa;
use flotilla_hub::serviceaccount::key::SealingKey;
use flotilla_testkit::NatsServer;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const NAMESPACE: &str = flotilla_api::serviceaccount::DEFAULT_NAMESPACE;

/// An OCM ManagedServiceAccount, parsed from YAML as `flotilla apply` does.
fn account(cluster: &str, name: &str, validity: &str, ttl: Option<i32>) -> ManagedServiceAccount {
    let ttl = ttl.map_or(String::new(), |t| {
        format!("  ttlSecondsAfterCreation: {t}\n")
    });
    let yaml = format!(
        "apiVersion: authentication.open-cluster-management.io/v1beta1\n\
         kind: ManagedServiceAccount\nmetadata:\n  name: {name}\n  namespace: {cluster}\n\
         spec:\n  rotation:\n    enabled: true\n    validity: {validity}\n{ttl}"
    );
    match flotilla_api::ocm::parse_documents(&yaml).remove(0) {
        Ok(flotilla_api::ocm::Document::ManagedServiceAccount(a)) => a,
        other => panic!("not a ManagedServiceAccount: {other:?}"),
    }
}

/// A simulated cluster issuing tokens of at most `cap`.
fn capped_backend(cap: Option<Duration>) -> Arc<SimBackend> {
    Arc::new(SimBackend::new(8, 32, "v1.30.2").with_config(SimConfig {
        ready_delay: Duration::from_millis(300),
        token_max_lifetime: cap,
        ..Default::default()
    }))
}

fn sa_id(name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "ServiceAccount".into(),
        namespace: NAMESPACE.into(),
        name: name.into(),
    }
}

fn condition(a: &ManagedServiceAccount, ty: &str) -> Option<String> {
    a.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == ty)
        .map(|c| c.status.clone())
}

fn times(a: &ManagedServiceAccount) -> Option<(SystemTime, SystemTime)> {
    let s = a.status.as_ref()?;
    let refreshed = s
        .token_secret_ref
        .as_ref()?
        .last_refresh_timestamp
        .as_ref()?;
    Some((
        flotilla_api::meta::system_time(refreshed),
        flotilla_api::meta::system_time(s.expiration_timestamp.as_ref()?),
    ))
}

/// Waits until the account has a token (TokenReported and SecretCreated True) passing `more`.
async fn wait_token(
    hub: &flotilla_hub::Hub,
    cluster: &str,
    name: &str,
    more: impl Fn(&ManagedServiceAccount) -> bool,
) -> ManagedServiceAccount {
    let accounts = hub.service_accounts();
    flotilla_testkit::eventually(SOON, &format!("a token for {cluster}/{name}"), || {
        let found = accounts.get(cluster, name).filter(|a| {
            condition(a, "TokenReported").as_deref() == Some("True")
                && condition(a, "SecretCreated").as_deref() == Some("True")
                && more(a)
        });
        async move { found }
    })
    .await
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn an_applied_account_gets_its_token_sealed_with_the_expiry_the_cluster_answered() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let backend = capped_backend(None);
    let _agent =
        accepted_agent_on(&mut api, agent_config("c1", &nats.url()), backend.clone()).await;
    let applied = hub
        .service_accounts()
        .apply(account("c1", "viewer", "24h", None))
        .await
        .unwrap();
    assert_eq!(applied.metadata.as_ref().unwrap().generation, 1);
    let a = wait_token(&hub, "c1", "viewer", |_| true).await;
    let (issued, expires) = times(&a).unwrap();
    let lifetime = expires.duration_since(issued).unwrap();
    assert!(
        lifetime.abs_diff(Duration::from_secs(24 * 3600)) < Duration::from_secs(5),
        "the cluster granted what was asked: {lifetime:?}"
    );
    assert!(
        backend.get(&sa_id("viewer")).await.unwrap().is_some(),
        "the ServiceAccount exists on the cluster"
    );
    let token = hub
        .service_accounts()
        .token("c1", "viewer", None)
        .await
        .unwrap();
    assert!(
        token.token.starts_with("sim."),
        "a token the cluster issued"
    );
    assert_eq!(token.service_account_namespace, NAMESPACE);
    // JetStream holds the sealed box only, keyed by the token's hash.
    let tokens = raw_values(&nats, flotilla_hub::serviceaccount::TOKENS).await;
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens[0].0, format!("c1.{}", msa::token_hash(&token.token)));
    for (key, value) in tokens.iter().chain(
        raw_values(&nats, flotilla_hub::serviceaccount::ACCOUNTS)
            .await
            .iter(),
    ) {
        assert!(
            !contains(value, &token.token),
            "{key} holds the token in plaintext"
        );
    }
    let client = async_nats::connect(nats.url()).await.unwrap();
    let status = async_nats::jetstream::new(client)
        .get_stream(flotilla_bus::jetstream::STATUS_STREAM)
        .await
        .unwrap()
        .get_last_raw_message_by_subject(&msa::status_subject(
            "c1",
            &msa::resource_id("c1", "viewer"),
        ))
        .await
        .unwrap();
    assert!(
        !contains(&status.payload, &token.token),
        "the status stream holds the token in plaintext"
    );
    // A read-only caller is refused the token; a deployer only with a grant covering it.
    let tokens = common::tokens::tokens();
    let viewer = tokens.identify(common::tokens::VIEWER).unwrap();
    let deployer = tokens.identify(common::tokens::DEPLOYER).unwrap();
    for who in [viewer, deployer] {
        let e = hub
            .service_accounts()
            .token("c1", "viewer", Some(&who))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("may not fetch the token"), "{e}");
    }
}

#[tokio::test]
async fn tokens_rotate_at_a_fraction_of_the_lifetime_the_cluster_capped() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    // Asked for ten minutes, the "cloud" grants three seconds: rotated after about 2.4 s.
    let backend = capped_backend(Some(Duration::from_secs(3)));
    let _agent = accepted_agent_on(&mut api, agent_config("c1", &nats.url()), backend).await;
    hub.service_accounts()
        .apply(account("c1", "short", "10m", None))
        .await
        .unwrap();
    let first = wait_token(&hub, "c1", "short", |_| true).await;
    let (issued, expires) = times(&first).unwrap();
    assert!(
        expires.duration_since(issued).unwrap() <= Duration::from_secs(4),
        "the expiry is the cluster's answer, not the validity asked"
    );
    let old = hub
        .service_accounts()
        .token("c1", "short", None)
        .await
        .unwrap()
        .token;
    let second = wait_token(&hub, "c1", "short", |a| {
        times(a).is_some_and(|(i, _)| i > issued)
    })
    .await;
    let (reissued, _) = times(&second).unwrap();
    assert!(
        reissued < expires,
        "rotated before the old token expired ({reissued:?} vs {expires:?})"
    );
    let new = hub
        .service_accounts()
        .token("c1", "short", None)
        .await
        .unwrap()
        .token;
    assert_ne!(old, new);
    // The hub keeps the current token only.
    assert_eq!(
        raw_values(&nats, flotilla_hub::serviceaccount::TOKENS)
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn ttl_and_delete_remove_the_account_and_its_service_account_on_the_cluster() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let backend = capped_backend(None);
    let _agent =
        accepted_agent_on(&mut api, agent_config("c1", &nats.url()), backend.clone()).await;
    let accounts = hub.service_accounts();
    accounts
        .apply(account("c1", "brief", "1h", Some(3)))
        .await
        .unwrap();
    accounts
        .apply(account("c1", "kept", "1h", None))
        .await
        .unwrap();
    wait_token(&hub, "c1", "brief", |_| true).await;
    wait_token(&hub, "c1", "kept", |_| true).await;
    assert!(backend.get(&sa_id("brief")).await.unwrap().is_some());
    // Deleted: the token is refused at once, the ServiceAccount goes, then the account.
    accounts.delete("c1", "kept").await.unwrap();
    assert!(accounts.token("c1", "kept", None).await.is_err());
    for name in ["kept", "brief"] {
        let b = backend.clone();
        let a = accounts.clone();
        flotilla_testkit::eventually(SOON, &format!("{name} gone from hub and cluster"), || {
            let (b, a) = (b.clone(), a.clone());
            async move {
                let sa = b.get(&sa_id(name)).await.unwrap();
                (sa.is_none() && a.get("c1", name).is_none()).then_some(())
            }
        })
        .await;
    }
    assert!(
        raw_values(&nats, flotilla_hub::serviceaccount::TOKENS)
            .await
            .is_empty()
    );
}

/// Publishes `report` as cluster `subject_cluster`'s report on its status subject.
async fn publish_report(
    nats: &NatsServer,
    subject_cluster: &str,
    report: &ServiceAccountTokenReport,
) {
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let ev = Event::new(msa::status_type(), "attacker", subject_cluster, report)
        .with_sequence(1_000_000)
        .with_resource_id(report.resource_id.clone());
    let subject = msa::status_subject(subject_cluster, &report.resource_id);
    js.publish_with_headers(subject, headers(&ev), ev.encode(1 << 20).unwrap())
        .await
        .unwrap()
        .await
        .unwrap();
}

#[tokio::test]
async fn hostile_reports_are_refused_counted_and_store_nothing() {
    let nats = NatsServer::start();
    let key = SealingKey::ephemeral();
    let mut config = hub_config(&nats.url());
    config.families.service_accounts.key = key.clone();
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let _agents = accepted_fleet(&mut api, &nats.url(), &["c1", "c2"]).await;
    hub.service_accounts()
        .apply(account("c1", "sa", "1h", None))
        .await
        .unwrap();
    hub.service_accounts()
        .apply(account("c2", "sa", "1h", None))
        .await
        .unwrap();
    let before = wait_token(&hub, "c1", "sa", |_| true).await;
    wait_token(&hub, "c2", "sa", |_| true).await;
    let real = hub
        .service_accounts()
        .token("c1", "sa", None)
        .await
        .unwrap()
        .token;
    let now = flotilla_api::meta::now();
    let later = flotilla_api::meta::timestamp(SystemTime::now() + Duration::from_secs(3600));
    let forged = |cluster: &str, name: &str, token: &str, to: &str| {
        let (sealed, sender) = msa::seal(token, to).unwrap();
        ServiceAccountTokenReport {
            cluster_name: cluster.into(),
            name: name.into(),
            resource_id: msa::resource_id(cluster, name),
            observed_generation: 1,
            sealed_token: sealed,
            sender_xkey: sender,
            hub_xkey: key.public().to_string(),
            expiration_timestamp: Some(later),
            issued_at: Some(now),
            service_account_namespace: NAMESPACE.into(),
            ..Default::default()
        }
    };
    // An account the hub does not have.
    publish_report(
        &nats,
        "c1",
        &forged("c1", "ghost", "forged-1", key.public()),
    )
    .await;
    // c2's account, reported on c1's subject.
    publish_report(&nats, "c1", &forged("c2", "sa", "forged-2", key.public())).await;
    // A box that does not open with the hub's key (sealed to another).
    let other = nkeys::XKey::new().public_key();
    publish_report(&nats, "c1", &forged("c1", "sa", "forged-3", &other)).await;
    for reason in ["unknown_account", "clustername_mismatch", "sealed_token"] {
        wait_metric(&hub, &format!("reason=\"{reason}\"")).await;
    }
    // Nothing changed: the same token, the same status, one token per account.
    assert_eq!(
        hub.service_accounts()
            .token("c1", "sa", None)
            .await
            .unwrap()
            .token,
        real
    );
    assert_eq!(
        times(&hub.service_accounts().get("c1", "sa").unwrap()),
        times(&before)
    );
    let stored = raw_values(&nats, flotilla_hub::serviceaccount::TOKENS).await;
    assert_eq!(
        stored.len(),
        2,
        "{:?}",
        stored.iter().map(|(k, _)| k).collect::<Vec<_>>()
    );
    assert!(hub.service_accounts().get("c1", "ghost").is_none());
}

#[tokio::test]
async fn kubectl_with_an_accounts_token_reaches_its_cluster_only() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("hub.pem"), dir.path().join("hub-key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(common::tokens::tokens());
    config.api.tls = Some(flotilla_hub::TlsFiles {
        cert: cert_file,
        key: key_file,
    });
    config.cluster.auto_accept.enabled = true;
    config.cluster_proxy.listen = Some("127.0.0.1:0".parse().unwrap());
    let hub = start_hub(config).await;
    let _a1 = start_agent(agent_config("c1", &nats.url()));
    let _a2 = start_agent(agent_config("c2", &nats.url()));
    for c in ["c1", "c2"] {
        flotilla_testkit::eventually(SOON, &format!("{c} available"), || {
            let up = hub
                .inventory
                .get(c)
                .is_some_and(|x| available(&x).as_deref() == Some("True"));
            async move { up.then_some(()) }
        })
        .await;
    }
    hub.service_accounts()
        .apply(account("c1", "ops", "1h", None))
        .await
        .unwrap();
    wait_token(&hub, "c1", "ops", |_| true).await;
    let token = hub
        .service_accounts()
        .token("c1", "ops", None)
        .await
        .unwrap()
        .token;
    let server = format!(
        "https://localhost:{}",
        hub.cluster_proxy_addr.unwrap().port()
    );
    let on_c1 = Kubectl::new(&server, Some(&cert.cert.pem()), "c1", Some(&token));
    on_c1
        .ok(
            &["create", "configmap", "from-sa", "--from-literal=k=v"],
            None,
        )
        .await;
    assert!(
        on_c1
            .ok(&["get", "configmaps", "-o", "name"], None)
            .await
            .contains("configmap/from-sa")
    );
    // The same token is nobody on another cluster.
    let on_c2 = Kubectl::new(&server, Some(&cert.cert.pem()), "c2", Some(&token));
    let refused = on_c2.fails(&["get", "configmaps"], None).await;
    assert!(
        refused.contains("Unauthorized") || refused.contains("logged in"),
        "{refused}"
    );
    // Deleted: refused at once, on its own cluster too.
    hub.service_accounts().delete("c1", "ops").await.unwrap();
    let refused = on_c1.fails(&["get", "configmaps"], None).await;
    assert!(refused.contains("logged in"), "{refused}");
}

/// A report of a new token `token` for `cluster/name`, sealed to `key`, issued `issued`.
fn sealed_report(
    cluster: &str,
    name: &str,
    token: &str,
    key: &SealingKey,
    issued: SystemTime,
) -> ServiceAccountTokenReport {
    let (sealed, sender) = msa::seal(token, key.public()).unwrap();
    ServiceAccountTokenReport {
        cluster_name: cluster.into(),
        name: name.into(),
        resource_id: msa::resource_id(cluster, name),
        observed_generation: 1,
        sealed_token: sealed,
        sender_xkey: sender,
        hub_xkey: key.public().to_string(),
        expiration_timestamp: Some(flotilla_api::meta::timestamp(
            issued + Duration::from_secs(3600),
        )),
        issued_at: Some(flotilla_api::meta::timestamp(issued)),
        service_account_namespace: NAMESPACE.into(),
        ..Default::default()
    }
}

/// Forwards `report` to the controllers' hub as a shard's hub does, sent once this returns;
/// the answer comes on the subscription.
async fn forward_start(
    client: &async_nats::Client,
    report: &ServiceAccountTokenReport,
) -> async_nats::Subscriber {
    use prost::Message;
    let ev = Event::new(msa::status_type(), "agent", &report.cluster_name, report)
        .with_resource_id(report.resource_id.clone());
    let forwarded = flotilla_api::v1::ForwardedReport {
        event: ev.encode(1 << 20).unwrap().to_vec(),
        resource_id: report.resource_id.clone(),
        accepted: true,
    };
    let inbox = client.new_inbox();
    let answers = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply(
            format!("{}.{}", flotilla_hub::report::SUBJECT_PREFIX, msa::KIND_MSA),
            inbox,
            forwarded.encode_to_vec().into(),
        )
        .await
        .unwrap();
    client.flush().await.unwrap();
    answers
}

/// The answer to a forwarded report (`taken`, `busy` or `refused:<reason>`), waited for at
/// most `within`.
async fn answer(mut answers: async_nats::Subscriber, within: Duration) -> String {
    use flotilla_api::v1::report_answer::Outcome;
    use futures::StreamExt;
    use prost::Message;
    let m = tokio::time::timeout(within, answers.next())
        .await
        .expect("an answer from the controllers' hub in time")
        .unwrap();
    let answer = flotilla_api::v1::ReportAnswer::decode(m.payload.as_ref()).unwrap();
    match answer.outcome {
        Some(Outcome::Taken(_)) => "taken".into(),
        Some(Outcome::Busy(_)) => "busy".into(),
        Some(Outcome::Refused(r)) => format!("refused:{}", r.reason),
        None => "none".into(),
    }
}

#[tokio::test]
async fn a_forwarded_report_is_answered_taken_only_once_stored_and_busy_when_the_mailbox_is_full() {
    use futures::StreamExt;
    let nats = NatsServer::start();
    let key = SealingKey::ephemeral();
    let mut config = hub_config(&nats.url());
    config.families.service_accounts.key = key.clone();
    config.families.service_accounts.mailbox = 1;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let _agent = accepted_agent_on(
        &mut api,
        agent_config("c1", &nats.url()),
        capped_backend(None),
    )
    .await;
    hub.service_accounts()
        .apply(account("c1", "sa", "1h", None))
        .await
        .unwrap();
    wait_token(&hub, "c1", "sa", |_| true).await;
    let own = hub
        .service_accounts()
        .token("c1", "sa", None)
        .await
        .unwrap()
        .token;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    // The token store stops answering: its stream is gone, and whatever listens on its
    // subjects never acknowledges a write.
    js.delete_stream(format!("KV_{}", flotilla_hub::serviceaccount::TOKENS))
        .await
        .unwrap();
    let mut swallow = client
        .subscribe(format!("$KV.{}.>", flotilla_hub::serviceaccount::TOKENS))
        .await
        .unwrap();
    client.flush().await.unwrap();
    let t0 = SystemTime::now();
    let report = |token: &str, ms: u64| {
        sealed_report("c1", "sa", token, &key, t0 + Duration::from_millis(ms))
    };
    // A: taken into the task, whose token write then hangs.
    let a = forward_start(&client, &report("fwd-a", 1)).await;
    tokio::time::timeout(SOON, swallow.next())
        .await
        .expect("the task writes A's token")
        .unwrap();
    // B waits in the mailbox (capacity 1); C finds it full and is told so at once.
    let b = forward_start(&client, &report("fwd-b", 2)).await;
    let c = forward_start(&client, &report("fwd-c", 3)).await;
    assert_eq!(answer(c, Duration::from_secs(2)).await, "busy");
    // A's write fails: A was not stored, and says so; so does B.
    drop(swallow);
    client.flush().await.unwrap();
    assert_eq!(answer(a, SOON).await, "busy");
    assert_eq!(answer(b, SOON).await, "busy");
    assert_eq!(
        hub.service_accounts()
            .token("c1", "sa", None)
            .await
            .unwrap()
            .token,
        own,
        "the cluster's own token is still the account's"
    );
    // The store is back: the same report again is stored, then answered taken.
    flotilla_hub::store::Bucket::<flotilla_api::v1::ServiceAccountTokenRecord>::open(
        &js,
        flotilla_hub::serviceaccount::TOKENS,
        Default::default(),
    )
    .await
    .unwrap();
    let c = forward_start(&client, &report("fwd-c", 3)).await;
    assert_eq!(answer(c, SOON).await, "taken");
    let stored = raw_values(&nats, flotilla_hub::serviceaccount::TOKENS).await;
    assert_eq!(
        stored.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        [format!("c1.{}", msa::token_hash("fwd-c"))]
    );
    assert_eq!(
        hub.service_accounts()
            .token("c1", "sa", None)
            .await
            .unwrap()
            .token,
        "fwd-c"
    );
}

/// Lets the token bucket's stream take rollups (a KV purge is one) or not: with them refused,
/// every removal of a token record fails while writes still succeed.
async fn token_purges_work(nats: &NatsServer, allowed: bool) {
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut stream = js
        .get_stream(format!("KV_{}", flotilla_hub::serviceaccount::TOKENS))
        .await
        .unwrap();
    let mut config = stream.info().await.unwrap().config.clone();
    config.allow_rollup = allowed;
    js.update_stream(config).await.unwrap();
}

async fn token_lookup(nats: &NatsServer) -> flotilla_hub::serviceaccount::TokenLookup {
    let client = async_nats::connect(nats.url()).await.unwrap();
    flotilla_hub::serviceaccount::TokenLookup::open(
        &async_nats::jetstream::new(client),
        Default::default(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_replaced_token_whose_removal_failed_is_refused_and_removed_once_the_store_allows() {
    let nats = NatsServer::start();
    let config = hub_config(&nats.url());
    let hub = start_hub(config.clone()).await;
    let mut api = clusters_client(&hub).await;
    // Tokens of three seconds: replaced about every 2.4 s.
    let _agent = accepted_agent_on(
        &mut api,
        agent_config("c1", &nats.url()),
        capped_backend(Some(Duration::from_secs(3))),
    )
    .await;
    hub.service_accounts()
        .apply(account("c1", "short", "10m", None))
        .await
        .unwrap();
    let first = wait_token(&hub, "c1", "short", |_| true).await;
    let (issued, _) = times(&first).unwrap();
    let old = hub
        .service_accounts()
        .token("c1", "short", None)
        .await
        .unwrap()
        .token;
    let lookup = token_lookup(&nats).await;
    assert!(lookup.owner("c1", &old).await.unwrap().is_some());
    token_purges_work(&nats, false).await;
    wait_token(&hub, "c1", "short", |a| {
        times(a).is_some_and(|(i, _)| i > issued)
    })
    .await;
    let new = hub
        .service_accounts()
        .token("c1", "short", None)
        .await
        .unwrap()
        .token;
    let stored: Vec<String> = raw_values(&nats, flotilla_hub::serviceaccount::TOKENS)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(
        stored.contains(&format!("c1.{}", msa::token_hash(&old))),
        "the old record is still stored (its removal failed): {stored:?}"
    );
    assert_eq!(
        lookup.owner("c1", &old).await.unwrap(),
        None,
        "a replaced token is refused while its record is left"
    );
    assert!(lookup.owner("c1", &new).await.unwrap().is_some());
    // The store takes removals again: the leftover goes without another rotation's help.
    token_purges_work(&nats, true).await;
    only_the_current_token_stored(&nats, &hub).await;
    assert_eq!(lookup.owner("c1", &old).await.unwrap(), None);
    // Leftovers of a hub that stopped are found by the next one from the store.
    token_purges_work(&nats, false).await;
    let (issued, _) = times(&wait_token(&hub, "c1", "short", |_| true).await).unwrap();
    wait_token(&hub, "c1", "short", |a| {
        times(a).is_some_and(|(i, _)| i > issued)
    })
    .await;
    assert!(
        raw_values(&nats, flotilla_hub::serviceaccount::TOKENS)
            .await
            .len()
            > 1
    );
    hub.stop().await;
    let hub = start_hub(config).await;
    token_purges_work(&nats, true).await;
    only_the_current_token_stored(&nats, &hub).await;
}

/// Waits until the token bucket holds c1/short's current token only.
async fn only_the_current_token_stored(nats: &NatsServer, hub: &flotilla_hub::Hub) {
    let accounts = hub.service_accounts();
    flotilla_testkit::eventually(SOON, "only the current token's record left", || {
        let accounts = accounts.clone();
        async move {
            let current = accounts.token("c1", "short", None).await.ok()?.token;
            let stored = raw_values(nats, flotilla_hub::serviceaccount::TOKENS).await;
            (stored.len() == 1 && stored[0].0 == format!("c1.{}", msa::token_hash(&current)))
                .then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn deleting_a_cluster_removes_its_accounts_and_their_tokens() {
    use flotilla_api::v1::ServiceAccountTokenRecord;
    use flotilla_hub::serviceaccount::{ACCOUNTS, TOKENS};
    use flotilla_hub::store::Bucket;
    let nats = NatsServer::start();
    // An account and token of a cluster deleted while no hub ran the controllers.
    {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let accounts = Bucket::<ManagedServiceAccount>::open(&js, ACCOUNTS, Default::default())
            .await
            .unwrap();
        let tokens = Bucket::<ServiceAccountTokenRecord>::open(&js, TOKENS, Default::default())
            .await
            .unwrap();
        let mut orphan = account("gone", "sa", "1h", None);
        orphan.metadata.as_mut().unwrap().generation = 1;
        accounts.put("gone.sa", &orphan).await.unwrap();
        let record = ServiceAccountTokenRecord {
            cluster_name: "gone".into(),
            name: "sa".into(),
            ..Default::default()
        };
        tokens
            .put(&format!("gone.{}", msa::token_hash("t")), &record)
            .await
            .unwrap();
    }
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let _agents = accepted_fleet(&mut api, &nats.url(), &["c1", "c2"]).await;
    for c in ["c1", "c2"] {
        hub.service_accounts()
            .apply(account(c, "sa", "1h", None))
            .await
            .unwrap();
        wait_token(&hub, c, "sa", |_| true).await;
    }
    let token = hub
        .service_accounts()
        .token("c1", "sa", None)
        .await
        .unwrap()
        .token;
    let lookup = token_lookup(&nats).await;
    assert!(lookup.owner("c1", &token).await.unwrap().is_some());
    api.delete_cluster(flotilla_api::v1::DeleteClusterRequest { name: "c1".into() })
        .await
        .unwrap();
    let accounts = hub.service_accounts();
    flotilla_testkit::eventually(SOON, "c1's and gone's accounts and tokens removed", || {
        let (nats, accounts) = (&nats, accounts.clone());
        async move {
            let keys =
                |v: Vec<(String, Vec<u8>)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
            let stored = keys(raw_values(nats, ACCOUNTS).await);
            let tokens = keys(raw_values(nats, TOKENS).await);
            let c2 = |ks: &[String]| ks.len() == 1 && ks[0].starts_with("c2.");
            (accounts.get("c1", "sa").is_none()
                && accounts.get("gone", "sa").is_none()
                && c2(&stored)
                && c2(&tokens))
            .then_some(())
        }
    })
    .await;
    assert_eq!(lookup.owner("c1", &token).await.unwrap(), None);
    assert!(hub.service_accounts().get("c2", "sa").is_some());
}

#[tokio::test]
async fn a_refused_report_says_so_in_the_status_a_repeat_writes_nothing_and_clusters_are_rate_limited()
 {
    let nats = NatsServer::start();
    let key = SealingKey::ephemeral();
    let mut config = hub_config(&nats.url());
    config.families.service_accounts.key = key.clone();
    config.families.service_accounts.report_rate =
        flotilla_hub::serviceaccount::rules::ReportRate {
            per_second: 0.001,
            burst: 6,
        };
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let _agent = accepted_agent_on(
        &mut api,
        agent_config("c1", &nats.url()),
        capped_backend(None),
    )
    .await;
    let accounts = hub.service_accounts();
    accounts
        .apply(account("c1", "sa", "1h", None))
        .await
        .unwrap();
    let before = wait_token(&hub, "c1", "sa", |_| true).await;
    let own = accounts.token("c1", "sa", None).await.unwrap().token;
    let client = async_nats::connect(nats.url()).await.unwrap();
    // A box that does not open.
    let mut bad = sealed_report("c1", "sa", "forged", &key, SystemTime::now());
    bad.sealed_token[0] ^= 1;
    assert_eq!(
        answer(forward_start(&client, &bad).await, SOON).await,
        "taken"
    );
    let refused = accounts.get("c1", "sa").unwrap();
    let reported = refused
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.r#type == "TokenReported")
        .unwrap()
        .clone();
    assert_eq!(
        (reported.status.as_str(), reported.reason.as_str()),
        ("False", "ReportRefused")
    );
    assert!(
        reported.message.contains("sealed_token"),
        "{}",
        reported.message
    );
    // The token held stays the account's.
    assert_eq!(times(&refused), times(&before));
    assert_eq!(accounts.token("c1", "sa", None).await.unwrap().token, own);
    // The same refusal again changes nothing, and writes nothing.
    let revision = |a: &ManagedServiceAccount| a.metadata.as_ref().unwrap().resource_version;
    assert_eq!(
        answer(forward_start(&client, &bad).await, SOON).await,
        "taken"
    );
    assert_eq!(
        revision(&accounts.get("c1", "sa").unwrap()),
        revision(&refused)
    );
    // Past its burst, a cluster's reports wait for a later delivery.
    let mut answers = Vec::new();
    for _ in 0..8 {
        let a = answer(forward_start(&client, &bad).await, SOON).await;
        let busy = a == "busy";
        answers.push(a);
        if busy {
            break;
        }
    }
    assert_eq!(
        answers.last().map(String::as_str),
        Some("busy"),
        "{answers:?}"
    );
    assert!(answers.len() <= 5, "{answers:?}");
    wait_metric(&hub, "reason=\"rate_limited\"").await;
}

#[tokio::test]
async fn a_bearer_lookup_is_bounded_and_a_bearer_not_shaped_like_a_token_costs_none() {
    use flotilla_hub::serviceaccount::{LOOKUP_TIMEOUT, LookupError, TOKENS};
    let nats = NatsServer::start();
    let lookup = token_lookup(&nats).await;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    // The token store stops answering: its stream is gone and its reads go unanswered.
    js.delete_stream(format!("KV_{TOKENS}")).await.unwrap();
    let _swallow = client
        .subscribe(format!("$JS.API.DIRECT.GET.KV_{TOKENS}.>"))
        .await
        .unwrap();
    client.flush().await.unwrap();
    let started = std::time::Instant::now();
    for bearer in ["not-a-token", "a.b.c", "with space.in.it-long-enough"] {
        assert_eq!(lookup.owner("c1", bearer).await.unwrap(), None);
    }
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "no lookup for bearers that cannot be tokens ({:?})",
        started.elapsed()
    );
    let started = std::time::Instant::now();
    let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
    let err = lookup.owner("c1", jwt).await.unwrap_err();
    assert!(matches!(err, LookupError::TimedOut(_)), "{err}");
    assert!(
        started.elapsed() < LOOKUP_TIMEOUT + Duration::from_secs(1),
        "bounded ({:?})",
        started.elapsed()
    );
}

#[tokio::test]
async fn tokens_keep_rotating_once_the_hub_has_confirmed_the_account() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    // Three-second tokens: the hub confirms the account after the first report and sends it
    // again only every five minutes; the agent must rotate on its own.
    let _agent = accepted_agent_on(
        &mut api,
        agent_config("c1", &nats.url()),
        capped_backend(Some(Duration::from_secs(3))),
    )
    .await;
    hub.service_accounts()
        .apply(account("c1", "short", "10m", None))
        .await
        .unwrap();
    let (mut issued, _) = times(&wait_token(&hub, "c1", "short", |_| true).await).unwrap();
    for _ in 0..3 {
        let next = wait_token(&hub, "c1", "short", |a| {
            times(a).is_some_and(|(i, _)| i > issued)
        })
        .await;
        let (i, _) = times(&next).unwrap();
        assert!(
            i.duration_since(issued).unwrap() < Duration::from_secs(3),
            "rotated before the previous token expired"
        );
        issued = i;
    }
}
