//! What travels between the hub's resolution of hub templates and the agent: OCM's annotation
//! for a hub template that failed, protected values (`$ocm_encrypted:<base64>`) and the
//! annotation naming the key that sealed them, and their opening on the agent.
//!
//! Flotilla seals a protected value by the hub's sealing key to the cluster's agent curve key
//! (an NKeys xkey box: authenticated, only that agent opens it) where OCM encrypts with
//! AES-256-CBC under a per-cluster key; the value's text keeps OCM's prefix.

use data_encoding::BASE64;
use serde_json::Value;

/// The annotation OCM's propagator puts on a template whose hub templates failed; the agent
/// reports `NonCompliant; template-error; <its text>` and evaluates nothing of the template.
pub const HUB_TEMPLATES_ERROR: &str = "policy.open-cluster-management.io/hub-templates-error";
/// The root's annotation that turns hub templates off (`"true"`).
pub const DISABLE_TEMPLATES: &str = "policy.open-cluster-management.io/disable-templates";
/// The root's annotation whose every new value makes the hub resolve its hub templates again
/// for every cluster (a copy whose result did not change is not sent again); it is only the
/// root's: replicated copies never carry it.
pub const TRIGGER_UPDATE: &str = "policy.open-cluster-management.io/trigger-update";
/// The annotation naming the hub key (`X…`) that sealed a template's protected values
/// (Flotilla's, in place of OCM's IV annotation).
pub const SEALED_BY: &str = "policy.flotilla.io/sealed-by";
/// What prefixes a protected value.
pub const ENCRYPTED: &str = "$ocm_encrypted:";

/// `metadata.annotations[name]` of a template object.
pub fn annotation<'a>(object: &'a Value, name: &str) -> Option<&'a str> {
    object
        .get("metadata")?
        .get("annotations")?
        .get(name)?
        .as_str()
}

/// Why a protected value did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The template holds protected values but names no sealing key.
    #[error("the template holds protected values but no {SEALED_BY} annotation")]
    NoSender,
    /// The value after the prefix is not base64.
    #[error("a protected value is not base64")]
    NotBase64,
    /// The box did not open (sealed to another key, or tampered with) or is not UTF-8.
    #[error("a protected value does not open with this agent's key: {0}")]
    Box(String),
}

/// Opens a sealed box given the sealing hub's key (`X…`): its plaintext, or why not.
pub type Open<'a> = &'a dyn Fn(&[u8], &str) -> Result<String, String>;

/// Replaces every protected string of `object` (whole string values starting with
/// [`ENCRYPTED`]) with what `open(box, sender)` gives, `sender` the [`SEALED_BY`] key.
pub fn open_all(object: &mut Value, open: Open<'_>) -> Result<(), OpenError> {
    let sender = annotation(object, SEALED_BY).map(str::to_string);
    walk(object, &|s: &str| {
        let b64 = &s[ENCRYPTED.len()..];
        let sender = sender.as_deref().ok_or(OpenError::NoSender)?;
        let sealed = BASE64
            .decode(b64.as_bytes())
            .map_err(|_| OpenError::NotBase64)?;
        open(&sealed, sender).map_err(OpenError::Box)
    })
}

fn walk(v: &mut Value, open: &dyn Fn(&str) -> Result<String, OpenError>) -> Result<(), OpenError> {
    match v {
        Value::String(s) if s.starts_with(ENCRYPTED) => {
            *s = open(s)?;
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(|i| walk(i, open)),
        Value::Object(map) => map.values_mut().try_for_each(|i| walk(i, open)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn protected_values_open_in_place_with_the_named_sender() {
        let mut o = json!({"metadata": {"annotations": {SEALED_BY: "XHUB"}},
            "spec": {"v": format!("{ENCRYPTED}{}", BASE64.encode(b"box")), "n": [1, "plain"]}});
        open_all(&mut o, &|sealed, sender| {
            assert_eq!(sender, "XHUB");
            Ok(format!("opened {}", String::from_utf8_lossy(sealed)))
        })
        .unwrap();
        assert_eq!(o["spec"], json!({"v": "opened box", "n": [1, "plain"]}));
    }

    #[test]
    fn a_value_that_does_not_open_or_names_no_sender_is_an_error() {
        let value = format!("{ENCRYPTED}{}", BASE64.encode(b"box"));
        let mut o = json!({"v": value});
        assert_eq!(
            open_all(&mut o, &|_, _| Ok(String::new())),
            Err(OpenError::NoSender)
        );
        let mut o = json!({"metadata": {"annotations": {SEALED_BY: "X"}}, "v": value});
        assert_eq!(
            open_all(&mut o, &|_, _| Err("bad".into())),
            Err(OpenError::Box("bad".into()))
        );
        let mut o = json!({"metadata": {"annotations": {SEALED_BY: "X"}}, "v": "$ocm_encrypted:!"});
        assert_eq!(
            open_all(&mut o, &|_, _| Ok(String::new())),
            Err(OpenError::NotBase64)
        );
    }
}
