//! `v1 ConfigMap` and `v1 Secret` applied to the hub: the inputs hub templates read
//! (`{{hub fromConfigMap "" "site-config" "vlan" hub}}`). Parsed in the shape `kubectl` users
//! write; `stringData` is folded into `data` as the API server does, `binaryData` is refused
//! (hub templates read strings), and the size bound is Kubernetes' (1 MiB of data).

use super::meta::Metadata;
use crate::v1;
use data_encoding::BASE64;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The apiVersion of both kinds.
pub const CORE_V1: &str = "v1";
/// Largest data of one object (keys and values), as Kubernetes bounds a ConfigMap or Secret.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// A ConfigMap in the YAML shape.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMap {
    /// `v1`.
    pub api_version: String,
    /// `ConfigMap`.
    pub kind: String,
    /// Metadata (namespaced).
    pub metadata: Metadata,
    /// String values.
    #[serde(default)]
    pub data: BTreeMap<String, String>,
    /// Binary values (refused on the hub).
    #[serde(default)]
    pub binary_data: BTreeMap<String, String>,
    /// Whether the data may change.
    #[serde(default)]
    pub immutable: bool,
}

/// A Secret in the YAML shape.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Secret {
    /// `v1`.
    pub api_version: String,
    /// `Secret`.
    pub kind: String,
    /// Metadata (namespaced).
    pub metadata: Metadata,
    /// `Opaque` when empty.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Base64 values.
    #[serde(default)]
    pub data: BTreeMap<String, String>,
    /// Plain values, folded into `data` (they win over `data`'s, as the API server has it).
    #[serde(default)]
    pub string_data: BTreeMap<String, String>,
    /// Whether the data may change.
    #[serde(default)]
    pub immutable: bool,
}

/// Kubernetes' rule for a data key: `[-._a-zA-Z0-9]+`, at most 253 characters.
fn check_key(key: &str) -> Result<(), String> {
    let ok = !key.is_empty()
        && key.len() <= 253
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "data.{key}: a valid config key must consist of alphanumeric characters, '-', '_' \
             or '.' (at most 253)"
        ))
    }
}

/// The metadata; a missing namespace is left to the caller (`flotilla apply` puts the
/// default one, the hub refuses none).
fn meta(m: &Metadata) -> Result<v1::ObjectMeta, Vec<String>> {
    if m.name.is_empty() {
        return Err(vec!["metadata.name: required".to_string()]);
    }
    m.to_proto().map_err(|e| vec![e])
}

fn check_size(total: usize, errors: &mut Vec<String>) {
    if total > MAX_DATA_BYTES {
        errors.push(format!(
            "data: {total} bytes is more than the {MAX_DATA_BYTES} a ConfigMap or Secret may hold"
        ));
    }
}

impl ConfigMap {
    /// The stored object; every problem named by its field.
    pub fn to_proto(&self) -> Result<v1::HubConfigMap, Vec<String>> {
        let mut errors = Vec::new();
        let metadata = meta(&self.metadata).unwrap_or_else(|e| {
            errors.extend(e);
            v1::ObjectMeta::default()
        });
        if !self.binary_data.is_empty() {
            errors.push(
                "binaryData: not supported on the hub (hub templates read strings; use data)"
                    .into(),
            );
        }
        errors.extend(self.data.keys().filter_map(|k| check_key(k).err()));
        check_size(
            self.data.iter().map(|(k, v)| k.len() + v.len()).sum(),
            &mut errors,
        );
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(v1::HubConfigMap {
            metadata: Some(metadata),
            data: self.data.clone().into_iter().collect(),
            immutable: self.immutable,
        })
    }
}

impl Secret {
    /// The object to send (decoded bytes); every problem named by its field.
    pub fn to_proto(&self) -> Result<v1::HubSecret, Vec<String>> {
        let mut errors = Vec::new();
        let metadata = meta(&self.metadata).unwrap_or_else(|e| {
            errors.extend(e);
            v1::ObjectMeta::default()
        });
        let mut data: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for (k, v) in &self.data {
            match BASE64.decode(v.as_bytes()) {
                Ok(bytes) => {
                    data.insert(k.clone(), bytes);
                }
                Err(e) => errors.push(format!("data.{k}: not base64: {e}")),
            }
        }
        for (k, v) in &self.string_data {
            data.insert(k.clone(), v.as_bytes().to_vec());
        }
        errors.extend(data.keys().filter_map(|k| check_key(k).err()));
        check_size(
            data.iter().map(|(k, v)| k.len() + v.len()).sum(),
            &mut errors,
        );
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(v1::HubSecret {
            metadata: Some(metadata),
            r#type: if self.type_.is_empty() {
                "Opaque".into()
            } else {
                self.type_.clone()
            },
            data: data.into_iter().collect(),
            immutable: self.immutable,
        })
    }
}

