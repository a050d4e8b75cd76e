//! The plan's object-source half: the records of objects listed on spokes (their absences
//! counted once per fresh complete list, deleted or dropped after
//! [`MISSING_LISTS_TO_DELETE`]), and the listed objects (clusters created, adopted, shaped).

use super::{
    Edit, Judged, Listing, MISSING_LISTS_TO_DELETE, Plan, Selected, Snapshot, SourceObject,
    Verdict, count, deleting, desired_labels, shape, source_ref,
};
use crate::importpolicy::compiled::{CompiledPolicy, Template, Vars, json_value, with_reference};
use crate::importpolicy::reason::Reason;
use flotilla_api::v1::{ClusterOrigin, ImportRecord, ImportSourceRef, ManagedCluster};
use std::collections::{BTreeMap, HashMap, HashSet};

/// An object policy's records: counted, their absences counted (once per fresh complete list),
/// deleted (or dropped) after [`MISSING_LISTS_TO_DELETE`] lists without their source.
pub(super) fn records(
    s: &Snapshot,
    p: &CompiledPolicy,
    lists: Option<&BTreeMap<String, Listing>>,
    live: &HashMap<&str, &ManagedCluster>,
    plan: &mut Plan,
) {
    let tally = plan.statuses.entry(p.name.clone()).or_default();
    for spoke in &p.source.clusters {
        match lists.and_then(|l| l.get(spoke)) {
            None => tally
                .unlisted
                .push((spoke.clone(), "not listed yet".into())),
            Some(Listing { result: Err(e), .. }) => {
                tally.unlisted.push((spoke.clone(), e.to_string()))
            }
            Some(Listing {
                result: Ok(objects),
                ..
            }) => tally.sources += objects.len() as i32,
        }
    }
    for (cluster, r) in s.records.iter().filter(|(_, r)| r.policy == p.name) {
        let Some(c) = live.get(cluster.as_str()) else {
            continue;
        };
        let at = source_ref(r);
        if !p.source.clusters.contains(&at.cluster) {
            // The spoke left the policy: nothing says the source is gone; the cluster stays.
            plan.records_delete.push(cluster.clone());
            continue;
        }
        count(tally, r);
        let mut next = r.clone();
        if let Some(Listing {
            fresh: true,
            result: Ok(objects),
        }) = lists.and_then(|l| l.get(&at.cluster))
        {
            let present = objects
                .iter()
                .any(|o| o.namespace == at.namespace && o.name == at.name);
            next.missing_lists = if present { 0 } else { r.missing_lists + 1 };
        }
        if next.missing_lists >= MISSING_LISTS_TO_DELETE {
            if r.created && origin(c) == ClusterOrigin::Import {
                plan.deletes.push(cluster.clone());
            } else {
                plan.records_delete.push(cluster.clone());
            }
            if r.created {
                tally.imported -= 1;
            } else {
                tally.adopted -= 1;
            }
            continue;
        }
        if next != *r {
            plan.records_put.push((cluster.clone(), next));
        }
    }
}

/// How a cluster came to be (unknown: hand-made or older than the marker).
pub fn origin(c: &ManagedCluster) -> ClusterOrigin {
    c.hub
        .as_ref()
        .and_then(|h| ClusterOrigin::try_from(h.origin).ok())
        .unwrap_or(ClusterOrigin::Unspecified)
}

/// An object policy's listed objects: new clusters created or existing ones adopted, own
/// ones shaped by the template.
pub(super) fn matches(
    s: &Snapshot,
    p: &CompiledPolicy,
    lists: Option<&BTreeMap<String, Listing>>,
    live: &HashMap<&str, &ManagedCluster>,
    claimed: &mut HashSet<String>,
    plan: &mut Plan,
) {
    let Some(lists) = lists else {
        return;
    };
    let budget = s.budget.get(&p.name).copied().unwrap_or(0);
    let mut m = Matcher {
        s,
        p,
        live,
        claimed,
        plan,
        budget,
        created: s
            .records
            .iter()
            .filter(|(k, r)| r.policy == p.name && r.created && live.contains_key(k.as_str()))
            .count(),
    };
    for spoke in &p.source.clusters {
        if let Some(Listing {
            result: Ok(objects),
            ..
        }) = lists.get(spoke)
        {
            for o in objects {
                m.object(spoke, o);
            }
        }
    }
    let (spent, created) = (budget - m.budget, m.created);
    if spent > 0 {
        plan.created.insert(p.name.clone(), spent);
    }
    let tally = plan.statuses.entry(p.name.clone()).or_default();
    if tally.over_cap > 0 {
        tally.error(format!(
            "{} source objects name clusters not created: the policy holds {created} clusters \
             it created, the most one policy may (--import-max-clusters)",
            tally.over_cap
        ));
    }
}

