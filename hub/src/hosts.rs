//! Which `Host` an open server answers (pure). An open hub (no API tokens) treats every caller
//! as an admin, which is safe only because it listens on loopback. A web page elsewhere can
//! still reach it through DNS rebinding: the page's own name is re-pointed at 127.0.0.1, so the
//! browser sends the request — with the page's name in `Host` — and lets the page read the
//! answer. Refusing every `Host` but the loopback names and the listen address closes that,
//! since a rebound request always carries the attacker's DNS name.

use std::net::{IpAddr, SocketAddr};

/// The hosts an open server answers: `localhost`, loopback addresses and the address it
/// listens on (any IP literal when it listens on every address — an address is never
/// rebound; a name is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllowedHosts {
    listen: SocketAddr,
}

/// A request an open server does not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostRefusal {
    /// No `Host` header and no authority in the request line.
    #[error(
        "no Host header: this open hub (no API tokens) answers only requests addressed to \
         localhost, a loopback address or {listen}"
    )]
    Missing {
        /// Where the server listens.
        listen: SocketAddr,
    },
    /// A name or address other than the allowed ones.
    #[error(
        "Host {host:?} refused: this open hub (no API tokens, every caller an admin) answers \
         only requests addressed to localhost, a loopback address or {listen}, so that a web \
         page cannot reach it by re-pointing its own name (DNS rebinding); use \
         http://127.0.0.1:{port}, or give the hub API tokens (--api-token-file)",
        port = listen.port()
    )]
    Refused {
        /// The host asked for.
        host: String,
        /// Where the server listens.
        listen: SocketAddr,
    },
}

impl AllowedHosts {
    /// The hosts a server listening on `listen` answers while it is open.
    pub fn open_server(listen: SocketAddr) -> Self {
        Self { listen }
    }

    /// Checks a request's host (the `Host` header, or HTTP/2's `:authority`), with or without
    /// its port.
    pub fn check(&self, host: Option<&str>) -> Result<(), HostRefusal> {
        let Some(host) = host.map(str::trim).filter(|h| !h.is_empty()) else {
            return Err(HostRefusal::Missing {
                listen: self.listen,
            });
        };
        if self.allows(strip_port(host)) {
            Ok(())
        } else {
            Err(HostRefusal::Refused {
                host: host.to_string(),
                listen: self.listen,
            })
        }
    }

    fn allows(&self, name: &str) -> bool {
        let name = name.trim_end_matches('.');
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let Ok(ip) = name.trim_matches(['[', ']']).parse::<IpAddr>() else {
            return false;
        };
        ip.is_loopback() || self.listen.ip().is_unspecified() || ip == self.listen.ip()
    }
}

/// The request's host: the `Host` header, else the URI's authority (HTTP/2).
pub fn of_request<B>(req: &http::Request<B>) -> Option<&str> {
    req.headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
}

/// `host` without a trailing `:port` (IPv6 literals keep their brackets).
fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split_once(']').map_or(host, |(ip, _)| ip);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.chars().all(|c| c.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(listen: &str) -> AllowedHosts {
        AllowedHosts::open_server(listen.parse().unwrap())
    }

    #[test]
    fn loopback_names_and_the_listen_address_are_answered() {
        let hosts = on("127.0.0.1:8080");
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST",
            "localhost.",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:9",
            "[::1]:8080",
            "[::1]",
        ] {
            assert_eq!(hosts.check(Some(ok)), Ok(()), "{ok}");
        }
    }

    #[test]
    fn a_rebound_name_or_another_address_is_refused_with_what_to_do() {
        let hosts = on("127.0.0.1:8080");
        for bad in [
            "evil.example",
            "evil.example:8080",
            "10.0.0.5",
            "localhost.evil.example",
        ] {
            let e = hosts.check(Some(bad)).unwrap_err();
            assert!(
                e.to_string().contains("DNS rebinding") && e.to_string().contains("127.0.0.1:8080"),
                "{e}"
            );
        }
        assert!(matches!(
            hosts.check(None),
            Err(HostRefusal::Missing { .. })
        ));
        assert!(matches!(
            hosts.check(Some(" ")),
            Err(HostRefusal::Missing { .. })
        ));
    }

    #[test]
    fn a_server_on_every_address_answers_any_address_but_no_name() {
        let hosts = on("0.0.0.0:8080");
        assert_eq!(hosts.check(Some("192.0.2.7:8080")), Ok(()));
        assert!(hosts.check(Some("hub.example")).is_err());
        let hosts = on("192.0.2.7:8080");
        assert_eq!(hosts.check(Some("192.0.2.7")), Ok(()));
        assert!(hosts.check(Some("192.0.2.8")).is_err());
    }

    #[test]
    fn the_host_comes_from_the_header_or_else_the_authority() {
        let req = http::Request::get("http://127.0.0.1:1/x").body(()).unwrap();
        assert_eq!(of_request(&req), Some("127.0.0.1:1"));
        let req = http::Request::get("/x")
            .header("host", "evil.example")
            .body(())
            .unwrap();
        assert_eq!(of_request(&req), Some("evil.example"));
    }
}
