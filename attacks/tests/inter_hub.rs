//! Issue 42: nothing secret crosses NATS in clear between the hubs of one control plane.
//!
//! Two hubs share a secure directory (each its own copy, as on two machines) and an API token
//! file. Someone holding `hub.creds` — or any way to read the hub account's traffic — records
//! every message of the account (`>`) while an operator works through the hub that does not
//! hold the controllers: `flotilla kubeconfig --service-account` (a ManagedServiceAccount's
//! token, answered by the controllers' hub) and `flotilla join-token` for clusters whose shard
//! the other hub holds (a join credential's seed, answered by the shard's hub). The capture must
//! show the calls crossing — and hold neither the operator's bearer token, nor a join seed, nor
//! the ManagedServiceAccount's token.

use flotilla_api::v1::{ClusterCall, cluster_call};
use flotilla_attacks::fleet::SOON;
use flotilla_attacks::{Attacker, Fleet, HubOptions, Server, on_every_server, wait_for};
use prost::Message as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ADMIN: &str = "inter-hub-admin-token-0123456789";
const FORWARD_SUBJECT: &str = "flotilla.hub.controllers.grpc";

const ACCOUNT: &str = "\
apiVersion: authentication.open-cluster-management.io/v1beta1
kind: ManagedServiceAccount
metadata:
  name: ops
  namespace: edge-1
spec:
  rotation:
    enabled: true
    validity: 8640h0m0s
";

/// Captured messages: subject, then payload and headers.
type Messages = Vec<(String, Vec<u8>)>;

/// Every message of the hub account, as `hub.creds` sees it.
#[derive(Clone, Default)]
struct Capture {
    messages: Arc<Mutex<Messages>>,
}

impl Capture {
    async fn start(fleet: &Fleet) -> (Self, Attacker) {
        let listener = match Attacker::connect(
            &fleet.nats_url(),
            &fleet.secure.join("hub.creds"),
            "_INBOX.capture",
            fleet.ca().as_deref(),
        )
        .await
        {
            Ok(a) => a,
            Err(e) => fleet.fail(&format!("connecting with hub.creds to capture: {e}")),
        };
        let mut all = match listener.client.subscribe(">").await {
            Ok(s) => s,
            Err(e) => fleet.fail(&format!("subscribing to > with hub.creds: {e}")),
        };
        if let Err(e) = listener.client.flush().await {
            fleet.fail(&format!("flushing the capture's subscription: {e}"));
        }
        let capture = Self::default();
        let sink = capture.messages.clone();
        tokio::spawn(async move {
            while let Some(msg) = futures::StreamExt::next(&mut all).await {
                let mut bytes = msg.payload.to_vec();
                // Headers too: a token in a header is as readable as in the payload.
                if let Some(headers) = &msg.headers {
                    for (name, values) in headers.iter() {
                        for value in values {
                            bytes.extend_from_slice(name.to_string().as_bytes());
                            bytes.extend_from_slice(value.as_str().as_bytes());
                        }
                    }
                }
                sink.lock()
                    .expect("capture lock")
                    .push((msg.subject.to_string(), bytes));
            }
        });
        (capture, listener)
    }

    fn snapshot(&self) -> Messages {
        self.messages.lock().expect("capture lock").clone()
    }

    /// The subjects of captured messages holding `secret`.
    fn holding(&self, secret: &str) -> Vec<String> {
        self.snapshot()
            .into_iter()
            .filter(|(_, payload)| {
                payload
                    .windows(secret.len())
                    .any(|w| w == secret.as_bytes())
            })
            .map(|(subject, _)| subject)
            .collect()
    }
}

/// The seed line of a credentials file the CLI printed.
fn seed(out: &str) -> Option<String> {
    let mut lines = out.lines();
    lines.find(|l| l.contains("BEGIN USER NKEY SEED"))?;
    lines
        .map(str::trim)
        .find(|l| l.starts_with("SU"))
        .map(str::to_string)
}

/// The `token:` of a kubeconfig.
fn kubeconfig_token(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("token:"))
        .map(|t| t.trim().trim_matches('\'').trim_matches('"').to_string())
        .find(|t| !t.is_empty())
}

on_every_server!(nothing_secret_crosses_nats_between_hubs);

