//! One task per Policy: the only writer of the policy and its per-cluster records. It
//! reconciles on applies, on its placements' decision changes, on binding / set / rule changes,
//! on cluster changes when a PlacementRule decides for it, and when a delivered spec is due to be
//! re-sent; it takes its clusters' reports and writes the root status (coalesced: at most once a
//! second, the in-memory view at once). A reconcile gathers the clusters decided, asks [`plan`]
//! (pure) what to deliver, re-send, delete and forget, and carries it out.

mod plan;
mod resolve;

use super::rules::{self, Bound, PlacementKind};
use super::{Inner, PolicyError};
use crate::backoff::Backoff;
use crate::keys::ObjectRef;
use crate::report::Outcome;
use flotilla_api::policy::Compliance;
use flotilla_api::v1::{
    Policy, PolicyClusterRecord, PolicySet, PolicyStatusReport, RenderedPolicy,
};
use flotilla_bus::envelope::{Action, Event};
use flotilla_bus::policies;
use plan::RESEND_AFTER;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// A checked report from a cluster, with the stream message to acknowledge once it is kept.
pub struct ReportIn {
    /// The report.
    pub report: PolicyStatusReport,
    /// Its `sequenceid`.
    pub sequence: Option<u64>,
    /// Settled once the record is written.
    pub ack: Option<crate::report::Ack>,
}

/// Messages to a policy actor.
pub enum Msg {
    /// Create or update the policy; answered once stored.
    Apply(Box<Policy>, oneshot::Sender<Result<Policy, PolicyError>>),
    /// Remove every copy and stop; answered when done.
    Delete(oneshot::Sender<()>),
    /// A cluster's report.
    Report(Box<ReportIn>),
    /// One page of the decided clusters' last reports (clusters after `after`, by name).
    Details(DetailsPage, oneshot::Sender<Reports>),
    /// One cluster's copy resolved now, sent nowhere (`flotilla policy render`).
    Render(String, oneshot::Sender<Result<RenderedPolicy, PolicyError>>),
}

/// Which page of [`Msg::Details`] to answer.
#[derive(Debug, Clone)]
pub struct DetailsPage {
    /// The last cluster of the previous page (`None`: the first page).
    pub after: Option<String>,
    /// Rows at most (at least 1).
    pub limit: usize,
}

/// A page of reports, and the last cluster's name when more follow.
#[derive(Debug, Default)]
pub struct Reports {
    /// The page's rows, by cluster name.
    pub clusters: Vec<PolicyStatusReport>,
    /// Where the next page starts (`None`: this was the last).
    pub next: Option<String>,
}

/// Mailbox capacity of a policy actor.
const MAILBOX: usize = 65_536;
/// Reports taken from the mailbox at once, their records written concurrently.
const REPORT_BATCH: usize = 512;

/// How often the root status is written at most.
const STATUS_EVERY: Duration = Duration::from_secs(1);
/// How often reports are folded into the published view at most (a fleet reporting at once
/// rebuilds a status of thousands of clusters a few times a second, not once per report).
const VIEW_EVERY: Duration = Duration::from_millis(200);
/// How long a burst of changes settles before a reconcile.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// A report taken into its record.
enum Taken {
    /// Nothing to write (acknowledged already).
    Done,
    /// The record to write, then acknowledge.
    Write(Box<Write>),
}

/// A record write and the reports it acknowledges.
struct Write {
    key: String,
    record: PolicyClusterRecord,
    acks: Vec<crate::report::Ack>,
    /// The cluster is ahead of the generation delivered: send it the spec again.
    behind: bool,
}

