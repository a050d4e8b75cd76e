//! ManagedServiceAccount (`authentication.open-cluster-management.io/v1beta1`) in the shape OCM
//! users write and `kubectl get -o yaml` prints. `metadata.namespace` is the managed cluster's
//! name; `spec.rotation.validity` is a Go duration (default `8640h0m0s`).

use super::meta::{Condition, Metadata, conditions};
use crate::meta::{parse_rfc3339, rfc3339};
use crate::serviceaccount::{
    AUTHENTICATION_V1BETA1, DEFAULT_VALIDITY, KIND, MAX_VALIDITY, MIN_VALIDITY, format_go_duration,
    parse_go_duration,
};
use crate::v1;
use serde::{Deserialize, Serialize};

/// ManagedServiceAccount in the OCM shape.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceAccount {
    /// `authentication.open-cluster-management.io/v1beta1`.
    pub api_version: String,
    /// `ManagedServiceAccount`.
    pub kind: String,
    /// Metadata: the namespace is the managed cluster's name.
    pub metadata: Metadata,
    /// Spec.
    #[serde(default)]
    pub spec: ManagedServiceAccountSpec,
    /// Status (ignored on input: the hub keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ManagedServiceAccountStatus>,
}

/// The spec.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedServiceAccountSpec {
    /// Token rotation.
    #[serde(default)]
    pub rotation: Rotation,
    /// Delete the ManagedServiceAccount this many seconds after its creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_creation: Option<i32>,
}

/// `spec.rotation`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rotation {
    /// Refresh the token before it expires (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The validity asked for each token, a Go duration (default `8640h0m0s`).
    #[serde(default = "default_validity")]
    pub validity: String,
}

fn yes() -> bool {
    true
}

fn default_validity() -> String {
    format_go_duration(DEFAULT_VALIDITY.as_secs())
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            enabled: true,
            validity: default_validity(),
        }
    }
}

/// The status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceAccountStatus {
    /// `TokenReported`, `SecretCreated`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When the current token expires (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expiration_timestamp: String,
    /// Where the token is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<TokenSecretRef>,
}

/// `status.tokenSecretRef`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TokenSecretRef {
    /// The name the token is kept under.
    pub name: String,
    /// When the token was last refreshed (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_refresh_timestamp: String,
}

