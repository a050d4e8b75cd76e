//! OCM `serverSideApply.ignoreFields`: fields of a manifest the agent stops updating when their
//! condition holds, by applying the live value instead of the work's (so no field is dropped
//! from the apply and no other manager's value is fought over).
//!
//! - `OnSpokePresent` (the default): once the resource exists, the fields keep whatever the
//!   spoke has; they are set only when the resource is created.
//! - `OnSpokeChange`: once another actor on the spoke changed a field away from the value this
//!   agent last applied, the spoke's value stays. The last-applied values are kept in the
//!   work's actor, so after an agent restart a spoke change made while it was down is
//!   overwritten once before it is respected again (OCM compares against the live object's
//!   managed fields instead).

use flotilla_api::v1::ServerSideApplyConfig;
use serde_json::Value;
use std::collections::HashMap;

/// When the fields are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Present,
    Change,
}

/// A manifest's ignore rules.
#[derive(Debug, Clone)]
pub struct IgnoreRules {
    rules: Vec<(When, Vec<Vec<String>>)>,
}

/// The value at `path` in `v`.
pub fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, seg| v.get(seg.as_str()))
}

/// Sets (`Some`) or removes (`None`) the value at `path`, creating objects on the way.
pub fn put(v: &mut Value, path: &[String], value: Option<Value>) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for seg in parents {
        if !cur.get(seg.as_str()).is_some_and(Value::is_object) {
            if value.is_none() {
                return;
            }
            if let Some(m) = cur.as_object_mut() {
                m.insert(seg.clone(), Value::Object(Default::default()));
            }
        }
        match cur.get_mut(seg.as_str()) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        match value {
            Some(x) => {
                m.insert(last.clone(), x);
            }
            None => {
                m.remove(last);
            }
        }
    }
}

impl IgnoreRules {
    /// The rules of a server-side apply config (none: `None`). Paths the hub accepted always
    /// parse; anything else is skipped.
    pub fn new(ssa: &ServerSideApplyConfig) -> Option<Self> {
        let rules: Vec<(When, Vec<Vec<String>>)> = ssa
            .ignore_fields
            .iter()
            .map(|f| {
                let when = if f.condition == "OnSpokeChange" {
                    When::Change
                } else {
                    When::Present
                };
                let paths = f
                    .json_paths
                    .iter()
                    .chain(&f.json_pointers)
                    .filter_map(|p| flotilla_api::work::ignore_path(p).ok())
                    .collect();
                (when, paths)
            })
            .collect();
        (!rules.is_empty()).then_some(Self { rules })
    }

    /// What to apply: `desired` with every ignored field replaced by the spoke's value (or left
    /// out when the spoke has none). `last` holds the values this agent applied per path from
    /// the work; it is updated with what is applied now from the work.
    pub fn shape(
        &self,
        desired: &Value,
        live: Option<&Value>,
        last: &mut HashMap<Vec<String>, Value>,
    ) -> Value {
        let mut out = desired.clone();
        // Paths whose spoke value is kept because someone else changed it: what this agent
        // applied before stays the reference, so the change keeps being respected.
        let mut respected: Vec<&Vec<String>> = Vec::new();
        if let Some(live) = live {
            for (when, paths) in &self.rules {
                for path in paths {
                    let spoke = get(live, path).cloned();
                    let ignore = match when {
                        When::Present => true,
                        When::Change => match (last.get(path), &spoke) {
                            (Some(applied), Some(now)) => applied != now,
                            (Some(_), None) => true,
                            (None, _) => false,
                        },
                    };
                    if ignore {
                        put(&mut out, path, spoke);
                        if *when == When::Change {
                            respected.push(path);
                        }
                    }
                }
            }
        }
        for (_, paths) in &self.rules {
            for path in paths.iter().filter(|p| !respected.contains(p)) {
                match get(&out, path) {
                    Some(v) => {
                        last.insert(path.clone(), v.clone());
                    }
                    None => {
                        last.remove(path);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
