//! The one task of the hub's ManagedServiceAccounts: the only writer of both buckets. It takes
//! applies, deletes, token reads and the clusters' reports from its mailbox, and wakes for
//! re-deliveries and `ttlSecondsAfterCreation` deletions.

use super::rules::{self, Refusal};
use super::{Buckets, Deps, MsaError, Views, token_key};
use crate::keys::ObjectRef;
use flotilla_api::v1::{
    ManagedServiceAccount, ManagedServiceAccountToken, ServiceAccountDelivery,
    ServiceAccountTokenRecord, ServiceAccountTokenReport,
};
use flotilla_bus::envelope::{Action, Event};
use flotilla_bus::serviceaccounts as msa;
use flotilla_bus::subjects;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// A checked report from a cluster, with the stream message to acknowledge once handled.
pub struct ReportIn {
    /// The report (its cluster and resource id match its subject).
    pub report: ServiceAccountTokenReport,
    /// Acknowledged once handled.
    pub ack: Option<async_nats::jetstream::Message>,
}

/// Messages to the task.
pub enum Msg {
    /// Create or update; answered once stored.
    Apply(
        Box<ManagedServiceAccount>,
        oneshot::Sender<Result<ManagedServiceAccount, MsaError>>,
    ),
    /// Start deleting; answered once the deletion is stored.
    Delete(ObjectRef, oneshot::Sender<Result<(), MsaError>>),
    /// The current token, opened.
    Token(
        ObjectRef,
        oneshot::Sender<Result<ManagedServiceAccountToken, MsaError>>,
    ),
    /// A cluster's report.
    Report(Box<ReportIn>),
    /// Stop (the controllers moved).
    Stop,
}

const MAILBOX: usize = 4096;

struct Entry {
    account: ManagedServiceAccount,
    rev: u64,
    /// The current token: its hash and record.
    token: Option<(String, ServiceAccountTokenRecord)>,
    /// The generation the cluster last answered.
    confirmed: i64,
    next_send: Instant,
    sends: u32,
}

impl Entry {
    fn deleting(&self) -> bool {
        self.account
            .metadata
            .as_ref()
            .is_some_and(|m| m.deletion_timestamp.is_some())
    }

    fn generation(&self) -> i64 {
        self.account.metadata.as_ref().map_or(0, |m| m.generation)
    }
}

struct Actor {
    buckets: Buckets,
    deps: Deps,
    views: Views,
    entries: BTreeMap<String, Entry>,
}

/// Starts the task over what was stored.
pub(super) fn spawn(
    buckets: Buckets,
    deps: Deps,
    views: Views,
    accounts: Vec<(String, ManagedServiceAccount, u64)>,
    tokens: Vec<(String, ServiceAccountTokenRecord, u64)>,
) -> (mpsc::Sender<Msg>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(MAILBOX);
    let mut actor = Actor {
        buckets,
        deps,
        views,
        entries: BTreeMap::new(),
    };
    let now = Instant::now();
    for (_, account, rev) in accounts {
        let key = super::object_key(account.metadata.as_ref()).inventory_key();
        let generation = account.metadata.as_ref().map_or(0, |m| m.generation);
        actor.publish_view(&key, &account, rev);
        actor.entries.insert(
            key,
            Entry {
                account,
                rev,
                token: None,
                confirmed: generation,
                next_send: now,
                sends: 0,
            },
        );
    }
    let mut stray = Vec::new();
    for (kv_key, record, _) in tokens {
        let key = ObjectRef::new(&record.cluster_name, &record.name).inventory_key();
        let hash = kv_key.rsplit('.').next().unwrap_or_default().to_string();
        match actor.entries.get_mut(&key) {
            Some(e) if !e.deleting() => {
                let newer = e
                    .token
                    .as_ref()
                    .is_none_or(|(_, r)| issued(r) < issued(&record));
                if newer {
                    if let Some((old, _)) = e.token.replace((hash, record)) {
                        stray.push(token_key(&key_cluster(&key), &old));
                    }
                } else {
                    stray.push(kv_key);
                }
            }
            _ => stray.push(kv_key),
        }
    }
    let task = tokio::spawn(tracing::Instrument::instrument(
        async move {
            for k in stray {
                let _ = actor.buckets.tokens.purge(&k).await;
            }
            actor.run(rx).await;
        },
        tracing::info_span!("serviceaccounts"),
    ));
    (tx, task)
}

