//! The grants file (`--grants-file`): YAML `kind: Grants` mapping users and groups to roles on
//! the fleet, on cluster sets and on namespaces (docs/notes/issue-48-design.md §3.2). Pure: the
//! caller reads the bytes ([`load`] is the one-line exception, for the hub's flags).
//!
//! ```yaml
//! apiVersion: flotilla.io/v1alpha1
//! kind: Grants
//! fleet:
//!   admin: { groups: [platform-admins], users: ["https://idp.example#ops-oncall"] }
//!   view:  { groups: [auditors] }
//! clusterSets:
//!   team-a:
//!     admin: { groups: [team-a-sre] }
//!     bind:  { groups: [team-a-leads] }
//!     view:  { groups: [team-a-dev] }
//! namespaces:
//!   team-a-apps:
//!     edit: { groups: [team-a-dev, team-a-sre] }
//! ```
//!
//! A file that is not YAML of this shape is refused at the first such error, with its line,
//! column and YAML path (`grants.yaml:14:5: clusterSets.team-a: unknown field `edits`, …`);
//! a file of the right shape whose names are wrong is refused with every wrong name at once,
//! each with its path. Sets and namespaces that do not exist (yet) may be granted.

use super::{FleetRole, Grant, Grants, Held, NamespaceRole, SetRole, Subject};
use flotilla_api::names::{self, NameError};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

/// The `apiVersion` a grants file must have.
pub const API_VERSION: &str = "flotilla.io/v1alpha1";
/// The `kind` a grants file must have.
pub const KIND: &str = "Grants";
/// The largest grants file read (bytes).
pub const MAX_BYTES: usize = 1 << 20;
/// The most distinct subjects (users and groups) one file may name.
pub const MAX_SUBJECTS: usize = 10_000;
/// The most (subject, role, target) entries one file may hold.
pub const MAX_ENTRIES: usize = 100_000;
/// The longest user or group name (bytes).
pub const MAX_SUBJECT_LEN: usize = 1_024;

/// A grants file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// It is larger than [`MAX_BYTES`].
    #[error("{path}: {size} bytes, at most {MAX_BYTES} allowed")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: usize,
    },
    /// It is not YAML of the grants file's shape (the first such error).
    #[error("{path}:{line}:{column}: {message}")]
    Yaml {
        /// The file.
        path: String,
        /// 1-based line of the error (0 when the parser gave none).
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message, with the YAML path of the value it refused.
        message: String,
    },
    /// Its shape is right but names or limits are wrong: every error, each with its YAML path.
    #[error("{}", lines(.path, .errors))]
    Invalid {
        /// The file.
        path: String,
        /// Every error found.
        errors: Vec<Invalid>,
    },
}

fn lines(path: &str, errors: &[Invalid]) -> String {
    errors
        .iter()
        .map(|e| format!("{path}: {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One thing wrong in a grants file of the right shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// `apiVersion` is not [`API_VERSION`].
    #[error("apiVersion: {0:?} is not {API_VERSION:?}")]
    ApiVersion(String),
    /// `kind` is not [`KIND`].
    #[error("kind: {0:?} is not {KIND:?}")]
    Kind(String),
    /// A set or namespace name that breaks the DNS-1123 label rule; its field is the YAML path.
    #[error(transparent)]
    Name(NameError),
    /// A user or group name that is empty, too long, padded with spaces or has control
    /// characters.
    #[error("{at}: {got:?} is not a {what} name")]
    Subject {
        /// The YAML path (`clusterSets.team-a.admin.groups[2]`).
        at: String,
        /// `user` or `group`.
        what: &'static str,
        /// The name as written.
        got: String,
    },
    /// More subjects or entries than the limits allow.
    #[error("{count} {what} in all, at most {limit} allowed")]
    TooMany {
        /// `subjects` or `entries`.
        what: &'static str,
        /// How many the file has.
        count: usize,
        /// The limit.
        limit: usize,
    },
}

/// Reads and parses the grants file at `path`.
pub fn load(path: &Path) -> Result<Grants, FileError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| FileError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&shown, &bytes)
}

/// Parses the bytes of a grants file named `path` (for messages).
pub fn parse(path: &str, bytes: &[u8]) -> Result<Grants, FileError> {
    if bytes.len() > MAX_BYTES {
        return Err(FileError::TooLarge {
            path: path.into(),
            size: bytes.len(),
        });
    }
    let doc: Doc = serde_yaml::from_slice(bytes).map_err(|e| yaml_error(path, &e))?;
    let mut errors = Vec::new();
    let entries = doc.entries(&mut errors);
    let subjects: std::collections::HashSet<&Subject> = entries.iter().map(|(s, _)| s).collect();
    if subjects.len() > MAX_SUBJECTS {
        errors.push(Invalid::TooMany {
            what: "subjects",
            count: subjects.len(),
            limit: MAX_SUBJECTS,
        });
    }
    if entries.len() > MAX_ENTRIES {
        errors.push(Invalid::TooMany {
            what: "entries",
            count: entries.len(),
            limit: MAX_ENTRIES,
        });
    }
    if !errors.is_empty() {
        return Err(FileError::Invalid {
            path: path.into(),
            errors,
        });
    }
    Ok(from_entries(entries))
}

