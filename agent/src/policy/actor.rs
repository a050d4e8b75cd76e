//! One task per replicated policy: evaluates its templates against the cluster on every change
//! the backend signals and on their intervals, enforces (create, patch, delete) when asked,
//! keeps each template's history, persists its record, and reports status when it changes.
//! A template whose dependencies are not met is neither evaluated nor enforced: it reports
//! Pending, and is looked at again whenever a policy on this cluster changes compliance (every
//! actor shares its compliance in [`Deps::compliances`]) or the cluster changes.
//! Nothing here needs the hub: an offline spoke keeps evaluating and repairing, and reports the
//! history it kept when it reconnects.

use super::executor::{perform, snapshot, validate};
use super::rules::{self, Compliances, Gate, Held, Template};
use super::templates;
use super::{PolicyConfig, StatusSink};
use crate::backend::Backend;
use crate::store::LocalStore;
use flotilla_api::policy::certificate::{self, CertificatePolicy};
use flotilla_api::policy::config::ConfigurationPolicy;
use flotilla_api::policy::dependency::{Dependency, Observed};
use flotilla_api::policy::evaluate::{Action, ObjectKey, evaluate, kinds, prune};
use flotilla_api::policy::template::policy::{ResolvedPolicy, is_templated};
use flotilla_api::policy::{Compliance, history};
use flotilla_api::v1::{
    AppliedPolicy, Policy, PolicyObjectRef, PolicyStatusReport, TemplateDetails,
};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

/// What a policy actor is asked to do.
enum Msg {
    /// A new spec from the hub.
    Update(Box<Policy>),
    /// Remove the policy (pruning as its templates ask) and stop; answered when done.
    Remove(oneshot::Sender<()>),
    /// Publish the status again (after a reconnect: the hub may have lost it, or may no longer
    /// have the policy and answers with a delete).
    Republish,
}

/// The handle of one policy's task.
pub struct PolicyHandle {
    tx: mpsc::Sender<Msg>,
    join: JoinHandle<()>,
    generation: i64,
}

impl PolicyHandle {
    /// The generation of the spec the actor holds.
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// Whether the task ended.
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }

    /// Hands a newer spec over.
    pub async fn update(&mut self, policy: Policy) {
        self.generation = generation_of(&policy);
        if self.tx.send(Msg::Update(Box::new(policy))).await.is_err() {
            tracing::warn!("policy task gone; update dropped");
        }
    }

    /// Removes the policy and waits until its task pruned and ended.
    pub async fn remove(self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Remove(tx)).await.is_ok() {
            let _ = rx.await;
        }
        let _ = self.join.await;
    }

    /// Asks for the status to be published again.
    pub fn republish(&self) {
        // A full mailbox already holds work that ends in a report.
        let _ = self.tx.try_send(Msg::Republish);
    }

    /// Stops the task without removing anything (agent shutdown).
    pub async fn stop(self) {
        drop(self.tx);
        let _ = self.join.await;
    }
}

fn generation_of(p: &Policy) -> i64 {
    p.metadata.as_ref().map_or(0, |m| m.generation)
}

/// What the actor needs from the agent.
#[derive(Clone)]
pub struct Deps {
    /// This cluster's name.
    pub cluster: String,
    /// The cluster.
    pub backend: Arc<dyn Backend>,
    /// Where records persist.
    pub store: Arc<LocalStore>,
    /// Where status goes.
    pub sink: Arc<dyn StatusSink>,
    /// Settings.
    pub config: PolicyConfig,
    /// The compliance of every policy on this cluster, shared by their actors: what
    /// dependencies are checked against, and the signal that one may have been met.
    pub compliances: Arc<tokio::sync::watch::Sender<Compliances>>,
}

/// Starts the task of one replicated policy from its record.
pub fn spawn(record: AppliedPolicy, deps: Deps) -> PolicyHandle {
    let policy = record.policy.clone().unwrap_or_default();
    let generation = generation_of(&policy);
    let name = policy
        .metadata
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let (tx, rx) = mpsc::channel(8);
    let span = tracing::info_span!("policy", policy.name = %name, cluster.name = %deps.cluster);
    let actor = PolicyActor::new(record, deps);
    let join = tokio::spawn(actor.run(rx).instrument(span));
    PolicyHandle {
        tx,
        join,
        generation,
    }
}

/// Why the templates are looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// A new spec (or the start): every template.
    All,
    /// The cluster changed: templates that re-evaluate on changes, and those due.
    Change,
    /// A timer ran out: the templates it was for.
    Timer,
    /// A policy on this cluster changed compliance: templates whose dependencies changed.
    Dependencies,
}