impl ManagedServiceAccount {
    /// Converts to protobuf, checking every field; each error names its field.
    pub fn to_proto(&self) -> Result<v1::ManagedServiceAccount, Vec<String>> {
        let mut errors = Vec::new();
        if self.api_version != AUTHENTICATION_V1BETA1 || self.kind != KIND {
            errors.push(format!(
                "apiVersion/kind: {:?}/{:?} is not {AUTHENTICATION_V1BETA1}/{KIND}",
                self.api_version, self.kind
            ));
        }
        let metadata = self.metadata.to_proto().map_err(|e| errors.push(e)).ok();
        if self.metadata.namespace.is_empty() {
            errors.push(
                "metadata.namespace: a ManagedServiceAccount lives in its managed cluster's \
                 namespace (the cluster's name)"
                    .into(),
            );
        } else if let Err(e) =
            crate::names::validate_dns1123_label("metadata.namespace", &self.metadata.namespace)
        {
            errors.push(format!("{e} (the managed cluster's name)"));
        }
        if let Err(e) = crate::names::validate_dns1123_label("metadata.name", &self.metadata.name) {
            errors.push(e.to_string());
        }
        let validity = match parse_go_duration(&self.spec.rotation.validity) {
            Ok(d) if d < MIN_VALIDITY => {
                errors.push(format!(
                    "spec.rotation.validity: {:?} is shorter than {} (Kubernetes issues no \
                     shorter token)",
                    self.spec.rotation.validity,
                    format_go_duration(MIN_VALIDITY.as_secs())
                ));
                0
            }
            Ok(d) if d > MAX_VALIDITY => {
                errors.push(format!(
                    "spec.rotation.validity: {:?} is longer than {}",
                    self.spec.rotation.validity,
                    format_go_duration(MAX_VALIDITY.as_secs())
                ));
                0
            }
            Ok(d) => d.as_secs() as i64,
            Err(e) => {
                errors.push(format!("spec.rotation.validity: {e}"));
                0
            }
        };
        if let Some(ttl) = self.spec.ttl_seconds_after_creation
            && ttl < 0
        {
            errors.push(format!(
                "spec.ttlSecondsAfterCreation: {ttl} is negative (seconds, 0 or more)"
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(v1::ManagedServiceAccount {
            metadata,
            spec: Some(v1::ManagedServiceAccountSpec {
                rotation: Some(v1::ManagedServiceAccountRotation {
                    enabled: self.spec.rotation.enabled,
                    validity_seconds: validity,
                }),
                ttl_seconds_after_creation: self.spec.ttl_seconds_after_creation,
            }),
            status: self
                .status
                .as_ref()
                .map(|s| v1::ManagedServiceAccountStatus {
                    conditions: s
                        .conditions
                        .iter()
                        .map(|c| v1::Condition {
                            r#type: c.type_.clone(),
                            status: c.status.clone(),
                            reason: c.reason.clone(),
                            message: c.message.clone(),
                            last_transition_time: parse_rfc3339(&c.last_transition_time),
                            observed_generation: c.observed_generation,
                        })
                        .collect(),
                    expiration_timestamp: parse_rfc3339(&s.expiration_timestamp),
                    token_secret_ref: s.token_secret_ref.as_ref().map(|r| {
                        v1::ServiceAccountTokenSecretRef {
                            name: r.name.clone(),
                            last_refresh_timestamp: parse_rfc3339(&r.last_refresh_timestamp),
                        }
                    }),
                }),
        })
    }
}

impl From<&v1::ManagedServiceAccount> for ManagedServiceAccount {
    fn from(m: &v1::ManagedServiceAccount) -> Self {
        let spec = m.spec.unwrap_or_default();
        let rotation = spec.rotation.unwrap_or_default();
        let validity = if rotation.validity_seconds > 0 {
            rotation.validity_seconds as u64
        } else {
            DEFAULT_VALIDITY.as_secs()
        };
        Self {
            api_version: AUTHENTICATION_V1BETA1.into(),
            kind: KIND.into(),
            metadata: m.metadata.as_ref().map(Metadata::from).unwrap_or_default(),
            spec: ManagedServiceAccountSpec {
                rotation: Rotation {
                    enabled: rotation.enabled,
                    validity: format_go_duration(validity),
                },
                ttl_seconds_after_creation: spec.ttl_seconds_after_creation,
            },
            status: m.status.as_ref().map(|s| ManagedServiceAccountStatus {
                conditions: conditions(&s.conditions),
                expiration_timestamp: s
                    .expiration_timestamp
                    .as_ref()
                    .map(rfc3339)
                    .unwrap_or_default(),
                token_secret_ref: s.token_secret_ref.as_ref().map(|r| TokenSecretRef {
                    name: r.name.clone(),
                    last_refresh_timestamp: r
                        .last_refresh_timestamp
                        .as_ref()
                        .map(rfc3339)
                        .unwrap_or_default(),
                }),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OCM_YAML: &str = r#"
apiVersion: authentication.open-cluster-management.io/v1beta1
kind: ManagedServiceAccount
metadata:
  name: my-sample
  namespace: cluster1
spec:
  rotation:
    enabled: true
    validity: 8640h0m0s
  ttlSecondsAfterCreation: 3600
"#;

    #[test]
    fn ocm_yaml_round_trips_unchanged() {
        let o: ManagedServiceAccount = serde_yaml::from_str(OCM_YAML).unwrap();
        let p = o.to_proto().unwrap();
        let rotation = p.spec.as_ref().unwrap().rotation.unwrap();
        assert_eq!(rotation.validity_seconds, 8640 * 3600);
        assert_eq!(
            p.spec.as_ref().unwrap().ttl_seconds_after_creation,
            Some(3600)
        );
        let back = ManagedServiceAccount::from(&p);
        assert_eq!(back, o);
    }

    #[test]
    fn defaults_are_ocms() {
        let o: ManagedServiceAccount = serde_yaml::from_str(
            "apiVersion: authentication.open-cluster-management.io/v1beta1\n\
             kind: ManagedServiceAccount\nmetadata: {name: a, namespace: c1}\n",
        )
        .unwrap();
        let p = o.to_proto().unwrap();
        let r = p.spec.unwrap().rotation.unwrap();
        assert!(r.enabled);
        assert_eq!(r.validity_seconds, DEFAULT_VALIDITY.as_secs() as i64);
    }

    #[test]
    fn bad_fields_are_named() {
        let mut o: ManagedServiceAccount = serde_yaml::from_str(OCM_YAML).unwrap();
        o.spec.rotation.validity = "5m".into();
        o.spec.ttl_seconds_after_creation = Some(-1);
        o.metadata.namespace.clear();
        let errors = o.to_proto().unwrap_err().join("\n");
        assert!(errors.contains("spec.rotation.validity"), "{errors}");
        assert!(errors.contains("spec.ttlSecondsAfterCreation"), "{errors}");
        assert!(errors.contains("metadata.namespace"), "{errors}");
        o.spec.rotation.validity = "1 day".into();
        assert!(o.to_proto().unwrap_err().join("").contains("validity"));
    }
}
