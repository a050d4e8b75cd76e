//! Patches as a Kubernetes API server applies them (pure): JSON patch (RFC 6902), JSON merge
//! patch (RFC 7386) and strategic merge patch, approximated — no schemas are known here (used by
//! the in-memory cluster's API server and by GitOps bundle patches), so a list whose elements
//! all have a `name` merges by name (what `containers`, `env`, `volumes` and most built-in lists
//! use as their merge key), honouring `$patch: delete` elements and `$setElementOrder/<list>`;
//! every other list is replaced, and other directives (`$retainKeys`,
//! `$deleteFromPrimitiveList`) are ignored.

use serde_json::{Map, Value};

/// A patch that cannot be applied, saying where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

/// Applies a JSON merge patch (RFC 7386).
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let map = target.as_object_mut().expect("made an object above");
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            merge(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// Applies a strategic merge patch (approximated: see the module).
pub fn strategic(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let map = target.as_object_mut().expect("made an object above");
    for (k, v) in patch {
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            map.remove(k);
            continue;
        }
        let order = patch.get(&format!("$setElementOrder/{k}"));
        match (map.get_mut(k), v) {
            (Some(Value::Array(current)), Value::Array(items))
                if by_name(current) && by_name(items) =>
            {
                merge_named(current, items, order);
            }
            (_, Value::Array(items)) => {
                let kept: Vec<Value> = items
                    .iter()
                    .filter(|i| i.get("$patch").and_then(Value::as_str) != Some("delete"))
                    .cloned()
                    .collect();
                map.insert(k.clone(), Value::Array(kept));
            }
            (Some(current), _) => strategic(current, v),
            (None, _) => {
                let mut fresh = Value::Null;
                strategic(&mut fresh, v);
                map.insert(k.clone(), fresh);
            }
        }
    }
}

fn by_name(items: &[Value]) -> bool {
    items
        .iter()
        .all(|i| i.get("name").is_some_and(Value::is_string))
}

