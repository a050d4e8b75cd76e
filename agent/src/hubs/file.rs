//! The hubs file (`flotilla-agent --hubs FILE`): the hubs an agent may register with, in the
//! order it tries them (OCM's `bootstrapKubeConfigs.localSecretsConfig.kubeConfigSecrets`).
//!
//! ```yaml
//! hubs:
//!   - name: hub-a                       # DNS-1123 label; the hub's state is STATE_DIR/hubs/hub-a
//!     natsUrl: tls://hub-a.example:4222
//!     ca: hub-a/ca.pem                  # the CA of hub A's NATS server (required in secure mode over TLS)
//!     bootstrapCreds: hub-a/bootstrap.creds   # optional: secure mode on hub A
//!     tlsFirst: true                    # optional: hub A's server starts TLS first
//!   - name: hub-b
//!     natsUrl: tls://hub-b.example:4222
//! ```
//!
//! Relative paths are read from the file's directory. Every problem is reported at once, each
//! naming its entry and field.

use super::HubEndpoint;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    hubs: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Entry {
    name: String,
    nats_url: String,
    #[serde(default)]
    ca: Option<PathBuf>,
    #[serde(default)]
    bootstrap_creds: Option<PathBuf>,
    #[serde(default)]
    tls_first: bool,
}

/// Reads and checks the hubs file at `path`.
pub fn read(path: &Path) -> Result<Vec<HubEndpoint>, Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![format!("--hubs {}: {e}", path.display())])?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, base).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| format!("--hubs {}: {e}", path.display()))
            .collect()
    })
}

/// Parses a hubs file whose relative paths are relative to `base`.
pub fn parse(text: &str, base: &Path) -> Result<Vec<HubEndpoint>, Vec<String>> {
    let file: File = serde_yaml::from_str(text).map_err(|e| vec![e.to_string()])?;
    let mut errors = Vec::new();
    if file.hubs.len() < 2 {
        errors.push(format!(
            "hubs: {} listed, at least 2 needed (one hub needs no hubs file: use --nats-url)",
            file.hubs.len()
        ));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, e) in file.hubs.into_iter().enumerate() {
        if let Err(err) =
            flotilla_api::names::validate_dns1123_label(&format!("hubs[{i}].name"), &e.name)
        {
            errors.push(err.to_string());
        }
        if !seen.insert(e.name.clone()) {
            errors.push(format!("hubs[{i}].name: {:?} is listed twice", e.name));
        }
        if e.nats_url.trim().is_empty() {
            errors.push(format!("hubs[{i}].natsUrl: empty"));
        }
        let ca = e.ca.map(|p| base.join(p));
        let secure = e.bootstrap_creds.is_some();
        match flotilla_bus::connect::check_transport(&e.nats_url, ca.is_some(), secure) {
            Ok(warnings) => {
                for w in warnings {
                    tracing::warn!(hub = %e.name, "{w}");
                }
            }
            Err(err) => errors.push(format!("hubs[{i}].natsUrl: {err}")),
        }
        for (field, file) in [("ca", &ca), ("bootstrapCreds", &e.bootstrap_creds)] {
            if let Some(p) = file.as_ref().map(|p| base.join(p))
                && !p.is_file()
            {
                errors.push(format!("hubs[{i}].{field}: {} is not a file", p.display()));
            }
        }
        out.push(HubEndpoint {
            name: e.name,
            nats_url: e.nats_url,
            ca,
            bootstrap_creds: e.bootstrap_creds.map(|p| base.join(p)),
            tls_first: e.tls_first,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hubs_file_lists_hubs_in_order_with_paths_from_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), "x").unwrap();
        std::fs::write(dir.path().join("a.creds"), "x").unwrap();
        let hubs = parse(
            "hubs:\n- {name: hub-a, natsUrl: 'tls://a:4222', ca: ca.pem, bootstrapCreds: a.creds}\n\
             - {name: hub-b, natsUrl: 'nats://b:4222'}\n",
            dir.path(),
        )
        .unwrap();
        assert_eq!(hubs.len(), 2);
        assert_eq!(hubs[0].name, "hub-a");
        assert_eq!(
            hubs[0].ca.as_deref(),
            Some(dir.path().join("ca.pem").as_path())
        );
        assert_eq!(
            hubs[0].bootstrap_creds.as_deref(),
            Some(dir.path().join("a.creds").as_path())
        );
        assert_eq!(
            (hubs[1].name.as_str(), hubs[1].ca.as_ref()),
            ("hub-b", None)
        );
    }

    #[test]
    fn every_problem_of_a_hubs_file_is_named_by_entry_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let errors = parse(
            "hubs:\n- {name: Hub_A, natsUrl: 'nats://a:4222', ca: missing.pem}\n\
             - {name: Hub_A, natsUrl: ''}\n",
            dir.path(),
        )
        .unwrap_err();
        let all = errors.join("\n");
        assert!(all.contains("hubs[0].name"), "{all}");
        assert!(
            all.contains("hubs[1].name: \"Hub_A\" is listed twice"),
            "{all}"
        );
        assert!(all.contains("hubs[1].natsUrl: empty"), "{all}");
        assert!(
            all.contains("hubs[0].ca:") && all.contains("is not a file"),
            "{all}"
        );
        let one = parse("hubs:\n- {name: a, natsUrl: 'nats://a:4222'}\n", dir.path()).unwrap_err();
        assert!(one[0].contains("at least 2"), "{one:?}");
        let unknown = parse(
            "hubs:\n- {name: a, natsUrl: 'nats://a:4222', url: x}\n",
            dir.path(),
        )
        .unwrap_err();
        assert!(unknown[0].contains("unknown field `url`"), "{unknown:?}");
    }
}