/// One object policy's pass over its listed objects.
struct Matcher<'a, 'p> {
    s: &'a Snapshot<'a>,
    p: &'a CompiledPolicy,
    live: &'a HashMap<&'a str, &'a ManagedCluster>,
    claimed: &'p mut HashSet<String>,
    plan: &'p mut Plan,
    /// Creations left in this pass (the policy's rate).
    budget: usize,
    /// Live clusters the policy created, counting this pass's.
    created: usize,
}

impl Matcher<'_, '_> {
    fn tally(&mut self) -> &mut super::Tally {
        self.plan.statuses.entry(self.p.name.clone()).or_default()
    }

    /// The record written in this plan for `name`, if any.
    fn planned(&self, name: &str) -> Option<&ImportRecord> {
        self.plan
            .records_put
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, r)| r)
    }

    /// One listed object: its cluster created, adopted or shaped, or why not in the status.
    fn object(&mut self, spoke: &str, o: &Judged) {
        let what = format!("{spoke}: {}", shown(o));
        let selected = match &o.verdict {
            Verdict::Skipped => return,
            Verdict::Failed(e) => return self.tally().error(format!("{what}: {e}")),
            Verdict::Selected(selected) => selected,
        };
        let name = selected.cluster.as_str();
        let record = self
            .s
            .records
            .get(name)
            .filter(|_| self.live.contains_key(name));
        let this = ImportSourceRef {
            cluster: spoke.to_string(),
            group: self.p.source.group.clone(),
            resource: self.p.source.resource.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
        };
        let Some(held) = self.holder(&what, selected, record, &this) else {
            return;
        };
        let template = match &selected.template {
            Ok(t) => t,
            Err(e) => return self.tally().error(format!("{what}: {e}")),
        };
        self.write(name, record, held, template, this);
    }

    /// The record `selected`'s cluster is held under: this object's own, or a new one — `None`
    /// (with why in the status, when it is an error) when the policy does not take it now.
    fn holder(
        &mut self,
        what: &str,
        selected: &Selected,
        record: Option<&ImportRecord>,
        this: &ImportSourceRef,
    ) -> Option<ImportRecord> {
        let name = selected.cluster.as_str();
        match record {
            Some(r) if same_source(r, &self.p.name, this) => {
                // Its own record (possibly just written by records).
                let r = self.planned(name).unwrap_or(r).clone();
                let gone = self.plan.deletes.iter().any(|c| c == name)
                    || self.plan.records_delete.iter().any(|c| c == name);
                (!gone).then_some(r)
            }
            Some(r) => {
                let at = source_ref(r);
                self.tally().error(format!(
                    "{what}: cluster {name:?} is held by ClusterImportPolicy {:?} (source \
                     {}/{}/{})",
                    r.policy, at.cluster, at.namespace, at.name
                ));
                None
            }
            None if self.claimed.contains(name) => {
                self.tally().error(format!(
                    "{what}: cluster {name:?} is named by another source too"
                ));
                None
            }
            None => self.admit(what, selected, this),
        }
    }

    /// A new record for an object no record holds: when its creation condition holds, and for
    /// a cluster that does not exist yet, within the policy's cap and then its rate (a hostile
    /// source spoke lists up to 5,000 objects per list, and can change them every poll).
    fn admit(
        &mut self,
        what: &str,
        selected: &Selected,
        this: &ImportSourceRef,
    ) -> Option<ImportRecord> {
        let name = selected.cluster.as_str();
        match &selected.condition {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                self.tally().error(format!("{what}: {e}"));
                return None;
            }
        }
        let existing = self.live.get(name).filter(|c| !deleting(c));
        if self.live.contains_key(name) && existing.is_none() {
            self.claimed.insert(name.to_string());
            return None; // being deleted: created again once it is gone
        }
        if existing.is_none() {
            if let Err(e) = &selected.template {
                self.tally().error(format!("{what}: {e}"));
                return None;
            }
            if self.created >= self.s.max_created {
                self.tally().over_cap += 1;
                return None;
            }
            if self.budget == 0 {
                self.tally().deferred += 1;
                return None;
            }
            self.budget -= 1;
            self.created += 1;
        }
        self.claimed.insert(name.to_string());
        Some(ImportRecord {
            policy: self.p.name.clone(),
            source_ref: Some(this.clone()),
            created: existing.is_none(),
            ..Default::default()
        })
    }

    /// The cluster's edit (its creation, or the template's shape) and its record after it.
    fn write(
        &mut self,
        name: &str,
        record: Option<&ImportRecord>,
        held: ImportRecord,
        template: &Template,
        this: ImportSourceRef,
    ) {
        let (p, s) = (self.p, self.s);
        let (edit, mut next) = match self.live.get(name) {
            Some(c) => {
                let tally = self.tally();
                if record.is_none() {
                    count(tally, &held);
                }
                shape(p, c, &held, template, s.secure, tally)
            }
            None => {
                self.tally().imported += 1;
                let mut next = held;
                next.policy_generation = p.generation;
                let desired = desired_labels(template);
                next.applied_labels = desired.clone();
                let edit = Edit {
                    cluster: name.to_string(),
                    set_labels: desired,
                    accept: template.accept,
                    create: true,
                    taints: template.taints.clone(),
                    lease_seconds: template.lease_seconds,
                    ..Default::default()
                };
                (edit, next)
            }
        };
        if let Some(r) = record {
            next.missing_lists = self
                .planned(name)
                .map_or(r.missing_lists, |r| r.missing_lists);
        }
        next.source_ref = Some(this);
        let plan = &mut *self.plan;
        if let Some(i) = plan.records_put.iter().rposition(|(k, _)| k == name) {
            plan.records_put.remove(i);
        }
        if s.records.get(name) != Some(&next) {
            plan.records_put.push((name.to_string(), next));
        }
        if !edit.is_noop() {
            plan.edits.push(edit);
        }
    }
}

