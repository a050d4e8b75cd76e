//! Pure decisions of the agent's ManagedServiceAccounts: what a spec from the hub may be, and
//! what to do next for one account — issue a token now, wait until its rotation is due, or
//! nothing.

use flotilla_api::v1::{ManagedServiceAccount, ServiceAccountDelivery};
use std::time::{Duration, SystemTime};

/// One ManagedServiceAccount as the agent holds it.
#[derive(Debug, Clone)]
pub struct Held {
    /// Its name (the ServiceAccount's on the cluster).
    pub name: String,
    /// The spec's generation.
    pub generation: i64,
    /// Refresh tokens before they expire.
    pub rotation: bool,
    /// The validity to ask for.
    pub validity: Duration,
    /// The hub's public curve key to seal tokens to.
    pub hub_xkey: String,
    /// The current token: the generation it was issued for, when, and its expiry as the
    /// cluster answered.
    pub token: Option<Token>,
    /// The last attempt failed: not before this.
    pub retry_at: Option<SystemTime>,
}

/// What is known of an issued token (never the token: it is sealed and reported at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// The spec generation it was issued for.
    pub generation: i64,
    /// When it was issued.
    pub issued: SystemTime,
    /// When it expires, as the cluster answered.
    pub expires: SystemTime,
}

/// What to do for one account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Create the ServiceAccount if needed and issue a token now.
    Issue,
    /// Nothing until then (rotation due, or a retry).
    At(SystemTime),
    /// Nothing (rotation off and a token held).
    Idle,
}

/// A spec the agent will not take: why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// Checks a delivery for this cluster: the account lives in the cluster's namespace, its
/// resource id matches its name, the hub key is one. Returns the account's name.
pub fn check(
    delivery: &ServiceAccountDelivery,
    cluster: &str,
    resource_id: Option<&str>,
) -> Result<String, Refused> {
    let account = delivery
        .account
        .as_ref()
        .ok_or_else(|| Refused("the delivery carries no ManagedServiceAccount".into()))?;
    let meta = account.metadata.clone().unwrap_or_default();
    if meta.namespace != cluster {
        return Err(Refused(format!(
            "ManagedServiceAccount {}/{} is not this cluster's ({cluster})",
            meta.namespace, meta.name
        )));
    }
    if flotilla_api::names::validate_dns1123_label("metadata.name", &meta.name).is_err() {
        return Err(Refused(format!(
            "ManagedServiceAccount name {:?} is not a DNS-1123 label",
            meta.name
        )));
    }
    let rid = flotilla_bus::serviceaccounts::resource_id(cluster, &meta.name);
    if resource_id != Some(rid.as_str()) {
        return Err(Refused(format!(
            "ManagedServiceAccount {}: the event's resourceid does not match its name",
            meta.name
        )));
    }
    let deleting = meta.deletion_timestamp.is_some();
    if !deleting && nkeys::XKey::from_public_key(&delivery.hub_xkey).is_err() {
        return Err(Refused(format!(
            "ManagedServiceAccount {}: hubXkey is not a public curve key",
            meta.name
        )));
    }
    Ok(meta.name)
}

/// The held state of a (checked) account, keeping the token of `previous` when the validity
/// and the hub key did not change.
pub fn hold(account: &ManagedServiceAccount, hub_xkey: &str, previous: Option<&Held>) -> Held {
    let meta = account.metadata.clone().unwrap_or_default();
    let rotation = account
        .spec
        .as_ref()
        .and_then(|s| s.rotation)
        .unwrap_or_default();
    let validity = if rotation.validity_seconds > 0 {
        Duration::from_secs(rotation.validity_seconds as u64)
    } else {
        flotilla_api::serviceaccount::DEFAULT_VALIDITY
    };
    let token = previous
        .filter(|p| p.validity == validity && p.hub_xkey == hub_xkey)
        .and_then(|p| p.token);
    Held {
        name: meta.name,
        generation: meta.generation,
        rotation: rotation.enabled,
        validity,
        hub_xkey: hub_xkey.to_string(),
        token,
        retry_at: None,
    }
}