struct Actor {
    inner: Arc<Inner>,
    key: String,
    /// The stored policy and its revision (None until the first apply).
    policy: Option<(Policy, u64)>,
    /// Each cluster's record, by cluster.
    records: BTreeMap<String, PolicyClusterRecord>,
    /// When each cluster that has not confirmed its spec is sent it again.
    resend: Backoff<String>,
    bounds: Vec<Bound>,
    /// The clusters each of `bounds` decides.
    decided: Vec<BTreeSet<String>>,
    /// The clusters decided now, and whether a binding overrides to enforce there.
    targets: BTreeMap<String, bool>,
    /// The status differs from the stored one.
    status_dirty: bool,
    last_status_write: Option<Instant>,
    /// Reports arrived since the view was last rebuilt.
    view_dirty: bool,
    last_view: Option<Instant>,
    /// The policy holds hub templates: each cluster's copy is its own.
    templated: bool,
    /// Each cluster's last hub-template resolution ([`resolve`]).
    cache: BTreeMap<String, resolve::Cached>,
}

/// Starts the actor of the policy `key` (`<namespace>/<name>`).
pub(crate) fn spawn(
    inner: Arc<Inner>,
    key: &str,
    stored: Option<(Policy, u64)>,
    records: Vec<(PolicyClusterRecord, u64)>,
) -> mpsc::Sender<Msg> {
    // Reports of a whole fleet arrive at once; the router must not find the mailbox full (the
    // report would wait for JetStream's redelivery). Capacity costs nothing until used.
    let (tx, rx) = mpsc::channel(MAILBOX);
    let actor = Actor {
        inner,
        key: key.to_string(),
        policy: stored,
        records: records
            .into_iter()
            .map(|(r, _)| (r.cluster_name.clone(), r))
            .collect(),
        resend: plan::resend_backoff(),
        bounds: Vec::new(),
        decided: Vec::new(),
        targets: BTreeMap::new(),
        status_dirty: false,
        last_status_write: None,
        view_dirty: false,
        last_view: None,
        templated: false,
        cache: BTreeMap::new(),
    };
    let span = tracing::info_span!("policy", policy = %key);
    let tasks = actor.inner.tasks.clone();
    tasks.spawn(tracing::Instrument::instrument(actor.run(rx), span));
    tx
}