/// Whether `r` is `policy`'s record of the source object `this`.
fn same_source(r: &ImportRecord, policy: &str, this: &ImportSourceRef) -> bool {
    let at = source_ref(r);
    r.policy == policy
        && at.cluster == this.cluster
        && at.namespace == this.namespace
        && at.name == this.name
}

/// Judges one object as read — its selector, cluster name, references, creation condition and
/// template, evaluated once when listed — so that nothing of the object is kept.
pub fn judge(p: &CompiledPolicy, o: SourceObject) -> Judged {
    let SourceObject {
        namespace,
        name,
        uid,
        object,
        references,
    } = o;
    Judged {
        verdict: verdict(p, &object, references),
        namespace,
        name,
        uid,
    }
}

fn verdict(
    p: &CompiledPolicy,
    object: &serde_json::Value,
    references: Result<Vec<(String, serde_json::Value)>, Reason>,
) -> Verdict {
    let mut vars = Vars::of(json_value(object));
    match p.selects(&vars) {
        Ok(true) => {}
        Ok(false) => return Verdict::Skipped,
        Err(e) => return Verdict::Failed(e.into()),
    }
    let cluster = match p.cluster_name(&vars) {
        Ok(n) => n,
        Err(e) => return Verdict::Failed(e.into()),
    };
    match references {
        Ok(refs) => {
            for (key, object) in refs {
                vars = with_reference(&vars, &key, json_value(&object));
            }
        }
        Err(e) => return Verdict::Failed(e),
    }
    Verdict::Selected(Box::new(Selected {
        cluster,
        condition: p.condition_holds(&vars).map_err(Reason::from),
        template: p.template_with(&vars).map_err(Reason::from),
    }))
}

fn shown(o: &Judged) -> String {
    if o.namespace.is_empty() {
        o.name.clone()
    } else {
        format!("{}/{}", o.namespace, o.name)
    }
}