fn merge_named(current: &mut Vec<Value>, items: &[Value], order: Option<&Value>) {
    for item in items {
        let name = &item["name"];
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        let at = current.iter().position(|c| &c["name"] == name);
        match (at, delete) {
            (Some(i), true) => {
                current.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic(&mut current[i], item),
            (None, false) => {
                let mut fresh = Value::Null;
                strategic(&mut fresh, item);
                current.push(fresh);
            }
        }
    }
    if let Some(Value::Array(order)) = order {
        let rank = |v: &Value| {
            order
                .iter()
                .position(|o| o["name"] == v["name"])
                .unwrap_or(usize::MAX)
        };
        current.sort_by_key(rank);
    }
}

/// Applies a JSON patch (RFC 6902).
pub fn json_patch(target: &mut Value, ops: &Value) -> Result<(), PatchError> {
    let ops = ops
        .as_array()
        .ok_or_else(|| PatchError("a JSON patch must be a list of operations".into()))?;
    for (i, op) in ops.iter().enumerate() {
        let err = |m: String| PatchError(format!("operation {i}: {m}"));
        let kind = op["op"]
            .as_str()
            .ok_or_else(|| err("\"op\" is missing".into()))?;
        let path = op["path"]
            .as_str()
            .ok_or_else(|| err("\"path\" is missing".into()))?;
        match kind {
            "add" => add(target, path, op["value"].clone()).map_err(err)?,
            "remove" => {
                remove(target, path).map_err(err)?;
            }
            "replace" => {
                remove(target, path).map_err(err)?;
                add(target, path, op["value"].clone()).map_err(err)?;
            }
            "move" | "copy" => {
                let from = op["from"]
                    .as_str()
                    .ok_or_else(|| err("\"from\" is missing".into()))?;
                let value = if kind == "move" {
                    remove(target, from).map_err(err)?
                } else {
                    target
                        .pointer(from)
                        .cloned()
                        .ok_or_else(|| err(format!("{from}: no such path")))?
                };
                add(target, path, value).map_err(err)?;
            }
            "test" => {
                if target.pointer(path) != Some(&op["value"]) {
                    return Err(err(format!("test of {path} failed")));
                }
            }
            other => return Err(err(format!("unknown op {other:?}"))),
        }
    }
    Ok(())
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn parent<'a>(target: &'a mut Value, path: &str) -> Result<(&'a mut Value, String), String> {
    let (head, last) = path
        .rsplit_once('/')
        .ok_or_else(|| format!("{path:?} is not a JSON pointer"))?;
    let parent = target
        .pointer_mut(head)
        .ok_or_else(|| format!("{path}: parent {head:?} does not exist"))?;
    Ok((parent, unescape(last)))
}

fn add(target: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *target = value;
        return Ok(());
    }
    let (parent, key) = parent(target, path)?;
    match parent {
        Value::Object(m) => {
            m.insert(key, value);
            Ok(())
        }
        Value::Array(a) if key == "-" => {
            a.push(value);
            Ok(())
        }
        Value::Array(a) => {
            let i: usize = key
                .parse()
                .map_err(|_| format!("{path}: {key:?} is not an index"))?;
            if i > a.len() {
                return Err(format!("{path}: index {i} is beyond the list"));
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err(format!("{path}: parent is not an object or list")),
    }
}

fn remove(target: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, key) = parent(target, path)?;
    match parent {
        Value::Object(m) => m
            .remove(&key)
            .ok_or_else(|| format!("{path}: no such field")),
        Value::Array(a) => {
            let i: usize = key
                .parse()
                .map_err(|_| format!("{path}: {key:?} is not an index"))?;
            if i >= a.len() {
                return Err(format!("{path}: index {i} is beyond the list"));
            }
            Ok(a.remove(i))
        }
        _ => Err(format!("{path}: parent is not an object or list")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patches_follow_rfc_7386() {
        let mut v = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge(&mut v, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(v, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn strategic_patches_merge_named_lists_and_drop_directives() {
        let mut v = json!({"spec": {"containers": [
            {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "busybox"}
        ]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "side"}, {"name": "web"}],
            "containers": [{"name": "web", "image": "nginx:2"}, {"name": "side", "$patch": "delete"}, {"name": "new", "image": "x"}]
        }});
        strategic(&mut v, &patch);
        assert_eq!(
            v,
            json!({"spec": {"containers": [
                {"name": "web", "image": "nginx:2", "ports": [{"containerPort": 80}]},
                {"name": "new", "image": "x"}
            ]}})
        );
        let mut v = json!({"spec": {"args": ["a"]}});
        strategic(&mut v, &json!({"spec": {"args": ["b"], "x": null}}));
        assert_eq!(v, json!({"spec": {"args": ["b"]}}));
    }

    #[test]
    fn json_patches_follow_rfc_6902_and_say_which_operation_failed() {
        let mut v = json!({"spec": {"replicas": 1, "list": [1, 2]}, "metadata": {"labels": {}}});
        json_patch(
            &mut v,
            &json!([
                {"op": "replace", "path": "/spec/replicas", "value": 3},
                {"op": "add", "path": "/spec/list/-", "value": 3},
                {"op": "add", "path": "/metadata/labels/app~1name", "value": "x"},
                {"op": "remove", "path": "/spec/list/0"},
                {"op": "copy", "from": "/spec/replicas", "path": "/spec/copy"},
                {"op": "test", "path": "/spec/copy", "value": 3}
            ]),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"spec": {"replicas": 3, "list": [2, 3], "copy": 3}, "metadata": {"labels": {"app/name": "x"}}})
        );
        let e = json_patch(&mut v, &json!([{"op": "remove", "path": "/spec/nope"}])).unwrap_err();
        assert!(e.0.starts_with("operation 0: /spec/nope"), "{e}");
        assert!(json_patch(&mut v, &json!({"op": "add"})).is_err());
    }
}
