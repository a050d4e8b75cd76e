//! Where a worker may connect: a GitRepo's author chooses the URL, so a fetch must not become a
//! way to reach the cloud metadata service or the hub's own listeners (server-side request
//! forgery). Pure; the worker checks every address a host resolves to, before connecting.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused, or `None` when it may be used.
pub fn refusal(ip: IpAddr, allow_loopback: bool) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4, allow_loopback),
        IpAddr::V6(v6) => refusal_v6(v6, allow_loopback),
    }
}

fn refusal_v4(ip: Ipv4Addr, allow_loopback: bool) -> Option<&'static str> {
    if ip.is_link_local() {
        Some("a link-local address (cloud metadata services live there)")
    } else if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        Some("not a unicast address")
    } else if ip.is_loopback() && !allow_loopback {
        Some("a loopback address (the hub's own listeners; allowed with --gitops-allow-loopback)")
    } else {
        None
    }
}

fn refusal_v6(ip: Ipv6Addr, allow_loopback: bool) -> Option<&'static str> {
    // fe80::/10
    if (ip.segments()[0] & 0xffc0) == 0xfe80 {
        Some("a link-local address (cloud metadata services live there)")
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some("not a unicast address")
    } else if ip.is_loopback() && !allow_loopback {
        Some("a loopback address (the hub's own listeners; allowed with --gitops-allow-loopback)")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn metadata_and_link_local_addresses_are_always_refused() {
        for a in ["169.254.169.254", "fe80::1", "::ffff:169.254.169.254"] {
            assert!(
                refusal(ip(a), true).unwrap().starts_with("a link-local"),
                "{a}"
            );
        }
    }

    #[test]
    fn loopback_is_refused_unless_allowed() {
        for a in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
            assert!(
                refusal(ip(a), false).unwrap().starts_with("a loopback"),
                "{a}"
            );
            assert_eq!(refusal(ip(a), true), None, "{a}");
        }
    }

    #[test]
    fn ordinary_and_private_addresses_are_allowed() {
        for a in ["10.1.2.3", "192.168.1.10", "140.82.112.3", "2001:db8::1"] {
            assert_eq!(refusal(ip(a), false), None, "{a}");
        }
        assert!(refusal(ip("0.0.0.0"), true).is_some());
        assert!(refusal(ip("224.0.0.1"), true).is_some());
    }
}
