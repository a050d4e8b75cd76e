//! TLS downgrade (issue 23, attack 7): with a secure directory made with `--tls`, a `nats://`
//! URL (which a man in the middle could keep plaintext) is a configuration error for the hub
//! and for an agent given a CA: both refuse to start with exit code 64 and say TLS is required.

use flotilla_attacks::fleet::{Output, run};
use flotilla_attacks::{AgentOptions, Fleet, HubOptions, Server, on_every_server};
use std::time::Duration;

/// How long a binary gets to refuse its configuration (it exits before connecting).
const REFUSE_WITHIN: Duration = Duration::from_secs(10);

/// Why `out` is not a refusal to start saying TLS is required, if it is not.
fn not_refused(what: &str, out: &Output) -> Option<String> {
    let said = out.stderr.to_lowercase() + &out.stdout.to_lowercase();
    if out.code != Some(64) {
        return Some(format!(
            "{what} with a nats:// URL did not refuse to start with exit code 64 (exit {:?}): {}{}",
            out.code,
            out.stderr.trim(),
            out.stdout.trim()
        ));
    }
    if !(said.contains("tls") && said.contains("requir")) {
        return Some(format!(
            "{what} does not say TLS is required: {}{}",
            out.stderr.trim(),
            out.stdout.trim()
        ));
    }
    None
}

on_every_server!(with_a_tls_secure_dir_hub_and_agent_refuse_a_plaintext_nats_url);

/// Attack 7: a plaintext URL against a TLS secure setup.
async fn with_a_tls_secure_dir_hub_and_agent_refuse_a_plaintext_nats_url(server: Server) {
    let mut fleet = Fleet::secure_tls(server).await;
    let plain = fleet.plain_nats_url();
    let (hub, _log) = fleet.hub_command(&plain, &HubOptions::new());
    let agent = fleet.agent_command("edge-1", &plain, &AgentOptions::default());
    let (hub, agent) = tokio::join!(
        run(hub.into(), None, REFUSE_WITHIN),
        run(agent.into(), None, REFUSE_WITHIN)
    );
    let problems: Vec<String> = [
        not_refused("flotilla-hub --secure-dir <a --tls secure dir>", &hub),
        not_refused("flotilla-agent --nats-ca <the CA>", &agent),
    ]
    .into_iter()
    .flatten()
    .collect();
    fleet.check(problems.is_empty(), || problems.join("\n"));
}
