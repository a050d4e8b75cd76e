//! `flotilla-hub rotate`: new credentials on disk, the old key revoked — in the revocations
//! bucket the hubs share when it exists — and pushed.

use flotilla_bus::connect::NatsArgs;
use flotilla_hub::security::revocations;
use flotilla_hub::store::ride::{Call, ride};
use std::path::PathBuf;
use std::process::ExitCode;

/// Replaces the fleet-wide bootstrap credentials (`bootstrap`) or the hub's own (`hub`) in
/// the secure directory and revokes the old key for ever, pushing the revocation to the
/// NATS server. Agents that have their own credentials are not affected by a bootstrap
/// rotation; a running hub reads the new hub.creds at its next reconnect.
#[derive(clap::Args, Debug)]
pub struct Rotate {
    /// Which credentials.
    #[arg(value_enum)]
    which: Rotated,
    /// The secure directory.
    #[arg(long, env = "FLOTILLA_SECURE_DIR")]
    secure_dir: PathBuf,
}

/// Credentials `rotate` replaces.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Rotated {
    /// bootstrap.creds (agents' account).
    Bootstrap,
    /// hub.creds (the hub's account).
    Hub,
}

impl Rotate {
    pub async fn run(self, nats: &NatsArgs) -> ExitCode {
        rotate(self.which, &self.secure_dir, nats).await
    }
}

async fn rotate(which: Rotated, dir: &std::path::Path, nats: &NatsArgs) -> ExitCode {
    let result = async {
        let secure = flotilla_auth::SecureDir::load(dir).map_err(|e| e.to_string())?;
        let issuer = std::sync::Arc::new(
            flotilla_auth::Issuer::new(&secure, std::time::Duration::from_secs(86_400))
                .map_err(|e| e.to_string())?,
        );
        let which = match which {
            Rotated::Bootstrap => flotilla_auth::Which::Agents,
            Rotated::Hub => flotilla_auth::Which::Hub,
        };
        let tls_ca = |c: &mut flotilla_bus::connect::NatsConfig| {
            if let (None, Some(tls)) = (&c.tls_ca_file, &secure.tls) {
                c.tls_ca_file = Some(tls.ca.clone());
            }
            if secure.tls.as_ref().is_some_and(|t| t.handshake_first) {
                c.tls_first = true;
            }
            c.require_tls = flotilla_bus::connect::tls_required(c.tls_ca_file.is_some(), &c.url);
        };
        // The hubs' shared revocations, reached as the hub (with the credentials about to be
        // replaced, read now): absent before any hub started, then the file is enough.
        let mut hub = nats.config("flotilla-hub-rotate");
        hub.credentials_file = Some(secure.hub_creds.clone());
        tls_ca(&mut hub);
        let hub = flotilla_bus::connect::connect(&hub, None)
            .await
            .map_err(|e| e.to_string())?;
        let jetstream = async_nats::jetstream::new(hub.clone());
        let shared = match revocations::Shared::find(&jetstream, &issuer).await {
            Ok(shared) => shared,
            Err(e) => return Err(format!("opening the shared revocations: {e}")),
        };
        let revoked = issuer
            .rotate_key(which, flotilla_auth::setup::unix_now())
            .map_err(|e| e.to_string())?;
        println!(
            "Wrote new credentials; the old key is revoked in {}.",
            secure.revocations_file().display()
        );
        let mut sys = nats.config("flotilla-hub-rotate");
        sys.credentials_file = Some(secure.sys_creds.clone());
        tls_ca(&mut sys);
        let sys = flotilla_bus::connect::connect(&sys, None)
            .await
            .map_err(|e| e.to_string())?;
        let pushed = async {
            match &shared {
                Some(shared) => {
                    // Ridden like the hubs' own store calls: a hub pushing the accounts the
                    // record made it sign can leave JetStream without responders for a moment.
                    let call = |op| Call {
                        op,
                        bucket: revocations::BUCKET,
                        key: "",
                    };
                    ride(call("write"), || {
                        shared.record(std::slice::from_ref(&revoked))
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                    println!("Shared with every hub.");
                    ride(call("load"), || shared.push(&sys))
                        .await
                        .map_err(|e| e.to_string())
                }
                None => {
                    // Signed with an iat after any this directory's hub signed.
                    let jwts = issuer
                        .account_jwts(flotilla_auth::setup::unix_now())
                        .map_err(|e| e.to_string())?;
                    flotilla_auth::issuer::push_accounts(&sys, &jwts)
                        .await
                        .map_err(|e| e.to_string())
                }
            }
        };
        // Generous: an operator rotating a leaked credential would rather wait than retry, and
        // a busy server (a fleet reconnecting) answers account updates late.
        tokio::time::timeout(std::time::Duration::from_secs(30), pushed)
            .await
            .map_err(|_| "the NATS server did not answer within 30 s".to_string())??;
        println!("Pushed to the NATS server: the old key is refused from now on.");
        Ok::<_, String>(())
    }
    .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "flotilla-hub rotate: {e}\n(anything written above stays; the hubs push every \
                 revocation again when they start)"
            );
            ExitCode::FAILURE
        }
    }
}
