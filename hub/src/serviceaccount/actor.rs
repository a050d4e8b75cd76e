//! The one task of the hub's ManagedServiceAccounts: the only writer of both buckets. It takes
//! applies, deletes, token reads and the clusters' reports from its mailbox (telling each
//! report's source its [`Outcome`] once stored), follows the cluster inventory (a deleted
//! cluster's accounts go with it), and wakes for re-deliveries, `ttlSecondsAfterCreation`
//! deletions and retries of token-record removals. What a report does is decided in
//! [`plan`] (pure); this task gathers, asks it, and writes.

mod plan;

use super::rules::{self, Refusal};
use super::{Buckets, Deps, MsaError, Views, token_key};
use crate::backoff::Backoff;
use crate::keys::ObjectRef;
use flotilla_api::v1::{
    ManagedServiceAccount, ManagedServiceAccountToken, ServiceAccountDelivery,
    ServiceAccountTokenRecord, ServiceAccountTokenReport,
};
use flotilla_bus::envelope::{Action, Event};
use flotilla_bus::serviceaccounts as msa;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// A checked report from a cluster, with whom to tell what became of it.
pub struct ReportIn {
    /// The report (its cluster and resource id match its subject).
    pub report: ServiceAccountTokenReport,
    /// Told once the report is handled.
    pub reply: Reply,
}

pub use crate::report::{Ack as Reply, Outcome};

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

struct Entry {
    account: ManagedServiceAccount,
    rev: u64,
    /// The current token: its hash and record.
    token: Option<(String, ServiceAccountTokenRecord)>,
    /// The generation the cluster last answered.
    confirmed: i64,
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
    /// When each account is sent to its cluster next: unconfirmed ones backing off from
    /// [`rules::RESEND_MIN`] to [`rules::RESEND_MAX`], confirmed ones every `redeliver_every`.
    sends: Backoff<String>,
    /// Token records to remove, by KV key (`<cluster>.<hash>`): the token of a deleted account,
    /// or one a newer token replaced. The proxy already refuses it (it is not its account's
    /// current token); removing it is tidying, retried until the store takes it.
    purges: Backoff<String>,
    /// What is left of each cluster's report budget.
    budgets: std::collections::HashMap<String, rules::Budget>,
}

