//! The objects of an in-memory API server (pure state, no I/O): resource versions,
//! generations, field ownership per manager (server-side apply with conflicts), the patch types
//! ([`crate::patch`]), deletion with propagation through owner references, the watch history,
//! and the one "controller" that marks workloads ready ([`Options::auto_ready`]).

use crate::Options;
use crate::patch;
use crate::resources::{self, Resource};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use tokio::sync::broadcast;

/// Identity of a stored object (all versions of a resource share storage, as in Kubernetes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// API group (`""` for core).
    pub group: String,
    /// Plural resource name.
    pub resource: String,
    /// Namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// A key.
    pub fn new(group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// How a delete reaches dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are deleted first (here: at once).
    Foreground,
    /// Dependents are deleted by the garbage collector (here: at once).
    Background,
    /// Dependents lose their owner reference and stay.
    Orphan,
}

pub use crate::status::ApiError;

/// A watch event.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// The store's revision after the change.
    pub revision: u64,
    /// Group of the object's resource.
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Namespace.
    pub namespace: String,
    /// `ADDED`, `MODIFIED`, `DELETED`.
    pub kind: &'static str,
    /// The object.
    pub object: Value,
}

#[derive(Debug, Clone)]
struct Entry {
    object: Value,
    /// Manager → (operation, owned leaf paths).
    owners: BTreeMap<String, (&'static str, BTreeSet<String>)>,
}

/// Everything the server holds.
pub struct Store {
    resources: Vec<Resource>,
    objects: BTreeMap<ObjectKey, Entry>,
    revision: u64,
    uids: u64,
    auto_ready: bool,
    /// Pod log streams open now (`GET …/pods/<name>/log`).
    pub log_streams: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Watch events.
    pub events: broadcast::Sender<WatchEvent>,
    /// The latest events, so a watch from a resourceVersion misses nothing since its list.
    history: std::collections::VecDeque<WatchEvent>,
}

/// The patch types of `PATCH` other than server-side apply, by their media types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json` ([approximated](crate::patch::strategic)).
    Strategic,
    /// `application/json-patch+json` (RFC 6902).
    Json,
}

/// An RFC 3339 time (seconds), as Kubernetes writes timestamps.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// Events kept for watches that start from an older resourceVersion.
const HISTORY: usize = 10_000;

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// Leaf paths (`.spec.replicas`, `.metadata.labels.app`) of what a client set; objects recurse,
/// everything else is a leaf. Identity and status are not owned.
fn leaves(v: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, path: String, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, x) in m {
                    walk(x, format!("{path}.{k}"), out);
                }
            }
            _ => {
                out.insert(path);
            }
        }
    }
    let mut out = BTreeSet::new();
    if let Value::Object(m) = v {
        for (k, x) in m {
            match k.as_str() {
                "apiVersion" | "kind" | "status" => {}
                "metadata" => {
                    for field in ["labels", "annotations"] {
                        if let Some(x) = x.get(field) {
                            walk(x, format!(".metadata.{field}"), &mut out);
                        }
                    }
                }
                _ => walk(x, format!(".{k}"), &mut out),
            }
        }
    }
    out
}

fn value_at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(v, |node, key| node.get(key))
}

fn remove_at(v: &mut Value, path: &str) {
    let keys: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    let mut node = v;
    for k in parents {
        match node.get_mut(*k) {
            Some(n) => node = n,
            None => return,
        }
    }
    if let Some(m) = node.as_object_mut() {
        m.remove(*last);
    }
}

fn spec_part(v: &Value) -> Value {
    let mut c = v.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    c
}

fn fields_v1(paths: &BTreeSet<String>) -> Value {
    let mut root = Map::new();
    for p in paths {
        let mut node = &mut root;
        for key in p.trim_start_matches('.').split('.') {
            node = node
                .entry(format!("f:{key}"))
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .expect("fieldsV1 nodes are objects");
        }
    }
    Value::Object(root)
}

