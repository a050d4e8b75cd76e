//! `kubeconfig CLUSTER [--server URL] [--service-account [NS/]NAME]`: a kubeconfig for the
//! hub's cluster proxy (`flotilla-hub --cluster-proxy-listen`), so `kubectl` reaches the
//! cluster through the hub with the caller's own token (`--token` / `FLOTILLA_TOKEN`) and
//! rights — written from the flags alone — or, with `--service-account`, with the current
//! token of that ManagedServiceAccount (asked of the hub with the caller's token): the spoke
//! then authenticates the ServiceAccount, and its RBAC decides.

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;

/// Where a hub's cluster proxy is by default (the address the docs and the demo use).
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:6443";

/// `kubeconfig` flags.
#[derive(Args, Debug)]
pub struct KubeconfigArgs {
    /// The cluster.
    pub cluster: String,
    /// The hub's cluster proxy (its --cluster-proxy-listen address): https:// (kubectl sends
    /// tokens only over TLS; --ca names the CA of its certificate), or http:// on loopback for
    /// a hub without tokens.
    #[arg(long, env = "FLOTILLA_CLUSTER_PROXY", default_value = DEFAULT_SERVER)]
    pub server: String,
    /// Use the token of this ManagedServiceAccount of the cluster (`NAME`, or `NS/NAME` where
    /// NS is its namespace — the cluster's name) instead of your own; the hub hands it to
    /// admins and to deployers that may act as its ServiceAccount.
    #[arg(long, value_name = "[NS/]NAME")]
    pub service_account: Option<String>,
}

/// The ManagedServiceAccount `--service-account` names: its name, checked against the
/// cluster (a ManagedServiceAccount lives in its cluster's namespace).
pub fn service_account_name(cluster: &str, flag: &str) -> Result<String> {
    let name = match flag.split_once('/') {
        Some((ns, name)) if ns == cluster => name,
        Some((ns, _)) => bail!(
            "--service-account {flag:?}: a ManagedServiceAccount lives in its cluster's namespace, \
             so NS must be {cluster:?} (the cluster), not {ns:?}; or give the NAME alone"
        ),
        None => flag,
    };
    flotilla_api::names::validate_dns1123_label("--service-account", name)?;
    Ok(name.to_string())
}

/// What the kubeconfig carries besides the flags.
pub struct Secrets<'a> {
    /// The bearer token (none: an open hub, or the exec plugin's).
    pub token: Option<&'a str>,
    /// The exec credential plugin kubectl runs for a token (`--exec-command`, no `--token`).
    pub exec: Option<&'a crate::exec_credential::ExecPlugin>,
    /// PEM CA bundle that signs the proxy's certificate (`--ca`).
    pub ca_pem: Option<&'a [u8]>,
}

/// The kubeconfig (YAML), or why it cannot be written.
pub fn render(args: &KubeconfigArgs, secrets: &Secrets<'_>) -> Result<String> {
    flotilla_api::names::validate_cluster_name(&args.cluster)?;
    let server = args.server.trim_end_matches('/');
    if !(server.starts_with("http://") || server.starts_with("https://")) {
        bail!("--server {server:?}: want http://HOST:PORT or https://HOST:PORT");
    }
    if (secrets.token.is_some() || secrets.exec.is_some()) && server.starts_with("http://") {
        // kubectl (client-go) sends no credentials to a plain http:// server at all.
        bail!(
            "--server {server}: kubectl sends tokens only over TLS; serve the cluster proxy with \
             the API's certificate (--grpc-tls-cert, --grpc-tls-key) and use https:// with --ca"
        );
    }
    let name = format!("flotilla-{}", args.cluster);
    let mut cluster = json!({"server": format!("{server}/clusters/{}", args.cluster)});
    if let Some(pem) = secrets.ca_pem {
        cluster["certificate-authority-data"] = json!(base64(pem));
    }
    let user = match (secrets.token, secrets.exec) {
        (Some(t), _) => json!({"token": t}),
        (None, Some(exec)) => json!({"exec": exec_user(exec)}),
        (None, None) => json!({}),
    };
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": args.cluster, "context": {"cluster": name, "user": name}}],
        "current-context": args.cluster,
    });
    serde_yaml::to_string(&config).context("rendering the kubeconfig")
}

/// A kubeconfig `exec` user for `plugin` (client-go's `client.authentication.k8s.io/v1`).
fn exec_user(plugin: &crate::exec_credential::ExecPlugin) -> serde_json::Value {
    use crate::exec_credential::Interactive;
    let env: Vec<_> = (plugin.env.iter())
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": plugin.command,
        "args": plugin.args,
        "env": env,
        "interactiveMode": match plugin.interactive {
            Interactive::Never => "Never",
            Interactive::IfAvailable => "IfAvailable",
            Interactive::Always => "Always",
        },
        "provideClusterInfo": false,
    })
}

