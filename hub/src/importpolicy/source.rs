//! Object sources read through spokes: a policy's source kind listed on each spoke of
//! `source.clusters` by its agent (`ProxyRequest` on `flotilla.proxy.<cluster>`, the path of the
//! `flotilla get --cluster` proxy, always with the API group so two groups' kinds of one name
//! are never confused), and each selected object's references read there too.
//!
//! A spoke's answer is untrusted: at most [`MAX_SOURCE_OBJECTS`] objects, each a JSON object
//! of the asked group (and versions) with a name; anything else fails the whole list, and a
//! failed list changes nothing ([`super::rules`]). Errors kept for the status are cut to
//! [`MAX_ERROR_LEN`] bytes.
//!
//! Memory: each object is judged as soon as its references are read ([`judge`]) and only the
//! verdict is kept — a few hundred bytes — never the object or its references. What is kept
//! is bounded too: [`MAX_LIST_WEIGHT`] per spoke's list and [`MAX_POLICY_WEIGHT`] per policy
//! (a heavier list fails, and changes nothing). What is read at once is bounded by the NATS
//! server's `max_payload` per answer, [`MAX_REFERENCE_BYTES`] per reference, and
//! [`REFERENCE_CONCURRENCY`] objects' references in flight.

use super::compiled::{CompiledPolicy, EvalError, Vars, json_value, with_reference};
use super::rules::{Judged, Listing, SourceObject, judge};
use flotilla_api::importpolicy::MAX_SOURCE_OBJECTS;
use flotilla_api::v1::{ProxyRequest, ProxyResponse};
use flotilla_bus::envelope::{Event, types};
use flotilla_bus::publish::{PublishError, Publisher};
use flotilla_bus::subjects::Wire;
use futures::StreamExt;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

pub use super::reason::{MAX_ERROR_LEN, Reason, cut};
/// Source objects whose references are read at once, per spoke.
pub const REFERENCE_CONCURRENCY: usize = 8;
/// A reference's object is at most this large (a Kubernetes object is at most about 1.5 MiB).
pub const MAX_REFERENCE_BYTES: usize = 1 << 20;
/// What the hub keeps of one spoke's list ([`Judged::weight`]), at most: a heavier list fails.
pub const MAX_LIST_WEIGHT: usize = 8 << 20;
/// What the hub keeps of one policy's lists, at most: the lists past it fail.
pub const MAX_POLICY_WEIGHT: usize = 32 << 20;
/// A `metadata.uid` is at most this long (Kubernetes makes 36-character UUIDs).
const MAX_UID_LEN: usize = 128;

/// Why a spoke's list (or a source object's references) could not be read or taken.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The request to the spoke's agent failed (no agent, a timeout, an undecodable answer).
    #[error("the agent of {spoke:?} did not answer: {source}")]
    NoAnswer {
        /// The spoke.
        spoke: String,
        /// Why.
        #[source]
        source: PublishError,
    },
    /// The agent answered with an error of its own (its text, from the wire).
    #[error("the agent of {spoke:?}: {error}")]
    Agent {
        /// The spoke.
        spoke: String,
        /// What the agent said.
        error: String,
    },
    /// A reference's object is larger than [`MAX_REFERENCE_BYTES`].
    #[error(
        "{spoke:?} answered {bytes} bytes for {resource} {namespace}/{name}, more than the \
         {MAX_REFERENCE_BYTES} a reference may be"
    )]
    ReferenceTooLarge {
        /// The spoke.
        spoke: String,
        /// The answer's size.
        bytes: usize,
        /// The reference's resource.
        resource: String,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// More objects than a source may have.
    #[error(
        "{spoke:?} answered {count} objects, more than the {MAX_SOURCE_OBJECTS} a source may have"
    )]
    TooManyObjects {
        /// The spoke.
        spoke: String,
        /// How many it answered.
        count: usize,
    },
    /// An object of the answer is not what was asked for.
    #[error("{spoke:?} answered a bad object {index}: {why}")]
    BadObject {
        /// The spoke.
        spoke: String,
        /// The object's index in the answer.
        index: usize,
        /// What is wrong with it.
        #[source]
        why: BadObject,
    },
    /// Every object is in versions the policy does not take: not an empty list.
    #[error(
        "{spoke}: {resource}.{group} is served in version(s) {served:?}, none of the policy's \
         {wanted:?}; the list is not taken (nothing is deleted)"
    )]
    OtherVersions {
        /// The spoke.
        spoke: String,
        /// The source's resource.
        resource: String,
        /// Its group.
        group: String,
        /// The versions the spoke served.
        served: BTreeSet<String>,
        /// The versions the policy takes.
        wanted: Vec<String>,
    },
    /// A reference's target could not be evaluated.
    #[error(transparent)]
    Target(#[from] EvalError),
    /// A reference's object does not exist on the spoke.
    #[error("spec.references[{index}] ({key}): {resource} {namespace}/{name} not found")]
    ReferenceNotFound {
        /// The reference's index.
        index: usize,
        /// Its key.
        key: String,
        /// Its resource.
        resource: String,
        /// The namespace looked in.
        namespace: String,
        /// The name looked for.
        name: String,
    },
    /// The verdicts of one list weigh more than [`MAX_LIST_WEIGHT`].
    #[error(
        "{spoke:?} answered {count} objects whose verdicts weigh {weight} bytes, more than the \
         {MAX_LIST_WEIGHT} one list may"
    )]
    ListTooHeavy {
        /// The spoke.
        spoke: String,
        /// How many objects it answered.
        count: usize,
        /// What their verdicts weigh.
        weight: usize,
    },
    /// The policy's lists together weigh more than [`MAX_POLICY_WEIGHT`].
    #[error(
        "the policy's lists weigh more than the {MAX_POLICY_WEIGHT} bytes one policy may; \
         {spoke:?}'s is not taken"
    )]
    PolicyTooHeavy {
        /// The spoke whose list is not taken.
        spoke: String,
    },
}