/// Issue 42: the forwarding hub vouches for its caller instead of passing the token on, and
/// the answers carrying credentials — a ManagedServiceAccount token, a join credential — are
/// sealed to the asking hub.
async fn nothing_secret_crosses_nats_between_hubs(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    let tokens = fleet.dir().join("tokens.csv");
    if let Err(e) = std::fs::write(&tokens, format!("{ADMIN},alice,admin\n")) {
        fleet.fail(&format!("writing the token file: {e}"));
    }
    fleet.use_token(ADMIN);
    let options = HubOptions::new()
        .flag("--api-token-file", &tokens.display().to_string())
        .flag("--shard-lease-ttl-seconds", "3")
        .flag("--shard-lease-renew-seconds", "1");
    fleet.hub(options.clone()).await;
    fleet.accepted_agent("edge-1").await;
    fleet.apply(ACCOUNT).await;
    wait_for!(fleet, "edge-1/ops's token reported", SOON, {
        let out = fleet.cli(&["get", "managedserviceaccounts"]).await;
        (out.ok()
            && out
                .stdout
                .lines()
                .any(|l| l.contains("ops") && l.contains("True")))
        .then_some(())
    });

    // The second machine: its own copy of the secure directory (the sealing key among it).
    let other_secure = fleet.secure_copy("secure-b");
    let (capture, _listener) = Capture::start(&fleet).await;
    let b = fleet.other_hub(&other_secure, &options).await;

    // Through hub b: the controllers (on hub a, the first) hand out the account's token.
    let kubeconfig = wait_for!(fleet, "kubeconfig --service-account through hub b", SOON, {
        let out = fleet
            .cli_at(
                &b,
                &[
                    "kubeconfig",
                    "edge-1",
                    "--server",
                    "https://localhost:1",
                    "--service-account",
                    "ops",
                ],
            )
            .await;
        out.ok().then_some(out.stdout)
    });
    let Some(msa_token) = kubeconfig_token(&kubeconfig) else {
        fleet.fail(&format!("the kubeconfig has no token:\n{kubeconfig}"));
    };
    // Join credentials through both hubs, for clusters of shards either may hold: some are
    // issued by the other hub.
    let mut seeds = Vec::new();
    for i in 0..8 {
        for (api, hub) in [(fleet.hub_url(), "a"), (b.clone(), "b")] {
            let name = format!("join-{hub}-{i}");
            let out = fleet.cli_at(&api, &["join-token", &name]).await;
            fleet.check(out.ok(), || {
                format!(
                    "join-token {name} through hub {hub} failed: {}{}",
                    out.stderr, out.stdout
                )
            });
            match seed(&out.stdout) {
                Some(s) => seeds.push(s),
                None => fleet.fail(&format!(
                    "join-token {name} printed no seed:\n{}",
                    out.stdout
                )),
            }
        }
    }
    // Let the capture catch up with the last answers.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let seen = capture.snapshot();
    fleet.check(seen.iter().any(|(s, _)| s == FORWARD_SUBJECT), || {
        format!(
            "no call was forwarded between the hubs on {FORWARD_SUBJECT} ({} messages captured)",
            seen.len()
        )
    });
    let join_calls = seen
        .iter()
        .filter(|(s, _)| s.starts_with("flotilla.hub.shard."))
        .filter_map(|(_, p)| ClusterCall::decode(p.as_slice()).ok())
        .filter(|c| matches!(c.op, Some(cluster_call::Op::Join(_))))
        .count();
    fleet.check(join_calls > 0, || {
        "no join call crossed between the hubs: the test proves nothing about join seeds".into()
    });

    let mut leaks = Vec::new();
    for (what, secret) in [
        ("the operator's API token", ADMIN.to_string()),
        ("a bearer header", "Bearer ".to_string()),
        ("the ManagedServiceAccount's token", msa_token),
    ] {
        let subjects = capture.holding(&secret);
        if !subjects.is_empty() {
            leaks.push(format!("{what} in clear on {subjects:?}"));
        }
    }
    for seed in &seeds {
        let subjects = capture.holding(seed);
        if !subjects.is_empty() {
            leaks.push(format!(
                "a join credential's seed ({}…) in clear on {subjects:?}",
                &seed[..6]
            ));
        }
    }
    let headers = capture.holding("NKEY SEED");
    if !headers.is_empty() {
        leaks.push(format!("a credentials file in clear on {headers:?}"));
    }
    fleet.check(leaks.is_empty(), || {
        format!(
            "secrets crossed NATS in clear between the hubs ({} join calls, {} messages \
             captured):\n{}",
            join_calls,
            seen.len(),
            leaks.join("\n")
        )
    });
}
