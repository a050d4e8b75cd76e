//! The `labelSelector` and `fieldSelector` of list, watch and `deletecollection` requests
//! (pure): parsed as the API server parses them, and matched against objects. Field selectors
//! select on `metadata.name` and `metadata.namespace` (`=`, `==`, `!=`), which every resource
//! supports on a real API server; other fields are refused by name.

use flotilla_api::v1::LabelSelector;
use serde_json::Value;
use std::collections::HashMap;

/// One `fieldSelector` term: the field, the value, and whether it must equal (`=`, `==`) or
/// differ (`!=`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    path: String,
    value: String,
    equal: bool,
}

/// A request's selectors.
#[derive(Debug, Clone, Default)]
pub struct Selectors {
    labels: Option<LabelSelector>,
    fields: Vec<FieldTerm>,
}

/// A selector the API server would refuse, worded for a 400 `BadRequest`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A `labelSelector` that does not parse.
    #[error("labelSelector {selector:?}: {why}")]
    Labels {
        /// The selector as sent.
        selector: String,
        /// Why it does not parse.
        why: String,
    },
    /// A `fieldSelector` term that is not `FIELD=VALUE`.
    #[error("fieldSelector term {0:?} is not FIELD=VALUE")]
    Term(String),
    /// A field the cluster does not select on (its path).
    #[error(
        "fieldSelector {0:?}: an in-memory cluster selects only on metadata.name and metadata.namespace"
    )]
    Field(String),
}

impl SelectorError {
    /// The refusal as `cluster` says it ("the simulated cluster selects only on …").
    pub fn worded_for(&self, cluster: &str) -> String {
        match self {
            Self::Field(path) => format!(
                "fieldSelector {path:?}: {cluster} selects only on metadata.name and metadata.namespace"
            ),
            other => other.to_string(),
        }
    }
}

impl Selectors {
    /// Parses the `labelSelector` and `fieldSelector` parameters (absent or empty: everything).
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Self, SelectorError> {
        let labels = match labels.filter(|s| !s.is_empty()) {
            Some(s) => {
                Some(
                    flotilla_api::selector::parse(s).map_err(|e| SelectorError::Labels {
                        selector: s.to_string(),
                        why: e.to_string(),
                    })?,
                )
            }
            None => None,
        };
        let mut terms = Vec::new();
        for term in fields
            .filter(|s| !s.is_empty())
            .into_iter()
            .flat_map(|s| s.split(','))
        {
            let (path, value, equal) = if let Some((p, v)) = term.split_once("!=") {
                (p, v, false)
            } else if let Some((p, v)) = term.split_once("==") {
                (p, v, true)
            } else if let Some((p, v)) = term.split_once('=') {
                (p, v, true)
            } else {
                return Err(SelectorError::Term(term.to_string()));
            };
            if !matches!(path, "metadata.name" | "metadata.namespace") {
                return Err(SelectorError::Field(path.to_string()));
            }
            terms.push(FieldTerm {
                path: path.to_string(),
                value: value.to_string(),
                equal,
            });
        }
        Ok(Self {
            labels,
            fields: terms,
        })
    }

    /// Whether `object` passes both selectors.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = || -> HashMap<String, String> {
            object["metadata"]["labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default()
        };
        self.labels
            .as_ref()
            .is_none_or(|sel| flotilla_api::selector::matches_labels(sel, &labels()))
            && self.fields.iter().all(|t| {
                let actual = match t.path.as_str() {
                    "metadata.name" => object["metadata"]["name"].as_str(),
                    "metadata.namespace" => object["metadata"]["namespace"].as_str(),
                    _ => None,
                }
                .unwrap_or_default();
                (actual == t.value) == t.equal
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(ns: &str, name: &str, app: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name, "labels": {"app": app}}})
    }

    #[test]
    fn label_and_field_selectors_select_as_an_api_server_does() {
        let all = Selectors::parse(None, Some("")).unwrap();
        assert!(all.matches(&obj("a", "x", "web")));
        let s = Selectors::parse(Some("app=web"), Some("metadata.namespace!=b")).unwrap();
        assert!(s.matches(&obj("a", "x", "web")));
        assert!(!s.matches(&obj("b", "x", "web")));
        assert!(!s.matches(&obj("a", "x", "db")));
        let s = Selectors::parse(None, Some("metadata.name==x,metadata.namespace=a")).unwrap();
        assert!(s.matches(&obj("a", "x", "db")));
        assert!(!s.matches(&obj("a", "y", "db")));
    }

    #[test]
    fn unsupported_selectors_are_refused_by_name() {
        let e = Selectors::parse(None, Some("spec.nodeName=n1")).unwrap_err();
        assert!(e.to_string().contains("spec.nodeName"), "{e}");
        assert_eq!(
            e.worded_for("the simulated cluster"),
            "fieldSelector \"spec.nodeName\": the simulated cluster selects only on metadata.name and metadata.namespace"
        );
        assert!(Selectors::parse(None, Some("nonsense")).is_err());
        assert!(Selectors::parse(Some("app in ("), None).is_err());
    }
}