/// Starts the task over what was stored.
pub(super) fn spawn(
    buckets: Buckets,
    deps: Deps,
    views: Views,
    accounts: Vec<(String, ManagedServiceAccount, u64)>,
    tokens: Vec<(String, ServiceAccountTokenRecord, u64)>,
) -> (mpsc::Sender<Msg>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(deps.config.mailbox.max(1));
    let mut actor = Actor {
        buckets,
        deps,
        views,
        entries: BTreeMap::new(),
        sends: Backoff::new(rules::RESEND_MIN, rules::RESEND_MAX),
        purges: Backoff::new(rules::PURGE_MIN, rules::PURGE_MAX),
        budgets: std::collections::HashMap::new(),
    };
    let now = Instant::now();
    for (_, account, rev) in accounts {
        let key = super::object_key(account.metadata.as_ref()).inventory_key();
        let generation = account.metadata.as_ref().map_or(0, |m| m.generation);
        actor.publish_view(&key, &account, rev);
        actor.sends.schedule(key.clone(), now);
        actor.entries.insert(
            key,
            Entry {
                account,
                rev,
                token: None,
                confirmed: generation,
            },
        );
    }
    // Records that are no account's current token: left by a purge that failed, or by a hub
    // that stopped in between. Removed like any other (`purges`).
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
            if !stray.is_empty() {
                tracing::info!(
                    records = stray.len(),
                    "removing token records that are no account's current token"
                );
            }
            for k in stray {
                actor.drop_token(k).await;
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

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        use tokio::sync::broadcast::error::RecvError;
        let mut clusters = self.deps.clusters.subscribe();
        let mut clusters_open = true;
        // Accounts of clusters deleted while the controllers were elsewhere.
        self.purge_orphans().await;
        loop {
            let wake = self.next_wake();
            tokio::select! {
                change = clusters.recv(), if clusters_open => match change {
                    Ok(c) if c.kind == crate::inventory::ChangeKind::Deleted => {
                        self.cluster_deleted(&c.key).await;
                    }
                    Ok(_) => {}
                    // Lease renewals of a large fleet overrun the broadcast: a deletion
                    // missed is found by comparing with the inventory.
                    Err(RecvError::Lagged(_)) => self.purge_orphans().await,
                    Err(RecvError::Closed) => clusters_open = false,
                },
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
        let mut wake = [self.purges.deadline(), self.sends.deadline()]
            .into_iter()
            .flatten()
            .fold(now + Duration::from_secs(3600), Instant::min);
        for e in self.entries.values() {
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
        self.retry_purges().await;
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
        for key in self.sends.due(now) {
            let cluster = key_cluster(&key);
            let gone = self.deps.clusters.get(&cluster).is_none();
            let Some(e) = self.entries.get(&key) else {
                self.sends.remove(&key);
                continue;
            };
            if e.deleting() && gone {
                // Its cluster is gone: nobody is left to confirm.
                self.purge(&key).await;
                continue;
            }
            // A confirmed account is delivered again every `redeliver_every` (a restarted
            // agent holds nothing); an unconfirmed one backs off until its cluster answers.
            let confirmed = e.confirmed >= e.generation() && !e.deleting();
            let account = e.account.clone();
            if confirmed {
                self.sends
                    .succeeded(key, now + self.deps.config.redeliver_every);
            } else {
                self.sends.attempted(key, now);
            }
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
            .publish(self.deps.clusters.wire(cluster).spec(cluster), &ev)
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
        });
        let changed = entry.generation() != generation || entry.confirmed == 0;
        entry.account = account.clone();
        entry.rev = rev;
        if changed {
            self.sends.schedule(ikey.clone(), Instant::now());
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
        // The token is refused from now on (the proxy takes no token of an account being
        // deleted), before the cluster has deleted anything; its record goes.
        let token = e.token.take();
        e.account = account.clone();
        e.rev = rev;
        self.sends.schedule(ikey.to_string(), Instant::now());
        self.publish_view(ikey, &account, rev);
        if let Some((hash, _)) = token {
            self.drop_token(token_key(&key.namespace, &hash)).await;
        }
        tracing::info!(account = %ikey, "ManagedServiceAccount deleting: its cluster deletes the ServiceAccount");
        Ok(())
    }

    /// Forgets an account for good (its cluster confirmed, or is gone). When the store does
    /// not take the removal, the account stays (being deleted) and is removed again with the
    /// next re-send.
    async fn purge(&mut self, ikey: &str) {
        let Some(e) = self.entries.get_mut(ikey) else {
            return;
        };
        let key = super::object_key(e.account.metadata.as_ref());
        if let Some((hash, _)) = e.token.take() {
            self.drop_token(token_key(&key.namespace, &hash)).await;
        }
        match self.buckets.accounts.purge(&key.store_key()).await {
            Ok(()) => {
                self.entries.remove(ikey);
                self.sends.remove(ikey);
                self.views.write().expect("views lock").remove(ikey);
                tracing::info!(account = %ikey, "ManagedServiceAccount deleted");
            }
            Err(err) => {
                tracing::warn!(account = %ikey, error = %err, "removing a deleted ManagedServiceAccount failed; tried again");
                self.sends.attempted(ikey.to_string(), Instant::now());
            }
        }
    }

    /// Removes every account of a deleted cluster, with their tokens: nobody is left to
    /// confirm, and OCM deletes a cluster's namespace with it.
    async fn cluster_deleted(&mut self, cluster: &str) {
        let prefix = ObjectRef::prefix(cluster);
        let keys: Vec<String> = self
            .entries
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        if keys.is_empty() {
            return;
        }
        tracing::info!(cluster.name = %cluster, accounts = keys.len(), "the cluster was deleted: removing its ManagedServiceAccounts");
        for ikey in keys {
            if let Some(e) = self.entries.get_mut(&ikey) {
                let m = e.account.metadata.get_or_insert_with(Default::default);
                if m.deletion_timestamp.is_none() {
                    m.deletion_timestamp = Some(flotilla_api::meta::now());
                }
                let (account, rev) = (e.account.clone(), e.rev);
                self.publish_view(&ikey, &account, rev);
            }
            self.purge(&ikey).await;
        }
    }

    /// Removes the accounts of every cluster that no longer exists (deleted while this task
    /// did not run, or while it missed changes).
    async fn purge_orphans(&mut self) {
        let gone: std::collections::BTreeSet<String> = self
            .entries
            .keys()
            .map(|k| key_cluster(k))
            .filter(|c| {
                // A cluster whose record does not decode is unreadable, not gone.
                self.deps.clusters.get(c).is_none()
                    && !crate::store::quarantine::holds(crate::store::CLUSTERS, c)
            })
            .collect();
        for cluster in gone {
            self.cluster_deleted(&cluster).await;
        }
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
                "ManagedServiceAccount report refused; its token is not stored"
            );
        }
    }

    /// Refuses a report of an existing account: counted, and said in its `TokenReported`
    /// condition (written only when that changes it).
    async fn refuse_report(
        &mut self,
        ikey: &str,
        report: &ServiceAccountTokenReport,
        refusal: Refusal,
    ) -> Outcome {
        self.refuse(report, refusal.clone());
        let Some(e) = self.entries.get(ikey) else {
            return Outcome::Taken;
        };
        let generation = report.observed_generation.min(e.generation());
        let status = rules::report_refused(e.account.status.as_ref(), &refusal, generation);
        self.write_status(ikey, status, 0).await
    }

    async fn report(&mut self, input: ReportIn) {
        let ReportIn { report, reply } = input;
        let outcome = self.take(report).await;
        reply.settle(outcome).await;
    }

    /// Takes one report: [`Outcome::Taken`] once it is stored (the token record, then the
    /// status that makes it current), refused or found to change nothing;
    /// [`Outcome::Retry`] when a write failed.
    async fn take(&mut self, report: ServiceAccountTokenReport) -> Outcome {
        let ikey = ObjectRef::new(&report.cluster_name, &report.name).inventory_key();
        let hub_xkey = self.deps.config.key.public().to_string();
        let rate = self.deps.config.report_rate;
        let budgets = &mut self.budgets;
        let admit = || {
            let now = std::time::Instant::now();
            budgets
                .entry(report.cluster_name.clone())
                .or_insert_with(|| rules::Budget::new(rate, now))
                .take(rate, now)
        };
        let held = self.entries.get(&ikey).map(|e| plan::Held {
            generation: e.generation(),
            deleting: e.deleting(),
            status: e.account.status.as_ref(),
            token_issued: e
                .token
                .as_ref()
                .and_then(|(_, r)| r.issued_at.as_ref())
                .map(flotilla_api::meta::system_time),
        });
        let plan = plan::report(&report, held, &hub_xkey, SystemTime::now(), admit);
        match plan {
            plan::Plan::Taken => Outcome::Taken,
            plan::Plan::Unknown(refusal) => {
                self.refuse(&report, refusal);
                Outcome::Taken
            }
            plan::Plan::Purge => {
                self.purge(&ikey).await;
                Outcome::Taken
            }
            plan::Plan::Redeliver => {
                self.sends.schedule(ikey, Instant::now());
                Outcome::Taken
            }
            plan::Plan::RateLimited => {
                // Delivered again later: a busy cluster's reports wait, they are not lost.
                if self
                    .deps
                    .metrics
                    .rejected(&msa::status_type().to_string(), "rate_limited")
                {
                    tracing::warn!(cluster.name = %report.cluster_name, account = %report.name, "ManagedServiceAccount reports over the cluster's rate; delivered again later");
                }
                Outcome::Retry
            }
            plan::Plan::Refuse { refusal, redeliver } => {
                if redeliver {
                    self.sends.schedule(ikey.clone(), Instant::now());
                }
                self.refuse_report(&ikey, &report, refusal).await
            }
            plan::Plan::Status(status) => {
                self.write_status(&ikey, status, report.observed_generation)
                    .await
            }
            plan::Plan::Store { issued, expires } => {
                self.store_token(&ikey, &report, issued, expires).await
            }
        }
    }

    /// Stores a newer token: its record, then the status that makes it current; the token it
    /// replaces is removed once the status names the new one.
    async fn store_token(
        &mut self,
        ikey: &str,
        report: &ServiceAccountTokenReport,
        issued: SystemTime,
        expires: SystemTime,
    ) -> Outcome {
        let hash = match self
            .deps
            .config
            .key
            .open(&report.sealed_token, &report.sender_xkey)
        {
            Ok(token) => msa::token_hash(&token),
            Err(err) => {
                return self
                    .refuse_report(ikey, report, Refusal("sealed_token", err.to_string()))
                    .await;
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
            tracing::warn!(account = %ikey, error = %err, "storing a sealed token failed; the report is delivered again");
            return Outcome::Retry;
        }
        let old = self
            .entries
            .get_mut(ikey)
            .and_then(|e| e.token.replace((hash.clone(), record)));
        let status = {
            let e = &self.entries[ikey];
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
        let outcome = self
            .write_status(ikey, status, report.observed_generation)
            .await;
        // The previous token is no longer current once the status names the new one.
        if let Some((old_hash, _)) = old
            && old_hash != hash
        {
            self.drop_token(token_key(&cluster, &old_hash)).await;
        }
        outcome
    }

    /// Removes a token record now, or keeps it in `purges` to try again.
    async fn drop_token(&mut self, kv_key: String) {
        if !self.purges.contains(&kv_key) {
            self.purges.schedule(kv_key.clone(), Instant::now());
        }
        self.try_purge(kv_key).await;
    }

    /// Tries every removal that is due.
    async fn retry_purges(&mut self) {
        for k in self.purges.due(Instant::now()) {
            self.try_purge(k).await;
        }
    }

    async fn try_purge(&mut self, kv_key: String) {
        let current = self.entries.values().any(|e| {
            e.token
                .as_ref()
                .is_some_and(|(hash, r)| token_key(&r.cluster_name, hash) == kv_key)
        });
        if current {
            // Current again (cannot happen: tokens are found by their hash): kept.
            self.purges.remove(&kv_key);
            return;
        }
        match self.buckets.tokens.purge(&kv_key).await {
            Ok(()) => {
                self.purges.remove(&kv_key);
            }
            Err(err) if self.purges.contains(&kv_key) => {
                let now = Instant::now();
                let at = self.purges.attempted(kv_key.clone(), now);
                tracing::warn!(
                    record = %kv_key, retry_in_ms = (at - now).as_millis(), error = %err,
                    "removing a token record failed; the proxy refuses the token meanwhile, \
                     and the removal is tried again"
                );
            }
            Err(_) => {}
        }
    }

    /// Stores a new status; [`Outcome::Retry`] when the write failed (the report is delivered
    /// again).
    async fn write_status(
        &mut self,
        ikey: &str,
        status: flotilla_api::v1::ManagedServiceAccountStatus,
        observed: i64,
    ) -> Outcome {
        let Some(e) = self.entries.get_mut(ikey) else {
            return Outcome::Taken;
        };
        e.confirmed = e.confirmed.max(observed);
        if e.account.status.as_ref() == Some(&status) {
            // Nothing changes: nothing to write (a cluster repeating itself costs no write).
            return Outcome::Taken;
        }
        let mut account = e.account.clone();
        account.status = Some(status);
        let key = super::object_key(account.metadata.as_ref());
        match self.buckets.accounts.put(&key.store_key(), &account).await {
            Ok(rev) => {
                e.account = account.clone();
                e.rev = rev;
                self.publish_view(ikey, &account, rev);
                Outcome::Taken
            }
            Err(err) => {
                tracing::warn!(account = %ikey, error = %err, "writing a ManagedServiceAccount's status failed; the report is delivered again");
                Outcome::Retry
            }
        }
    }
}
