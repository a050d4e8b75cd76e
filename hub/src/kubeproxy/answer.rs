//! What of a spoke's answer reaches the client (pure). A spoke is hostile: its status must be a
//! final one (200–599) — a redirect would have the client (client-go follows 307/308) replay
//! the caller's request, with the caller's hub token, wherever the spoke says, another
//! cluster's path included (like Kubernetes CVE-2022-3172) — and the headers that steer the
//! client rather than describe the answer (`Location`, `Strict-Transport-Security`, `Alt-Svc`)
//! and hop-by-hop ones never cross.

use flotilla_api::v1::TunnelHeader;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use thiserror::Error;

/// Response headers of the spoke's that never reach the client, besides the hop-by-hop ones
/// the server drops both ways.
const STEERING: [&str; 4] = [
    "location",
    "content-location",
    "strict-transport-security",
    "alt-svc",
];

/// Why a spoke's answer is not passed on (the client gets a 502 `Status` saying so).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Refused {
    /// Informational (1xx, `101 Switching Protocols`) or redirect (3xx): the proxy passes on
    /// final answers only.
    #[error(
        "the cluster's API answered {0}, an informational or redirect status, which the cluster proxy does not pass on"
    )]
    NotFinal(u16),
    /// Not an HTTP status at all.
    #[error("the cluster's API answered status {0}, which is not an HTTP status (200–599)")]
    Invalid(u32),
}

/// The status the client sees for the spoke's `status`: 200–599 but 3xx, checked before any
/// narrowing (a hostile `65736` must not become `200`).
pub fn status(status: u32) -> Result<StatusCode, Refused> {
    let code = u16::try_from(status).map_err(|_| Refused::Invalid(status))?;
    match code {
        300..=399 => Err(Refused::NotFinal(code)),
        200..=599 => StatusCode::from_u16(code).map_err(|_| Refused::Invalid(status)),
        100..=199 => Err(Refused::NotFinal(code)),
        _ => Err(Refused::Invalid(status)),
    }
}

/// The spoke's headers the client sees: not in `dropped` (hop-by-hop, framing), not steering,
/// and valid HTTP.
pub fn headers(from_spoke: Vec<TunnelHeader>, dropped: &[&str]) -> HeaderMap {
    let mut out = HeaderMap::new();
    for h in from_spoke {
        let name = h.name.to_ascii_lowercase();
        if dropped.contains(&name.as_str()) || STEERING.contains(&name.as_str()) {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&h.value),
        ) {
            out.append(n, v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_final_statuses_cross() {
        for ok in [200, 201, 204, 404, 409, 422, 500, 503, 599] {
            assert_eq!(status(ok).map(|s| u32::from(s.as_u16())), Ok(ok));
        }
        for redirect in [300, 301, 302, 303, 304, 307, 308] {
            assert_eq!(status(redirect), Err(Refused::NotFinal(redirect as u16)));
        }
        for informational in [100, 101, 103] {
            assert_eq!(
                status(informational),
                Err(Refused::NotFinal(informational as u16))
            );
        }
        // 65736 would truncate to 200, 65843 to 307.
        for hostile in [0, 99, 600, 999, 65_535, 65_736, 65_843, u32::MAX] {
            assert!(
                matches!(status(hostile), Err(Refused::Invalid(_))),
                "{hostile}"
            );
        }
    }

    #[test]
    fn steering_and_hop_by_hop_headers_do_not_cross() {
        let h = |name: &str, value: &str| TunnelHeader {
            name: name.into(),
            value: value.into(),
        };
        let out = headers(
            vec![
                h("Content-Type", "application/json"),
                h("Location", "/clusters/other/api/v1/namespaces/a/secrets"),
                h("Strict-Transport-Security", "max-age=31536000"),
                h("Alt-Svc", "h3=\"evil.example:443\""),
                h("Content-Location", "/clusters/other"),
                h("Connection", "close"),
                h("Audit-Id", "1"),
                h("Bad Name", "x"),
            ],
            &["connection"],
        );
        let names: Vec<_> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["content-type", "audit-id"]);
    }
}
