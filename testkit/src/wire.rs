//! Recorded wire fixtures: the messages a released agent sent, kept as files so that every
//! later build can be tested against them (issue 49 §6.6).
//!
//! A recording is a directory `testkit/fixtures/wire/<release>/` holding `MANIFEST.json` and
//! one `<name>.bin` per message: the payload exactly as it was published (an encoded
//! CloudEvent), with the subject, reply subject and headers it was published with in the
//! manifest. Nothing is decoded here: a test replays the bytes, so a change to the current
//! code that no longer reads what the release sent fails the test instead of being re-encoded
//! away. `hub/examples/record_wire.rs` writes a recording; it is re-run only at a release.

use bytes::Bytes;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// One message as the agent published it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The name the scenario gave it (`register`, `lease`, `resync-digest`, …): its file is
    /// `<name>.bin`.
    pub name: String,
    /// What the step was, for a reader of the manifest.
    pub about: String,
    /// The subject it was published on.
    pub subject: String,
    /// Its reply subject, when it was a request (or a JetStream publish awaiting its ack).
    pub reply: Option<String>,
    /// Its headers, in order.
    pub headers: Vec<(String, String)>,
    /// The payload, byte for byte.
    pub payload: Bytes,
}

/// A release's recorded messages, in the order they were sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    /// The release (`0.1`): the directory's name is `v<release>`.
    pub release: String,
    /// How and from what it was recorded (the commit, the scenario).
    pub note: String,
    /// The messages.
    pub messages: Vec<Message>,
}

/// The directory of `release`'s recording in this repository.
pub fn dir(release: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/wire")
        .join(format!("v{release}"))
}

impl Recording {
    /// Loads `release`'s recording from [`dir`]; a missing or malformed file panics naming it
    /// (a fixture of the suite, not input).
    pub fn load(release: &str) -> Self {
        Self::load_from(&dir(release))
    }

    /// Loads a recording from `dir`.
    pub fn load_from(dir: &Path) -> Self {
        let path = dir.join("MANIFEST.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (record it: see its README)", path.display()));
        let manifest: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
        let field = |v: &Value, key: &str| -> String {
            v[key]
                .as_str()
                .unwrap_or_else(|| panic!("{}: {key:?} is not a string in {v}", path.display()))
                .to_string()
        };
        let messages = manifest["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no \"messages\" array", path.display()))
            .iter()
            .map(|m| {
                let name = field(m, "name");
                let file = dir.join(format!("{name}.bin"));
                let payload =
                    std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                let headers = m["headers"]
                    .as_array()
                    .map(|hs| {
                        hs.iter()
                            .map(|h| (field(h, "name"), field(h, "value")))
                            .collect()
                    })
                    .unwrap_or_default();
                Message {
                    about: field(m, "about"),
                    subject: field(m, "subject"),
                    reply: m["reply"].as_str().map(str::to_string),
                    headers,
                    payload: payload.into(),
                    name,
                }
            })
            .collect();
        Self {
            release: field(&manifest, "release"),
            note: field(&manifest, "note"),
            messages,
        }
    }

    /// The message named `name`; panics listing the names there are.
    pub fn get(&self, name: &str) -> &Message {
        self.messages
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| {
                let names: Vec<&str> = self.messages.iter().map(|m| m.name.as_str()).collect();
                panic!(
                    "no message {name:?} in the v{} recording (it has {names:?})",
                    self.release
                )
            })
    }

    /// Writes the recording into `dir` (created if missing): `MANIFEST.json` and a `.bin` per
    /// message. Names must be unique and plain (letters, digits, `-`).
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut seen = std::collections::BTreeSet::new();
        for m in &self.messages {
            let plain = !m.name.is_empty()
                && m.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !plain || !seen.insert(m.name.as_str()) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("message name {:?} is not plain or not unique", m.name),
                ));
            }
            std::fs::write(dir.join(format!("{}.bin", m.name)), &m.payload)?;
        }
        let messages: Vec<Value> = self
            .messages
            .iter()
            .map(|m| {
                json!({
                    "name": m.name,
                    "about": m.about,
                    "subject": m.subject,
                    "reply": m.reply,
                    "headers": m.headers.iter()
                        .map(|(n, v)| json!({"name": n, "value": v}))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let manifest = json!({
            "release": self.release,
            "note": self.note,
            "messages": messages,
        });
        let text = serde_json::to_string_pretty(&manifest).map_err(std::io::Error::other)?;
        std::fs::write(dir.join("MANIFEST.json"), text + "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_reads_back_byte_for_byte_and_refuses_a_name_that_is_not_a_plain_file_name() {
        let dir = tempfile::tempdir().unwrap();
        let recording = Recording {
            release: "0.1".into(),
            note: "test".into(),
            messages: vec![Message {
                name: "register".into(),
                about: "the first registration".into(),
                subject: "flotilla.register.c1".into(),
                reply: Some("flotilla.to.c1.reply.abc".into()),
                headers: vec![("Nats-Msg-Id".into(), "x".into())],
                payload: Bytes::from_static(b"\x00\x01\xff"),
            }],
        };
        recording.save(dir.path()).unwrap();
        assert_eq!(Recording::load_from(dir.path()), recording);

        let mut bad = recording.clone();
        bad.messages[0].name = "../escape".into();
        let err = bad.save(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not plain"), "{err}");
    }
}
