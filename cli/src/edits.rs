//! Parsing of label and taint edits given on the command line, kubectl style.

use flotilla_api::meta::TAINT_EFFECTS;
use flotilla_api::v1::{Taint, TaintKey};
use std::collections::HashMap;

/// What is wrong with one label or taint edit; each names the argument as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// A label edit with nothing before `=` or `-`.
    #[error("label {0:?}: empty key")]
    EmptyLabelKey(String),
    /// A label edit that neither sets nor removes.
    #[error("label {0:?}: expected key=value to set or key- to remove")]
    LabelShape(String),
    /// A taint edit with nothing before `=`, `:` or `-`.
    #[error("taint {0:?}: empty key")]
    EmptyTaintKey(String),
    /// A taint edit that neither adds nor removes.
    #[error("taint {0:?}: expected key=value:Effect (add) or key:Effect- (remove)")]
    TaintShape(String),
    /// A taint effect OCM does not know.
    #[error(
        "taint {arg:?}: effect {effect:?} is not one of NoSelect, PreferNoSelect, NoSelectIfNew"
    )]
    TaintEffect {
        /// The edit as given.
        arg: String,
        /// Its effect.
        effect: String,
    },
}

/// Label edits: `key=value` sets, `key-` removes.
#[derive(Debug, Default, PartialEq)]
pub struct LabelEdits {
    /// Labels to set.
    pub set: HashMap<String, String>,
    /// Keys to remove.
    pub remove: Vec<String>,
}

/// Parses label edits, naming the bad argument.
pub fn parse_labels(args: &[String]) -> Result<LabelEdits, EditError> {
    let mut edits = LabelEdits::default();
    for a in args {
        if let Some((k, v)) = a.split_once('=') {
            if k.is_empty() {
                return Err(EditError::EmptyLabelKey(a.clone()));
            }
            edits.set.insert(k.to_string(), v.to_string());
        } else if let Some(k) = a.strip_suffix('-') {
            if k.is_empty() {
                return Err(EditError::EmptyLabelKey(a.clone()));
            }
            edits.remove.push(k.to_string());
        } else {
            return Err(EditError::LabelShape(a.clone()));
        }
    }
    Ok(edits)
}

/// Taint edits.
#[derive(Debug, Default, PartialEq)]
pub struct TaintEdits {
    /// Taints to add.
    pub add: Vec<Taint>,
    /// Taints to remove.
    pub remove: Vec<TaintKey>,
}

fn check_effect(a: &str, effect: &str) -> Result<(), EditError> {
    if TAINT_EFFECTS.contains(&effect) {
        Ok(())
    } else {
        Err(EditError::TaintEffect {
            arg: a.to_string(),
            effect: effect.to_string(),
        })
    }
}

/// Parses taint edits: `key=value:Effect` or `key:Effect` adds; `key:Effect-` or `key-` removes.
pub fn parse_taints(args: &[String]) -> Result<TaintEdits, EditError> {
    let mut edits = TaintEdits::default();
    for a in args {
        if let Some(rest) = a.strip_suffix('-') {
            let (key, effect) = match rest.split_once(':') {
                Some((k, e)) => {
                    check_effect(a, e)?;
                    (k, e)
                }
                None => (rest, ""),
            };
            let key = key.split_once('=').map_or(key, |(k, _)| k);
            if key.is_empty() {
                return Err(EditError::EmptyTaintKey(a.clone()));
            }
            edits.remove.push(TaintKey {
                key: key.to_string(),
                effect: effect.to_string(),
            });
            continue;
        }
        let (kv, effect) = a
            .rsplit_once(':')
            .ok_or_else(|| EditError::TaintShape(a.clone()))?;
        check_effect(a, effect)?;
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        if key.is_empty() {
            return Err(EditError::EmptyTaintKey(a.clone()));
        }
        edits.add.push(Taint {
            key: key.to_string(),
            value: value.to_string(),
            effect: effect.to_string(),
            time_added: None,
        });
    }
    Ok(edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn label_edits_set_and_remove() {
        let e = parse_labels(&s(&["env=prod", "old-", "empty="])).unwrap();
        assert_eq!(e.set["env"], "prod");
        assert_eq!(e.set["empty"], "");
        assert_eq!(e.remove, vec!["old"]);
        let e = parse_labels(&s(&["novalue"])).unwrap_err();
        assert_eq!(e, EditError::LabelShape("novalue".into()));
        assert!(e.to_string().contains("\"novalue\""), "{e}");
        assert_eq!(
            parse_labels(&s(&["=x"])),
            Err(EditError::EmptyLabelKey("=x".into()))
        );
    }

    #[test]
    fn taint_edits_add_and_remove() {
        let e = parse_taints(&s(&[
            "gpu=true:NoSelect",
            "maint:PreferNoSelect",
            "gpu:NoSelect-",
            "old-",
        ]))
        .unwrap();
        assert_eq!(e.add.len(), 2);
        assert_eq!(e.add[0].key, "gpu");
        assert_eq!(e.add[0].value, "true");
        assert_eq!(e.add[1].value, "");
        assert_eq!(
            e.remove[0],
            TaintKey {
                key: "gpu".into(),
                effect: "NoSelect".into()
            }
        );
        assert_eq!(
            e.remove[1],
            TaintKey {
                key: "old".into(),
                effect: String::new()
            }
        );
        let e = parse_taints(&s(&["gpu=true:NoExecute"])).unwrap_err();
        assert!(matches!(&e, EditError::TaintEffect { effect, .. } if effect == "NoExecute"));
        assert!(e.to_string().contains("NoExecute"), "{e}");
        assert_eq!(
            parse_taints(&s(&["gpu=true"])),
            Err(EditError::TaintShape("gpu=true".into()))
        );
    }
}