/// What to do next for `held` at `now`.
pub fn next(held: &Held, now: SystemTime) -> Next {
    if let Some(at) = held.retry_at
        && at > now
    {
        return Next::At(at);
    }
    let Some(token) = held.token else {
        return Next::Issue;
    };
    if !held.rotation {
        return Next::Idle;
    }
    let due = flotilla_api::serviceaccount::rotation_due(token.issued, token.expires);
    if due <= now {
        Next::Issue
    } else {
        Next::At(due)
    }
}

/// How long after a failed attempt the next one is made: 2 s doubling to 60 s.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(2u64.saturating_pow(failures.clamp(1, 6)).min(60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{ManagedServiceAccountRotation, ManagedServiceAccountSpec, ObjectMeta};

    fn account(cluster: &str, name: &str, validity: i64) -> ManagedServiceAccount {
        ManagedServiceAccount {
            metadata: Some(ObjectMeta {
                name: name.into(),
                namespace: cluster.into(),
                generation: 1,
                ..Default::default()
            }),
            spec: Some(ManagedServiceAccountSpec {
                rotation: Some(ManagedServiceAccountRotation {
                    enabled: true,
                    validity_seconds: validity,
                }),
                ttl_seconds_after_creation: None,
            }),
            status: None,
        }
    }

    fn delivery(cluster: &str, name: &str) -> ServiceAccountDelivery {
        ServiceAccountDelivery {
            account: Some(account(cluster, name, 3600)),
            hub_xkey: nkeys::XKey::new().public_key(),
        }
    }

    #[test]
    fn a_spec_for_another_cluster_or_with_a_forged_id_is_refused() {
        let rid = flotilla_bus::serviceaccounts::resource_id("c1", "sa");
        assert_eq!(
            check(&delivery("c1", "sa"), "c1", Some(&rid)).unwrap(),
            "sa"
        );
        assert!(check(&delivery("c2", "sa"), "c1", Some(&rid)).is_err());
        assert!(check(&delivery("c1", "other"), "c1", Some(&rid)).is_err());
        let mut bad_key = delivery("c1", "sa");
        bad_key.hub_xkey = "UABC".into();
        assert!(check(&bad_key, "c1", Some(&rid)).is_err());
        let mut bad_name = delivery("c1", "a.b");
        bad_name
            .account
            .as_mut()
            .unwrap()
            .metadata
            .as_mut()
            .unwrap()
            .name = "A/B".into();
        assert!(check(&bad_name, "c1", Some(&rid)).is_err());
    }

    #[test]
    fn rotation_is_due_at_a_fraction_of_the_lifetime_the_cluster_granted() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let mut held = hold(&account("c1", "sa", 3600), "X", None);
        assert_eq!(next(&held, t0), Next::Issue);
        // Asked for an hour, granted 10 s (a cloud's cap): due after 8 s.
        held.token = Some(Token {
            generation: 1,
            issued: t0,
            expires: t0 + Duration::from_secs(10),
        });
        assert_eq!(next(&held, t0), Next::At(t0 + Duration::from_secs(8)));
        assert_eq!(next(&held, t0 + Duration::from_secs(8)), Next::Issue);
        held.rotation = false;
        assert_eq!(next(&held, t0 + Duration::from_secs(9)), Next::Idle);
        held.retry_at = Some(t0 + Duration::from_secs(30));
        assert_eq!(next(&held, t0), Next::At(t0 + Duration::from_secs(30)));
    }

    #[test]
    fn a_changed_validity_or_hub_key_asks_for_a_new_token() {
        let t0 = SystemTime::UNIX_EPOCH;
        let mut held = hold(&account("c1", "sa", 3600), "X1", None);
        held.token = Some(Token {
            generation: 1,
            issued: t0,
            expires: t0 + Duration::from_secs(3600),
        });
        assert!(
            hold(&account("c1", "sa", 3600), "X1", Some(&held))
                .token
                .is_some()
        );
        assert!(
            hold(&account("c1", "sa", 7200), "X1", Some(&held))
                .token
                .is_none()
        );
        assert!(
            hold(&account("c1", "sa", 3600), "X2", Some(&held))
                .token
                .is_none()
        );
        assert_eq!(backoff(1), Duration::from_secs(2));
        assert_eq!(backoff(10), Duration::from_secs(60));
    }
}
