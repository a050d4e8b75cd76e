//! Which address sent a webhook when the hub sits behind an Ingress or a load balancer (pure):
//! only when the connection comes from a trusted proxy (`--gitops-webhook-trusted-proxies`) is
//! `X-Forwarded-For` read, right to left, past every trusted proxy, to the first address that
//! is not one — the last hop a trusted proxy saw. Anything left of it is the sender's own word
//! and never read. Without trusted proxies, the connection's address.

use crate::webserver::Cidr;
use std::net::{IpAddr, SocketAddr};

/// The address a webhook's rate is kept for: `peer` unless it is in `trusted`, else the
/// right-most address of `forwarded_for` (the `X-Forwarded-For` values in order) that is not in
/// `trusted`. A list of trusted proxies only, or an entry that is no address (a proxy appends
/// what it saw, so that is the sender's), ends the walk at the last trusted hop read.
pub fn client(peer: IpAddr, forwarded_for: &[&str], trusted: &[Cidr]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let hops = forwarded_for
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    let mut last = peer;
    for hop in hops.into_iter().rev() {
        let Some(ip) = address(hop) else {
            return last;
        };
        if !is_trusted(ip) {
            return ip;
        }
        last = ip;
    }
    last
}

/// One `X-Forwarded-For` entry: an address, perhaps with a port (`1.2.3.4:5678`,
/// `[2001:db8::1]:443`).
fn address(hop: &str) -> Option<IpAddr> {
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|s| s.ip()))
}