impl Store {
    /// A store with a `default` and a `kube-system` namespace and the configured nodes.
    pub fn new(options: &Options) -> Self {
        let (events, _) = broadcast::channel(4096);
        let mut s = Self {
            resources: resources::builtin_of(&options.git_version),
            objects: BTreeMap::new(),
            revision: 0,
            uids: 0,
            auto_ready: options.auto_ready,
            log_streams: std::sync::Arc::default(),
            events,
            history: std::collections::VecDeque::new(),
        };
        for ns in ["default", "kube-system"] {
            let _ = s.create(
                "",
                "namespaces",
                "",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                "kube-apiserver",
            );
        }
        for (name, cpu, memory) in &options.nodes {
            let mut node = json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {
                    "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                    "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                    "nodeInfo": {"kubeletVersion": options.git_version},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            });
            if !options.provider.is_empty() {
                node["spec"] = json!({"providerID": format!("{}{name}", options.provider)});
            }
            let _ = s.create("", "nodes", "", node, "kubelet");
        }
        s
    }

    /// Every resource served now.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// The resource at `group/version/plural`.
    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<Resource> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    fn next_revision(&mut self) -> String {
        self.revision += 1;
        self.revision.to_string()
    }

    /// The object at `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<&Value> {
        self.objects.get(key).map(|e| &e.object)
    }

    /// Objects of a resource, in one namespace or all (`None`), with the list's revision.
    pub fn list(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> (Vec<Value>, String) {
        let items = self
            .objects
            .iter()
            .filter(|(k, _)| {
                k.group == group
                    && k.resource == resource
                    && namespace.is_none_or(|ns| k.namespace == ns)
            })
            .map(|(_, e)| e.object.clone())
            .collect();
        (items, self.revision.to_string())
    }

    /// Every object of a resource in every namespace.
    pub fn list_resource(&self, resource: &str) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|(k, _)| k.resource == resource)
            .map(|(_, e)| e.object.clone())
            .collect()
    }

    fn publish(&mut self, key: &ObjectKey, kind: &'static str, object: &Value) {
        let event = WatchEvent {
            revision: self.revision,
            group: key.group.clone(),
            resource: key.resource.clone(),
            namespace: key.namespace.clone(),
            kind,
            object: object.clone(),
        };
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(event.clone());
        let _ = self.events.send(event);
    }

    /// Events after `revision`, or `None` when they are no longer all kept (a watch from there
    /// gets 410 Gone, as from a real server, and must list again).
    pub fn events_since(&self, revision: u64) -> Option<Vec<WatchEvent>> {
        if let Some(first) = self.history.front()
            && first.revision > revision + 1
            && self.history.len() == HISTORY
        {
            return None;
        }
        Some(
            self.history
                .iter()
                .filter(|e| e.revision > revision)
                .cloned()
                .collect(),
        )
    }

    fn check_namespace(&self, namespace: &str) -> Result<(), ApiError> {
        if namespace.is_empty()
            || self
                .objects
                .contains_key(&ObjectKey::new("", "namespaces", "", namespace))
        {
            Ok(())
        } else {
            Err(ApiError::new(
                404,
                "NotFound",
                format!("namespaces \"{namespace}\" not found"),
            ))
        }
    }

    /// Creates an object (`POST`).
    pub fn create(
        &mut self,
        group: &str,
        resource: &str,
        namespace: &str,
        mut object: Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            return Err(ApiError::new(
                422,
                "Invalid",
                "metadata.name: Required value: name is required".into(),
            ));
        }
        let key = ObjectKey::new(group, resource, namespace, &name);
        self.check_namespace(namespace)?;
        if self.objects.contains_key(&key) {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("{resource} \"{name}\" already exists"),
            ));
        }
        self.uids += 1;
        let rv = self.next_revision();
        let meta = object["metadata"]
            .as_object_mut()
            .ok_or_else(|| ApiError::new(400, "BadRequest", "metadata must be an object".into()))?;
        meta.insert(
            "uid".into(),
            json!(format!("00000000-0000-4000-8000-{:012}", self.uids)),
        );
        meta.insert("resourceVersion".into(), json!(rv));
        meta.insert("creationTimestamp".into(), json!(now()));
        meta.insert("generation".into(), json!(1));
        if !namespace.is_empty() {
            meta.insert("namespace".into(), json!(namespace));
        }
        let mut owners = BTreeMap::new();
        owners.insert(manager.to_string(), ("Update", leaves(&object)));
        let mut entry = Entry { object, owners };
        self.controllers(&key, &mut entry.object);
        Self::write_managed_fields(&mut entry);
        if resource == "customresourcedefinitions" {
            for r in resources::from_crd(&entry.object) {
                if !self.resources.contains(&r) {
                    self.resources.push(r);
                }
            }
        }
        let out = entry.object.clone();
        self.publish(&key, "ADDED", &out);
        self.objects.insert(key, entry);
        Ok(out)
    }

    /// Replaces an object (`PUT`), refusing a stale `metadata.resourceVersion`.
    pub fn replace(
        &mut self,
        key: &ObjectKey,
        object: Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let Some(entry) = self.objects.get(key) else {
            return Err(not_found(key));
        };
        let sent = object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        let current = entry.object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        if !sent.is_empty() && sent != current {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                    key.resource, key.name
                ),
            ));
        }
        let mut next = object;
        if let Some(status) = entry.object.get("status") {
            next["status"] = status.clone();
        }
        self.store_update(key, next, manager, "Update")
    }

    /// Merges a JSON merge patch into an object (`PATCH` with `application/merge-patch+json`).
    pub fn merge_patch(
        &mut self,
        key: &ObjectKey,
        patch: &Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        self.patch(key, PatchType::Merge, patch, manager)
    }

    /// Patches an object (`PATCH` with a merge, strategic merge or JSON patch); a JSON patch
    /// that cannot be applied is a 422 `Invalid` naming its operation.
    pub fn patch(
        &mut self,
        key: &ObjectKey,
        kind: PatchType,
        body: &Value,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let Some(entry) = self.objects.get(key) else {
            return Err(not_found(key));
        };
        let mut next = entry.object.clone();
        match kind {
            PatchType::Merge => patch::merge(&mut next, body),
            PatchType::Strategic => patch::strategic(&mut next, body),
            PatchType::Json => patch::json_patch(&mut next, body).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!(
                        "the patch of {} {:?} cannot be applied: {e}",
                        qualified(key),
                        key.name
                    ),
                )
            })?,
        }
        self.store_update(key, next, manager, "Update")
    }

    /// Server-side apply (`PATCH` with `application/apply-patch+yaml`): creates or merges what
    /// `manager` declares, removes what it stopped declaring, and refuses to change fields
    /// another manager owns unless `force`.
    pub fn apply(
        &mut self,
        key: &ObjectKey,
        applied: Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApiError> {
        if manager.is_empty() {
            return Err(ApiError::new(
                400,
                "BadRequest",
                "PATCH: fieldManager is required for apply requests".into(),
            ));
        }
        let declared = leaves(&applied);
        let Some(entry) = self.objects.get(key).cloned() else {
            let mut created =
                self.create(&key.group, &key.resource, &key.namespace, applied, manager)?;
            if let Some(e) = self.objects.get_mut(key) {
                e.owners.clear();
                e.owners.insert(manager.to_string(), ("Apply", declared));
                Self::write_managed_fields(e);
                created = e.object.clone();
            }
            return Ok(created);
        };
        let mut conflicts = Vec::new();
        for (other, (_, paths)) in &entry.owners {
            if other == manager {
                continue;
            }
            for p in paths.intersection(&declared) {
                if value_at(&entry.object, p) != value_at(&applied, p) {
                    conflicts.push((other.clone(), p.clone()));
                }
            }
        }
        if !conflicts.is_empty() && !force {
            let api_version = applied["apiVersion"].as_str().unwrap_or_default();
            return Err(ApiError::apply_conflict(api_version, &conflicts));
        }
        let mut next = entry.object.clone();
        let previously = entry
            .owners
            .get(manager)
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        for p in previously.difference(&declared) {
            let owned_elsewhere = entry
                .owners
                .iter()
                .any(|(m, (_, ps))| m != manager && ps.contains(p));
            if !owned_elsewhere {
                remove_at(&mut next, p);
            }
        }
        patch::merge(&mut next, &applied);
        let mut e = entry;
        for (m, (_, paths)) in e.owners.iter_mut() {
            if m != manager {
                paths.retain(|p| !declared.contains(p));
            }
        }
        e.owners.retain(|_, (_, p)| !p.is_empty());
        e.owners.insert(manager.to_string(), ("Apply", declared));
        self.objects.insert(key.clone(), e);
        self.store_update(key, next, manager, "Apply")
    }

    /// Writes `next` over the object at `key`: bumps the revision, the generation when the
    /// spec changed, and gives `manager` the fields whose values it changed.
    fn store_update(
        &mut self,
        key: &ObjectKey,
        mut next: Value,
        manager: &str,
        operation: &'static str,
    ) -> Result<Value, ApiError> {
        let rv = self.next_revision();
        let Some(mut entry) = self.objects.get(key).cloned() else {
            return Err(not_found(key));
        };
        let old = &entry.object;
        // Identity is the server's.
        for field in [
            "uid",
            "creationTimestamp",
            "generation",
            "namespace",
            "name",
        ] {
            if let Some(v) = old["metadata"].get(field) {
                next["metadata"][field] = v.clone();
            }
        }
        let spec_changed = spec_part(old) != spec_part(&next);
        if spec_changed {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            next["metadata"]["generation"] = json!(g);
        }
        next["metadata"]["resourceVersion"] = json!(rv);
        if operation == "Update" {
            let changed: BTreeSet<String> = leaves(&next)
                .into_iter()
                .filter(|p| value_at(old, p) != value_at(&next, p))
                .collect();
            for (m, (_, paths)) in entry.owners.iter_mut() {
                if m != manager {
                    paths.retain(|p| !changed.contains(p));
                }
            }
            entry
                .owners
                .entry(manager.to_string())
                .or_insert(("Update", BTreeSet::new()))
                .1
                .extend(changed);
            entry.owners.retain(|_, (_, p)| !p.is_empty());
        }
        entry.object = next;
        if spec_changed {
            self.controllers(key, &mut entry.object);
        }
        Self::write_managed_fields(&mut entry);
        let out = entry.object.clone();
        self.publish(key, "MODIFIED", &out);
        self.objects.insert(key.clone(), entry);
        Ok(out)
    }

    /// Sets an object's status without touching its spec.
    pub fn set_status(&mut self, key: &ObjectKey, status: Value) -> bool {
        let rv = self.next_revision();
        let Some(e) = self.objects.get_mut(key) else {
            return false;
        };
        e.object["status"] = status;
        e.object["metadata"]["resourceVersion"] = json!(rv);
        let out = e.object.clone();
        self.publish(key, "MODIFIED", &out);
        true
    }

    /// Deletes an object and, unless orphaning, its dependents (and a namespace's objects).
    pub fn delete(&mut self, key: &ObjectKey, propagation: Propagation) -> Result<Value, ApiError> {
        let Some(mut entry) = self.objects.remove(key) else {
            return Err(not_found(key));
        };
        // A deletion is a change with a revision of its own, as in Kubernetes.
        let rv = self.next_revision();
        entry.object["metadata"]["resourceVersion"] = json!(rv);
        let uid = entry.object["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.publish(key, "DELETED", &entry.object);
        if key.resource == "namespaces" && key.group.is_empty() {
            let inside: Vec<ObjectKey> = self
                .objects
                .keys()
                .filter(|k| k.namespace == key.name)
                .cloned()
                .collect();
            for k in inside {
                let _ = self.delete(&k, Propagation::Background);
            }
        }
        let dependents: Vec<ObjectKey> = self
            .objects
            .iter()
            .filter(|(_, e)| {
                e.object["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid.as_str()))
            })
            .map(|(k, _)| k.clone())
            .collect();
        let live_uids: BTreeSet<String> = self
            .objects
            .values()
            .filter_map(|e| e.object["metadata"]["uid"].as_str().map(str::to_string))
            .collect();
        for d in dependents {
            // As the garbage collector does: a dependent goes only with its last owner.
            let other_owner = self.objects.get(&d).is_some_and(|e| {
                e.object["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r["uid"].as_str())
                    .any(|u| u != uid && live_uids.contains(u))
            });
            if propagation == Propagation::Orphan || other_owner {
                if let Some(e) = self.objects.get_mut(&d)
                    && let Some(refs) = e.object["metadata"]["ownerReferences"].as_array_mut()
                {
                    refs.retain(|r| r["uid"] != uid.as_str());
                }
            } else {
                let _ = self.delete(&d, propagation);
            }
        }
        Ok(entry.object)
    }

    fn write_managed_fields(e: &mut Entry) {
        let managed: Vec<Value> = e
            .owners
            .iter()
            .map(|(m, (op, paths))| {
                json!({
                    "manager": m,
                    "operation": op,
                    "apiVersion": e.object["apiVersion"],
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1(paths),
                })
            })
            .collect();
        e.object["metadata"]["managedFields"] = Value::Array(managed);
    }

    /// The fake's one controller: workloads report themselves ready.
    fn controllers(&self, key: &ObjectKey, object: &mut Value) {
        if !self.auto_ready {
            return;
        }
        let generation = object["metadata"]["generation"].clone();
        let replicas = object["spec"]["replicas"].as_i64().unwrap_or(1);
        let status = match (key.group.as_str(), key.resource.as_str()) {
            // Each kind's own status fields only: strict field validation (`schema`) judges a
            // status written back with the object as the API server's decoder does.
            ("apps", "deployments") => json!({
                "observedGeneration": generation,
                "replicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "updatedReplicas": replicas,
                "conditions": [
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                ],
            }),
            ("apps", "statefulsets") => json!({
                "observedGeneration": generation,
                "replicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "updatedReplicas": replicas,
                "currentReplicas": replicas,
            }),
            ("apps", "replicasets") => json!({
                "observedGeneration": generation,
                "replicas": replicas,
                "fullyLabeledReplicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
            }),
            ("apps", "daemonsets") => json!({
                "observedGeneration": generation,
                "desiredNumberScheduled": 2,
                "currentNumberScheduled": 2,
                "updatedNumberScheduled": 2,
                "numberReady": 2,
                "numberAvailable": 2,
            }),
            ("batch", "jobs") => json!({
                "succeeded": 1,
                "conditions": [{"type": "Complete", "status": "True"}],
            }),
            ("", "pods") => json!({
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            }),
            _ => return,
        };
        object["status"] = status;
    }
}

/// `deployments.apps`, or `pods` in the core group (as Kubernetes names them in errors).
fn qualified(key: &ObjectKey) -> String {
    if key.group.is_empty() {
        key.resource.clone()
    } else {
        format!("{}.{}", key.resource, key.group)
    }
}

fn not_found(key: &ObjectKey) -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        format!("{} \"{}\" not found", qualified(key), key.name),
    )
}

#[cfg(test)]
mod tests;
