//! Validation of names, label keys/values and claims, with errors that name the offending field.

use thiserror::Error;

/// A name or label that breaks the Kubernetes rules.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {reason}")]
pub struct NameError {
    /// Which field was wrong (`metadata.name`, `labels["env"]`, …).
    pub field: String,
    /// What was wrong with it.
    pub reason: String,
}

impl NameError {
    fn new(field: &str, reason: impl Into<String>) -> Self {
        Self {
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

/// Validates a DNS-1123 label (lower-case alphanumerics and '-', starting and ending with an
/// alphanumeric, at most 63 characters) — the rule for cluster names, which are also NATS
/// subject tokens and so may never contain '.', '*', '>' or whitespace.
pub fn validate_dns1123_label(field: &str, name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::new(field, "must not be empty"));
    }
    if name.len() > 63 {
        return Err(NameError::new(
            field,
            format!(
                "{name:?} is {} characters long, at most 63 allowed",
                name.len()
            ),
        ));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if let Some(bad) = name.chars().find(|c| !ok_char(*c)) {
        return Err(NameError::new(
            field,
            format!(
                "{name:?} contains {bad:?}; a DNS-1123 label has only lower-case letters, digits and '-'"
            ),
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(NameError::new(
            field,
            format!("{name:?} must start and end with a letter or digit"),
        ));
    }
    Ok(())
}

/// Validates a cluster name (`metadata.name` of a ManagedCluster).
pub fn validate_cluster_name(name: &str) -> Result<(), NameError> {
    validate_dns1123_label("clusterName", name)
}

/// Validates a DNS-1123 subdomain (namespaces, set names use the label rule; object names may
/// have dots): at most 253 characters of dot-separated labels.
pub fn validate_dns1123_subdomain(field: &str, name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::new(field, "must not be empty"));
    }
    if name.len() > 253 {
        return Err(NameError::new(field, "at most 253 characters allowed"));
    }
    for part in name.split('.') {
        validate_dns1123_label(field, part).map_err(|_| {
            NameError::new(
                field,
                format!(
                    "{name:?} is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')"
                ),
            )
        })?;
    }
    Ok(())
}

fn is_qualified_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// Validates a label key (`[prefix/]name`, prefix a DNS subdomain, name a qualified name).
pub fn validate_label_key(field: &str, key: &str) -> Result<(), NameError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        validate_dns1123_subdomain(field, p).map_err(|_| {
            NameError::new(field, format!("label key {key:?} has an invalid prefix"))
        })?;
    }
    if !is_qualified_name_part(name) {
        return Err(NameError::new(
            field,
            format!(
                "label key {key:?}: the name part must be 1-63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
            ),
        ));
    }
    Ok(())
}

/// Validates a label value (empty, or a qualified-name part of at most 63 characters).
pub fn validate_label_value(field: &str, value: &str) -> Result<(), NameError> {
    if value.is_empty() || is_qualified_name_part(value) {
        Ok(())
    } else {
        Err(NameError::new(
            field,
            format!(
                "label value {value:?} must be at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
            ),
        ))
    }
}

/// Validates a map of labels, reporting every bad entry.
pub fn validate_labels<'a>(
    field: &str,
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<NameError> {
    let mut errors = Vec::new();
    for (k, v) in labels {
        let f = format!("{field}[{k:?}]");
        if let Err(e) = validate_label_key(&f, k) {
            errors.push(e);
        }
        if let Err(e) = validate_label_value(&f, v) {
            errors.push(e);
        }
    }
    errors
}

/// Validates a cluster claim: the name like a label key, the value 1–1024 characters.
pub fn validate_claim(field: &str, name: &str, value: &str) -> Result<(), NameError> {
    validate_label_key(&format!("{field}.name"), name)?;
    if value.is_empty() || value.len() > 1024 {
        return Err(NameError::new(
            &format!("{field}.value"),
            format!(
                "claim {name:?} value must be 1-1024 characters, got {}",
                value.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_follow_dns1123_labels() {
        assert!(validate_cluster_name("cluster1").is_ok());
        assert!(validate_cluster_name("edge-0001").is_ok());
        for bad in [
            "",
            "Cluster1",
            "a.b",
            "a*",
            "-a",
            "a-",
            "a b",
            &"x".repeat(64),
        ] {
            let err = validate_cluster_name(bad).unwrap_err();
            assert_eq!(err.field, "clusterName", "{bad}");
        }
        assert!(validate_cluster_name(&"x".repeat(63)).is_ok());
    }

    #[test]
    fn label_keys_accept_prefixes_and_reject_garbage() {
        assert!(validate_label_key("k", "cluster.open-cluster-management.io/clusterset").is_ok());
        assert!(validate_label_key("k", "env").is_ok());
        assert!(validate_label_key("k", "Bad_Prefix/x").is_err());
        assert!(validate_label_key("k", "-x").is_err());
        assert!(validate_label_value("v", "").is_ok());
        assert!(validate_label_value("v", "a b").is_err());
    }

    #[test]
    fn claims_need_a_value_of_at_most_1024_chars() {
        assert!(validate_claim("claims[0]", "platform.open-cluster-management.io", "AWS").is_ok());
        assert_eq!(
            validate_claim("claims[0]", "x", "").unwrap_err().field,
            "claims[0].value"
        );
        assert!(validate_claim("claims[0]", "x", &"v".repeat(1025)).is_err());
    }
}
