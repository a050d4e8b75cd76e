//! `known_hosts` as OpenSSH writes it (`ssh-keyscan`, `~/.ssh/known_hosts`): which host keys an
//! `ssh://` repository's server may present. Pure: the hub parses a Secret's `known_hosts` when
//! it reads the Secret (so a bad line is named in the GitRepo's status before any fetch), the
//! worker parses it again and checks the key the server presented. There is no trust on first
//! use: a host with no line is refused.
//!
//! Taken: host patterns (`host`, `[host]:port`, comma lists, `*` and `?` wildcards, `!` negation),
//! hashed hosts (`|1|salt|hash`, `ssh-keyscan -H`), `@revoked` lines (a key on one is refused
//! even when another line names it). Refused by line number: `@cert-authority` (host
//! certificates are not taken), a key that is not base64, a line with too few fields.

use data_encoding::BASE64;
use hmac::{Hmac, Mac};
use sha1::Sha1;

/// Bytes of a `known_hosts` text, at most (a few hundred hosts).
pub const MAX_BYTES: usize = 256 * 1024;

/// The port `ssh://` uses when the URL names none; `known_hosts` writes it bare.
pub const DEFAULT_PORT: u16 = 22;

/// One usable line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The line's number (1-based), for messages.
    pub line: usize,
    /// Which hosts it names.
    pub hosts: Hosts,
    /// `@revoked`: this key is refused for these hosts.
    pub revoked: bool,
    /// The key's algorithm name (`ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`, …).
    pub algorithm: String,
    /// The key in SSH wire encoding (the base64 field, decoded).
    pub key: Vec<u8>,
}

/// The host field of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hosts {
    /// Comma-separated patterns.
    Patterns(Vec<String>),
    /// `|1|salt|hash`: HMAC-SHA1 of the host name under the salt.
    Hashed {
        /// The salt (the HMAC key).
        salt: Vec<u8>,
        /// The HMAC.
        hash: Vec<u8>,
    },
}

/// A line that cannot be used, with its number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("known_hosts line {line}: {why}")]
pub struct LineError {
    /// The line's number (1-based).
    pub line: usize,
    /// What is wrong with it.
    pub why: String,
}

/// Every usable line of `text`, or the first that is not (comments and blank lines skipped).
pub fn parse(text: &str) -> Result<Vec<Entry>, LineError> {
    if text.len() > MAX_BYTES {
        return Err(LineError {
            line: 0,
            why: format!("{} bytes; at most {MAX_BYTES}", text.len()),
        });
    }
    let mut entries = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        entries.push(parse_line(line, trimmed)?);
    }
    Ok(entries)
}

fn parse_line(line: usize, text: &str) -> Result<Entry, LineError> {
    let err = |why: String| LineError { line, why };
    let mut fields = text.split_whitespace();
    let mut first = fields.next().unwrap_or_default();
    let mut revoked = false;
    if let Some(marker) = first.strip_prefix('@') {
        match marker {
            "revoked" => revoked = true,
            "cert-authority" => {
                return Err(err(
                    "@cert-authority: host certificates are not taken; list the host's own key"
                        .into(),
                ));
            }
            other => return Err(err(format!("unknown marker @{other}"))),
        }
        first = fields.next().unwrap_or_default();
    }
    let (Some(algorithm), Some(key)) = (fields.next(), fields.next()) else {
        return Err(err(
            "expected `<hosts> <key type> <base64 key>` (as ssh-keyscan prints)".into(),
        ));
    };
    let key = BASE64
        .decode(key.as_bytes())
        .map_err(|e| err(format!("the {algorithm} key is not base64: {e}")))?;
    if wire_algorithm(&key).as_deref() != Some(algorithm) {
        return Err(err(format!(
            "the key's type field says {algorithm} but the key itself is not one"
        )));
    }
    Ok(Entry {
        line,
        hosts: hosts(first).map_err(err)?,
        revoked,
        algorithm: algorithm.to_owned(),
        key,
    })
}

