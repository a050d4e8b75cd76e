//! The transport rules of a NATS URL list (pure): which URLs a configuration may use, given a
//! pinned CA and secure mode. Every binary checks them before connecting (through
//! `flotilla_bus::connect`), and so does `flotilla join` before it renders an agent's manifest.

/// Whether a host is this machine (loopback addresses and `localhost`).
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_matches(['[', ']']);
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// What the transport of a NATS URL list must be, given what is configured:
///
/// - a CA (`--nats-ca`, or the secure directory's `tls/ca.pem`) means TLS is required on every
///   URL: a `nats://` URL is refused rather than silently allowed to fall back to plaintext that
///   a man in the middle could force;
/// - credentials (secure mode) off loopback need TLS too: refused over `nats://`;
/// - secure mode over TLS needs the CA pinned: the system's roots would take any public
///   certificate for a host a man in the middle steers the client to;
/// - plaintext off loopback without credentials works, with a loud warning.
///
/// Returns the warnings to log, or what is wrong. `Ok` means the caller must also set
/// `flotilla_bus::connect::NatsConfig::require_tls` when [`tls_required`] says so.
pub fn check_transport(urls: &str, ca: bool, secure: bool) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    for url in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        let (scheme, rest) = url.split_once("://").unwrap_or(("nats", url));
        let hostport = rest.rsplit('@').next().unwrap_or(rest);
        let host = match hostport.rsplit_once(':') {
            Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
            _ => hostport,
        };
        let tls = matches!(scheme, "tls" | "wss");
        let loopback = is_loopback_host(host);
        if tls && secure && !ca {
            return Err(format!(
                "{url}: secure mode over TLS needs the server's CA pinned (--nats-ca ca.pem, \
                 from the hub's secure directory): with the system's roots any public \
                 certificate for a host on the path would be trusted"
            ));
        }
        if tls {
            continue;
        }
        if ca {
            return Err(format!(
                "{url}: a CA is configured, so TLS is required; use tls://{hostport} \
                 (a nats:// URL could be downgraded to plaintext by anyone on the path)"
            ));
        }
        if secure && !loopback {
            return Err(format!(
                "{url}: secure mode sends credentials and workloads over this link, so TLS is \
                 required off loopback; use tls://{hostport} with the CA (--nats-ca)"
            ));
        }
        if !loopback {
            warnings.push(format!(
                "{url}: PLAINTEXT NATS off loopback — every message, workload and status can be \
                 read and changed on the path; use secure mode with TLS (docs/security.md)"
            ));
        } else if secure {
            warnings.push(format!(
                "{url}: secure mode without TLS, acceptable on loopback only"
            ));
        }
    }
    Ok(warnings)
}

/// Whether connections must refuse a server that does not speak TLS.
pub fn tls_required(ca: bool, urls: &str) -> bool {
    ca || urls.split(',').any(|u| {
        let u = u.trim();
        u.starts_with("tls://") || u.starts_with("wss://")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_needs_tls_with_a_ca_and_for_credentials_off_loopback() {
        assert!(
            check_transport("nats://127.0.0.1:4222", false, false)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            check_transport("nats://localhost:4222", false, true)
                .unwrap()
                .len(),
            1,
            "secure on loopback: allowed, with a note"
        );
        let e = check_transport("nats://hub.example.com:4222", true, true).unwrap_err();
        assert!(
            e.contains("TLS is required") && e.contains("tls://hub.example.com:4222"),
            "{e}"
        );
        let e = check_transport("tls://a:4222,nats://127.0.0.1:4222", true, false).unwrap_err();
        assert!(e.contains("nats://127.0.0.1:4222"), "{e}");
        let e = check_transport("nats://10.0.0.5:4222", false, true).unwrap_err();
        assert!(e.contains("secure mode"), "{e}");
        let w = check_transport("nats://10.0.0.5:4222", false, false).unwrap();
        assert!(w[0].contains("PLAINTEXT"), "{w:?}");
        assert!(
            check_transport("tls://hub:4222", true, true)
                .unwrap()
                .is_empty()
        );
        assert!(
            check_transport("nats://[::1]:4222", false, false)
                .unwrap()
                .is_empty()
        );
        // Secure mode over TLS authenticates the server by a pinned CA only (issue 42): the
        // system's roots would trust any public certificate for a host on the path.
        let e = check_transport("tls://hub:4222", false, true).unwrap_err();
        assert!(e.contains("CA pinned") && e.contains("--nats-ca"), "{e}");
        assert!(
            check_transport("tls://hub:4222", false, false)
                .unwrap()
                .is_empty(),
            "plain mode over TLS may use the system's roots"
        );
        assert!(tls_required(true, "nats://x"));
        assert!(tls_required(false, "tls://x"));
        assert!(!tls_required(false, "nats://x"));
    }
}
