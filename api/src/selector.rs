//! Label selectors: kubectl-style strings (`env=prod,tier!=db,gpu,!legacy,region in (eu,us)`) and
//! matching of [`LabelSelector`] values against label (or claim) maps.

use crate::v1::{LabelSelector, LabelSelectorRequirement};
use std::collections::HashMap;
use thiserror::Error;

/// A selector that cannot be parsed or is invalid.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {reason}")]
pub struct SelectorError {
    /// Field path of the offending part.
    pub field: String,
    /// What was wrong.
    pub reason: String,
}

/// Operators of a label selector requirement.
pub const OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

/// Validates a selector's expressions, naming the field of each problem (`field` is the path of
/// the selector itself, e.g. `spec.clusterSelector.labelSelector`).
pub fn validate(field: &str, sel: &LabelSelector) -> Vec<SelectorError> {
    let mut errors = Vec::new();
    for (i, req) in sel.match_expressions.iter().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        if req.key.is_empty() {
            errors.push(SelectorError {
                field: format!("{f}.key"),
                reason: "must not be empty".into(),
            });
        }
        match req.operator.as_str() {
            "In" | "NotIn" if req.values.is_empty() => errors.push(SelectorError {
                field: format!("{f}.values"),
                reason: format!("operator {} needs at least one value", req.operator),
            }),
            "Exists" | "DoesNotExist" if !req.values.is_empty() => errors.push(SelectorError {
                field: format!("{f}.values"),
                reason: format!("operator {} takes no values", req.operator),
            }),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(SelectorError {
                field: format!("{f}.operator"),
                reason: format!(
                    "unknown operator {other:?} (want In, NotIn, Exists or DoesNotExist)"
                ),
            }),
        }
    }
    errors
}

/// Whether `labels` satisfies `sel` (an empty selector matches everything). Unknown operators
/// match nothing, so an invalid selector never widens a selection.
pub fn matches<F>(sel: &LabelSelector, get: F) -> bool
where
    F: Fn(&str) -> Option<String>,
{
    sel.match_labels
        .iter()
        .all(|(k, v)| get(k).as_deref() == Some(v.as_str()))
        && sel.match_expressions.iter().all(|r| {
            let val = get(&r.key);
            match r.operator.as_str() {
                "In" => val.is_some_and(|v| r.values.contains(&v)),
                "NotIn" => val.is_none_or(|v| !r.values.contains(&v)),
                "Exists" => val.is_some(),
                "DoesNotExist" => val.is_none(),
                _ => false,
            }
        })
}

/// Matches a selector against a plain label map.
pub fn matches_labels(sel: &LabelSelector, labels: &HashMap<String, String>) -> bool {
    matches(sel, |k| labels.get(k).cloned())
}

/// Parses a kubectl-style label selector string. The empty string selects everything.
///
/// Every term must parse as one of `key`, `!key`, `key=value`, `key==value`, `key!=value`,
/// `key in (v1,v2)` or `key notin (v1,v2)`, with keys and values that are valid label keys and
/// values; anything else is an error naming the term — a typo never widens a selection.
pub fn parse(input: &str) -> Result<LabelSelector, SelectorError> {
    parse_with(input, |field, v| {
        crate::names::validate_label_value(field, v).map_err(|e| e.to_string())
    })
}

/// Parses a selector over cluster claims: keys like label keys, values like claim values
/// (1–1024 characters, so `v1.28.3+k3s1` is a value).
pub fn parse_claims(input: &str) -> Result<LabelSelector, SelectorError> {
    parse_with(input, |field, v| {
        if v.is_empty() || v.len() > 1024 || v.chars().any(char::is_control) {
            Err(format!(
                "{field}: claim value {v:?} must be 1-1024 characters without control characters"
            ))
        } else {
            Ok(())
        }
    })
}

fn parse_with(
    input: &str,
    value_ok: impl Fn(&str, &str) -> Result<(), String>,
) -> Result<LabelSelector, SelectorError> {
    let mut sel = LabelSelector::default();
    if input.trim().is_empty() {
        return Ok(sel);
    }
    for (i, raw) in split_terms(input).into_iter().enumerate() {
        let term = raw.trim();
        let err = |reason: String| SelectorError {
            field: format!("selector term {} ({term:?})", i + 1),
            reason,
        };
        let key_ok = |key: &str| {
            crate::names::validate_label_key("key", key).map_err(|e| err(e.to_string()))
        };
        let values_ok = |values: &[String]| {
            values
                .iter()
                .try_for_each(|v| value_ok("value", v))
                .map_err(err)
        };
        if term.is_empty() {
            return Err(err("empty term (a stray comma?)".into()));
        }
        if let Some(key) = term.strip_prefix('!') {
            let key = key.trim();
            key_ok(key)?;
            sel.match_expressions.push(req(key, "DoesNotExist", vec![]));
        } else if let Some((key, (op, list))) = split_set_op(term) {
            key_ok(key)?;
            let inner = list
                .trim()
                .strip_prefix('(')
                .and_then(|l| l.strip_suffix(')'))
                .ok_or_else(|| err(format!("expected a (value,...) list after {op}")))?;
            let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
            if values.iter().all(String::is_empty) {
                return Err(err(format!("{op} needs at least one value")));
            }
            values_ok(&values)?;
            sel.match_expressions.push(req(key, op, values));
        } else if let Some((k, v)) = term.split_once("!=") {
            let (k, v) = (k.trim(), v.trim().to_string());
            key_ok(k)?;
            values_ok(std::slice::from_ref(&v))?;
            sel.match_expressions.push(req(k, "NotIn", vec![v]));
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            let (k, v) = (k.trim(), v.trim().to_string());
            key_ok(k)?;
            values_ok(std::slice::from_ref(&v))?;
            sel.match_labels.insert(k.to_string(), v);
        } else {
            key_ok(term)?;
            sel.match_expressions.push(req(term, "Exists", vec![]));
        }
    }
    Ok(sel)
}

