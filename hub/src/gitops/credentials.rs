//! A GitRepo's credentials: the hub Secret its `clientSecretName` names (in the GitRepo's
//! namespace; at rest sealed in the `hubsecrets` bucket, opened only in the hub's memory),
//! turned into what the fetch worker needs and handed to it in its request on stdin — never on
//! its command line or in its environment, never in the GitRepo, its status or a log line
//! (design §7). Pure but for the one read of the Secret ([`of`]).
//!
//! Accepted Secrets (Fleet's): `kubernetes.io/basic-auth` with `password` (a token goes there)
//! and `username` (default `git`: GitHub, GitLab and Gitea take any user name with a token),
//! for `https://` only; `kubernetes.io/ssh-auth` with `ssh-privatekey` and `known_hosts` (the
//! server's host keys, as `ssh-keyscan` prints them; required), for `ssh://` and scp-like
//! repositories.

use crate::policy::hubdata::HubData;
use flotilla_api::v1::GitRepo;
use flotilla_gitfetch::{
    known_hosts,
    protocol::{BasicAuth, Credential, Credentials, SshKey},
};
use std::collections::BTreeMap;

/// The Secret type of a user name and password or token.
pub const BASIC_AUTH: &str = "kubernetes.io/basic-auth";
/// The Secret type of an SSH private key.
pub const SSH_AUTH: &str = "kubernetes.io/ssh-auth";
/// The user name sent with a token when the Secret gives none.
pub const DEFAULT_USERNAME: &str = "git";

/// The credentials of `repo`: `Ok(None)` when it names no Secret; an error (for its `Fetched`
/// condition) when the Secret is missing or unusable.
pub fn of(secrets: &HubData, repo: &GitRepo) -> Result<Option<Credentials>, String> {
    let spec = flotilla_gitops::source::spec(repo);
    if spec.client_secret_name.is_empty() {
        return Ok(None);
    }
    let namespace = repo.metadata.as_ref().map_or("", |m| m.namespace.as_str());
    let name = &spec.client_secret_name;
    let source = format!("Secret {namespace}/{name}");
    // Validation let through only `scheme://…` and scp-like `user@host:path` (SSH).
    let scheme = spec.repo.split_once("://").map_or("ssh", |(s, _)| s);
    let Some((kind, data)) = secrets.secret_data(namespace, name) else {
        return Err(format!(
            "spec.clientSecretName: {source} not found: apply a {} in the GitRepo's namespace",
            if scheme == "ssh" {
                format!("{SSH_AUTH} Secret (ssh-privatekey, known_hosts)")
            } else {
                format!("{BASIC_AUTH} Secret (username, password)")
            }
        ));
    };
    from_secret(source, scheme, &kind, &data).map(Some)
}