fn hosts(field: &str) -> Result<Hosts, String> {
    if let Some(rest) = field.strip_prefix("|1|") {
        let (salt, hash) = rest
            .split_once('|')
            .ok_or_else(|| "a hashed host without its hash (|1|salt|hash)".to_owned())?;
        let decode = |s: &str, what: &str| {
            BASE64
                .decode(s.as_bytes())
                .map_err(|e| format!("the hashed host's {what} is not base64: {e}"))
        };
        return Ok(Hosts::Hashed {
            salt: decode(salt, "salt")?,
            hash: decode(hash, "hash")?,
        });
    }
    if field.starts_with('|') {
        return Err("a hashed host of an unknown kind (only |1| is)".into());
    }
    let patterns: Vec<String> = field.split(',').map(str::to_owned).collect();
    if patterns.iter().any(String::is_empty) {
        return Err(format!("an empty host pattern in {field:?}"));
    }
    Ok(Hosts::Patterns(patterns))
}

/// The algorithm name an SSH wire-encoded key starts with.
fn wire_algorithm(key: &[u8]) -> Option<String> {
    let len = u32::from_be_bytes(key.get(..4)?.try_into().ok()?) as usize;
    let name = key.get(4..4 + len)?;
    String::from_utf8(name.to_vec()).ok()
}

/// How `known_hosts` names `host` on `port`: bare on 22, `[host]:port` elsewhere.
pub fn host_name(host: &str, port: u16) -> String {
    if port == DEFAULT_PORT {
        host.to_owned()
    } else {
        format!("[{host}]:{port}")
    }
}

impl Entry {
    /// Whether this line is about `name` (from [`host_name`]).
    pub fn names(&self, name: &str) -> bool {
        match &self.hosts {
            Hosts::Hashed { salt, hash } => {
                let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(salt) else {
                    return false;
                };
                // OpenSSH hashes the host name lower-cased.
                mac.update(name.to_ascii_lowercase().as_bytes());
                mac.verify_slice(hash).is_ok()
            }
            Hosts::Patterns(patterns) => {
                let name = name.to_ascii_lowercase();
                let mut matched = false;
                for p in patterns {
                    let (negated, p) = match p.strip_prefix('!') {
                        Some(p) => (true, p),
                        None => (false, p.as_str()),
                    };
                    if glob(&p.to_ascii_lowercase(), &name) {
                        if negated {
                            return false;
                        }
                        matched = true;
                    }
                }
                matched
            }
        }
    }
}

/// What the lines say about a key presented by a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A line names the host with this key, and none revokes it.
    Trusted,
    /// A `@revoked` line names this key for the host.
    Revoked {
        /// The revoking line.
        line: usize,
    },
    /// Lines name the host, none with this key (a changed key, or a man in the middle).
    Mismatch {
        /// The algorithms the lines for this host hold.
        known: Vec<String>,
    },
    /// No line names the host.
    Unknown,
}

/// Checks the key (`algorithm`, wire encoding) `name` presented against `entries`.
pub fn check(entries: &[Entry], name: &str, algorithm: &str, key: &[u8]) -> Verdict {
    let mine: Vec<&Entry> = entries.iter().filter(|e| e.names(name)).collect();
    if let Some(r) = mine.iter().find(|e| e.revoked && e.key == key) {
        return Verdict::Revoked { line: r.line };
    }
    let trusted: Vec<&&Entry> = mine.iter().filter(|e| !e.revoked).collect();
    if trusted.is_empty() {
        return Verdict::Unknown;
    }
    if trusted
        .iter()
        .any(|e| e.algorithm == algorithm && e.key == key)
    {
        return Verdict::Trusted;
    }
    let mut known: Vec<String> = trusted.iter().map(|e| e.algorithm.clone()).collect();
    known.sort();
    known.dedup();
    Verdict::Mismatch { known }
}

/// OpenSSH's pattern match: `*` any run, `?` any one character.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests;
