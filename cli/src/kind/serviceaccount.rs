//! ManagedServiceAccounts: per cluster (their namespace) with their token's state — NAMESPACE
//! (the cluster), NAME, TOKEN REPORTED, EXPIRES, ROTATION — and `describe` with conditions.

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::ocm::serviceaccount as shapes;
use flotilla_api::v1::{ManagedServiceAccount, ObjectMeta};
use std::fmt::Write;

impl Kind for ManagedServiceAccount {
    type Ocm = shapes::ManagedServiceAccount;
    const COLUMNS: &'static [&'static str] =
        &["NAMESPACE", "NAME", "TOKEN REPORTED", "EXPIRES", "ROTATION"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    /// TOKEN REPORTED is the condition's status (`Deleting` while the cluster removes the
    /// ServiceAccount); ROTATION the validity asked, or `off`.
    fn row(&self) -> Vec<String> {
        let o = self.to_ocm();
        let status = o.status.clone().unwrap_or_default();
        let reported = if !o.metadata.deletion_timestamp.is_empty() {
            "Deleting".to_string()
        } else {
            status
                .conditions
                .iter()
                .find(|c| c.type_ == flotilla_api::serviceaccount::CONDITION_TOKEN_REPORTED)
                .map_or_else(|| "Unknown".to_string(), |c| c.status.clone())
        };
        vec![
            o.metadata.namespace,
            o.metadata.name,
            reported,
            if status.expiration_timestamp.is_empty() {
                "-".into()
            } else {
                status.expiration_timestamp
            },
            if o.spec.rotation.enabled {
                o.spec.rotation.validity
            } else {
                "off".into()
            },
        ]
    }

    fn to_ocm(&self) -> shapes::ManagedServiceAccount {
        shapes::ManagedServiceAccount::from(self)
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No ManagedServiceAccounts found.".into())
    }

    /// The accounts of the cluster (the namespace; of every cluster when none is given), only
    /// the named ones when the query names some.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let r = flotilla_api::v1::ListManagedServiceAccountsRequest {
            namespace: query.namespace.clone().unwrap_or_default(),
        };
        let items = hub
            .idempotent(async || {
                hub.service_accounts()
                    .list_managed_service_accounts(r.clone())
                    .await
            })
            .await?
            .items;
        super::named(items, &query.names, "ManagedServiceAccount")
    }
}

/// `describe managedserviceaccount`: spec, token and conditions.
pub fn describe(m: &ManagedServiceAccount) -> String {
    let o = m.to_ocm();
    let status = o.status.clone().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "Name:         {}", o.metadata.name);
    let _ = writeln!(out, "Cluster:      {}", o.metadata.namespace);
    let _ = writeln!(out, "Created:      {}", o.metadata.creation_timestamp);
    if !o.metadata.deletion_timestamp.is_empty() {
        let _ = writeln!(
            out,
            "Deleting:     since {} (the cluster removes the ServiceAccount)",
            o.metadata.deletion_timestamp
        );
    }
    let _ = writeln!(
        out,
        "Rotation:     {} (validity asked: {})",
        if o.spec.rotation.enabled { "on" } else { "off" },
        o.spec.rotation.validity
    );
    if let Some(ttl) = o.spec.ttl_seconds_after_creation {
        let _ = writeln!(out, "TTL:          {ttl}s after creation");
    }
    let refreshed = status
        .token_secret_ref
        .as_ref()
        .map(|r| r.last_refresh_timestamp.clone())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Token:        {}",
        if status.expiration_timestamp.is_empty() {
            "none yet".to_string()
        } else {
            format!(
                "issued {refreshed}, expires {} (as the cluster answered)",
                status.expiration_timestamp
            )
        }
    );
    let _ = writeln!(out, "Conditions:");
    if status.conditions.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for c in &status.conditions {
        let _ = writeln!(
            out,
            "  {:<14} {:<6} {:<16} {}",
            c.type_, c.status, c.reason, c.message
        );
    }
    out
}

impl Delete for ManagedServiceAccount {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::GetManagedServiceAccountRequest {
            namespace: target.namespace,
            name: target.name,
        };
        let d = hub
            .delete(async || {
                hub.service_accounts()
                    .delete_managed_service_account(r.clone())
                    .await
            })
            .await?;
        Ok(Gone::new(
            d,
            format!(
                "managedserviceaccount/{} deleting on cluster {} (its ServiceAccount goes)",
                r.name, r.namespace
            ),
        ))
    }
}