fn ns_name(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

fn record_key(r: &PolicyClusterRecord) -> String {
    let rid = policies::resource_id(
        &r.cluster_name,
        &policies::replicated_name(&r.policy_namespace, &r.policy_name),
    );
    format!("{}.{rid}", r.cluster_name)
}

/// Publishes a delete of the cluster's copy of the policy the record names.
pub(crate) async fn send_delete(inner: &Inner, r: &PolicyClusterRecord) {
    let name = policies::replicated_name(&r.policy_namespace, &r.policy_name);
    let copy = Policy {
        metadata: Some(flotilla_api::v1::ObjectMeta {
            name: name.clone(),
            namespace: r.cluster_name.clone(),
            generation: r.generation,
            deletion_timestamp: Some(flotilla_api::meta::now()),
            ..Default::default()
        }),
        spec: None,
        status: None,
    };
    publish(inner, &r.cluster_name, &copy, Action::DeleteRequest).await;
}

/// Publishes a replicated policy on the cluster's spec subject (core NATS, at most once; the
/// actor re-sends until the cluster reports the generation).
async fn publish(inner: &Inner, cluster: &str, copy: &Policy, action: Action) {
    let meta = copy.metadata.clone().unwrap_or_default();
    let ev = Event::new(
        policies::spec_type(action),
        crate::cluster::SOURCE,
        cluster,
        copy,
    )
    .with_resource_id(policies::resource_id(cluster, &meta.name))
    .with_resource_version(meta.generation);
    if let Err(e) = inner
        .deps
        .publisher
        .publish(inner.deps.clusters.wire(cluster).spec(cluster), &ev)
        .await
    {
        if e.is_permanent() {
            tracing::error!(error = %e, cluster, "policy spec cannot be sent");
            return;
        }
        tracing::warn!(error = %e, cluster, "publishing a policy spec failed; it will be re-sent");
    }
    inner.metrics.specs_sent.inc();
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut placements = self.inner.deps.placements.subscribe();
        let mut governance = self.inner.governance.subscribe();
        let mut clusters = self.inner.deps.clusters.subscribe();
        let mut sets = self.inner.deps.sets.subscribe();
        let mut hubdata = self.inner.hubdata.subscribe();
        let mut due: Option<Instant> = Some(Instant::now());
        loop {
            let status_at = self.status_dirty.then(|| {
                self.last_status_write
                    .map_or_else(Instant::now, |t| t + STATUS_EVERY)
            });
            let view_at = self
                .view_dirty
                .then(|| self.last_view.map_or_else(Instant::now, |t| t + VIEW_EVERY));
            let wake = [due, status_at, view_at].into_iter().flatten().min();
            tokio::select! {
                msg = rx.recv() => match msg {
                    None => return,
                    Some(Msg::Report(r)) => {
                        let (resend, other) = self.reports(*r, &mut rx).await;
                        if resend {
                            due = soonest(due, Instant::now());
                        }
                        if let Some(m) = other
                            && !self.handle(m, &mut due).await
                        {
                            return;
                        }
                    }
                    Some(m) => {
                        if !self.handle(m, &mut due).await {
                            return;
                        }
                    }
                },
                change = placements.recv() => {
                    let relevant = match &change {
                        Ok(c) => self.uses_placement(&c.key),
                        Err(_) => true,
                    };
                    if relevant {
                        due = soonest(due, Instant::now() + DEBOUNCE);
                    }
                }
                _ = governance.recv() => due = soonest(due, Instant::now() + DEBOUNCE),
                // A set or a binding changed: a rule's bound sets may have.
                _ = sets.recv() => if self.uses_rule() {
                    due = soonest(due, Instant::now() + DEBOUNCE);
                },
                // A hub ConfigMap or Secret of the policy's namespace: its hub templates may
                // read it (the per-cluster cache skips the clusters that did not).
                change = hubdata.recv() => if self.templated && match &change {
                    Ok(c) => c.namespace == ns_name(&self.key).0,
                    Err(_) => true,
                } {
                    due = soonest(due, Instant::now() + DEBOUNCE);
                },
                change = clusters.recv() => {
                    let relevant = match &change {
                        // A deleted cluster's records go; rules follow labels and conditions;
                        // hub templates a cluster's labels and agent key.
                        Ok(c) => self.uses_rule() || (c.kind == crate::inventory::ChangeKind::Deleted
                            && self.records.contains_key(c.key.as_ref()))
                            || self.template_inputs_changed(&c.object),
                        // Lease renewals of a large fleet overrun the broadcast: only rules
                        // and hub templates need every change (a missed deletion is found by
                        // the next reconcile).
                        Err(_) => self.uses_rule() || self.templated,
                    };
                    if relevant {
                        due = soonest(due, Instant::now() + DEBOUNCE);
                    }
                }
                () = sleep_until(wake) => {
                    if due.is_some_and(|t| t <= Instant::now()) {
                        due = self.reconcile().await;
                    }
                    if self.view_dirty && view_at.is_some_and(|t| t <= Instant::now()) {
                        self.update_view();
                    }
                    if self.status_dirty && status_at.is_some_and(|t| t <= Instant::now()) {
                        self.write_status().await;
                    }
                }
            }
        }
    }

    /// Handles a message other than a report; false when the actor ends.
    async fn handle(&mut self, msg: Msg, due: &mut Option<Instant>) -> bool {
        match msg {
            Msg::Apply(p, reply) => {
                let r = self.apply(*p).await;
                let _ = reply.send(r);
                *due = Some(Instant::now());
            }
            Msg::Delete(done) => {
                self.delete().await;
                let _ = done.send(());
                return false;
            }
            Msg::Report(r) => {
                // Reports go through `reports`; one arriving here is taken alone.
                if let Taken::Write(w) = self.take(*r).await {
                    let resend = w.behind;
                    self.write(vec![*w]).await;
                    if resend {
                        *due = soonest(*due, Instant::now());
                    }
                }
            }
            Msg::Details(page, reply) => {
                let _ = reply.send(self.details(&page));
            }
            Msg::Render(cluster, reply) => {
                let _ = reply.send(self.render(&cluster));
            }
        }
        true
    }

    /// Takes `first` and the reports queued behind it (up to [`REPORT_BATCH`]), then writes
    /// their records concurrently and acknowledges each once written. Returns whether a cluster
    /// must be sent its spec again, and the first other message met (handled by the caller).
    async fn reports(
        &mut self,
        first: ReportIn,
        rx: &mut mpsc::Receiver<Msg>,
    ) -> (bool, Option<Msg>) {
        let mut writes: Vec<Write> = Vec::new();
        let mut other = None;
        let mut next = Some(first);
        let mut taken = 0;
        while let Some(r) = next.take() {
            if let Taken::Write(w) = self.take(r).await {
                // A later report of the same cluster replaces the earlier one's write; both are
                // acknowledged once it lands.
                match writes.iter_mut().find(|x| x.key == w.key) {
                    Some(x) => {
                        x.record = w.record;
                        x.acks.extend(w.acks);
                        x.behind |= w.behind;
                    }
                    None => writes.push(*w),
                }
            }
            taken += 1;
            if taken >= REPORT_BATCH {
                break;
            }
            match rx.try_recv() {
                Ok(Msg::Report(r)) => next = Some(*r),
                Ok(m) => other = Some(m),
                Err(_) => {}
            }
        }
        let resend = writes.iter().any(|w| w.behind);
        self.write(writes).await;
        (resend, other)
    }

    /// Writes records concurrently; each one's reports are acknowledged once it landed (a
    /// failed one is left for JetStream to redeliver).
    async fn write(&mut self, writes: Vec<Write>) {
        let bucket = self.inner.buckets.status.clone();
        let results =
            futures::future::join_all(writes.iter().map(|w| bucket.put(&w.key, &w.record))).await;
        for (w, r) in writes.into_iter().zip(results) {
            match r {
                Ok(_) => {
                    for a in w.acks {
                        a.settle(Outcome::Taken).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, key = %w.key, "writing a policy report failed");
                    for a in w.acks {
                        a.settle(Outcome::Retry).await;
                    }
                }
            }
        }
        self.status_dirty = true;
        self.view_dirty = true;
    }

    fn uses_placement(&self, key: &str) -> bool {
        let (ns, _) = ns_name(&self.key);
        self.bounds.iter().any(|b| match &b.placement {
            PlacementKind::Placement(p) => ObjectRef::new(ns, p).inventory_key() == key,
            PlacementKind::Rule(_) => false,
        })
    }

    fn uses_rule(&self) -> bool {
        self.bounds
            .iter()
            .any(|b| matches!(b.placement, PlacementKind::Rule(_)))
    }

    async fn apply(&mut self, mut p: Policy) -> Result<Policy, PolicyError> {
        let m = p.metadata.get_or_insert_with(Default::default);
        match &self.policy {
            Some((old, rev)) => {
                if m.resource_version != 0 && m.resource_version != *rev {
                    return Err(PolicyError::Conflict(format!(
                        "Policy {}: resourceVersion {} is stale (stored: {rev})",
                        self.key, m.resource_version
                    )));
                }
                let om = old.metadata.clone().unwrap_or_default();
                let spec_changed = old.spec != p.spec;
                crate::identity::keep(m, &om, spec_changed);
                p.status = old.status.clone();
            }
            None => {
                crate::identity::create(m);
                p.status = None;
            }
        }
        if let Some(m) = p.metadata.as_mut() {
            m.resource_version = 0;
        }
        let store_key = {
            let (ns, name) = ns_name(&self.key);
            ObjectRef::new(ns, name).store_key()
        };
        let rev = self.inner.buckets.policies.put(&store_key, &p).await?;
        if let Some(m) = p.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.policy = Some((p.clone(), rev));
        self.inner.views.upsert(&self.key, p.clone());
        Ok(p)
    }

    /// What the decided clusters should hold, delivered; copies of clusters no longer decided
    /// removed; unconfirmed specs re-sent; the status recomputed. Returns when to look again.
    async fn reconcile(&mut self) -> Option<Instant> {
        let (policy, _) = self.policy.clone()?;
        let sets = self.gather(&policy);
        self.templated = super::templates::templated(&policy);
        // Without hub templates the replicated spec depends only on the override: two hashes,
        // not one per cluster. With them each cluster's copy is resolved (or its cache holds).
        let mut hashed = resolve::Hashed::default();
        if self.templated {
            hashed = self.template_hashes(&policy, &sets).await;
        } else {
            self.cache.clear();
        }
        let now = Instant::now();
        let two = [false, true]
            .map(|enforce| rules::spec_hash(&rules::replicated(&policy, "", enforce, 0, &sets)));
        let by_override = plan::by_override(two);
        let hashes = &hashed.hashes;
        let hash_of = |c: &str, enforce: bool| match hashes.get(c) {
            Some(h) => h.clone(),
            None => by_override(c, enforce),
        };
        let clusters = &self.inner.deps.clusters;
        let plan = plan::plan(
            &self.targets,
            &self.records,
            hash_of,
            &self.resend,
            |c| clusters.get(c).is_some(),
            now,
        );
        self.deliver(&policy, &sets, plan.deliver, hashed.copies, now)
            .await;
        for send in plan.resend {
            let copy =
                self.resent_copy(&policy, &send.cluster, send.enforce, send.generation, &sets);
            if plan.resumed.contains(&send.cluster) {
                self.resend.resumed(send.cluster.clone(), now);
            } else {
                self.resend.attempted(send.cluster.clone(), now);
            }
            publish(&self.inner, &send.cluster, &copy, Action::UpdateRequest).await;
        }
        for cluster in &plan.confirmed {
            self.resend.remove(cluster);
        }
        // Clusters no longer decided (or deleted): their copies go, forgotten once the cluster
        // confirms (asked again with the re-sends).
        for cluster in &plan.delete {
            send_delete(&self.inner, &self.records[cluster]).await;
        }
        for cluster in &plan.forget {
            self.forget(cluster).await;
        }
        self.status_dirty = true;
        self.update_view();
        let resend_at = self.targets.keys().filter_map(|c| self.resend.at(c)).min();
        let ask_again = (!plan.delete.is_empty()).then(|| now + RESEND_AFTER);
        [resend_at, ask_again].into_iter().flatten().min()
    }

    /// Reads the bindings, sets, rules and placements the policy follows and decides its
    /// clusters (`bounds`, `decided`, `targets`; none while it is disabled). Returns the policy
    /// sets, which the replicated spec names.
    fn gather(&mut self, policy: &Policy) -> Vec<PolicySet> {
        let (ns, name) = ns_name(&self.key);
        let (ns, name) = (ns.to_string(), name.to_string());
        let bindings: Vec<_> = self
            .inner
            .bindings
            .read()
            .expect("lock")
            .values()
            .cloned()
            .collect();
        let sets: Vec<_> = self
            .inner
            .sets
            .read()
            .expect("lock")
            .values()
            .cloned()
            .collect();
        self.bounds = rules::bindings_of(&ns, &name, &bindings, &sets);
        let disabled = policy.spec.as_ref().is_some_and(|s| s.disabled);
        self.decided = {
            let uses_rules = self.uses_rule();
            let (cluster_views, bound) = if uses_rules {
                (
                    self.inner.deps.clusters.snapshot(),
                    self.inner.deps.sets.bound_in(&ns),
                )
            } else {
                (Vec::new(), Vec::new())
            };
            let rules_map = self.inner.rules.read().expect("lock").clone();
            let placements = self.inner.deps.placements.clone();
            self.bounds
                .iter()
                .map(|b| match &b.placement {
                    PlacementKind::Placement(p) => placements
                        .get(&ns, p)
                        .map(|v| v.clusters())
                        .unwrap_or_default(),
                    PlacementKind::Rule(r) => rules_map
                        .get(&ObjectRef::new(&ns, r).inventory_key())
                        .map(|rule| {
                            rules::rule_clusters(rule, &cluster_views, &bound)
                                .into_iter()
                                .collect::<BTreeSet<_>>()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        };
        self.targets = if disabled {
            BTreeMap::new()
        } else {
            rules::targets(&self.bounds, &self.decided)
        };
        sets
    }

    /// Delivers new generations: each cluster's record is updated and its spec published (its
    /// back-off starting over), then the records are written, 256 writes in flight (a
    /// fleet-wide policy change is one burst); a failed one is written again with the
    /// cluster's next report.
    async fn deliver(
        &mut self,
        policy: &Policy,
        sets: &[PolicySet],
        deliveries: Vec<(plan::Send, String)>,
        mut copies: BTreeMap<String, Policy>,
        now: Instant,
    ) {
        let (ns, name) = ns_name(&self.key);
        let (ns, name) = (ns.to_string(), name.to_string());
        let mut writes: Vec<PolicyClusterRecord> = Vec::new();
        for (send, hash) in deliveries {
            let record =
                self.records
                    .entry(send.cluster.clone())
                    .or_insert_with(|| PolicyClusterRecord {
                        cluster_name: send.cluster.clone(),
                        policy_namespace: ns.clone(),
                        policy_name: name.clone(),
                        ..Default::default()
                    });
            record.generation = send.generation;
            record.spec_hash = hash;
            writes.push(record.clone());
            self.resend.remove(&send.cluster);
            self.resend.attempted(send.cluster.clone(), now);
            // A copy with hub templates was resolved when its hash was taken.
            let copy = match copies.remove(&send.cluster) {
                Some(mut copy) => {
                    if let Some(m) = copy.metadata.as_mut() {
                        m.generation = send.generation;
                    }
                    copy
                }
                None => {
                    rules::replicated(policy, &send.cluster, send.enforce, send.generation, sets)
                }
            };
            publish(&self.inner, &send.cluster, &copy, Action::UpdateRequest).await;
        }
        let bucket = self.inner.buckets.status.clone();
        for chunk in writes.chunks(256) {
            let keys: Vec<String> = chunk.iter().map(record_key).collect();
            let results =
                futures::future::join_all(chunk.iter().zip(&keys).map(|(r, k)| bucket.put(k, r)))
                    .await;
            for (r, result) in chunk.iter().zip(results) {
                if let Err(e) = result {
                    tracing::warn!(error = %e, cluster = %r.cluster_name, "writing a policy record failed");
                }
            }
        }
    }

    async fn forget(&mut self, cluster: &str) {
        self.resend.remove(cluster);
        if let Some(r) = self.records.remove(cluster) {
            if let Err(e) = self.inner.buckets.status.purge(&record_key(&r)).await {
                tracing::warn!(error = %e, cluster, "purging a policy record failed");
            }
            self.status_dirty = true;
        }
    }

    /// Takes a report into the cluster's record; what remains is the record's write (the
    /// report is acknowledged after it), unless nothing is to be written.
    async fn take(&mut self, input: ReportIn) -> Taken {
        let ReportIn {
            report,
            sequence,
            ack,
        } = input;
        let cluster = report.cluster_name.clone();
        tracing::debug!(cluster = %cluster, generation = report.observed_generation, compliant = %report.compliant, ?sequence, "policy report");
        let targeted = self.targets.contains_key(&cluster);
        if report.deleted {
            if !targeted {
                self.forget(&cluster).await;
            }
            ack_msg(ack).await;
            self.view_dirty = true;
            return Taken::Done;
        }
        let Some(entry) = self.records.get_mut(&cluster) else {
            // A copy this policy did not send here (or no longer has a record of): remove it.
            let record = PolicyClusterRecord {
                cluster_name: cluster.clone(),
                policy_namespace: ns_name(&self.key).0.to_string(),
                policy_name: ns_name(&self.key).1.to_string(),
                generation: report.observed_generation,
                ..Default::default()
            };
            send_delete(&self.inner, &record).await;
            ack_msg(ack).await;
            return Taken::Done;
        };
        let seq = sequence.unwrap_or(0);
        if seq != 0 && seq <= entry.report_sequence {
            ack_msg(ack).await;
            return Taken::Done;
        }
        // The cluster holds a generation past the one delivered (this hub lost the record, or
        // the policy was deleted and created again while the cluster was away): deliver the
        // current spec above it, or the agent would keep the copy it has.
        let behind = report.observed_generation > entry.generation;
        if behind {
            entry.generation = report.observed_generation;
            entry.spec_hash.clear();
        }
        entry.report = Some(report);
        entry.report_sequence = seq;
        Taken::Write(Box::new(Write {
            key: record_key(entry),
            record: entry.clone(),
            acks: ack.into_iter().collect(),
            behind,
        }))
    }

    fn per_cluster(&self) -> BTreeMap<String, Compliance> {
        self.targets
            .keys()
            .map(|c| {
                let state = self.records.get(c).map_or(Compliance::Unknown, |r| {
                    rules::reported(r.generation, r.report.as_ref())
                });
                (c.clone(), state)
            })
            .collect()
    }

    /// Publishes the current status in the view and the metrics at once (the KV write is
    /// coalesced).
    fn update_view(&mut self) {
        self.view_dirty = false;
        self.last_view = Some(Instant::now());
        let per_cluster = self.per_cluster();
        let Some((policy, _)) = &mut self.policy else {
            return;
        };
        let disabled = policy.spec.as_ref().is_some_and(|s| s.disabled);
        let (ns, name) = ns_name(&self.key);
        let status = rules::root_status(&self.bounds, &self.decided, &per_cluster, disabled);
        self.inner
            .metrics
            .set(ns, name, &status.compliant, &per_cluster);
        if policy.status.as_ref() != Some(&status) {
            policy.status = Some(status);
            self.inner.views.upsert(&self.key, policy.clone());
            self.status_dirty = true;
        }
    }

    async fn write_status(&mut self) {
        self.last_status_write = Some(Instant::now());
        let Some((policy, rev)) = &mut self.policy else {
            self.status_dirty = false;
            return;
        };
        let (ns, name) = ns_name(&self.key);
        let mut stored = policy.clone();
        if let Some(m) = stored.metadata.as_mut() {
            m.resource_version = 0;
        }
        match self
            .inner
            .buckets
            .policies
            .put(&ObjectRef::new(ns, name).store_key(), &stored)
            .await
        {
            Ok(r) => {
                *rev = r;
                if let Some(m) = policy.metadata.as_mut() {
                    m.resource_version = r;
                }
                self.inner.views.upsert(&self.key, policy.clone());
                self.status_dirty = false;
            }
            Err(e) => tracing::warn!(error = %e, "writing the policy status failed; retrying"),
        }
    }

    fn details(&self, page: &DetailsPage) -> Reports {
        use std::ops::Bound::{Excluded, Unbounded};
        let from = page.after.as_ref().map_or(Unbounded, Excluded);
        let mut clusters = Vec::new();
        for c in self
            .targets
            .range::<String, _>((from, Unbounded))
            .map(|(c, _)| c)
        {
            if clusters.len() == page.limit {
                let next = clusters
                    .last()
                    .map(|r: &PolicyStatusReport| r.cluster_name.clone());
                return Reports { clusters, next };
            }
            clusters.push(
                self.records
                    .get(c)
                    .and_then(|r| r.report.clone())
                    .unwrap_or_else(|| PolicyStatusReport {
                        cluster_name: c.clone(),
                        ..Default::default()
                    }),
            );
        }
        Reports {
            clusters,
            next: None,
        }
    }

    async fn delete(&mut self) {
        let clusters: Vec<String> = self.records.keys().cloned().collect();
        for c in clusters {
            let record = self.records[&c].clone();
            send_delete(&self.inner, &record).await;
            self.forget(&c).await;
        }
        let (ns, name) = ns_name(&self.key);
        self.inner.metrics.set(ns, name, "", &BTreeMap::new());
    }
}

async fn ack_msg(ack: Option<crate::report::Ack>) {
    crate::report::settle(ack, Outcome::Taken).await;
}

fn soonest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