fn issued(r: &ServiceAccountTokenRecord) -> SystemTime {
    r.issued_at
        .as_ref()
        .map_or(SystemTime::UNIX_EPOCH, flotilla_api::meta::system_time)
}

fn key_cluster(key: &str) -> String {
    key.split_once('/').map_or(key, |(c, _)| c).to_string()
}

async fn ack(msg: Option<async_nats::jetstream::Message>) {
    if let Some(m) = msg {
        let _ = m.ack().await;
    }
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        loop {
            let wake = self.next_wake();
            tokio::select! {
                msg = rx.recv() => match msg {
                    None | Some(Msg::Stop) => return,
                    Some(Msg::Apply(a, reply)) => {
                        let _ = reply.send(self.apply(*a).await);
                    }
                    Some(Msg::Delete(key, reply)) => {
                        let _ = reply.send(self.delete(&key.inventory_key()).await);
                    }
                    Some(Msg::Token(key, reply)) => {
                        let _ = reply.send(self.token(&key));
                    }
                    Some(Msg::Report(r)) => self.report(*r).await,
                },
                () = tokio::time::sleep_until(wake) => self.tick().await,
            }
        }
    }

    fn next_wake(&self) -> Instant {
        let now_sys = SystemTime::now();
        let now = Instant::now();
        let mut wake = now + Duration::from_secs(3600);
        for e in self.entries.values() {
            wake = wake.min(e.next_send);
            if !e.deleting()
                && let Some(at) = rules::delete_at(&e.account)
            {
                let left = at.duration_since(now_sys).unwrap_or_default();
                wake = wake.min(now + left);
            }
        }
        wake
    }

    async fn tick(&mut self) {
        let now_sys = SystemTime::now();
        let expired: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                !e.deleting() && rules::delete_at(&e.account).is_some_and(|t| t <= now_sys)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            tracing::info!(account = %key, "ttlSecondsAfterCreation passed: deleting the ManagedServiceAccount");
            if let Err(e) = self.delete(&key).await {
                tracing::warn!(account = %key, error = %e, "deleting an expired ManagedServiceAccount failed");
            }
        }
        let now = Instant::now();
        let due: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.next_send <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            let cluster = key_cluster(&key);
            let gone = self.deps.clusters.get(&cluster).is_none();
            let Some(e) = self.entries.get_mut(&key) else {
                continue;
            };
            if e.deleting() && gone {
                // Its cluster is gone: nobody is left to confirm.
                self.purge(&key).await;
                continue;
            }
            e.sends += 1;
            let confirmed = e.confirmed >= e.generation() && !e.deleting();
            e.next_send =
                now + rules::resend_after(confirmed, e.sends, self.deps.config.redeliver_every);
            let account = e.account.clone();
            self.send(&cluster, &account).await;
        }
    }

    async fn send(&self, cluster: &str, account: &ManagedServiceAccount) {
        let meta = account.metadata.clone().unwrap_or_default();
        let action = if meta.deletion_timestamp.is_some() {
            Action::DeleteRequest
        } else {
            Action::UpdateRequest
        };
        let delivery = ServiceAccountDelivery {
            account: Some(ManagedServiceAccount {
                status: None,
                ..account.clone()
            }),
            hub_xkey: self.deps.config.key.public().to_string(),
        };
        let ev = Event::new(
            msa::spec_type(action),
            crate::cluster::SOURCE,
            cluster,
            &delivery,
        )
        .with_resource_id(msa::resource_id(cluster, &meta.name))
        .with_resource_version(meta.generation);
        if let Err(e) = self
            .deps
            .publisher
            .publish(subjects::spec(cluster), &ev)
            .await
        {
            tracing::debug!(error = %e, cluster, account = %meta.name, "sending a ManagedServiceAccount failed; it will be sent again");
        }
    }

    fn publish_view(&self, key: &str, account: &ManagedServiceAccount, rev: u64) {
        let mut shown = account.clone();
        if let Some(m) = shown.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.views
            .write()
            .expect("views lock")
            .insert(key.to_string(), shown);
    }

    async fn apply(
        &mut self,
        mut account: ManagedServiceAccount,
    ) -> Result<ManagedServiceAccount, MsaError> {
        let key = super::object_key(account.metadata.as_ref());
        let ikey = key.inventory_key();
        if self.deps.clusters.get(&key.namespace).is_none() {
            return Err(MsaError::Invalid(vec![format!(
                "metadata.namespace: there is no ManagedCluster {:?} (a ManagedServiceAccount \
                 lives in its cluster's namespace)",
                key.namespace
            )]));
        }
        let m = account.metadata.get_or_insert_with(Default::default);
        match self.entries.get(&ikey) {
            Some(e) if e.deleting() => {
                return Err(MsaError::Conflict(format!(
                    "ManagedServiceAccount {ikey} is being deleted; apply it again once it is gone"
                )));
            }
            Some(e) => {
                if m.resource_version != 0 && m.resource_version != e.rev {
                    return Err(MsaError::Conflict(format!(
                        "ManagedServiceAccount {ikey}: resourceVersion {} is stale (stored: {})",
                        m.resource_version, e.rev
                    )));
                }
                let stored = e.account.metadata.clone().unwrap_or_default();
                crate::identity::keep(m, &stored, e.account.spec != account.spec);
                account.status = e.account.status.clone();
            }
            None => {
                crate::identity::create(m);
                account.status = None;
            }
        }
        if let Some(m) = account.metadata.as_mut() {
            m.resource_version = 0;
            m.deletion_timestamp = None;
        }
        let rev = self
            .buckets
            .accounts
            .put(&key.store_key(), &account)
            .await?;
        self.publish_view(&ikey, &account, rev);
        let generation = account.metadata.as_ref().map_or(0, |m| m.generation);
        let entry = self.entries.entry(ikey.clone()).or_insert_with(|| Entry {
            account: account.clone(),
            rev,
            token: None,
            confirmed: 0,
            next_send: Instant::now(),
            sends: 0,
        });
        let changed = entry.generation() != generation || entry.confirmed == 0;
        entry.account = account.clone();
        entry.rev = rev;
        if changed {
            entry.next_send = Instant::now();
            entry.sends = 0;
        }
        tracing::info!(account = %ikey, generation, "ManagedServiceAccount applied");
        if let Some(m) = account.metadata.as_mut() {
            m.resource_version = rev;
        }
        Ok(account)
    }

    async fn delete(&mut self, ikey: &str) -> Result<(), MsaError> {
        let Some(e) = self.entries.get_mut(ikey) else {
            return Err(MsaError::NotFound(format!("ManagedServiceAccount {ikey}")));
        };
        if e.deleting() {
            return Ok(());
        }
        let mut account = e.account.clone();
        if let Some(m) = account.metadata.as_mut() {
            m.deletion_timestamp = Some(flotilla_api::meta::now());
        }
        let key = super::object_key(account.metadata.as_ref());
        let rev = self
            .buckets
            .accounts
            .put(&key.store_key(), &account)
            .await?;
        // The token is refused from now on, before the cluster has deleted anything.
        if let Some((hash, _)) = e.token.take() {
            self.buckets
                .tokens
                .purge(&token_key(&key.namespace, &hash))
                .await?;
        }
        e.account = account.clone();
        e.rev = rev;
        e.next_send = Instant::now();
        e.sends = 0;
        self.publish_view(ikey, &account, rev);
        tracing::info!(account = %ikey, "ManagedServiceAccount deleting: its cluster deletes the ServiceAccount");
        Ok(())
    }

    /// Forgets an account for good (its cluster confirmed, or is gone).
    async fn purge(&mut self, ikey: &str) {
        let Some(e) = self.entries.remove(ikey) else {
            return;
        };
        let key = super::object_key(e.account.metadata.as_ref());
        if let Some((hash, _)) = e.token {
            let _ = self
                .buckets
                .tokens
                .purge(&token_key(&key.namespace, &hash))
                .await;
        }
        if let Err(err) = self.buckets.accounts.purge(&key.store_key()).await {
            tracing::warn!(account = %ikey, error = %err, "removing a deleted ManagedServiceAccount failed");
        }
        self.views.write().expect("views lock").remove(ikey);
        tracing::info!(account = %ikey, "ManagedServiceAccount deleted");
    }

    fn token(&self, key: &ObjectRef) -> Result<ManagedServiceAccountToken, MsaError> {
        let ikey = key.inventory_key();
        let e = self
            .entries
            .get(&ikey)
            .ok_or_else(|| MsaError::NotFound(format!("ManagedServiceAccount {ikey}")))?;
        if e.deleting() {
            return Err(MsaError::NoToken(format!(
                "ManagedServiceAccount {ikey} is being deleted"
            )));
        }
        let Some((_, record)) = &e.token else {
            return Err(MsaError::NoToken(format!(
                "ManagedServiceAccount {ikey} has no token yet: its cluster has not reported one \
                 (see its TokenReported condition)"
            )));
        };
        let expired = record
            .expiration_timestamp
            .as_ref()
            .is_none_or(|t| flotilla_api::meta::system_time(t) <= SystemTime::now());
        if expired {
            return Err(MsaError::NoToken(format!(
                "ManagedServiceAccount {ikey}: its token has expired and its cluster has not \
                 reported a new one yet"
            )));
        }
        let token = self
            .deps
            .config
            .key
            .open(&record.sealed_token, &record.sender_xkey)
            .map_err(|e| {
                MsaError::NoToken(format!(
                    "ManagedServiceAccount {ikey}: the stored token does not open ({e}); is \
                     this hub's sealing key the one the others use?"
                ))
            })?;
        Ok(ManagedServiceAccountToken {
            token,
            expiration_timestamp: record.expiration_timestamp,
            cluster_name: record.cluster_name.clone(),
            name: record.name.clone(),
            service_account_namespace: record.service_account_namespace.clone(),
        })
    }

    fn refuse(&self, report: &ServiceAccountTokenReport, refusal: Refusal) {
        if self
            .deps
            .metrics
            .rejected(&msa::status_type().to_string(), refusal.0)
        {
            tracing::warn!(
                cluster.name = %report.cluster_name, account = %report.name,
                reason = refusal.0, error = %refusal.1,
                "ManagedServiceAccount report refused; nothing stored"
            );
        }
    }

    async fn report(&mut self, input: ReportIn) {
        let ReportIn { report, ack: msg } = input;
        let ikey = ObjectRef::new(&report.cluster_name, &report.name).inventory_key();
        let Some(e) = self.entries.get(&ikey) else {
            self.refuse(
                &report,
                Refusal(
                    "unknown_account",
                    format!(
                        "cluster {:?} has no ManagedServiceAccount {:?}",
                        report.cluster_name, report.name
                    ),
                ),
            );
            ack(msg).await;
            return;
        };
        if e.deleting() {
            if report.deleted {
                self.purge(&ikey).await;
            }
            ack(msg).await;
            return;
        }
        if report.deleted {
            // The cluster says the ServiceAccount is gone while the account is not: deliver
            // it again.
            if let Some(e) = self.entries.get_mut(&ikey) {
                e.next_send = Instant::now();
                e.sends = 0;
            }
            ack(msg).await;
            return;
        }
        if report.observed_generation > e.generation() {
            self.refuse(
                &report,
                Refusal(
                    "invalid_status",
                    format!(
                        "observedGeneration {} is ahead of the account's {}",
                        report.observed_generation,
                        e.generation()
                    ),
                ),
            );
            ack(msg).await;
            return;
        }
        if !report.error.is_empty() {
            let status = rules::token_failed(
                e.account.status.as_ref(),
                &report.error,
                report.observed_generation,
            );
            self.write_status(&ikey, status, report.observed_generation)
                .await;
            ack(msg).await;
            return;
        }
        if report.sealed_token.is_empty() {
            self.refuse(
                &report,
                Refusal(
                    "invalid_status",
                    "a report with neither a token nor an error".into(),
                ),
            );
            ack(msg).await;
            return;
        }
        if report.hub_xkey != self.deps.config.key.public() {
            // Sealed to another key (a hub key changed): deliver the current one.
            self.refuse(
                &report,
                Refusal(
                    "stale_key",
                    "the token is sealed to another hub key; delivering the current one".into(),
                ),
            );
            if let Some(e) = self.entries.get_mut(&ikey) {
                e.next_send = Instant::now();
                e.sends = 0;
            }
            ack(msg).await;
            return;
        }
        let (issued, expires) = match rules::token_times(&report, SystemTime::now()) {
            Ok(t) => t,
            Err(refusal) => {
                self.refuse(&report, refusal);
                ack(msg).await;
                return;
            }
        };
        let current_issued = e
            .token
            .as_ref()
            .and_then(|(_, r)| r.issued_at.as_ref())
            .map(flotilla_api::meta::system_time);
        if current_issued.is_some_and(|c| c >= issued) {
            // Not newer than the token held (a redelivery, or a replay).
            ack(msg).await;
            return;
        }
        let hash = match self
            .deps
            .config
            .key
            .open(&report.sealed_token, &report.sender_xkey)
        {
            Ok(token) => msa::token_hash(&token),
            Err(err) => {
                self.refuse(&report, Refusal("sealed_token", err.to_string()));
                ack(msg).await;
                return;
            }
        };
        let record = ServiceAccountTokenRecord {
            cluster_name: report.cluster_name.clone(),
            name: report.name.clone(),
            sealed_token: report.sealed_token.clone(),
            sender_xkey: report.sender_xkey.clone(),
            hub_xkey: report.hub_xkey.clone(),
            expiration_timestamp: report.expiration_timestamp,
            issued_at: report.issued_at,
            service_account_namespace: report.service_account_namespace.clone(),
        };
        let cluster = report.cluster_name.clone();
        if let Err(err) = self
            .buckets
            .tokens
            .put(&token_key(&cluster, &hash), &record)
            .await
        {
            // Not acknowledged: redelivered.
            tracing::warn!(account = %ikey, error = %err, "storing a sealed token failed");
            return;
        }
        let old = self
            .entries
            .get_mut(&ikey)
            .and_then(|e| e.token.replace((hash.clone(), record)));
        if let Some((old_hash, _)) = old
            && old_hash != hash
        {
            let _ = self
                .buckets
                .tokens
                .purge(&token_key(&cluster, &old_hash))
                .await;
        }
        let status = {
            let e = &self.entries[&ikey];
            rules::token_kept(
                e.account.status.as_ref(),
                &report.name,
                report.observed_generation,
                issued,
                expires,
            )
        };
        tracing::info!(
            account = %ikey,
            expires_in_s = expires.duration_since(SystemTime::now()).unwrap_or_default().as_secs(),
            "ManagedServiceAccount token reported (sealed)"
        );
        self.write_status(&ikey, status, report.observed_generation)
            .await;
        ack(msg).await;
    }

    async fn write_status(
        &mut self,
        ikey: &str,
        status: flotilla_api::v1::ManagedServiceAccountStatus,
        observed: i64,
    ) {
        let Some(e) = self.entries.get_mut(ikey) else {
            return;
        };
        e.confirmed = e.confirmed.max(observed);
        let mut account = e.account.clone();
        account.status = Some(status);
        let key = super::object_key(account.metadata.as_ref());
        match self.buckets.accounts.put(&key.store_key(), &account).await {
            Ok(rev) => {
                e.account = account.clone();
                e.rev = rev;
                self.publish_view(ikey, &account, rev);
            }
            Err(err) => {
                tracing::warn!(account = %ikey, error = %err, "writing a ManagedServiceAccount's status failed");
            }
        }
    }
}