/// Credentials from a Secret's type and data, for a repository of `scheme`; every problem says
/// which Secret and key. Never quotes a value.
pub fn from_secret(
    source: String,
    scheme: &str,
    kind: &str,
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<Credentials, String> {
    let credential = match kind {
        BASIC_AUTH => {
            if scheme != "https" {
                return Err(format!(
                    "{source}: basic-auth credentials are sent over https:// only, not {scheme}://"
                ));
            }
            let password = text(&source, data, "password")?.ok_or_else(|| {
                format!("{source}: a {BASIC_AUTH} Secret without a password (a token goes there)")
            })?;
            let username =
                text(&source, data, "username")?.unwrap_or_else(|| DEFAULT_USERNAME.to_owned());
            if username.contains(':') {
                return Err(format!(
                    "{source}: username: a basic-auth user name cannot hold ':'"
                ));
            }
            Credential::Basic(BasicAuth { username, password })
        }
        SSH_AUTH => {
            if scheme != "ssh" {
                return Err(format!(
                    "{source}: an SSH key for a {scheme}:// repository: use a {BASIC_AUTH} Secret"
                ));
            }
            let private_key = data
                .get("ssh-privatekey")
                .filter(|k| !k.is_empty())
                .cloned()
                .ok_or_else(|| format!("{source}: a {SSH_AUTH} Secret without ssh-privatekey"))?;
            let known_hosts = text(&source, data, "known_hosts")?.unwrap_or_default();
            // Checked here too, so a bad line is named before any connection: no line at all is
            // refused (there is no trust on first use).
            match known_hosts::parse(&known_hosts) {
                Ok(lines) if lines.is_empty() => {
                    return Err(format!(
                        "{source}: a {SSH_AUTH} Secret without known_hosts: add the server's \
                         host key (ssh-keyscan -p PORT HOST); there is no trust on first use"
                    ));
                }
                Ok(_) => {}
                Err(e) => return Err(format!("{source}: {e}")),
            }
            Credential::Ssh(SshKey {
                private_key,
                known_hosts,
            })
        }
        other => {
            return Err(format!(
                "{source}: type {other}: a GitRepo's credentials are a {BASIC_AUTH} Secret \
                 (username, password) or a {SSH_AUTH} Secret (ssh-privatekey, known_hosts)"
            ));
        }
    };
    Ok(Credentials {
        source,
        credential: Some(credential),
    })
}

/// A key's value as one line of text; `None` when absent or empty.
fn text(
    source: &str,
    data: &BTreeMap<String, Vec<u8>>,
    key: &str,
) -> Result<Option<String>, String> {
    let Some(bytes) = data.get(key).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match std::str::from_utf8(bytes) {
        Ok(s) if key == "known_hosts" || !s.chars().any(char::is_control) => Ok(Some(s.to_owned())),
        // A trailing newline (`echo token | base64`) is the usual slip: say so.
        _ => Err(format!(
            "{source}: {key}: not one line of text (a line break or control character; \
             was it encoded with a trailing newline?)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn basic(c: &Credentials) -> (&str, &str) {
        match c.credential.as_ref().unwrap() {
            Credential::Basic(b) => (b.username.as_str(), b.password.as_str()),
            Credential::Ssh(_) => panic!("not basic"),
        }
    }

    #[test]
    fn a_basic_auth_secret_gives_its_user_and_password_and_a_token_alone_goes_as_git() {
        let c = from_secret(
            "Secret a/b".into(),
            "https",
            BASIC_AUTH,
            &data(&[("username", "ann"), ("password", "s3cret")]),
        )
        .unwrap();
        assert_eq!(basic(&c), ("ann", "s3cret"));
        let c = from_secret(
            "Secret a/b".into(),
            "https",
            BASIC_AUTH,
            &data(&[("password", "ghp_token")]),
        )
        .unwrap();
        assert_eq!(basic(&c), ("git", "ghp_token"));
        assert_eq!(
            format!("{c:?}"),
            "Credentials { source: \"Secret a/b\", kind: \"basic-auth\" }",
            "Debug shows no value"
        );
    }

    #[test]
    fn an_ssh_auth_secret_gives_its_key_and_known_hosts() {
        let line = "[git.example.com]:2222 ssh-ed25519 \
                    AAAAC3NzaC1lZDI1NTE5AAAAIDzGyaOaiXwnk59mj/J1rtxAN2rUi6nVEWVz8ht9uvYX\n";
        let c = from_secret(
            "Secret a/b".into(),
            "ssh",
            SSH_AUTH,
            &data(&[("ssh-privatekey", "KEY"), ("known_hosts", line)]),
        )
        .unwrap();
        let Some(Credential::Ssh(k)) = &c.credential else {
            panic!("not ssh");
        };
        assert_eq!(
            (k.private_key.as_slice(), k.known_hosts.as_str()),
            (&b"KEY"[..], line)
        );
        assert_eq!(
            format!("{c:?}"),
            "Credentials { source: \"Secret a/b\", kind: \"ssh-auth\" }"
        );
    }

    /// A repository scheme, a Secret's type and data, and a part of the refusal expected.
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);

    #[test]
    fn unusable_secrets_are_refused_naming_the_secret_and_key_never_the_value() {
        let cases: &[Case] = &[
            (
                "http",
                BASIC_AUTH,
                &[("password", "pw-7f3a")],
                "over https:// only, not http://",
            ),
            (
                "https",
                BASIC_AUTH,
                &[("username", "ann")],
                "without a password",
            ),
            (
                "https",
                BASIC_AUTH,
                &[("password", "pw-7f3a\n")],
                "password: not one line",
            ),
            (
                "https",
                BASIC_AUTH,
                &[("username", "a:b"), ("password", "pw-7f3a")],
                "cannot hold ':'",
            ),
            (
                "https",
                SSH_AUTH,
                &[("ssh-privatekey", "k")],
                "use a kubernetes.io/basic-auth",
            ),
            (
                "ssh",
                SSH_AUTH,
                &[("known_hosts", "h")],
                "without ssh-privatekey",
            ),
            (
                "ssh",
                SSH_AUTH,
                &[("ssh-privatekey", "k")],
                "without known_hosts: add the server's host key",
            ),
            (
                "ssh",
                SSH_AUTH,
                &[
                    ("ssh-privatekey", "k"),
                    ("known_hosts", "# only\nhost ssh-ed25519 !!\n"),
                ],
                "known_hosts line 2: the ssh-ed25519 key is not base64",
            ),
            (
                "https",
                "Opaque",
                &[("password", "pw-7f3a")],
                "type Opaque: a GitRepo's credentials",
            ),
        ];
        for (scheme, kind, pairs, want) in cases {
            let err = from_secret("Secret a/b".into(), scheme, kind, &data(pairs)).unwrap_err();
            assert!(err.starts_with("Secret a/b: "), "{err}");
            assert!(err.contains(want), "{want}: {err}");
            assert!(!err.contains("pw-7f3a"), "a value leaked: {err}");
        }
    }
}
