//! Watch caches: what the work actors observe comes from one list + watch per kind and
//! namespace that works declare, instead of one GET per resource per observation, so thousands
//! of resources cost one stream each. Kinds listed cluster-wide (what policies judge) have a
//! cache of their own whose events are the backend's change signal: policies are evaluated
//! again when what they judge changes, not on a poll.
//!
//! A cache starts on the first read of its kind and namespace (that read still goes to the API)
//! and serves reads once its list arrived. The watch resumes from the last resourceVersion it
//! saw; when the server answers 410 (too old) or the stream fails, the cache lists again. Writes
//! made by the agent update the cache at once, so a status read right after an apply sees it.
//!
//! Works follow their objects here ([`Cache::follow`]): an event that brings news of a
//! followed object — a change the agent did not just write itself, or a deletion — bumps the
//! works' drift signals, and so does a list after the watch broke (what happened meanwhile is
//! unknown).

use crate::backend::WeakDriftSignal;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// One kind in one namespace (or cluster-wide).
#[derive(Debug, Default)]
pub struct Cache {
    /// By name; by `namespace/name` when [`Cache::across_namespaces`].
    objects: RwLock<HashMap<String, Value>>,
    synced: std::sync::atomic::AtomicBool,
    /// Drift signals of the works that applied each object, by name.
    followers: std::sync::Mutex<HashMap<String, Vec<WeakDriftSignal>>>,
    /// A cluster-wide cache of a namespaced kind: two objects of one name in two namespaces are
    /// two objects (by name alone, the one seen last would hide the other from every list).
    qualified: bool,
}

impl Cache {
    /// A cluster-wide cache: objects kept by `namespace/name`.
    pub fn across_namespaces() -> Self {
        Self {
            qualified: true,
            ..Self::default()
        }
    }

    /// The key `object` is kept by.
    fn key_of(&self, name: &str, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.qualified && !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_string(),
        }
    }

    fn key(&self, object: &Value) -> Option<String> {
        let name = object["metadata"]["name"].as_str()?;
        Some(self.key_of(name, object["metadata"]["namespace"].as_str()))
    }

    /// `Some(the object named name, or None when absent)` once the cache is synced; `None`
    /// before (the caller asks the API server).
    pub fn get(&self, name: &str) -> Option<Option<Value>> {
        if !self.synced.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        Some(
            self.objects
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(name)
                .cloned(),
        )
    }

    /// Every object once the cache is synced; `None` before.
    pub fn list(&self) -> Option<Vec<Value>> {
        if !self.synced.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        Some(
            self.objects
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .values()
                .cloned()
                .collect(),
        )
    }

    /// Bumps `signal` on news of the object `name` from now on (once per signal).
    pub fn follow(&self, name: &str, signal: WeakDriftSignal) {
        let mut followers = self.followers.lock().unwrap_or_else(|p| p.into_inner());
        let list = followers.entry(name.to_string()).or_default();
        if !list.iter().any(|s| s.same(&signal)) {
            list.push(signal);
        }
    }

    /// Bumps the followers of `name` (every follower when `None`), forgetting those gone.
    fn tell(&self, name: Option<&str>) {
        let mut followers = self.followers.lock().unwrap_or_else(|p| p.into_inner());
        match name {
            Some(name) => {
                if let Some(list) = followers.get_mut(name) {
                    list.retain(WeakDriftSignal::bump);
                    if list.is_empty() {
                        followers.remove(name);
                    }
                }
            }
            None => followers.retain(|_, list| {
                list.retain(WeakDriftSignal::bump);
                !list.is_empty()
            }),
        }
    }

    /// Records an object the agent just wrote (if it is newer than what the cache holds).
    pub fn put(&self, object: Value) {
        let Some(name) = self.key(&object) else {
            return;
        };
        let mut objects = self.objects.write().unwrap_or_else(|p| p.into_inner());
        let newer = match objects.get(&name) {
            Some(old) => revision(&object) >= revision(old),
            None => true,
        };
        if newer {
            objects.insert(name, object);
        }
    }

    fn replace_all(&self, items: Vec<Value>) {
        let mut objects = self.objects.write().unwrap_or_else(|p| p.into_inner());
        objects.clear();
        for o in items {
            if let Some(key) = self.key(&o) {
                objects.insert(key, o);
            }
        }
        self.synced
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Takes in a watch event; returns the revision to resume from, and the name of the
    /// object it brought news of (not an echo of the agent's own write, which [`Cache::put`]
    /// already holds at that revision or later).
    fn apply(&self, event: WatchEvent<DynamicObject>) -> (Option<String>, Option<String>) {
        let (object, deleted) = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
            WatchEvent::Deleted(o) => (o, true),
            WatchEvent::Bookmark(b) => return (Some(b.metadata.resource_version), None),
            WatchEvent::Error(_) => return (None, None),
        };
        let rv = object.metadata.resource_version.clone();
        let name = self.key_of(
            object.metadata.name.as_deref().unwrap_or_default(),
            object.metadata.namespace.as_deref(),
        );
        let mut objects = self.objects.write().unwrap_or_else(|p| p.into_inner());
        let news = if deleted {
            objects.remove(&name).is_some()
        } else {
            match serde_json::to_value(object) {
                Ok(v) => {
                    let held = objects.get(&name);
                    let echo =
                        held.is_some_and(|h| revision(h) >= revision(&v) && revision(&v) > 0);
                    let status_only = held.is_some_and(|h| status_only(h, &v));
                    if !echo {
                        objects.insert(name.clone(), v);
                    }
                    !echo && !status_only
                }
                Err(_) => false,
            }
        };
        (rv, news.then_some(name))
    }
}

