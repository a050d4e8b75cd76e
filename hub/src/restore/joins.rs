//! Restored join credentials are treated as spent (review §10). A join credential spent after
//! the backup comes back unspent in its cluster's record — and a spent one is not revoked on
//! the server (the name is bound instead, which the restore forgot) — so whoever presents it
//! again could bind its cluster. `restore` revokes every join credential the restored
//! `clusters` records hold and that has not expired yet, in the restored `revocations` bucket,
//! before any hub starts; the hubs push the revocations with the rest. A site that had not
//! joined yet at the backup needs a new join credential (`flotilla join` again).

use super::{Checked, RestoreError, put_revocations};
use flotilla_api::v1::ManagedCluster;
use flotilla_auth::issuer::{Revocation, Which};
use futures::TryStreamExt;
use prost::Message;

/// Revocations of the join credentials that `clusters` hold, unexpired at `now`: each refuses
/// every JWT of the key issued until `now` and lapses when the credential expires (never, for
/// a record without an expiry).
pub fn join_revocations(clusters: &[ManagedCluster], now: i64) -> Vec<(String, Revocation)> {
    clusters
        .iter()
        .filter_map(|c| c.hub.as_ref())
        .filter(|h| !h.join_key.is_empty())
        .map(|h| {
            (
                h.join_key.clone(),
                h.join_expires.as_ref().map(|t| t.seconds),
            )
        })
        .filter(|(_, until)| until.is_none_or(|t| t > now))
        .map(|(key, until)| {
            let revocation = Revocation {
                at: now,
                account: Which::Agents,
                until,
            };
            (key, revocation)
        })
        .collect()
}

/// Revokes the join credentials of the restored `clusters` bucket ([`join_revocations`]);
/// how many. A record that does not decode is left to `flotilla-hub doctor`.
pub async fn spend_joins(
    client: &async_nats::Client,
    checked: &Checked,
    replicas: Option<usize>,
) -> Result<usize, RestoreError> {
    let js = async_nats::jetstream::new(client.clone());
    let kv = match js.get_key_value(crate::store::CLUSTERS).await {
        Ok(kv) => kv,
        Err(e) if e.kind() == async_nats::jetstream::context::KeyValueErrorKind::GetBucket => {
            return Ok(0);
        }
        Err(e) => return Err(failed(e)),
    };
    let keys: Vec<String> = kv
        .keys()
        .await
        .map_err(failed)?
        .try_collect()
        .await
        .map_err(failed)?;
    let mut clusters = Vec::new();
    for key in keys {
        if let Some(value) = kv.get(&key).await.map_err(failed)?
            && let Ok(c) = ManagedCluster::decode(value)
        {
            clusters.push(c);
        }
    }
    let revocations = join_revocations(&clusters, flotilla_auth::setup::unix_now());
    if revocations.is_empty() {
        return Ok(0);
    }
    put_revocations(client, checked, replicas, &revocations).await
}

fn failed(e: impl std::error::Error + Send + Sync + 'static) -> RestoreError {
    RestoreError::Joins(Box::new(e))
}

#[cfg(test)]
mod tests {
    use super::join_revocations;
    use flotilla_api::v1::{HubClusterState, ManagedCluster};
    use flotilla_auth::issuer::{Revocation, Which};

    fn cluster(join_key: &str, expires: Option<i64>) -> ManagedCluster {
        ManagedCluster {
            hub: Some(HubClusterState {
                join_key: join_key.into(),
                join_expires: expires.map(|seconds| prost_types::Timestamp { seconds, nanos: 0 }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn every_unexpired_join_credential_in_the_restored_records_is_revoked_until_it_expires() {
        let now = 1_000;
        let clusters = [
            cluster("UJOINED", Some(2_000)),
            cluster("UEXPIRED", Some(1_000)),
            cluster("", Some(5_000)),
            cluster("UFOREVER", None),
            ManagedCluster::default(),
        ];
        let revoked = |until| Revocation {
            at: now,
            account: Which::Agents,
            until,
        };
        assert_eq!(
            join_revocations(&clusters, now),
            [
                ("UJOINED".to_string(), revoked(Some(2_000))),
                ("UFOREVER".to_string(), revoked(None)),
            ]
        );
    }
}