/// Per template: what it is, what it waits for, its last result and when to look again.
struct Slot {
    template: Template,
    gate: Gate,
    last: Compliance,
    next: Option<Instant>,
    /// While its dependencies are not met: OCM's message naming them.
    waiting: Option<String>,
    /// A templated ConfigurationPolicy as its last resolution left it: what pruning deletes
    /// from (the unresolved text names no object).
    resolved: Option<Box<ConfigurationPolicy>>,
}

struct PolicyActor {
    record: AppliedPolicy,
    slots: Vec<Slot>,
    deps: Deps,
    /// The last report the status stream acknowledged.
    published: Option<PolicyStatusReport>,
    /// Evaluate at the next turn (a change, a new spec, a failed read).
    dirty: bool,
    retry_publish: Option<Instant>,
}

impl PolicyActor {
    fn new(record: AppliedPolicy, deps: Deps) -> Self {
        let mut this = Self {
            record,
            slots: Vec::new(),
            deps,
            published: None,
            dirty: true,
            retry_publish: None,
        };
        this.load_templates();
        this
    }

    fn policy(&self) -> &Policy {
        self.record
            .policy
            .as_ref()
            .expect("record holds its policy")
    }

    fn name(&self) -> String {
        self.policy()
            .metadata
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default()
    }

    /// Reads the templates of the current spec; details of templates that stay keep their
    /// history, details of removed ones go.
    fn load_templates(&mut self) {
        let key = crate::claims::curve_key(&self.deps.store);
        let open = |sealed: &[u8], sender: &str| -> Result<String, String> {
            let sender = nkeys::XKey::from_public_key(sender).map_err(|e| e.to_string())?;
            let plain = key.open(sealed, &sender).map_err(|e| e.to_string())?;
            String::from_utf8(plain).map_err(|e| e.to_string())
        };
        let templates = rules::templates_opened(self.policy(), Some(&open));
        let mut details = Vec::with_capacity(templates.len());
        for t in &templates {
            let (name, kind) = t.id();
            let kept = self
                .record
                .details
                .iter()
                .find(|d| d.template_name == name && d.template_kind == kind)
                .cloned();
            details.push(kept.unwrap_or(TemplateDetails {
                template_name: name,
                template_kind: kind,
                compliant: String::new(),
                history: Vec::new(),
            }));
        }
        self.record.details = details;
        let gates = rules::gates(self.policy(), &self.deps.cluster);
        self.slots = templates
            .into_iter()
            .zip(gates)
            .map(|(template, gate)| {
                let (template, gate) = match gate {
                    Ok(g) => (template, g),
                    // Conflicting dependencies: the template is not evaluated, as in OCM.
                    Err(reason) => {
                        let (name, kind) = template.id();
                        let meta = flotilla_api::policy::config::TemplateMeta {
                            name,
                            kind,
                            ..Default::default()
                        };
                        (Template::Invalid { meta, reason }, Gate::default())
                    }
                };
                Slot {
                    template,
                    gate,
                    // Every template is evaluated once for a new spec.
                    last: Compliance::Unknown,
                    next: None,
                    waiting: None,
                    resolved: None,
                }
            })
            .collect();
        self.dirty = true;
    }

    /// Whether any template depends on something.
    fn gated(&self) -> bool {
        self.slots.iter().any(|s| !s.gate.dependencies.is_empty())
    }

    /// The message of slot `i` while its dependencies are not met; `None` when they are, or
    /// for a template that is never evaluated anyway.
    async fn waiting(&self, i: usize) -> Option<String> {
        let slot = &self.slots[i];
        let evaluated = matches!(
            slot.template,
            Template::Config(_) | Template::Certificate(_)
        );
        if slot.gate.dependencies.is_empty() || !evaluated {
            return None;
        }
        // Policies are known here; other kinds are read from the cluster first.
        let mut read: Vec<(Dependency, Observed)> = Vec::new();
        for dep in &slot.gate.dependencies {
            if self.deps.compliances.borrow().observe(dep).is_none() {
                let object = self
                    .deps
                    .backend
                    .get(&dependency_id(dep))
                    .await
                    .ok()
                    .flatten();
                read.push((dep.clone(), rules::observe_object(object.as_ref())));
            }
        }
        let held = self.deps.compliances.borrow().clone();
        rules::waiting_for(&slot.gate, |d| {
            held.observe(d).unwrap_or_else(|| {
                read.iter()
                    .find(|(r, _)| r == d)
                    .map_or(Observed::NotFound, |(_, o)| o.clone())
            })
        })
    }

