//! What connecting to an endpoint exposes on the network, decided before connecting (pure): a
//! bearer token is never sent in the clear to a host other than this one unless `--insecure`
//! says so.

/// What connecting to an endpoint exposes on the network, decided before connecting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// Nothing: TLS (`https://`), or plain http to this host (loopback).
    Nothing,
    /// Plain http to another host: allowed, with this warning on stderr.
    Warn(String),
    /// The bearer token would cross the network in the clear: refused before connecting.
    Refuse(Cleartext),
}

/// The refusal to send a bearer token in the clear: plain `http://` to a host that is not
/// loopback, without `--insecure`. `main` exits 64 (bad configuration) on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleartext {
    /// The `--hub` endpoint as given.
    pub endpoint: String,
    /// Its host.
    pub host: String,
}

impl std::fmt::Display for Cleartext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refusing to send the bearer token in the clear to {} (--hub {}): use an https:// \
             hub with --ca (FLOTILLA_CA), or pass --insecure (FLOTILLA_INSECURE=true) to send it \
             over plain http anyway",
            self.host, self.endpoint
        )
    }
}

impl std::error::Error for Cleartext {}

/// Whether `host` (a URI's host: a name, an IPv4 address or a bracketed IPv6 address) is this
/// machine: `localhost`, 127.0.0.0/8, `::1` (also IPv4-mapped).
pub fn is_loopback(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if bare.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_canonical().is_loopback(),
        Err(_) => false,
    }
}

/// What connecting to `endpoint` exposes, with or without a bearer `token`, and `insecure`
/// (`--insecure`). Only `https://` is encrypted: any other scheme (or none) counts as plain. An
/// endpoint that does not parse is left to the connection to report.
pub fn exposure(endpoint: &str, token: bool, insecure: bool) -> Exposure {
    let Ok(uri) = endpoint.parse::<tonic::codegen::http::Uri>() else {
        return Exposure::Nothing;
    };
    if uri.scheme_str() == Some("https") {
        return Exposure::Nothing;
    }
    let host = uri.host().unwrap_or_default().to_string();
    if is_loopback(&host) {
        return Exposure::Nothing;
    }
    match (token, insecure) {
        (false, _) => Exposure::Warn(format!(
            "warning: the hub at {endpoint} is reached over plain http: anyone on the network \
             path can read and change the calls (use https:// with --ca)"
        )),
        (true, true) => Exposure::Warn(format!(
            "warning: --insecure: the bearer token goes in the clear to {host} over plain \
             http: anyone on the network path can read it and act as you"
        )),
        (true, false) => Exposure::Refuse(Cleartext {
            endpoint: endpoint.to_string(),
            host,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_localhost_127_slash_8_and_ipv6_one() {
        for host in [
            "localhost",
            "LocalHost",
            "127.0.0.1",
            "127.1.2.3",
            "[::1]",
            "[::ffff:127.0.0.1]",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "10.1.2.3",
            "128.0.0.1",
            "[::2]",
            "localhost.example.com",
            "hub",
            "",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn a_token_is_never_sent_in_the_clear_off_loopback_without_insecure() {
        let refused = exposure("http://10.1.2.3:50051", true, false);
        let Exposure::Refuse(refusal) = refused else {
            panic!("{refused:?}");
        };
        let text = refusal.to_string();
        assert!(
            text.contains("to 10.1.2.3 (--hub http://10.1.2.3:50051)")
                && text.contains("https://")
                && text.contains("--ca")
                && text.contains("--insecure"),
            "{text}"
        );
        // No scheme, or another one, is not TLS either.
        assert!(matches!(
            exposure("hub.example.com:50051", true, false),
            Exposure::Refuse(_)
        ));
        assert!(matches!(
            exposure("http://[fd00::1]:50051", true, false),
            Exposure::Refuse(Cleartext { host, .. }) if host == "[fd00::1]"
        ));
    }

    #[test]
    fn insecure_sends_the_token_in_the_clear_with_a_warning() {
        let Exposure::Warn(w) = exposure("http://10.1.2.3:50051", true, true) else {
            panic!("not a warning");
        };
        assert!(
            w.starts_with("warning: --insecure") && w.contains("10.1.2.3"),
            "{w}"
        );
    }

    #[test]
    fn plain_http_without_a_token_off_loopback_is_allowed_with_a_warning() {
        let Exposure::Warn(w) = exposure("http://hub:50051", false, false) else {
            panic!("not a warning");
        };
        assert!(
            w.starts_with("warning:") && w.contains("http://hub:50051"),
            "{w}"
        );
        assert!(!w.contains('\n'), "one line: {w}");
    }

    #[test]
    fn tls_and_loopback_expose_nothing() {
        for (endpoint, token) in [
            ("https://10.1.2.3:50051", true),
            ("https://hub.example.com", false),
            ("http://127.0.0.1:50051", true),
            ("http://localhost:50051", true),
            ("http://[::1]:50051", true),
            ("http://127.0.0.1:50051", false),
        ] {
            assert_eq!(
                exposure(endpoint, token, false),
                Exposure::Nothing,
                "{endpoint}"
            );
        }
    }
}
