//! Object sources read through spokes: a policy's source kind listed on each spoke of
//! `source.clusters` by its agent (`ProxyRequest` on `flotilla.proxy.<cluster>`, the path of the
//! `flotilla get --cluster` proxy, always with the API group so two groups' kinds of one name
//! are never confused), and each selected object's references read there too.
//!
//! A spoke's answer is untrusted: at most [`MAX_SOURCE_OBJECTS`] objects, each a JSON object
//! of the asked group (and versions) with a name; anything else fails the whole list, and a
//! failed list changes nothing ([`super::rules`]). Errors kept for the status are cut to
//! [`MAX_ERROR_LEN`] bytes.

use super::compiled::{CompiledPolicy, Vars, json_value, with_reference};
use super::rules::{Listing, SourceObject};
use flotilla_api::importpolicy::MAX_SOURCE_OBJECTS;
use flotilla_api::v1::{ProxyRequest, ProxyResponse};
use flotilla_bus::envelope::{Event, types};
use flotilla_bus::publish::Publisher;
use flotilla_bus::subjects;
use futures::StreamExt;
use serde_json::Value;
use std::collections::BTreeMap;

/// An error kept for a status is at most this long.
pub const MAX_ERROR_LEN: usize = 300;
/// Source objects whose references are read at once, per spoke.
const REFERENCE_CONCURRENCY: usize = 8;

/// What to read on a spoke.
struct Query<'a> {
    spoke: &'a str,
    group: &'a str,
    resource: &'a str,
    versions: &'a [String],
    namespace: &'a str,
    name: &'a str,
}

/// Every spoke's list of `p`'s source (spokes asked at once).
pub async fn list_all(agents: &Publisher, p: &CompiledPolicy) -> BTreeMap<String, Listing> {
    futures::future::join_all(p.source.clusters.iter().map(|spoke| async move {
        let result = list_one(agents, p, spoke).await;
        if let Err(e) = &result {
            tracing::debug!(%spoke, error = %e, "import source not listed");
        }
        (
            spoke.clone(),
            Listing {
                fresh: true,
                result,
            },
        )
    }))
    .await
    .into_iter()
    .collect()
}

async fn list_one(
    agents: &Publisher,
    p: &CompiledPolicy,
    spoke: &str,
) -> Result<Vec<SourceObject>, String> {
    let query = Query {
        spoke,
        group: &p.source.group,
        resource: &p.source.resource,
        versions: &p.source.versions,
        namespace: "",
        name: "",
    };
    let objects = read(agents, &query).await?;
    let objects = futures::stream::iter(objects)
        .map(|o| resolve(agents, p, spoke, o))
        .buffered(REFERENCE_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    Ok(objects)
}

/// One listed object, with its references read when the selector admits it (the rules
/// evaluate the selector again: this only saves reads).
async fn resolve(agents: &Publisher, p: &CompiledPolicy, spoke: &str, o: Value) -> SourceObject {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let meta = &o["metadata"];
    let (namespace, name, uid) = (
        text(&meta["namespace"]),
        text(&meta["name"]),
        text(&meta["uid"]),
    );
    let vars = Vars::of(json_value(&o));
    let references = if p.references.is_empty() || !p.selects(&vars).unwrap_or(false) {
        Ok(Vec::new())
    } else {
        references(agents, p, spoke, vars).await
    };
    SourceObject {
        namespace,
        name,
        uid,
        object: o,
        references,
    }
}

/// The references of one source object, in order (each one's target may use the ones before).
async fn references(
    agents: &Publisher,
    p: &CompiledPolicy,
    spoke: &str,
    mut vars: Vars,
) -> Result<Vec<(String, Value)>, String> {
    let mut read_refs = Vec::with_capacity(p.references.len());
    for (i, r) in p.references.iter().enumerate() {
        let (namespace, name) = p.reference_target(i, &vars).map_err(cut)?;
        let query = Query {
            spoke,
            group: &r.group,
            resource: &r.resource,
            versions: &r.versions,
            namespace: &namespace,
            name: &name,
        };
        let object = read(agents, &query)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                format!(
                    "spec.references[{i}] ({}): {} {namespace}/{name} not found",
                    r.key, r.resource
                )
            })?;
        vars = with_reference(&vars, &r.key, json_value(&object));
        read_refs.push((r.key.clone(), object));
    }
    Ok(read_refs)
}

/// Asks the spoke's agent; the objects, checked.
async fn read(agents: &Publisher, q: &Query<'_>) -> Result<Vec<Value>, String> {
    let request = ProxyRequest {
        cluster_name: q.spoke.to_string(),
        kind: q.resource.to_string(),
        namespace: q.namespace.to_string(),
        name: q.name.to_string(),
        group: q.group.to_string(),
        group_given: true,
    };
    let ev = Event::new(
        types::proxy_request(),
        crate::cluster::SOURCE,
        q.spoke.to_string(),
        &request,
    );
    let answer: ProxyResponse = agents
        .request(subjects::proxy(q.spoke), &ev, "ProxyResponse")
        .await
        .map_err(|e| cut(format!("the agent of {:?} did not answer: {e}", q.spoke)))?;
    if !answer.error.is_empty() {
        return Err(cut(format!("the agent of {:?}: {}", q.spoke, answer.error)));
    }
    checked(q, answer.objects)
}