    /// Shares this policy's compliance with the other policies' actors (waking those whose
    /// dependencies may have changed).
    fn share(&self) {
        let held = Held {
            compliance: rules::cluster_compliance(
                &self.slots.iter().map(|s| s.last).collect::<Vec<_>>(),
            ),
            templates: self
                .slots
                .iter()
                .map(|s| {
                    let (name, kind) = s.template.id();
                    (kind, name, s.last)
                })
                .collect(),
        };
        let name = self.name();
        self.deps
            .compliances
            .send_if_modified(|c| c.set(&name, held));
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut changes = self.deps.backend.changes();
        let mut held = self.deps.compliances.subscribe();
        loop {
            if self.dirty {
                self.dirty = false;
                self.evaluate(Trigger::All).await;
            }
            let deadline = self
                .slots
                .iter()
                .filter_map(|s| s.next)
                .chain(self.retry_publish)
                .min();
            tokio::select! {
                msg = rx.recv() => match msg {
                    None => break,
                    Some(Msg::Update(p)) => {
                        self.record.policy = Some(*p);
                        self.load_templates();
                        self.persist();
                    }
                    Some(Msg::Remove(done)) => {
                        self.remove().await;
                        let _ = done.send(());
                        break;
                    }
                    Some(Msg::Republish) => {
                        self.published = None;
                        self.report().await;
                    }
                },
                changed = wait_change(&mut changes) => {
                    if changed {
                        // Let a burst of changes (an apply of many objects) settle first.
                        tokio::time::sleep(self.deps.config.debounce).await;
                        if let Some(rx) = changes.as_mut() {
                            rx.borrow_and_update();
                        }
                        self.evaluate(Trigger::Change).await;
                    } else {
                        changes = None;
                    }
                }
                Ok(()) = held.changed() => {
                    held.borrow_and_update();
                    if self.gated() {
                        self.evaluate(Trigger::Dependencies).await;
                    }
                }
                _ = sleep_until_opt(deadline) => {
                    if self.retry_publish.is_some_and(|t| t <= Instant::now()) {
                        self.retry_publish = None;
                        self.report().await;
                    }
                    if self.slots.iter().any(|s| s.next.is_some_and(|t| t <= Instant::now())) {
                        self.evaluate(Trigger::Timer).await;
                    }
                }
            }
        }
    }

    /// Evaluates the templates that are due, enforces, records history, persists and reports.
    async fn evaluate(&mut self, trigger: Trigger) {
        let now = Instant::now();
        let root = rules::root_remediation(self.policy());
        let signals = self.deps.backend.changes().is_some();
        let poll = self.deps.config.poll_interval;
        let mut changed = false;
        let mut created = Vec::new();
        for i in 0..self.slots.len() {
            let waiting = self.waiting(i).await;
            let slot = &self.slots[i];
            if let Some(pending) = waiting {
                // Not evaluated nor enforced until its dependencies are met.
                if slot.waiting.as_ref() == Some(&pending) && slot.last != Compliance::Unknown {
                    continue;
                }
                let (compliance, message) =
                    rules::waiting_status(&pending, slot.gate.ignore_pending);
                self.slots[i].waiting = Some(pending);
                changed |= self.record(i, compliance, &message, None, false, now);
                continue;
            }
            // Dependencies met since the last look: evaluated now.
            let released = self.slots[i].waiting.take().is_some();
            let slot = &self.slots[i];
            let timer_due = slot.next.is_some_and(|t| t <= now);
            let due = match (&slot.template, trigger) {
                _ if released => true,
                (_, Trigger::All) => true,
                (_, Trigger::Dependencies) => false,
                (_, _) if slot.last == Compliance::Unknown => true,
                (Template::Config(c), Trigger::Change) => {
                    timer_due || rules::reevaluate_on_change(c, slot.last)
                }
                (Template::Config(_), Trigger::Timer) => timer_due,
                (Template::Certificate(_), Trigger::Change) => true,
                (Template::Certificate(_), Trigger::Timer) => timer_due,
                // Templates that are never evaluated keep their one result.
                _ => false,
            };
            if !due {
                continue;
            }
            let (compliance, message, next, acted) = match &slot.template {
                Template::Config(c) => {
                    let resolved = match self.resolve_templates(c).await {
                        Ok(r) => r,
                        Err(e) => {
                            tracing::debug!(error = %e, "reading template inputs failed; retrying");
                            self.slots[i].next = Some(now + Duration::from_secs(5));
                            continue;
                        }
                    };
                    if is_templated(c) {
                        self.slots[i].resolved = Some(Box::new(resolved.policy.clone()));
                    }
                    let c = &resolved.policy;
                    let snap = match snapshot(self.deps.backend.as_ref(), &kinds(c)).await {
                        Ok(s) => s,
                        Err(e) => {
                            // Not judged on a view it could not read: try again shortly.
                            tracing::debug!(error = %e, "reading the cluster failed; retrying");
                            self.slots[i].next = Some(now + Duration::from_secs(5));
                            continue;
                        }
                    };
                    let mut evaluation = evaluate(c, root, &snap);
                    // Templates that failed to resolve come first, as their own findings.
                    evaluation.findings.splice(0..0, resolved.errors);
                    // What a field its kind does not define makes the cluster refuse is a
                    // violation, never written.
                    if let Err(e) = validate(self.deps.backend.as_ref(), &mut evaluation).await {
                        tracing::debug!(error = %e, "validating the writes failed; retrying");
                        self.slots[i].next = Some(now + Duration::from_secs(5));
                        continue;
                    }
                    let actions = evaluation.actions();
                    let results = perform(self.deps.backend.as_ref(), &actions).await;
                    for (a, r) in actions.iter().zip(&results) {
                        if let (Action::Create(key, _), Ok(())) = (a, r) {
                            created.push(key.clone());
                        }
                    }
                    let (compliance, message) = evaluation.settle(&results);
                    let next = rules::next_after(c, compliance, signals, poll);
                    (compliance, message, next, !actions.is_empty())
                }
                Template::Certificate(c) => match self.judge_certificates(c).await {
                    Ok((compliance, message, next)) => (compliance, message, Some(next), false),
                    Err(e) => {
                        tracing::debug!(error = %e, "reading Secrets failed; retrying");
                        self.slots[i].next = Some(now + Duration::from_secs(5));
                        continue;
                    }
                },
                t => (
                    Compliance::NonCompliant,
                    t.fixed_message().unwrap_or_default(),
                    None,
                    false,
                ),
            };
            changed |= self.record(i, compliance, &message, next, acted, now);
        }
        for key in created {
            let r = object_ref(&key);
            if !self.record.created.contains(&r) {
                self.record.created.push(r);
                changed = true;
            }
        }
        if changed {
            self.persist();
        }
        self.share();
        self.report().await;
    }