/// Standard base64 with padding (what kubeconfig `*-data` fields hold).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The current token of the ManagedServiceAccount `--service-account` names, from the hub.
pub async fn service_account_token(
    hub: &crate::hub::Hub,
    args: &KubeconfigArgs,
    flag: &str,
) -> Result<String> {
    let name = service_account_name(&args.cluster, flag)?;
    let answer = hub
        .idempotent(async || {
            hub.service_accounts()
                .get_managed_service_account_token(
                    flotilla_api::v1::GetManagedServiceAccountRequest {
                        namespace: args.cluster.clone(),
                        name: name.clone(),
                    },
                )
                .await
        })
        .await
        .with_context(|| format!("the token of ManagedServiceAccount {}/{name}", args.cluster))?;
    Ok(answer.token)
}

/// Prints the kubeconfig.
pub fn run(
    args: &KubeconfigArgs,
    token: Option<&str>,
    exec: Option<&crate::exec_credential::ExecPlugin>,
    ca: Option<&std::path::Path>,
) -> Result<()> {
    let ca_pem = match ca {
        Some(path) => {
            Some(std::fs::read(path).with_context(|| format!("--ca {}", path.display()))?)
        }
        None => None,
    };
    let text = render(
        args,
        &Secrets {
            token,
            exec,
            ca_pem: ca_pem.as_deref(),
        },
    )?;
    print!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cluster: &str, server: &str) -> KubeconfigArgs {
        KubeconfigArgs {
            cluster: cluster.into(),
            server: server.into(),
            service_account: None,
        }
    }

    const NONE: Secrets<'static> = Secrets {
        token: None,
        exec: None,
        ca_pem: None,
    };

    #[test]
    fn the_kubeconfig_points_at_the_clusters_path_with_the_callers_token() {
        let text = render(
            &args("edge-1", "https://127.0.0.1:6443/"),
            &Secrets {
                token: Some("tok-123"),
                exec: None,
                ca_pem: Some(b"pem"),
            },
        )
        .unwrap();
        let v: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443/clusters/edge-1"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority-data"],
            "cGVt"
        );
        assert_eq!(v["users"][0]["user"]["token"], "tok-123");
        assert_eq!(v["current-context"], "edge-1");
    }

    #[test]
    fn a_service_account_is_named_alone_or_in_its_clusters_namespace() {
        assert_eq!(service_account_name("edge-1", "sa").unwrap(), "sa");
        assert_eq!(service_account_name("edge-1", "edge-1/sa").unwrap(), "sa");
        let e = service_account_name("edge-1", "default/sa")
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be \"edge-1\""), "{e}");
        assert!(service_account_name("edge-1", "edge-1/Bad_Name").is_err());
    }

    #[test]
    fn bad_names_servers_and_cleartext_tokens_are_refused() {
        assert!(render(&args("Bad_Name", DEFAULT_SERVER), &NONE).is_err());
        // A cluster name is a DNS-1123 label: no dots, unlike an object name.
        assert!(render(&args("edge.one", DEFAULT_SERVER), &NONE).is_err());
        assert!(render(&args("edge-1", "127.0.0.1:6443"), &NONE).is_err());
        let token = Secrets {
            token: Some("t"),
            exec: None,
            ca_pem: None,
        };
        let e = render(&args("edge-1", "http://127.0.0.1:6443"), &token).unwrap_err();
        assert!(e.to_string().contains("only over TLS"), "{e}");
        assert!(render(&args("edge-1", "https://hub.example:6443"), &token).is_ok());
        assert!(render(&args("edge-1", "http://hub.example:6443"), &NONE).is_ok());
    }

    #[test]
    fn with_an_exec_plugin_the_kubeconfig_runs_it_and_holds_no_token() {
        // Review r3 §4: the plugin's ID token was written to disk and stopped working at its
        // expiry; kubectl runs the plugin itself instead.
        let plugin = crate::exec_credential::ExecPlugin {
            command: "kubectl".into(),
            args: vec!["oidc-login".into(), "get-token".into()],
            env: vec![("OIDC_ISSUER".into(), "https://idp.example".into())],
            interactive: crate::exec_credential::Interactive::IfAvailable,
        };
        let secrets = Secrets {
            token: None,
            exec: Some(&plugin),
            ca_pem: None,
        };
        let text = render(&args("edge-1", "https://hub.example:6443"), &secrets).unwrap();
        let doc: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        let user = &doc["users"][0]["user"];
        assert!(user.get("token").is_none(), "{text}");
        assert_eq!(
            user["exec"],
            json!({
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "kubectl",
                "args": ["oidc-login", "get-token"],
                "env": [{"name": "OIDC_ISSUER", "value": "https://idp.example"}],
                "interactiveMode": "IfAvailable",
                "provideClusterInfo": false,
            })
        );
        // kubectl runs no plugin for a plain http:// server either.
        let e = render(&args("edge-1", "http://127.0.0.1:6443"), &secrets).unwrap_err();
        assert!(e.to_string().contains("only over TLS"), "{e}");
    }

    #[test]
    fn base64_pads_like_the_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
    }
}
