//! A verified token's claims → a user and groups, as kube-apiserver maps them
//! (`--oidc-username-claim`, `--oidc-username-prefix`, `--oidc-groups-claim`,
//! `--oidc-groups-prefix`, `--oidc-required-claim`), with its messages.

use crate::config::Config;
use crate::verify::{Claims, Verified, string_or_array};
use serde_json::Value;

/// Most groups one token may carry.
pub const MAX_GROUPS: usize = 1000;
/// Longest group name (after the prefix).
pub const MAX_GROUP_BYTES: usize = 256;
/// Longest username (after the prefix).
pub const MAX_USERNAME_BYTES: usize = 1024;

/// Who a verified token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The username claim's value after its prefix.
    pub username: String,
    /// The groups claim's values after their prefix.
    pub groups: Vec<String>,
    /// The token's issuer.
    pub issuer: String,
    /// The token's `exp`, in seconds since the Unix epoch.
    pub expires: u64,
}

/// Why a verified token's claims do not make a user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// The username claim is absent, empty or not a string.
    #[error("oidc: claim {claim:?} is not present in the ID token or not a non-empty string")]
    Username {
        /// The claim.
        claim: String,
    },
    /// `email` as username with `email_verified` false.
    #[error("oidc: email not verified")]
    EmailNotVerified,
    /// The groups claim is neither a string nor an array of strings.
    #[error("oidc: claim {claim:?} is not a string or an array of strings")]
    Groups {
        /// The claim.
        claim: String,
    },
    /// A required claim is absent or not a string.
    #[error("oidc: required claim {claim} not present in ID token")]
    Required {
        /// The claim.
        claim: String,
    },
    /// A required claim has another value.
    #[error("oidc: required claim {claim} value does not match. Got = {got}, want = {want}")]
    RequiredMismatch {
        /// The claim.
        claim: String,
        /// Its value.
        got: String,
        /// The value required.
        want: String,
    },
    /// Too many groups, or a name too long: refused, not truncated.
    #[error("oidc: {what}")]
    TooLarge {
        /// What is too large.
        what: String,
    },
}

/// The subject of a verified token under `config`'s claim rules.
pub fn map(config: &Config, verified: &Verified) -> Result<Subject, ClaimError> {
    let claims = &verified.claims;
    for (claim, want) in &config.required_claims {
        match claims.get(claim) {
            Some(Value::String(got)) if got == want => {}
            Some(Value::String(got)) => {
                return Err(ClaimError::RequiredMismatch {
                    claim: claim.clone(),
                    got: got.clone(),
                    want: want.clone(),
                });
            }
            _ => {
                return Err(ClaimError::Required {
                    claim: claim.clone(),
                });
            }
        }
    }
    let username = username(config, claims)?;
    let groups = groups(config, claims)?;
    Ok(Subject {
        username,
        groups,
        issuer: config.issuer.clone(),
        expires: verified.expires,
    })
}

fn username(config: &Config, claims: &Claims) -> Result<String, ClaimError> {
    let claim = &config.username_claim;
    let value = match claims.get(claim) {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ => {
            return Err(ClaimError::Username {
                claim: claim.clone(),
            });
        }
    };
    if claim == "email" {
        match claims.get("email_verified") {
            None | Some(Value::Bool(true)) => {}
            Some(_) => return Err(ClaimError::EmailNotVerified),
        }
    }
    let username = format!("{}{value}", config.username_prefix());
    if username.len() > MAX_USERNAME_BYTES || username.chars().any(char::is_control) {
        return Err(ClaimError::TooLarge {
            what: format!(
                "the username is longer than {MAX_USERNAME_BYTES} bytes or has control characters"
            ),
        });
    }
    Ok(username)
}

fn groups(config: &Config, claims: &Claims) -> Result<Vec<String>, ClaimError> {
    let Some(claim) = &config.groups_claim else {
        return Ok(Vec::new());
    };
    let Some(value) = claims.get(claim) else {
        return Ok(Vec::new());
    };
    let groups = string_or_array(Some(value)).ok_or_else(|| ClaimError::Groups {
        claim: claim.clone(),
    })?;
    if groups.len() > MAX_GROUPS {
        return Err(ClaimError::TooLarge {
            what: format!(
                "claim {claim:?} lists {} groups; at most {MAX_GROUPS} are accepted",
                groups.len()
            ),
        });
    }
    groups
        .into_iter()
        .map(|g| {
            let group = format!("{}{g}", config.groups_prefix);
            if group.len() > MAX_GROUP_BYTES || g.is_empty() || group.chars().any(char::is_control)
            {
                return Err(ClaimError::TooLarge {
                    what: format!(
                        "claim {claim:?} has a group that is empty, longer than \
                         {MAX_GROUP_BYTES} bytes or has control characters"
                    ),
                });
            }
            Ok(group)
        })
        .collect()
}