/// The parser's error with its position taken out of the text and put in front.
fn yaml_error(path: &str, e: &serde_yaml::Error) -> FileError {
    let text = e.to_string();
    let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
    let suffix = format!(" at line {line} column {column}");
    let message = match text.find(&suffix) {
        Some(at) => format!("{}{}", &text[..at], &text[at + suffix.len()..]),
        None => text,
    };
    FileError::Yaml {
        path: path.into(),
        line,
        column,
        message,
    }
}

/// Grants from (subject, grant) entries: duplicates counted once, the higher role kept.
pub(super) fn from_entries(mut entries: Vec<(Subject, Grant)>) -> Grants {
    entries.sort();
    entries.dedup();
    let mut by_subject: HashMap<Subject, Held> = HashMap::new();
    let mut canonical = Sha256::new();
    for (subject, grant) in &entries {
        let (kind, who) = match subject {
            Subject::User(u) => ("user", u),
            Subject::Group(g) => ("group", g),
        };
        // Length-prefixed fields: no name can make two different files hash alike.
        let granted = grant.to_string();
        for field in [kind, &**who, granted.as_str()] {
            canonical.update((field.len() as u64).to_be_bytes());
            canonical.update(field.as_bytes());
        }
        let held = by_subject.entry(subject.clone()).or_default();
        let mut one = Held::default();
        match grant {
            Grant::Fleet(role) => one.fleet = Some(*role),
            Grant::Set { name, role } => {
                one.sets.insert(name.clone(), *role);
            }
            Grant::Namespace { name, role } => {
                one.namespaces.insert(name.clone(), *role);
            }
        }
        held.merge(&one);
    }
    Grants {
        by_subject,
        entries: entries.len(),
        digest: canonical.finalize().into(),
    }
}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Doc {
    api_version: String,
    kind: String,
    #[serde(default)]
    fleet: FleetDoc,
    #[serde(default)]
    cluster_sets: BTreeMap<String, SetDoc>,
    #[serde(default)]
    namespaces: BTreeMap<String, NamespaceDoc>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FleetDoc {
    admin: Option<SubjectsDoc>,
    view: Option<SubjectsDoc>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SetDoc {
    admin: Option<SubjectsDoc>,
    bind: Option<SubjectsDoc>,
    view: Option<SubjectsDoc>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NamespaceDoc {
    admin: Option<SubjectsDoc>,
    edit: Option<SubjectsDoc>,
    view: Option<SubjectsDoc>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SubjectsDoc {
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    groups: Vec<String>,
}

impl Doc {
    /// Every (subject, grant) entry, with every wrong name pushed to `errors`.
    fn entries(&self, errors: &mut Vec<Invalid>) -> Vec<(Subject, Grant)> {
        if self.api_version != API_VERSION {
            errors.push(Invalid::ApiVersion(self.api_version.clone()));
        }
        if self.kind != KIND {
            errors.push(Invalid::Kind(self.kind.clone()));
        }
        let mut out = Vec::new();
        let mut add = |at: String, subjects: &Option<SubjectsDoc>, grant: Grant| {
            if let Some(s) = subjects {
                s.entries(&at, &grant, &mut out, errors);
            }
        };
        add(
            "fleet.admin".into(),
            &self.fleet.admin,
            Grant::Fleet(FleetRole::Admin),
        );
        add(
            "fleet.view".into(),
            &self.fleet.view,
            Grant::Fleet(FleetRole::View),
        );
        for (name, doc) in &self.cluster_sets {
            let at = format!("clusterSets.{}", key(name));
            let set = |role| Grant::Set {
                name: name.as_str().into(),
                role,
            };
            add(format!("{at}.admin"), &doc.admin, set(SetRole::Admin));
            add(format!("{at}.bind"), &doc.bind, set(SetRole::Bind));
            add(format!("{at}.view"), &doc.view, set(SetRole::View));
        }
        for (name, doc) in &self.namespaces {
            let at = format!("namespaces.{}", key(name));
            let namespace = |role| Grant::Namespace {
                name: name.as_str().into(),
                role,
            };
            add(
                format!("{at}.admin"),
                &doc.admin,
                namespace(NamespaceRole::Admin),
            );
            add(
                format!("{at}.edit"),
                &doc.edit,
                namespace(NamespaceRole::Edit),
            );
            add(
                format!("{at}.view"),
                &doc.view,
                namespace(NamespaceRole::View),
            );
        }
        // Set names are values of the exclusive set label, as `ClusterSets::validate_set`
        // checks them: DNS-1123 labels, like namespaces.
        let sets = self.cluster_sets.keys().map(|n| ("clusterSets", n));
        let namespaces = self.namespaces.keys().map(|n| ("namespaces", n));
        for (section, name) in sets.chain(namespaces) {
            let at = format!("{section}.{}", key(name));
            if let Err(e) = names::validate_dns1123_label(&at, name) {
                errors.push(Invalid::Name(e));
            }
        }
        out
    }
}

impl SubjectsDoc {
    fn entries(
        &self,
        at: &str,
        grant: &Grant,
        out: &mut Vec<(Subject, Grant)>,
        errors: &mut Vec<Invalid>,
    ) {
        let users = self.users.iter().map(|u| ("user", "users", u));
        let groups = self.groups.iter().map(|g| ("group", "groups", g));
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (what, list, name) in users.chain(groups) {
            let i = index.entry(list).or_default();
            let here = format!("{at}.{list}[{i}]");
            *i += 1;
            if !subject_name_ok(name) {
                errors.push(Invalid::Subject {
                    at: here,
                    what,
                    got: name.clone(),
                });
                continue;
            }
            let subject = match what {
                "user" => Subject::User(name.as_str().into()),
                _ => Subject::Group(name.as_str().into()),
            };
            out.push((subject, grant.clone()));
        }
    }
}

/// A user or group name: not empty, not padded, at most [`MAX_SUBJECT_LEN`] bytes, no control
/// characters (names come from a CSV file or an identity provider's claims, which allow much).
fn subject_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SUBJECT_LEN
        && name.trim() == name
        && !name.chars().any(char::is_control)
}

/// A map key as it appears in a YAML path: bare when it is a plain name, quoted otherwise.
fn key(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if plain {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

/// The grants' entries as a YAML grants file (tests and the testkit's builder write files with
/// it; the digest of what it writes equals the digest of `grants`' entries).
pub fn to_yaml(entries: &[(Subject, Grant)]) -> String {
    let mut fleet: BTreeMap<String, Lists> = BTreeMap::new();
    let mut sets: BTreeMap<String, BTreeMap<String, Lists>> = BTreeMap::new();
    let mut namespaces: BTreeMap<String, BTreeMap<String, Lists>> = BTreeMap::new();
    for (subject, grant) in entries {
        let lists = match grant {
            Grant::Fleet(role) => fleet.entry(role.to_string()).or_default(),
            Grant::Set { name, role } => sets
                .entry(name.to_string())
                .or_default()
                .entry(role.to_string())
                .or_default(),
            Grant::Namespace { name, role } => namespaces
                .entry(name.to_string())
                .or_default()
                .entry(role.to_string())
                .or_default(),
        };
        match subject {
            Subject::User(u) => lists.users.push(u.to_string()),
            Subject::Group(g) => lists.groups.push(g.to_string()),
        }
    }
    let mut out = format!("apiVersion: {API_VERSION}\nkind: {KIND}\n");
    if !fleet.is_empty() {
        out.push_str("fleet:\n");
        for (role, lists) in &fleet {
            out.push_str(&format!("  {role}: {}\n", lists.flow()));
        }
    }
    for (section, targets) in [("clusterSets", &sets), ("namespaces", &namespaces)] {
        if targets.is_empty() {
            continue;
        }
        out.push_str(&format!("{section}:\n"));
        for (name, roles) in targets {
            out.push_str(&format!("  {}:\n", json(name)));
            for (role, lists) in roles {
                out.push_str(&format!("    {role}: {}\n", lists.flow()));
            }
        }
    }
    out
}

#[derive(Default)]
struct Lists {
    users: Vec<String>,
    groups: Vec<String>,
}

impl Lists {
    /// `{ users: ["a"], groups: ["b"] }` (JSON strings are YAML flow scalars).
    fn flow(&self) -> String {
        let list = |v: &[String]| {
            v.iter()
                .map(|s| json(s.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{{ users: [{}], groups: [{}] }}",
            list(&self.users),
            list(&self.groups)
        )
    }
}

fn json(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Builds grants in tests: `Builder::default().set("team-a", SetRole::Admin, group("sre"))`.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    entries: Vec<(Subject, Grant)>,
}

impl Builder {
    /// `role` on the fleet for `subject`.
    pub fn fleet(mut self, role: FleetRole, subject: Subject) -> Self {
        self.entries.push((subject, Grant::Fleet(role)));
        self
    }

    /// `role` on cluster set `name` for `subject`.
    pub fn set(mut self, name: &str, role: SetRole, subject: Subject) -> Self {
        let name = Arc::from(name);
        self.entries.push((subject, Grant::Set { name, role }));
        self
    }

    /// `role` on namespace `name` for `subject`.
    pub fn namespace(mut self, name: &str, role: NamespaceRole, subject: Subject) -> Self {
        let name = Arc::from(name);
        self.entries
            .push((subject, Grant::Namespace { name, role }));
        self
    }

    /// The grants.
    pub fn build(self) -> Grants {
        from_entries(self.entries)
    }

    /// The grants as a file's text.
    pub fn to_yaml(&self) -> String {
        to_yaml(&self.entries)
    }
}

/// A user subject.
pub fn user(name: &str) -> Subject {
    Subject::User(name.into())
}

/// A group subject.
pub fn group(name: &str) -> Subject {
    Subject::Group(name.into())
}
