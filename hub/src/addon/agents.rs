//! What add-on agents ask of the hub, through the handle (I/O): NATS credentials for an agent's
//! key (secure mode), its key recorded on the installation, and lease renewals passed to the
//! add-on's actor.

use super::actor;
use super::handle::AddOns;
use super::meta::with_rev;
use super::rules;
use super::store::lease_key;
use crate::keys::ObjectRef;
use flotilla_api::v1::ManagedClusterAddOn;
use std::time::{Duration, SystemTime};
use thiserror::Error;

/// Why an add-on agent's key gets no NATS credentials; the agent is told this text.
#[derive(Debug, Error)]
pub enum CredentialsError {
    /// The add-on is not installed on the cluster.
    #[error("add-on {addon:?} is not installed on cluster {cluster:?}")]
    NotInstalled {
        /// The add-on.
        addon: String,
        /// The cluster.
        cluster: String,
    },
    /// The add-on's template asks for no hub access.
    #[error("add-on {0:?}'s template asks for no hub access (spec.registration is empty)")]
    NoHubAccess(String),
    /// The hub is not in secure mode.
    #[error("this hub runs without --secure-dir: add-on agents connect without credentials")]
    NotSecure,
    /// The credentials could not be issued.
    #[error(transparent)]
    Issue(#[from] flotilla_auth::issuer::IssueError),
    /// The key issued before could not be revoked (nothing new is issued).
    #[error("revoking the add-on's previous key failed: {0}")]
    Revoke(#[source] crate::security::revocations::RevocationError),
}

impl AddOns {
    /// Records `key` as the add-on agent's key on the ManagedClusterAddOn (compare-and-set,
    /// read again after a lost race, a few times).
    async fn record_agent_key(&self, cluster: &str, addon: &str, key: &str) {
        let store = &self.inner.store;
        let k = ObjectRef::new(cluster, addon);
        for _ in 0..10 {
            let Ok(Some((mut stored, rev))) = store.cluster_addons.get(&k.store_key()).await else {
                return;
            };
            stored
                .hub
                .get_or_insert_with(Default::default)
                .agent_public_key = key.to_string();
            if let Ok(rev) = store
                .cluster_addons
                .write(&k.store_key(), &stored, rev)
                .await
            {
                store
                    .cluster_addon_views
                    .upsert(&k.inventory_key(), with_rev(stored, rev));
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tracing::warn!(cluster = %cluster, addon = %addon, "the add-on agent's key was not recorded");
    }

    /// NATS credentials for add-on `addon`'s agent key on `cluster` (secure mode): only for an
    /// installed add-on whose template asks for hub access. A new key replaces (and revokes)
    /// the one issued before.
    pub async fn issue_credentials(
        &self,
        cluster: &str,
        addon: &str,
        public_key: &str,
    ) -> Result<flotilla_api::v1::AddOnCredentialsResponse, CredentialsError> {
        let Some(mca) = self.get_cluster_addon(cluster, addon) else {
            return Err(CredentialsError::NotInstalled {
                addon: addon.into(),
                cluster: cluster.into(),
            });
        };
        if !self.needs_hub_access(&mca) {
            return Err(CredentialsError::NoHubAccess(addon.into()));
        }
        let Some(security) = &self.inner.deps.security else {
            return Err(CredentialsError::NotSecure);
        };
        let issued =
            security.issue(flotilla_auth::Subject::AddOn { addon, cluster }, public_key)?;
        let previous = mca
            .hub
            .as_ref()
            .map(|h| h.agent_public_key.clone())
            .unwrap_or_default();
        if !previous.is_empty() && previous != public_key {
            security
                .revoke(&[previous.as_str()])
                .await
                .map_err(CredentialsError::Revoke)?;
        }
        if previous != public_key {
            // Recorded (before answering) for the revocation when the add-on leaves; a status
            // write racing this one makes it read again.
            self.record_agent_key(cluster, addon, public_key).await;
        }
        let perms = flotilla_auth::permissions::addon(addon, cluster);
        Ok(flotilla_api::v1::AddOnCredentialsResponse {
            user_jwt: issued.jwt,
            expires: Some(prost_types::Timestamp {
                seconds: issued.expires_at,
                nanos: 0,
            }),
            message: String::new(),
            publish: perms.publish.allow,
            subscribe: perms.subscribe.allow,
        })
    }

    /// Whether an installed add-on's template asks for hub access: from its status, or — before
    /// the actor's first status write — from the template its work was rendered from (the agent
    /// asks as soon as it sees the work).
    fn needs_hub_access(&self, mca: &ManagedClusterAddOn) -> bool {
        if mca
            .status
            .as_ref()
            .is_some_and(|s| !s.registrations.is_empty())
        {
            return true;
        }
        let (cluster, name) = rules::key_of(mca);
        let work = self
            .inner
            .deps
            .works
            .get(
                &ObjectRef::new(&cluster, flotilla_api::addon::work_name(&name, 0)).inventory_key(),
            )
            .map(|w| w.to_work());
        rules::released(work.as_ref())
            .unwrap_or_default()
            .keys()
            .filter_map(|k| rules::parse_config_key(k))
            .filter(|(g, r, _, _)| {
                g == flotilla_api::addon::GROUP && r == flotilla_api::addon::TEMPLATES
            })
            .filter_map(|(_, _, _, n)| self.get_template(&n))
            .any(|t| t.spec.as_ref().is_some_and(|s| !s.registration.is_empty()))
    }

    /// A lease renewal of `addon` on `cluster` (from its agent). Tells the add-on's actor when
    /// the add-on's Available may change (first renewal, or one after the lease went stale).
    pub fn renew_lease(&self, cluster: &str, addon: &str, at: SystemTime) {
        let key = lease_key(cluster, addon);
        let previous = self.inner.store.leases.insert(key, at);
        let grace = self.inner.deps.config.lease_grace;
        let was_fresh = previous.is_some_and(|p| {
            flotilla_api::addon::health::lease_expires(p, grace) > SystemTime::now()
        });
        // Never waits on a busy actor (after a hub restart every agent's first renewal comes
        // at once): the renewal is recorded above, and a full mailbox means the actor has a
        // round coming anyway (at the latest its 30 s resync).
        if !was_fresh && let Some(tx) = self.inner.actors.get(addon) {
            let _ = tx.try_send(actor::Msg::Lease(cluster.to_string()));
        }
    }
}
