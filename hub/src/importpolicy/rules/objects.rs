//! The plan's object-source half: the records of objects listed on spokes (their absences
//! counted once per fresh complete list, deleted or dropped after
//! [`MISSING_LISTS_TO_DELETE`]), and the listed objects (clusters created, adopted, shaped).

use super::{
    Edit, Judged, Listing, MISSING_LISTS_TO_DELETE, Plan, Selected, Snapshot, SourceObject,
    Verdict, count, deleting, desired_labels, shape, source_ref,
};
use crate::importpolicy::compiled::{CompiledPolicy, Vars, json_value, with_reference};
use crate::importpolicy::source::cut;
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
            Some(Listing { result: Err(e), .. }) => tally.unlisted.push((spoke.clone(), e.clone())),
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
    let mut budget = s.budget.get(&p.name).copied().unwrap_or(0);
    let mut created = s
        .records
        .iter()
        .filter(|(k, r)| r.policy == p.name && r.created && live.contains_key(k.as_str()))
        .count();
    for spoke in &p.source.clusters {
        let Some(Listing {
            result: Ok(objects),
            ..
        }) = lists.get(spoke)
        else {
            continue;
        };
        for o in objects {
            let tally = plan.statuses.entry(p.name.clone()).or_default();
            let what = format!("{spoke}: {}", shown(o));
            let selected = match &o.verdict {
                Verdict::Skipped => continue,
                Verdict::Failed(e) => {
                    tally.error(format!("{what}: {e}"));
                    continue;
                }
                Verdict::Selected(selected) => selected,
            };
            let name = selected.cluster.clone();
            let record = s
                .records
                .get(&name)
                .filter(|_| live.contains_key(name.as_str()));
            let this = ImportSourceRef {
                cluster: spoke.clone(),
                group: p.source.group.clone(),
                resource: p.source.resource.clone(),
                namespace: o.namespace.clone(),
                name: o.name.clone(),
                uid: o.uid.clone(),
            };
            let same = |r: &ImportRecord| {
                let at = source_ref(r);
                r.policy == p.name
                    && at.cluster == this.cluster
                    && at.namespace == this.namespace
                    && at.name == this.name
            };
            let held = match record {
                Some(r) if same(r) => {
                    // Its own record (possibly just written by records).
                    let r = plan
                        .records_put
                        .iter()
                        .rev()
                        .find(|(k, _)| *k == name)
                        .map_or_else(|| r.clone(), |(_, r)| r.clone());
                    if plan.deletes.contains(&name) || plan.records_delete.contains(&name) {
                        continue;
                    }
                    r
                }
                Some(r) => {
                    let at = source_ref(r);
                    tally.error(format!(
                        "{what}: cluster {name:?} is held by ClusterImportPolicy {:?} (source \
                         {}/{}/{})",
                        r.policy, at.cluster, at.namespace, at.name
                    ));
                    continue;
                }
                None if claimed.contains(&name) => {
                    tally.error(format!(
                        "{what}: cluster {name:?} is named by another source too"
                    ));
                    continue;
                }
                None => {
                    match &selected.condition {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(e) => {
                            tally.error(format!("{what}: {e}"));
                            continue;
                        }
                    }
                    let existing = live.get(name.as_str()).filter(|c| !deleting(c));
                    if live.contains_key(name.as_str()) && existing.is_none() {
                        claimed.insert(name.clone());
                        continue; // being deleted: created again once it is gone
                    }
                    if existing.is_none() {
                        // A creation: the policy's cap, then its rate (a hostile source spoke
                        // lists at most 5,000 objects per list, and can change them every poll).
                        if let Err(e) = &selected.template {
                            tally.error(format!("{what}: {e}"));
                            continue;
                        }
                        if created >= s.max_created {
                            tally.over_cap += 1;
                            continue;
                        }
                        if budget == 0 {
                            tally.deferred += 1;
                            continue;
                        }
                        budget -= 1;
                        created += 1;
                    }
                    claimed.insert(name.clone());
                    ImportRecord {
                        policy: p.name.clone(),
                        source_ref: Some(this.clone()),
                        created: existing.is_none(),
                        ..Default::default()
                    }
                }
            };
            let template = match &selected.template {
                Ok(t) => t,
                Err(e) => {
                    tally.error(format!("{what}: {e}"));
                    continue;
                }
            };
            let (edit, next) = match live.get(name.as_str()) {
                Some(c) => {
                    if record.is_none() {
                        count(tally, &held);
                    }
                    shape(p, c, &held, template, s.secure, tally)
                }
                None => {
                    tally.imported += 1;
                    let mut next = held.clone();
                    next.policy_generation = p.generation;
                    let desired = desired_labels(template);
                    next.applied_labels = desired.clone();
                    let edit = Edit {
                        cluster: name.clone(),
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
            let mut next = next;
            if let Some(r) = record {
                next.missing_lists = plan
                    .records_put
                    .iter()
                    .rev()
                    .find(|(k, _)| *k == name)
                    .map_or(r.missing_lists, |(_, r)| r.missing_lists);
            }
            next.source_ref = Some(this);
            let before = plan.records_put.iter().rposition(|(k, _)| *k == name);
            if let Some(i) = before {
                plan.records_put.remove(i);
            }
            if s.records.get(&name) != Some(&next) {
                plan.records_put.push((name.clone(), next));
            }
            if !edit.is_noop() {
                plan.edits.push(edit);
            }
        }
    }
    let spent = s.budget.get(&p.name).copied().unwrap_or(0) - budget;
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
    references: Result<Vec<(String, serde_json::Value)>, String>,
) -> Verdict {
    let mut vars = Vars::of(json_value(object));
    match p.selects(&vars) {
        Ok(true) => {}
        Ok(false) => return Verdict::Skipped,
        Err(e) => return Verdict::Failed(cut(e)),
    }
    let cluster = match p.cluster_name(&vars) {
        Ok(n) => n,
        Err(e) => return Verdict::Failed(cut(e)),
    };
    match references {
        Ok(refs) => {
            for (key, object) in refs {
                vars = with_reference(&vars, &key, json_value(&object));
            }
        }
        Err(e) => return Verdict::Failed(cut(e)),
    }
    Verdict::Selected(Box::new(Selected {
        cluster,
        condition: p.condition_holds(&vars).map_err(cut),
        template: p.template_with(&vars).map_err(cut),
    }))
}

fn shown(o: &Judged) -> String {
    if o.namespace.is_empty() {
        o.name.clone()
    } else {
        format!("{}/{}", o.namespace, o.name)
    }
}