fn req(key: &str, op: &str, values: Vec<String>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_string(),
        operator: op.to_string(),
        values,
    }
}

/// Splits on commas that are not inside parentheses.
fn split_terms(input: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&input[start..]);
    out
}

/// Recognises `key in (...)` and `key notin (...)`.
fn split_set_op(term: &str) -> Option<(&str, (&'static str, &str))> {
    for (word, op) in [(" notin ", "NotIn"), (" in ", "In")] {
        if let Some(pos) = term.find(word) {
            return Some((term[..pos].trim(), (op, &term[pos + word.len()..])));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_every_kubectl_form() {
        let sel =
            parse("env=prod,tier!=db,gpu,!legacy,region in (eu, us),zone notin (z1)").unwrap();
        assert_eq!(
            sel.match_labels.get("env").map(String::as_str),
            Some("prod")
        );
        let ops: Vec<_> = sel
            .match_expressions
            .iter()
            .map(|r| (r.key.as_str(), r.operator.as_str()))
            .collect();
        assert_eq!(
            ops,
            vec![
                ("tier", "NotIn"),
                ("gpu", "Exists"),
                ("legacy", "DoesNotExist"),
                ("region", "In"),
                ("zone", "NotIn")
            ]
        );
        let l = labels(&[("env", "prod"), ("gpu", "1"), ("region", "eu")]);
        assert!(matches_labels(&sel, &l));
        let l = labels(&[("env", "prod"), ("gpu", "1"), ("region", "ap")]);
        assert!(!matches_labels(&sel, &l));
    }

    #[test]
    fn empty_selector_matches_everything() {
        let sel = parse("").unwrap();
        assert!(matches_labels(&sel, &labels(&[])));
    }

    #[test]
    fn unknown_operator_is_reported_with_its_field_and_matches_nothing() {
        let sel = LabelSelector {
            match_labels: Default::default(),
            match_expressions: vec![req("a", "Foo", vec![])],
        };
        let errs = validate("spec.labelSelector", &sel);
        assert_eq!(
            errs[0].field,
            "spec.labelSelector.matchExpressions[0].operator"
        );
        assert!(!matches_labels(&sel, &labels(&[("a", "b")])));
    }

    #[test]
    fn terms_that_do_not_parse_are_rejected_never_read_as_match_everything() {
        for bad in [
            "!!!==",
            "!env=prod",
            "!env!=prod",
            "env=prod=x",
            "a b=c",
            "env=pr od",
            "region in (eu,us",
            "region in (eu,us),",
            "Bad_Key_=x",
            "-env",
            "env>5",
            "(eu)",
            "env in (eu, b@d)",
            "env=prod,",
            ",env=prod",
            "env=prod,,tier=gold",
        ] {
            let e = parse(bad).err();
            assert!(
                e.is_some(),
                "{bad:?} must be rejected, parsed as {:?}",
                parse(bad)
            );
            let e = e.unwrap().to_string();
            assert!(e.contains("selector"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn an_error_names_the_term_at_fault() {
        let e = parse("env=prod,!!!==,tier=gold").unwrap_err().to_string();
        assert!(e.contains("\"!!!==\""), "{e}");
    }

    #[test]
    fn valid_keys_values_and_empty_values_parse() {
        for good in [
            "env=prod",
            "env==prod",
            "env=",
            "example.com/tier=gold",
            "a.b-c_d=1.2-3_x",
            " env = prod , !legacy ",
            "region in (eu, us),zone notin (z1)",
        ] {
            assert!(parse(good).is_ok(), "{good:?}: {:?}", parse(good));
        }
    }

    #[test]
    fn claim_selectors_take_claim_values() {
        let sel = parse_claims("kubeversion.open-cluster-management.io=v1.28.3+k3s1").unwrap();
        assert_eq!(
            sel.match_labels["kubeversion.open-cluster-management.io"],
            "v1.28.3+k3s1"
        );
        assert!(parse("kubeversion.open-cluster-management.io=v1.28.3+k3s1").is_err());
        assert!(parse_claims("!!!==").is_err());
    }

    #[test]
    fn malformed_set_lists_are_rejected() {
        assert!(parse("region in eu").is_err());
        assert!(parse("region in ()").is_err());
        assert!(parse("=x").is_err());
    }
}