/// A spoke's answer as objects: bounded, each a JSON object of the asked group and versions
/// with a name (and the asked name, when one was asked).
fn checked(q: &Query<'_>, raw: Vec<Vec<u8>>) -> Result<Vec<Value>, String> {
    if raw.len() > MAX_SOURCE_OBJECTS {
        return Err(format!(
            "{:?} answered {} objects, more than the {MAX_SOURCE_OBJECTS} a source may have",
            q.spoke,
            raw.len()
        ));
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut other_versions = std::collections::BTreeSet::new();
    for (i, bytes) in raw.iter().enumerate() {
        let bad = |why: &str| cut(format!("{:?} answered a bad object {i}: {why}", q.spoke));
        let o: Value = serde_json::from_slice(bytes).map_err(|e| bad(&e.to_string()))?;
        let meta = &o["metadata"];
        let name = meta["name"].as_str().unwrap_or_default();
        if name.is_empty() || name.len() > 253 {
            return Err(bad("metadata.name is missing or too long"));
        }
        if !(meta["namespace"].is_null()
            || meta["namespace"].as_str().is_some_and(|n| n.len() <= 63))
        {
            return Err(bad("metadata.namespace is not a namespace"));
        }
        if !(meta["uid"].is_null() || meta["uid"].is_string()) {
            return Err(bad("metadata.uid is not a string"));
        }
        let api_version = o["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        if group != q.group {
            return Err(bad(&format!(
                "apiVersion {api_version:?} is not of group {:?}",
                q.group
            )));
        }
        if !q.name.is_empty()
            && (name != q.name || meta["namespace"].as_str().unwrap_or("") != q.namespace)
        {
            return Err(bad(&format!(
                "not the object asked for ({}/{})",
                q.namespace, q.name
            )));
        }
        if q.versions.is_empty() || q.versions.iter().any(|v| v == version) {
            out.push(o);
        } else {
            other_versions.insert(version.to_string());
        }
    }
    // Objects served only in versions the policy does not take (the spoke's preferred version
    // moved on, or it answers so on purpose) are not an empty list: read as one, two polls
    // would delete every cluster the policy created from this spoke.
    if out.is_empty() && !other_versions.is_empty() {
        return Err(cut(format!(
            "{}: {}.{} is served in version(s) {:?}, none of the policy's {:?}; the list is not \
             taken (nothing is deleted)",
            q.spoke, q.resource, q.group, other_versions, q.versions
        )));
    }
    Ok(out)
}

/// An error cut to [`MAX_ERROR_LEN`] bytes (on a character boundary).
pub fn cut(mut s: String) -> String {
    if s.len() > MAX_ERROR_LEN {
        let mut end = MAX_ERROR_LEN;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query<'a>(versions: &'a [String]) -> Query<'a> {
        Query {
            spoke: "mgmt",
            group: "cluster.x-k8s.io",
            resource: "clusters",
            versions,
            namespace: "",
            name: "",
        }
    }

    fn raw(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn a_spokes_answer_is_checked_and_bounded() {
        let v1beta1 = ["v1beta1".to_string()];
        let q = query(&v1beta1);
        let good = raw(serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "Cluster", "metadata": {"name": "a", "namespace": "default"}}));
        let old = raw(
            serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1alpha4",
            "kind": "Cluster", "metadata": {"name": "b"}}),
        );
        let listed = checked(&q, vec![good.clone(), old.clone()]).unwrap();
        assert_eq!(listed.len(), 1, "another version is left out");
        // Objects only in versions the policy does not take are a failed list, not an empty
        // one (an empty one, twice, would delete the policy's clusters).
        let e = checked(&q, vec![old]).unwrap_err();
        assert!(
            e.contains("v1alpha4") && e.contains("nothing is deleted"),
            "{e}"
        );
        assert!(
            checked(&q, vec![]).unwrap().is_empty(),
            "an empty list stays empty"
        );

        let other_group = raw(serde_json::json!({"apiVersion": "example.com/v1beta1",
            "kind": "Cluster", "metadata": {"name": "c"}}));
        let e = checked(&q, vec![good.clone(), other_group]).unwrap_err();
        assert!(e.contains("not of group"), "{e}");
        let nameless = raw(serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta1"}));
        assert!(
            checked(&q, vec![nameless])
                .unwrap_err()
                .contains("metadata.name")
        );
        assert!(checked(&q, vec![b"{not json".to_vec()]).is_err());
        let many = vec![good; MAX_SOURCE_OBJECTS + 1];
        assert!(checked(&q, many).unwrap_err().contains("more than"));
        assert!(cut("é".repeat(400)).len() <= MAX_ERROR_LEN + 3);
    }
}
