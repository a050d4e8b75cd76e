//! `flotilla whoami`: who the hub takes the caller for — its user, groups and how it was
//! authenticated (a token of the token file, an ID token of the OIDC issuer) — and every role
//! it holds under the hub's grants, with whence (as `kubectl auth whoami` shows what the API
//! server took a credential for). A table, or `-o yaml` / `-o json`.

use crate::hub::Hub;
use crate::output::{Format, escaped, table};
use anyhow::Result;
use flotilla_api::v1::{WhoAmIRequest, WhoAmIResponse};
use serde::Serialize;

/// Asks the hub and prints its answer in `format`.
pub async fn run(hub: &Hub, format: Format) -> Result<()> {
    let answer = hub
        .idempotent(async || hub.access().who_am_i(WhoAmIRequest {}).await)
        .await?;
    print!("{}", render(format, &answer)?);
    Ok(())
}

/// The answer as the user reads it.
pub fn render(format: Format, a: &WhoAmIResponse) -> Result<String> {
    if !format.is_table() {
        return Ok(crate::output::structured(
            format,
            vec![WhoAmI::from(a)],
            true,
        )?);
    }
    let mut out = String::new();
    let mut field = |name: &str, value: &str| {
        if !value.is_empty() {
            out.push_str(&format!("{name:<12}{}\n", escaped(value)));
        }
    };
    field("User:", &a.user);
    field("Groups:", &a.groups.join(", "));
    field("Via:", &a.via);
    field("Issuer:", &a.issuer);
    field("Expires:", &expiry(a.expires_unix));
    field("Token role:", &a.token_role);
    field("Execute as:", &a.execute_as.join(" "));
    let grants = a.grants_digest.get(..12).unwrap_or(&a.grants_digest);
    field("Hub:", &format!("{} (grants {grants})", a.hub_id));
    out.push('\n');
    if a.roles.is_empty() {
        out.push_str("No roles: this hub's grants give this identity nothing.\n");
        return Ok(out);
    }
    let rows: Vec<Vec<String>> = a
        .roles
        .iter()
        .map(|r| {
            let name = if r.name.is_empty() { "-" } else { &r.name };
            vec![
                r.scope.clone(),
                name.to_string(),
                r.role.clone(),
                r.from.join(", "),
            ]
        })
        .collect();
    out.push_str(&table(&["SCOPE", "NAME", "ROLE", "FROM"], &rows));
    Ok(out)
}

/// `2026-11-30T21:00:00Z` (`""` for none).
fn expiry(unix: i64) -> String {
    if unix <= 0 {
        return String::new();
    }
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{unix} (seconds since 1970)"))
}

/// The answer in `-o yaml` / `-o json` (camelCase, as the hub's other objects).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WhoAmI {
    user: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    groups: Vec<String>,
    via: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    issuer: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    expires: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    token_role: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    execute_as: Vec<String>,
    roles: Vec<Role>,
    hub: String,
    grants_digest: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Role {
    scope: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    role: String,
    from: Vec<String>,
}

impl From<&WhoAmIResponse> for WhoAmI {
    fn from(a: &WhoAmIResponse) -> Self {
        Self {
            user: a.user.clone(),
            groups: a.groups.clone(),
            via: a.via.clone(),
            issuer: a.issuer.clone(),
            expires: expiry(a.expires_unix),
            token_role: a.token_role.clone(),
            execute_as: a.execute_as.clone(),
            roles: a
                .roles
                .iter()
                .map(|r| Role {
                    scope: r.scope.clone(),
                    name: r.name.clone(),
                    role: r.role.clone(),
                    from: r.from.clone(),
                })
                .collect(),
            hub: a.hub_id.clone(),
            grants_digest: a.grants_digest.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::HeldRole;

    fn ana() -> WhoAmIResponse {
        WhoAmIResponse {
            user: "ana".into(),
            groups: vec!["team-a-sre".into()],
            via: "token".into(),
            token_role: "member".into(),
            roles: vec![
                HeldRole {
                    scope: "clusterset".into(),
                    name: "team-a".into(),
                    role: "admin".into(),
                    from: vec!["group team-a-sre".into()],
                },
                HeldRole {
                    scope: "namespace".into(),
                    name: "team-a-apps".into(),
                    role: "edit".into(),
                    from: vec!["user ana".into(), "group team-a-sre".into()],
                },
            ],
            hub_id: "hub-1".into(),
            grants_digest: "0123456789abcdef0123".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_table_says_who_and_each_role_with_whence() {
        let text = render(Format::Table, &ana()).unwrap();
        assert!(
            text.starts_with("User:       ana\nGroups:     team-a-sre\nVia:        token\n"),
            "{text}"
        );
        assert!(
            text.contains("Hub:        hub-1 (grants 0123456789ab)\n"),
            "{text}"
        );
        assert!(text.contains("SCOPE"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>()
                    == [
                        "namespace",
                        "team-a-apps",
                        "edit",
                        "user",
                        "ana,",
                        "group",
                        "team-a-sre"
                    ]),
            "{text}"
        );
        let none = WhoAmIResponse {
            roles: Vec::new(),
            ..ana()
        };
        assert!(render(Format::Table, &none).unwrap().contains("No roles"));
    }

    #[test]
    fn yaml_and_json_carry_the_same_in_camel_case() {
        let json: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &ana()).unwrap()).unwrap();
        assert_eq!(json["user"], "ana");
        assert_eq!(json["tokenRole"], "member");
        assert_eq!(json["roles"][1]["from"][0], "user ana");
        assert!(json.get("issuer").is_none());
        let yaml = render(Format::Yaml, &ana()).unwrap();
        assert!(
            yaml.contains("grantsDigest: 0123456789abcdef0123"),
            "{yaml}"
        );
    }
}
