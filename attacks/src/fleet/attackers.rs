//! Clients connected to the fleet's nats-server: attackers holding what an attacker holds
//! (the bootstrap credentials, a stolen `cluster.creds`), and the read-only store view the
//! checks take with `hub.creds`.

use super::Fleet;
use crate::attacker::{self, Attacker, Outcome};
use crate::store::RawStore;
use std::path::Path;
use std::time::Duration;

impl Fleet {
    /// A read-only view of the hub's JetStream state with `hub.creds`.
    pub async fn store(&self) -> RawStore {
        let creds = self.secure.join("hub.creds");
        match Attacker::connect(
            &self.nats_url(),
            &creds,
            "_INBOX.checker",
            self.ca().as_deref(),
        )
        .await
        {
            Ok(a) => RawStore::new(a.client),
            Err(e) => self.fail(&format!(
                "connecting with hub.creds to check the store: {e}"
            )),
        }
    }

    /// An attacker holding the fleet's `bootstrap.creds` (replies in the bootstrap inbox space).
    pub async fn attacker_with_bootstrap(&self) -> Attacker {
        self.attacker_with(&self.bootstrap_creds(), "_INBOX_bootstrap.attacker")
            .await
    }

    /// An attacker holding cluster `cluster`'s `STATE_DIR/cluster.creds` (copied: the agent
    /// may be stopped or running).
    pub async fn attacker_as(&self, cluster: &str) -> Attacker {
        let source = self.state_dir(cluster).join("cluster.creds");
        let copy = self.dir.path().join(format!("stolen-{cluster}.creds"));
        if let Err(e) = std::fs::copy(&source, &copy) {
            self.fail(&format!("copying {}: {e}", source.display()));
        }
        self.attacker_with(&copy, &format!("_INBOX.{cluster}"))
            .await
    }

    /// An attacker holding `creds`, reading replies under `inbox`.
    pub async fn attacker_with(&self, creds: &Path, inbox: &str) -> Attacker {
        match Attacker::connect(&self.nats_url(), creds, inbox, self.ca().as_deref()).await {
            Ok(a) => a,
            Err(e) => self.fail(&format!("the attacker cannot connect: {e}")),
        }
    }

    /// Whether the server refuses (or cuts within a second) a connection with `creds`.
    pub async fn connect_outcome(&self, creds: &Path) -> Outcome {
        attacker::try_connect(
            &self.nats_url(),
            creds,
            self.ca().as_deref(),
            Duration::from_secs(1),
        )
        .await
    }
}