/// What is wrong with one object of a spoke's answer.
#[derive(Debug, thiserror::Error)]
pub enum BadObject {
    /// Not JSON.
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    /// No name, or a name too long for Kubernetes.
    #[error("metadata.name is missing or too long")]
    Name,
    /// A namespace that is not a string of at most 63 bytes.
    #[error("metadata.namespace is not a namespace")]
    Namespace,
    /// A uid that is not a string of at most [`MAX_UID_LEN`] bytes.
    #[error("metadata.uid is not a string of at most 128 bytes")]
    Uid,
    /// An object of another API group.
    #[error("apiVersion {api_version:?} is not of group {group:?}")]
    Group {
        /// Its apiVersion.
        api_version: String,
        /// The group asked for.
        group: String,
    },
    /// Not the object whose name was asked for.
    #[error("not the object asked for ({namespace}/{name})")]
    NotAsked {
        /// The namespace asked for.
        namespace: String,
        /// The name asked for.
        name: String,
    },
}

impl From<SourceError> for Reason {
    fn from(e: SourceError) -> Self {
        Self::new(e)
    }
}

/// What to read on a spoke.
struct Query<'a> {
    spoke: &'a str,
    /// The subjects its agent listens on.
    wire: Wire,
    group: &'a str,
    resource: &'a str,
    versions: &'a [String],
    namespace: &'a str,
    name: &'a str,
}

/// Every spoke's list of `p`'s source (spokes asked at once, each on its agent's wire, from
/// `clusters`).
pub async fn list_all(
    agents: &Publisher,
    clusters: &crate::inventory::ClusterInventory,
    p: &CompiledPolicy,
) -> BTreeMap<String, Listing> {
    let lists = futures::future::join_all(p.source.clusters.iter().map(|spoke| async move {
        let wire = clusters.wire(spoke);
        let result = list_one(agents, p, spoke, wire).await;
        if let Err(e) = &result {
            tracing::debug!(%spoke, error = %e, "import source not listed");
        }
        (spoke.clone(), result)
    }))
    .await;
    weighed(lists)
}

/// The lists as kept: each within [`MAX_LIST_WEIGHT`], all within [`MAX_POLICY_WEIGHT`] (in
/// `source.clusters` order; the lists past it fail).
fn weighed(lists: Vec<(String, Result<Vec<Judged>, SourceError>)>) -> BTreeMap<String, Listing> {
    let mut total = 0usize;
    lists
        .into_iter()
        .map(|(spoke, result)| {
            let result = result.and_then(|objects| {
                let weight: usize = objects.iter().map(Judged::weight).sum();
                if weight > MAX_LIST_WEIGHT {
                    return Err(SourceError::ListTooHeavy {
                        spoke: spoke.clone(),
                        count: objects.len(),
                        weight,
                    });
                }
                total += weight;
                if total > MAX_POLICY_WEIGHT {
                    return Err(SourceError::PolicyTooHeavy {
                        spoke: spoke.clone(),
                    });
                }
                Ok(objects)
            });
            let result = result.map_err(Reason::from);
            (
                spoke,
                Listing {
                    fresh: true,
                    result,
                },
            )
        })
        .collect()
}