/// What is wrong with a ConfigMap as the hub receives it (keys, size), each naming its field:
/// the hub checks what reaches it whoever sent it.
pub fn config_map_problems(c: &v1::HubConfigMap) -> Vec<String> {
    let mut errors: Vec<String> = c.data.keys().filter_map(|k| check_key(k).err()).collect();
    check_size(
        c.data.iter().map(|(k, v)| k.len() + v.len()).sum(),
        &mut errors,
    );
    errors.sort();
    errors
}

/// What is wrong with a Secret as the hub receives it (keys, size), each naming its field.
pub fn secret_problems(s: &v1::HubSecret) -> Vec<String> {
    let mut errors: Vec<String> = s.data.keys().filter_map(|k| check_key(k).err()).collect();
    check_size(
        s.data.iter().map(|(k, v)| k.len() + v.len()).sum(),
        &mut errors,
    );
    if s.r#type.len() > 253 {
        errors.push("type: at most 253 characters".into());
    }
    errors.sort();
    errors
}

/// A hub ConfigMap as templates read it (`lookup "v1" "ConfigMap" …`).
pub fn config_map_json(c: &v1::HubConfigMap) -> serde_json::Value {
    let m = c.metadata.clone().unwrap_or_default();
    let data: BTreeMap<&String, &String> = c.data.iter().collect();
    serde_json::json!({
        "apiVersion": CORE_V1,
        "kind": "ConfigMap",
        "metadata": object_meta_json(&m),
        "data": data,
    })
}

/// A hub Secret as templates read it: `data` base64, as the API server returns it.
pub fn secret_json(
    m: &v1::ObjectMeta,
    type_: &str,
    data: &BTreeMap<String, Vec<u8>>,
) -> serde_json::Value {
    let data: BTreeMap<&String, String> = data.iter().map(|(k, v)| (k, BASE64.encode(v))).collect();
    serde_json::json!({
        "apiVersion": CORE_V1,
        "kind": "Secret",
        "type": type_,
        "metadata": object_meta_json(m),
        "data": data,
    })
}

fn object_meta_json(m: &v1::ObjectMeta) -> serde_json::Value {
    let labels: BTreeMap<&String, &String> = m.labels.iter().collect();
    serde_json::json!({
        "name": m.name,
        "namespace": m.namespace,
        "labels": labels,
        "resourceVersion": m.resource_version.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_secret_folds_string_data_over_data_and_decodes_base64() {
        let s: Secret = parse(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\n\
             data: {a: aGk=, b: eA==}\nstringData: {b: plain}\n",
        );
        let p = s.to_proto().unwrap();
        assert_eq!(p.r#type, "Opaque");
        assert_eq!(p.data["a"], b"hi");
        assert_eq!(p.data["b"], b"plain");
    }

    #[test]
    fn every_problem_of_a_hub_object_is_named_by_its_field() {
        let s: Secret = parse(
            "apiVersion: v1\nkind: Secret\nmetadata: {namespace: n}\ndata: {'a b': eA==, c: '!!'}\n",
        );
        let errors = s.to_proto().unwrap_err();
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("metadata.name: required"))
        );
        assert!(errors.iter().any(|e| e.starts_with("data.c: not base64")));
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("data.a b: a valid config key"))
        );
        let c: ConfigMap = parse(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ns}\n\
             binaryData: {x: AA==}\n",
        );
        assert_eq!(
            c.to_proto().unwrap_err(),
            vec!["binaryData: not supported on the hub (hub templates read strings; use data)"]
        );
    }

    #[test]
    fn a_config_map_over_a_mebibyte_is_refused() {
        let big = "x".repeat(MAX_DATA_BYTES);
        let c = ConfigMap {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            metadata: Metadata {
                name: "c".into(),
                namespace: "ns".into(),
                ..Default::default()
            },
            data: [("k".to_string(), big)].into_iter().collect(),
            binary_data: BTreeMap::new(),
            immutable: false,
        };
        assert!(c.to_proto().unwrap_err()[0].contains("more than the 1048576"));
    }
}