    /// The policy with its managed-cluster templates resolved on this cluster (the policy
    /// itself when it has none).
    async fn resolve_templates(
        &self,
        c: &ConfigurationPolicy,
    ) -> Result<ResolvedPolicy, crate::backend::BackendError> {
        if !is_templated(c) {
            return Ok(ResolvedPolicy {
                policy: c.clone(),
                errors: Vec::new(),
                reads: Default::default(),
                sensitive: false,
            });
        }
        templates::resolve(
            self.deps.backend.as_ref(),
            &self.deps.store,
            &self.deps.config.claims,
            c,
        )
        .await
    }

    /// Judges a CertificatePolicy against the cluster's namespaces and Secrets: its compliance,
    /// cert-policy-controller's message, and when to judge it again (a certificate crossing
    /// its minimum duration changes the verdict with no change on the cluster).
    async fn judge_certificates(
        &self,
        policy: &CertificatePolicy,
    ) -> Result<(Compliance, String, Duration), crate::backend::BackendError> {
        let secrets = [("v1".to_string(), "Secret".to_string())];
        let snap = snapshot(self.deps.backend.as_ref(), &secrets).await?;
        let now = time::OffsetDateTime::from(SystemTime::now());
        let verdict = certificate::judge(policy, &snap.namespaces, &snap.objects, now);
        let next = rules::certificate_next(
            verdict.next_check,
            now,
            self.deps.backend.changes().is_some(),
            self.deps.config.poll_interval,
        );
        Ok((verdict.compliance, verdict.message, next))
    }

    /// Records slot `i`'s result: its compliance, when to look again, the history event;
    /// whether the record changed.
    fn record(
        &mut self,
        i: usize,
        compliance: Compliance,
        message: &str,
        next: Option<Duration>,
        acted: bool,
        now: Instant,
    ) -> bool {
        let name = self.name();
        let slot = &mut self.slots[i];
        slot.last = compliance;
        slot.next = next.map(|d| now + d);
        let detail = &mut self.record.details[i];
        let event_name = format!("{name}.{}", detail.template_name);
        let (now_ts, limit) = (timestamp(SystemTime::now()), self.deps.config.history_limit);
        let mut changed = if acted {
            // Enforce wrote something: an event, even when its message repeats the last one
            // (the same drift repaired again).
            history::push(&mut detail.history, now_ts, message, &event_name, limit);
            true
        } else {
            history::record(&mut detail.history, now_ts, message, &event_name, limit)
        };
        if detail.compliant != compliance.as_str() {
            detail.compliant = compliance.as_str().to_string();
            changed = true;
        }
        changed
    }