async fn list_one(
    agents: &Publisher,
    p: &CompiledPolicy,
    spoke: &str,
    wire: Wire,
) -> Result<Vec<Judged>, SourceError> {
    let query = Query {
        spoke,
        wire,
        group: &p.source.group,
        resource: &p.source.resource,
        versions: &p.source.versions,
        namespace: "",
        name: "",
    };
    let objects = read(agents, &query).await?;
    let objects = futures::stream::iter(objects)
        .map(|o| resolve(agents, p, spoke, wire, o))
        .buffered(REFERENCE_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    Ok(objects)
}

/// One listed object, with its references read when the selector admits it (the rules
/// evaluate the selector again: this only saves reads), judged at once: the object and its
/// references are dropped here.
async fn resolve(
    agents: &Publisher,
    p: &CompiledPolicy,
    spoke: &str,
    wire: Wire,
    o: Value,
) -> Judged {
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
        references(agents, p, spoke, wire, vars)
            .await
            .map_err(Reason::from)
    };
    judge(
        p,
        SourceObject {
            namespace,
            name,
            uid,
            object: o,
            references,
        },
    )
}

/// The references of one source object, in order (each one's target may use the ones before).
async fn references(
    agents: &Publisher,
    p: &CompiledPolicy,
    spoke: &str,
    wire: Wire,
    mut vars: Vars,
) -> Result<Vec<(String, Value)>, SourceError> {
    let mut read_refs = Vec::with_capacity(p.references.len());
    for (i, r) in p.references.iter().enumerate() {
        let (namespace, name) = p.reference_target(i, &vars)?;
        let query = Query {
            spoke,
            wire,
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
            .ok_or_else(|| SourceError::ReferenceNotFound {
                index: i,
                key: r.key.clone(),
                resource: r.resource.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
            })?;
        vars = with_reference(&vars, &r.key, json_value(&object));
        read_refs.push((r.key.clone(), object));
    }
    Ok(read_refs)
}

/// Asks the spoke's agent; the objects, checked.
async fn read(agents: &Publisher, q: &Query<'_>) -> Result<Vec<Value>, SourceError> {
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
        .request(q.wire.proxy(q.spoke), &ev, "ProxyResponse")
        .await
        .map_err(|source| SourceError::NoAnswer {
            spoke: q.spoke.into(),
            source,
        })?;
    if !answer.error.is_empty() {
        return Err(SourceError::Agent {
            spoke: q.spoke.into(),
            error: answer.error,
        });
    }
    checked(q, answer.objects)
}

/// A spoke's answer as objects: bounded (a reference's in bytes too), each a JSON object of the asked group and versions
/// with a name (and the asked name, when one was asked).
fn checked(q: &Query<'_>, raw: Vec<Vec<u8>>) -> Result<Vec<Value>, SourceError> {
    if !q.name.is_empty() {
        let bytes: usize = raw.iter().map(Vec::len).sum();
        if bytes > MAX_REFERENCE_BYTES {
            return Err(SourceError::ReferenceTooLarge {
                spoke: q.spoke.into(),
                bytes,
                resource: q.resource.into(),
                namespace: q.namespace.into(),
                name: q.name.into(),
            });
        }
    }
    if raw.len() > MAX_SOURCE_OBJECTS {
        return Err(SourceError::TooManyObjects {
            spoke: q.spoke.into(),
            count: raw.len(),
        });
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut other_versions = BTreeSet::new();
    for (i, bytes) in raw.iter().enumerate() {
        let bad = |why: BadObject| SourceError::BadObject {
            spoke: q.spoke.into(),
            index: i,
            why,
        };
        let o: Value = serde_json::from_slice(bytes).map_err(|e| bad(BadObject::Json(e)))?;
        let meta = &o["metadata"];
        let name = meta["name"].as_str().unwrap_or_default();
        if name.is_empty() || name.len() > 253 {
            return Err(bad(BadObject::Name));
        }
        if !(meta["namespace"].is_null()
            || meta["namespace"].as_str().is_some_and(|n| n.len() <= 63))
        {
            return Err(bad(BadObject::Namespace));
        }
        if !(meta["uid"].is_null() || meta["uid"].as_str().is_some_and(|u| u.len() <= MAX_UID_LEN))
        {
            return Err(bad(BadObject::Uid));
        }
        let api_version = o["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        if group != q.group {
            return Err(bad(BadObject::Group {
                api_version: api_version.into(),
                group: q.group.into(),
            }));
        }
        if !q.name.is_empty()
            && (name != q.name || meta["namespace"].as_str().unwrap_or("") != q.namespace)
        {
            return Err(bad(BadObject::NotAsked {
                namespace: q.namespace.into(),
                name: q.name.into(),
            }));
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
        return Err(SourceError::OtherVersions {
            spoke: q.spoke.into(),
            resource: q.resource.into(),
            group: q.group.into(),
            served: other_versions,
            wanted: q.versions.to_vec(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query<'a>(versions: &'a [String]) -> Query<'a> {
        Query {
            spoke: "mgmt",
            wire: Wire::Previous,
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
        let e = checked(&q, vec![old]).unwrap_err().to_string();
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
        let e = checked(&q, vec![good.clone(), other_group])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not of group"), "{e}");
        let nameless = raw(serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta1"}));
        assert!(
            checked(&q, vec![nameless])
                .unwrap_err()
                .to_string()
                .contains("metadata.name")
        );
        assert!(checked(&q, vec![b"{not json".to_vec()]).is_err());
        let many = vec![good; MAX_SOURCE_OBJECTS + 1];
        assert!(
            checked(&q, many)
                .unwrap_err()
                .to_string()
                .contains("more than")
        );
        assert!(cut("é".repeat(400)).len() <= MAX_ERROR_LEN + 3);
        let uid = raw(serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta1",
            "metadata": {"name": "d", "uid": "u".repeat(200)}}));
        assert!(
            checked(&q, vec![uid])
                .unwrap_err()
                .to_string()
                .contains("metadata.uid")
        );
    }

    #[test]
    fn a_reason_keeps_the_message_cut_whatever_failed() {
        let long = SourceError::Agent {
            spoke: "mgmt".into(),
            error: "x".repeat(4 * MAX_ERROR_LEN),
        };
        let reason = Reason::from(long);
        assert!(reason.starts_with("the agent of \"mgmt\": xxx"), "{reason}");
        assert!(reason.len() <= MAX_ERROR_LEN + 3, "{} bytes", reason.len());
        let short = SourceError::TooManyObjects {
            spoke: "mgmt".into(),
            count: MAX_SOURCE_OBJECTS + 1,
        };
        assert_eq!(
            Reason::from(short).to_string(),
            format!(
                "\"mgmt\" answered {} objects, more than the {MAX_SOURCE_OBJECTS} a source may have",
                MAX_SOURCE_OBJECTS + 1
            )
        );
        assert_eq!(&*Reason::from("not listed yet"), "not listed yet");
    }

    #[test]
    fn a_reference_is_bounded_in_bytes() {
        let versions = [];
        let q = Query {
            namespace: "default",
            name: "a-kubeconfig",
            ..query(&versions)
        };
        let big = raw(serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta1",
            "metadata": {"name": "a-kubeconfig", "namespace": "default"},
            "data": {"value": "x".repeat(MAX_REFERENCE_BYTES)}}));
        let e = checked(&q, vec![big]).unwrap_err().to_string();
        assert!(
            e.contains("a reference may be") && e.contains("a-kubeconfig"),
            "{e}"
        );
    }

    fn heavy(spoke: &str, bytes: usize) -> (String, Result<Vec<Judged>, SourceError>) {
        let j = Judged {
            namespace: String::new(),
            name: "a".into(),
            uid: String::new(),
            verdict: super::super::rules::Verdict::Failed(Reason::uncut("x".repeat(bytes))),
        };
        (spoke.to_string(), Ok(vec![j]))
    }

    #[test]
    fn what_is_kept_of_a_policys_lists_is_bounded() {
        let lists = weighed(vec![heavy("huge", MAX_LIST_WEIGHT + 1), heavy("small", 10)]);
        let e = lists["huge"].result.as_ref().unwrap_err();
        assert!(
            e.contains("more than the") && e.contains("one list may"),
            "{e}"
        );
        assert!(lists["small"].result.is_ok());
        assert!(lists.values().all(|l| l.fresh));
        // Lists within their own bound, past the policy's: the later ones fail.
        let each = MAX_LIST_WEIGHT - 1024;
        let n = MAX_POLICY_WEIGHT / each + 1;
        let lists = weighed((0..n).map(|i| heavy(&format!("s{i}"), each)).collect());
        let failed: Vec<&String> = lists
            .iter()
            .filter(|(_, l)| l.result.is_err())
            .map(|(s, _)| s)
            .collect();
        assert_eq!(failed, [&format!("s{}", n - 1)], "only the last one fails");
        assert!(
            lists[failed[0]]
                .result
                .as_ref()
                .unwrap_err()
                .contains("one policy may")
        );
    }
}
