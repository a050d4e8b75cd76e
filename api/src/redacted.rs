//! `Debug` of the generated messages that carry credentials (their derived `Debug` is off in
//! `build.rs`): everything but the secret, which prints as `<redacted>`, so no log line at any
//! level shows a token.

use crate::v1::{ManagedServiceAccountToken, TunnelRequest};
use std::fmt;

fn redacted(secret: &str) -> &'static str {
    if secret.is_empty() { "" } else { "<redacted>" }
}

impl fmt::Debug for ManagedServiceAccountToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagedServiceAccountToken")
            .field("token", &redacted(&self.token))
            .field("expiration_timestamp", &self.expiration_timestamp)
            .field("cluster_name", &self.cluster_name)
            .field("name", &self.name)
            .field("service_account_namespace", &self.service_account_namespace)
            .finish()
    }
}

impl fmt::Debug for TunnelRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TunnelRequest")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("query", &self.query)
            .field("headers", &self.headers)
            .field("caller", &self.caller)
            .field("impersonate", &self.impersonate)
            .field("window", &self.window)
            .field("max_chunk", &self.max_chunk)
            .field("has_body", &self.has_body)
            .field("hub", &self.hub)
            .field("bearer", &redacted(&self.bearer))
            .field("session", &self.session)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_never_show_in_debug() {
        let t = ManagedServiceAccountToken {
            token: "s3cret-token".into(),
            ..Default::default()
        };
        assert!(!format!("{t:?}").contains("s3cret"));
        let r = TunnelRequest {
            bearer: "s3cret-token".into(),
            path: "/api".into(),
            ..Default::default()
        };
        let shown = format!("{r:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("<redacted>") && shown.contains("/api")
        );
    }
}