    fn persist(&self) {
        if let Err(e) = self.deps.store.save_policy(&self.record) {
            tracing::error!(error = %e, "saving the policy record failed");
        }
    }

    fn status(&self, deleted: bool) -> PolicyStatusReport {
        let templates: Vec<Compliance> = self.slots.iter().map(|s| s.last).collect();
        PolicyStatusReport {
            cluster_name: self.deps.cluster.clone(),
            policy_name: self.name(),
            resource_id: self.record.resource_id.clone(),
            observed_generation: generation_of(self.policy()),
            compliant: if deleted {
                String::new()
            } else {
                rules::cluster_compliance(&templates).as_str().to_string()
            },
            details: if deleted {
                Vec::new()
            } else {
                self.record.details.clone()
            },
            deleted,
        }
    }

    /// Publishes the status unless the stream already has it; retries while offline.
    async fn report(&mut self) {
        let report = self.status(false);
        if self.published.as_ref() == Some(&report) {
            return;
        }
        if self.deps.sink.publish(&report).await {
            self.published = Some(report);
            self.retry_publish = None;
        } else {
            self.retry_publish = Some(Instant::now() + self.deps.config.retry_interval);
        }
    }

    /// The ConfigurationPolicies to prune with: templated ones as their last resolution left
    /// them (resolved now when none has run since the agent started; one that cannot be
    /// resolved prunes nothing, as OCM leaves a template error's objects).
    async fn prunable(&self) -> Vec<ConfigurationPolicy> {
        let mut out = Vec::new();
        for slot in &self.slots {
            let Template::Config(c) = &slot.template else {
                continue;
            };
            match &slot.resolved {
                Some(r) => out.push((**r).clone()),
                None if is_templated(c) => match self.resolve_templates(c).await {
                    Ok(r) => out.push(r.policy),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot resolve templates; nothing pruned")
                    }
                },
                None => out.push((**c).clone()),
            }
        }
        out
    }

    /// Prunes what `pruneObjectBehavior` asks, forgets the record and confirms the removal.
    async fn remove(&mut self) {
        let created: Vec<ObjectKey> = self.record.created.iter().map(object_key).collect();
        for c in self.prunable().await {
            let c = &c;
            let snap = match snapshot(self.deps.backend.as_ref(), &kinds(c)).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the cluster; nothing pruned");
                    continue;
                }
            };
            let deletes: Vec<Action> = prune(c, &snap, &created)
                .into_iter()
                .map(Action::Delete)
                .collect();
            for (a, r) in deletes
                .iter()
                .zip(perform(self.deps.backend.as_ref(), &deletes).await)
            {
                match r {
                    Ok(()) => tracing::info!(object = %a.key(), "pruned"),
                    Err(e) => tracing::warn!(object = %a.key(), error = %e, "prune failed"),
                }
            }
        }
        if let Err(e) = self.deps.store.remove_policy(&self.record.resource_id) {
            tracing::error!(error = %e, "removing the policy record failed");
        }
        let name = self.name();
        self.deps.compliances.send_if_modified(|c| c.remove(&name));
        let report = self.status(true);
        // The hub forgets the cluster's status when it sees this; retried a few times, then the
        // spec resync tells the hub the policy is gone.
        for _ in 0..3 {
            if self.deps.sink.publish(&report).await {
                break;
            }
            tokio::time::sleep(self.deps.config.retry_interval).await;
        }
    }
}

async fn wait_change(changes: &mut Option<tokio::sync::watch::Receiver<u64>>) -> bool {
    match changes {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

fn timestamp(t: SystemTime) -> prost_types::Timestamp {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    prost_types::Timestamp {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// The backend's id of an object depended on.
fn dependency_id(dep: &Dependency) -> flotilla_api::work::ManifestId {
    flotilla_api::work::ManifestId {
        group: dep.group.clone(),
        version: dep.version.clone(),
        kind: dep.kind.clone(),
        namespace: dep.namespace.clone(),
        name: dep.name.clone(),
    }
}

fn object_ref(k: &ObjectKey) -> PolicyObjectRef {
    PolicyObjectRef {
        api_version: k.api_version.clone(),
        kind: k.kind.clone(),
        namespace: k.namespace.clone(),
        name: k.name.clone(),
    }
}

fn object_key(r: &PolicyObjectRef) -> ObjectKey {
    ObjectKey {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}