/// Whether `next` differs from `held` only in what controllers report: the same
/// `metadata.generation` (set, so spec changes would have raised it), labels and annotations.
fn status_only(held: &Value, next: &Value) -> bool {
    let generation = &next["metadata"]["generation"];
    generation.as_i64().is_some_and(|g| g > 0)
        && held["metadata"]["generation"] == *generation
        && held["metadata"]["labels"] == next["metadata"]["labels"]
        && held["metadata"]["annotations"] == next["metadata"]["annotations"]
}

/// The numeric resourceVersion of an object (0 when missing or opaque).
fn revision(o: &Value) -> u64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Starts keeping `cache` in step with `api`: list, then watch from the list's revision,
/// listing again after a 410 or a failure. Runs until the cache is dropped. `changed`, when
/// given, is bumped after every list and every event the cache took in (the backend's change
/// signal: whoever reads the cache next sees the change).
pub fn spawn(
    api: Api<DynamicObject>,
    cache: &Arc<Cache>,
    changed: Option<Arc<tokio::sync::watch::Sender<u64>>>,
) {
    let bump = move || {
        if let Some(tx) = &changed {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    };
    let weak = Arc::downgrade(cache);
    tokio::spawn(async move {
        let mut failures = 0usize;
        'list: loop {
            let Some(cache) = weak.upgrade() else { return };
            let list = match api.list(&ListParams::default()).await {
                Ok(l) => l,
                Err(e) => {
                    failures += 1;
                    tracing::debug!(error = %e, "listing for the watch cache failed");
                    drop(cache);
                    tokio::time::sleep(flotilla_bus::connect::backoff(
                        failures,
                        Duration::from_secs(30),
                    ))
                    .await;
                    continue;
                }
            };
            let mut rv = list.metadata.resource_version.clone().unwrap_or_default();
            let relisted = cache.synced.load(std::sync::atomic::Ordering::Acquire);
            cache.replace_all(
                list.items
                    .into_iter()
                    .filter_map(|o| serde_json::to_value(o).ok())
                    .collect(),
            );
            if relisted {
                // The watch broke: whatever happened meanwhile is unknown to the followers.
                cache.tell(None);
            }
            drop(cache);
            bump();
            loop {
                let params = WatchParams::default().timeout(290);
                let stream = match api.watch(&params, &rv).await {
                    Ok(s) => s,
                    Err(e) => {
                        failures += 1;
                        tracing::debug!(error = %e, "watch failed; listing again");
                        tokio::time::sleep(flotilla_bus::connect::backoff(
                            failures,
                            Duration::from_secs(30),
                        ))
                        .await;
                        continue 'list;
                    }
                };
                futures::pin_mut!(stream);
                use futures::StreamExt;
                while let Some(event) = stream.next().await {
                    let Some(cache) = weak.upgrade() else { return };
                    match event {
                        Ok(WatchEvent::Error(e)) if e.code == 410 => continue 'list,
                        Ok(WatchEvent::Error(_)) | Err(_) => {
                            failures += 1;
                            tokio::time::sleep(flotilla_bus::connect::backoff(
                                failures,
                                Duration::from_secs(30),
                            ))
                            .await;
                            continue 'list;
                        }
                        Ok(ev) => {
                            failures = 0;
                            let object_event = !matches!(ev, WatchEvent::Bookmark(_));
                            let (next, news) = cache.apply(ev);
                            if let Some(next) = next {
                                rv = next;
                            }
                            if let Some(name) = news {
                                cache.tell(Some(&name));
                            }
                            drop(cache);
                            if object_event {
                                bump();
                            }
                        }
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{Cache, status_only};
    use kube::api::{DynamicObject, WatchEvent};
    use serde_json::json;

    fn object(namespace: &str, name: &str, rv: &str) -> serde_json::Value {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}})
    }

    #[test]
    fn a_cluster_wide_cache_keeps_same_named_objects_of_two_namespaces_apart() {
        let cache = Cache::across_namespaces();
        cache.replace_all(vec![
            object("team-a", "dev", "1"),
            object("team-b", "dev", "2"),
        ]);
        assert_eq!(cache.list().unwrap().len(), 2);
        // A change to one, then its deletion, leaves the other alone.
        let o: DynamicObject = serde_json::from_value(object("team-a", "dev", "3")).unwrap();
        cache.apply(WatchEvent::Modified(o.clone()));
        assert_eq!(cache.list().unwrap().len(), 2);
        cache.apply(WatchEvent::Deleted(o));
        let left = cache.list().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0]["metadata"]["namespace"], "team-b");
        cache.put(object("team-a", "dev", "4"));
        assert_eq!(cache.list().unwrap().len(), 2);
        // A namespace's own cache keeps objects by name, as its readers ask.
        let one = Cache::default();
        one.replace_all(vec![object("team-a", "dev", "1")]);
        assert!(one.get("dev").unwrap().is_some());
    }

    #[test]
    fn a_controllers_status_report_is_not_news_but_a_spec_or_label_change_is() {
        let held = json!({"metadata": {"generation": 2, "labels": {"a": "1"}}, "status": {"r": 1}});
        let status =
            json!({"metadata": {"generation": 2, "labels": {"a": "1"}}, "status": {"r": 2}});
        let spec = json!({"metadata": {"generation": 3, "labels": {"a": "1"}}});
        let label = json!({"metadata": {"generation": 2, "labels": {"a": "2"}}});
        assert!(status_only(&held, &status));
        assert!(!status_only(&held, &spec));
        assert!(!status_only(&held, &label));
        // Without a generation (a ConfigMap) every change is news.
        let cm = json!({"metadata": {}, "data": {"a": "1"}});
        assert!(!status_only(
            &cm,
            &json!({"metadata": {}, "data": {"a": "2"}})
        ));
    }
}
