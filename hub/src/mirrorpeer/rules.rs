//! Pure rules of the peer secret exchange: the checks of a cluster's request (hostile until
//! checked), what to answer it, the status of a MirrorPeer (ODF's phase, one exchange per
//! ordered pair, the offline peers), and which clusters still have something to do.

use flotilla_api::meta::{remove_condition, set_condition, status as cstatus};
use flotilla_api::mirrorpeer::{self as mp, exchange, phase};
use flotilla_api::v1::{
    MirrorPeer, MirrorPeerDelivery, MirrorPeerStatus, PeerExchange, PeerKey, PeerRef,
    PeerSyncRequest, SealedPeerSecret, StoredPeerSecret,
};
use std::collections::{BTreeMap, BTreeSet};

pub mod limit;

/// How far past the stored revision a box's revision may be.
pub const MAX_REVISION_STEP: u64 = 1024;

/// Boxes one request may carry at most.
pub const MAX_OUTBOUND: usize = 4 * mp::MAX_PEERS;
/// Applied revisions one request may carry at most.
pub const MAX_APPLIED: usize = 16 * mp::MAX_PEERS;
/// Source errors one request may carry at most.
pub const MAX_SOURCE_ERRORS: usize = 64;
/// The longest error text kept from a cluster.
pub const MAX_ERROR_CHARS: usize = 512;
/// A box is its payload plus the box's overhead and the payload's own fields.
pub const MAX_SEALED_BYTES: usize = mp::MAX_SECRET_BYTES + 4 * 1024;

/// The KV key of the box `from` sealed to `to` (names are DNS labels: one token each).
pub fn record_key(mirror_peer: &str, from: &str, to: &str) -> String {
    format!("{mirror_peer}.{from}.{to}")
}

/// What the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// MirrorPeers by name.
    pub peers: &'a BTreeMap<String, MirrorPeer>,
    /// Boxes by [`record_key`].
    pub records: &'a BTreeMap<String, SealedPeerSecret>,
    /// Every cluster's last presented curve key.
    pub keys: &'a BTreeMap<String, String>,
}

/// The peers' cluster names of a MirrorPeer.
pub fn members(p: &MirrorPeer) -> Vec<&str> {
    items(p).iter().map(|i| i.cluster_name.as_str()).collect()
}

fn items(p: &MirrorPeer) -> &[PeerRef] {
    p.spec.as_ref().map_or(&[], |s| s.items.as_slice())
}

fn name(p: &MirrorPeer) -> &str {
    p.metadata.as_ref().map_or("", |m| m.name.as_str())
}

/// The MirrorPeers `cluster` is a peer of.
pub fn of_cluster<'a>(view: View<'a>, cluster: &str) -> Vec<&'a MirrorPeer> {
    view.peers
        .values()
        .filter(|p| members(p).contains(&cluster))
        .collect()
}

/// A request taken apart: what to store, and what was refused (each naming what and why).
#[derive(Debug, Default, PartialEq)]
pub struct Checked {
    /// The cluster presented a key other than the stored one (or none was stored).
    pub new_key: Option<String>,
    /// Boxes to store (new or newer).
    pub boxes: Vec<SealedPeerSecret>,
    /// Records whose applied revision or error changes: `(key, revision, error)`.
    pub applied: Vec<(String, u64, String)>,
    /// What the cluster holds from a peer when the hub holds no box for the pair, or an older
    /// one (the pair's boxes purged while the cluster was deleted, the sender restarted): kept
    /// as a record with no box, applied, so that the peer's next box counts on from it (the
    /// cluster refuses anything older).
    pub floors: Vec<SealedPeerSecret>,
    /// The cluster's source errors by MirrorPeer (replacing what it said before).
    pub source_errors: BTreeMap<String, String>,
    /// What was refused.
    pub refused: Vec<String>,
}

/// Whether `key` is a public curve key.
pub fn is_xkey(key: &str) -> bool {
    nkeys::XKey::from_public_key(key).is_ok()
}

fn clip(s: &str) -> String {
    s.chars().take(MAX_ERROR_CHARS).collect()
}

/// Checks `cluster`'s request (its subject and envelope already named `cluster`). `Err`: the
/// whole request is refused, nothing in it is taken. Otherwise each part is taken or refused on
/// its own: a bad box never undoes a good one, and nothing already stored is lost.
pub fn check(cluster: &str, req: &PeerSyncRequest, view: View<'_>) -> Result<Checked, String> {
    check_whole(cluster, req)?;
    let mut out = Checked::default();
    if view.keys.get(cluster) != Some(&req.xkey) {
        out.new_key = Some(req.xkey.clone());
    }
    let mut seen = BTreeSet::new();
    for (i, b) in req.outbound.iter().enumerate() {
        let at = format!("outbound[{i}] ({}: {} → {})", b.mirror_peer, b.from, b.to);
        match check_box(cluster, &req.xkey, b, view) {
            Ok(()) if !seen.insert(record_key(&b.mirror_peer, &b.from, &b.to)) => {
                out.refused
                    .push(format!("{at}: a second box for the same pair"));
            }
            Ok(()) => out.boxes.push(SealedPeerSecret {
                applied_revision: 0,
                applied_error: String::new(),
                ..b.clone()
            }),
            Err(why) => out.refused.push(format!("{at}: {why}")),
        }
    }
    for (i, a) in req.applied.iter().enumerate() {
        match check_applied(cluster, &req.xkey, a, view) {
            Applied::Floor(floor) => out.floors.push(floor),
            Applied::Record {
                key,
                revision,
                error,
            } => out.applied.push((key, revision, error)),
            Applied::Unchanged => {}
            Applied::Refused(why) => out.refused.push(format!(
                "applied[{i}] ({}: {} → {cluster}): {why}",
                a.mirror_peer, a.from
            )),
        }
    }
    for (i, e) in req.source_errors.iter().enumerate() {
        match view.peers.get(&e.mirror_peer) {
            Some(p) if members(p).contains(&cluster) => {
                out.source_errors
                    .insert(e.mirror_peer.clone(), clip(&e.error));
            }
            _ => out.refused.push(format!(
                "sourceErrors[{i}] ({}): not a MirrorPeer of {cluster}",
                e.mirror_peer
            )),
        }
    }
    Ok(out)
}

/// What refuses a request whole: another cluster's name, a key that is no curve key, or more
/// entries than a request may carry.
fn check_whole(cluster: &str, req: &PeerSyncRequest) -> Result<(), String> {
    if req.cluster_name != cluster {
        return Err(format!(
            "clusterName {:?} does not match the subject's cluster {cluster:?}",
            req.cluster_name
        ));
    }
    if !is_xkey(&req.xkey) {
        return Err(format!(
            "xkey {:?}: not a public curve key (an NKeys xkey starting with X)",
            req.xkey.chars().take(64).collect::<String>()
        ));
    }
    for (what, n, max) in [
        ("outbound", req.outbound.len(), MAX_OUTBOUND),
        ("applied", req.applied.len(), MAX_APPLIED),
        ("sourceErrors", req.source_errors.len(), MAX_SOURCE_ERRORS),
    ] {
        if n > max {
            return Err(format!("{what}: {n} entries, at most {max}"));
        }
    }
    Ok(())
}

/// What one applied revision a cluster reports comes to.
#[derive(Debug, PartialEq)]
enum Applied {
    /// The cluster holds a newer box of the pair than the hub: the floor its sender counts on
    /// from, kept as a record with no box.
    Floor(SealedPeerSecret),
    /// The held record's applied revision or error changes.
    Record {
        /// The record's [`record_key`].
        key: String,
        /// Its applied revision now.
        revision: u64,
        /// Its applied error now (clipped).
        error: String,
    },
    /// Nothing to record (no record, another sender key, nothing new).
    Unchanged,
    /// Refused, saying why.
    Refused(String),
}

/// `cluster`'s report `a` of what it applied from a peer, `xkey` being the key it presents.
fn check_applied(
    cluster: &str,
    xkey: &str,
    a: &flotilla_api::v1::AppliedPeerSecret,
    view: View<'_>,
) -> Applied {
    let key = record_key(&a.mirror_peer, &a.from, cluster);
    let Some(p) = view.peers.get(&a.mirror_peer) else {
        return Applied::Refused("no such MirrorPeer".into());
    };
    if !members(p).contains(&cluster) || !members(p).contains(&a.from.as_str()) {
        return Applied::Refused("not an exchange of this MirrorPeer".into());
    }
    if !is_xkey(&a.sender_xkey) {
        return Applied::Refused(
            "senderXkey (the key the applied box was sealed with) is not a public curve key".into(),
        );
    }
    // The cluster holds a newer box of the pair than the hub (none, when the hub purged
    // the pair's boxes while the cluster was deleted; an older one, when the sender
    // restarted and counted again from what the hub held): what it holds is the floor the
    // sender must count on from, or every box is refused as stale. Kept as a record with
    // no box, applied — only under the sender's current key (an older key's count is
    // over), and only from a cluster hurting nobody but itself if it lies.
    let held = view.records.get(&key);
    let floor = a.error.is_empty()
        && a.revision > 0
        && view.keys.get(&a.from) == Some(&a.sender_xkey)
        && held.is_none_or(|r| {
            r.sender_xkey == a.sender_xkey && r.recipient_xkey == xkey && a.revision > r.revision
        });
    if floor {
        return Applied::Floor(SealedPeerSecret {
            mirror_peer: a.mirror_peer.clone(),
            from: a.from.clone(),
            to: cluster.to_string(),
            sender_xkey: a.sender_xkey.clone(),
            recipient_xkey: xkey.to_string(),
            revision: a.revision,
            applied_revision: a.revision,
            ..Default::default()
        });
    }
    let Some(r) = held else {
        return Applied::Unchanged; // Deleted or replaced meanwhile: nothing to record.
    };
    if a.sender_xkey != r.sender_xkey {
        // About a box its sender replaced under a new key: revisions count per sender key,
        // so its revision says nothing about the box held now.
        return Applied::Unchanged;
    }
    if a.revision > r.revision {
        return Applied::Refused(format!(
            "revision {} was never handed out (the hub holds {})",
            a.revision, r.revision
        ));
    }
    let error = clip(&a.error);
    let revision = if error.is_empty() {
        a.revision.max(r.applied_revision)
    } else {
        r.applied_revision
    };
    if revision != r.applied_revision || error != r.applied_error {
        Applied::Record {
            key,
            revision,
            error,
        }
    } else {
        Applied::Unchanged
    }
}

/// One box from `cluster`: sealed by it with the key it presents, to a peer of that
/// MirrorPeer with the key the hub holds for it, newer than the box stored, within the limit.
fn check_box(
    cluster: &str,
    xkey: &str,
    b: &SealedPeerSecret,
    view: View<'_>,
) -> Result<(), String> {
    let Some(p) = view.peers.get(&b.mirror_peer) else {
        return Err("no such MirrorPeer".into());
    };
    if b.from != cluster {
        return Err(format!("from must be the asking cluster {cluster:?}"));
    }
    let peers = members(p);
    if !peers.contains(&cluster) {
        return Err(format!("{cluster:?} is not a peer of this MirrorPeer"));
    }
    if b.to == cluster || !peers.contains(&b.to.as_str()) {
        return Err(format!("{:?} is not another peer of this MirrorPeer", b.to));
    }
    if b.sender_xkey != xkey {
        return Err("senderXkey is not the key this request presents".into());
    }
    match view.keys.get(&b.to) {
        Some(k) if *k == b.recipient_xkey => {}
        Some(_) => return Err(format!("recipientXkey is not {:?}'s current key", b.to)),
        None => return Err(format!("{:?} has presented no key yet", b.to)),
    }
    if b.sealed.is_empty() || b.sealed.len() > MAX_SEALED_BYTES {
        return Err(format!(
            "sealed: {} bytes, 1 to {MAX_SEALED_BYTES} allowed",
            b.sealed.len()
        ));
    }
    // Revisions count per pair of keys (the sender's, the recipient's): a box stored under a
    // key either side replaced neither blocks nor bounds the new pair's revisions — the
    // destination counts the same way, and cannot open a box of the old pair with its key.
    let stored = view
        .records
        .get(&record_key(&b.mirror_peer, &b.from, &b.to))
        .filter(|r| r.sender_xkey == b.sender_xkey && r.recipient_xkey == b.recipient_xkey)
        .map(|r| r.revision);
    if let Some(stored) = stored
        && b.revision <= stored
    {
        return Err(format!(
            "revision {} is not newer than the stored revision {stored}",
            b.revision
        ));
    }
    // A sender moves one revision at a time; a jump to the top of the range would leave the
    // pair's next revision nowhere to go (a compromised key blocking its successor).
    let ceiling = stored.unwrap_or(0).saturating_add(MAX_REVISION_STEP);
    if b.revision > ceiling {
        return Err(format!(
            "revision {} is more than {MAX_REVISION_STEP} past the stored revision {}",
            b.revision,
            stored.unwrap_or(0)
        ));
    }
    if b.revision == 0 {
        return Err("revision must be at least 1".into());
    }
    Ok(())
}

/// Whether the box is sealed with `from`'s current key to `to`'s current key (any other is
/// one its destination cannot open, or cannot take as `from`'s).
fn current(r: &SealedPeerSecret, view: View<'_>) -> bool {
    view.keys.get(&r.to) == Some(&r.recipient_xkey)
        && view.keys.get(&r.from) == Some(&r.sender_xkey)
}

/// The boxes to drop when `cluster` presents `key`: those it sealed with another key (no peer
/// can take them as its any more) and those sealed to another key of its (it cannot open
/// them). Its peers seal again to the new key; its own next boxes start a new count of
/// revisions under the new key.
pub fn replaced_boxes(cluster: &str, key: &str, view: View<'_>) -> Vec<String> {
    view.records
        .iter()
        .filter(|(_, r)| {
            (r.from == cluster && r.sender_xkey != key)
                || (r.to == cluster && r.recipient_xkey != key)
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// Every box from or to `cluster` (dropped with its key when the cluster is deleted).
pub fn boxes_of(cluster: &str, view: View<'_>) -> Vec<String> {
    view.records
        .iter()
        .filter(|(_, r)| r.from == cluster || r.to == cluster)
        .map(|(k, _)| k.clone())
        .collect()
}

/// The answer to `cluster`: each of its MirrorPeers with its own item, the other peers' keys,
/// the boxes for it not applied yet (at most `budget` sealed bytes: `more` says some were left
/// out), and the revisions of its own boxes the hub holds.
pub fn deliveries(cluster: &str, view: View<'_>, budget: usize) -> (Vec<MirrorPeerDelivery>, bool) {
    let mut out = Vec::new();
    let mut left = budget;
    let mut more = false;
    // The first box of the whole answer always goes (one box never exceeds the budget); any
    // other only within what is left.
    let mut delivered = false;
    for p in of_cluster(view, cluster) {
        let name = name(p);
        let own = items(p).iter().find(|i| i.cluster_name == cluster).cloned();
        let mut d = MirrorPeerDelivery {
            mirror_peer: name.to_string(),
            generation: p.metadata.as_ref().map_or(0, |m| m.generation),
            own_item: own,
            ..Default::default()
        };
        for peer in members(p).into_iter().filter(|c| *c != cluster) {
            d.peers.push(PeerKey {
                cluster: peer.to_string(),
                xkey: view.keys.get(peer).cloned().unwrap_or_default(),
            });
            if let Some(r) = view.records.get(&record_key(name, cluster, peer)) {
                d.stored.push(StoredPeerSecret {
                    to: peer.to_string(),
                    revision: r.revision,
                    recipient_xkey: r.recipient_xkey.clone(),
                });
            }
            if let Some(r) = view.records.get(&record_key(name, peer, cluster))
                && current(r, view)
                && r.applied_revision < r.revision
            {
                if r.sealed.len() > left && delivered {
                    more = true;
                    continue;
                }
                delivered = true;
                left = left.saturating_sub(r.sealed.len());
                d.inbound.push(SealedPeerSecret {
                    applied_revision: 0,
                    applied_error: String::new(),
                    ..r.clone()
                });
            }
        }
        out.push(d);
    }
    (out, more)
}

/// Whether `cluster` has something to do in its MirrorPeers: present a key, seal its Secret
/// for a peer that has a key, or apply a box for it.
pub fn has_work(cluster: &str, view: View<'_>) -> bool {
    let mine = of_cluster(view, cluster);
    if mine.is_empty() {
        return false;
    }
    if !view.keys.contains_key(cluster) {
        return true;
    }
    mine.iter().any(|p| {
        let name = name(p);
        members(p)
            .into_iter()
            .filter(|c| *c != cluster)
            .any(|peer| {
                let outgoing = view.keys.contains_key(peer)
                    && view
                        .records
                        .get(&record_key(name, cluster, peer))
                        .is_none_or(|r| !current(r, view));
                let incoming = view
                    .records
                    .get(&record_key(name, peer, cluster))
                    .is_some_and(|r| current(r, view) && r.applied_revision < r.revision);
                outgoing || incoming
            })
    })
}

/// What the status looks at besides the [`View`].
#[derive(Debug)]
pub struct Observed<'a> {
    /// Clusters whose ManagedClusterConditionAvailable is True.
    pub available: BTreeSet<&'a str>,
    /// Boxes handed to their destination (by [`record_key`]).
    pub delivered: &'a BTreeSet<String>,
    /// Sources' errors: `(mirror peer, cluster)` → error.
    pub source_errors: &'a BTreeMap<(String, String), String>,
    /// The hub is not in secure mode: the keys the peers present are not authenticated.
    pub insecure: bool,
}

static NOTHING_DELIVERED: BTreeSet<String> = BTreeSet::new();
static NO_SOURCE_ERRORS: BTreeMap<(String, String), String> = BTreeMap::new();

impl Default for Observed<'_> {
    /// Nobody Available, nothing delivered, no source errors, secure mode.
    fn default() -> Self {
        Self {
            available: BTreeSet::new(),
            delivered: &NOTHING_DELIVERED,
            source_errors: &NO_SOURCE_ERRORS,
            insecure: false,
        }
    }
}

/// The status of `p`: one exchange per ordered pair, ODF's phase, `PeersReachable` naming the
/// peers not Available, `S3ProfileSynced` Unsupported when `manageS3` asks for it,
/// `PeerKeysAuthenticated` False outside secure mode.
pub fn status(p: &MirrorPeer, view: View<'_>, seen: &Observed<'_>) -> MirrorPeerStatus {
    let name = name(p);
    let peers = members(p);
    let mut s = p.status.clone().unwrap_or_default();
    s.exchanges.clear();
    for from in &peers {
        for to in peers.iter().filter(|t| *t != from) {
            s.exchanges.push(exchange_of(name, from, to, view, seen));
        }
    }
    s.phase = if s.exchanges.iter().all(|e| e.phase == exchange::APPLIED) {
        phase::EXCHANGED
    } else {
        phase::EXCHANGING
    }
    .to_string();
    let offline: Vec<&str> = peers
        .iter()
        .copied()
        .filter(|c| !seen.available.contains(c))
        .collect();
    if offline.is_empty() {
        set_condition(
            &mut s.conditions,
            mp::CONDITION_PEERS_REACHABLE,
            cstatus::TRUE,
            "PeersAvailable",
            "every peer is Available",
        );
    } else {
        set_condition(
            &mut s.conditions,
            mp::CONDITION_PEERS_REACHABLE,
            cstatus::FALSE,
            "PeerOffline",
            &format!("not Available: {}", offline.join(", ")),
        );
    }
    if p.spec.as_ref().is_some_and(|s| s.manage_s3) {
        set_condition(
            &mut s.conditions,
            mp::CONDITION_S3,
            cstatus::FALSE,
            "Unsupported",
            "manageS3: Flotilla does not sync S3 profiles",
        );
    } else {
        remove_condition(&mut s.conditions, mp::CONDITION_S3);
    }
    if seen.insecure {
        set_condition(
            &mut s.conditions,
            mp::CONDITION_KEYS_AUTHENTICATED,
            cstatus::FALSE,
            "InsecureMode",
            "the hub is not in secure mode (allowed by --allow-insecure-mirrorpeers): any NATS \
             client can present a curve key under a peer's name, and the peers seal their \
             Secrets to whatever key was presented; run the hub with --secure-dir",
        );
    } else {
        remove_condition(&mut s.conditions, mp::CONDITION_KEYS_AUTHENTICATED);
    }
    s.observed_generation = p.metadata.as_ref().map_or(0, |m| m.generation);
    s
}

/// The phase table of one exchange.
fn exchange_of(
    name: &str,
    from: &str,
    to: &str,
    view: View<'_>,
    seen: &Observed<'_>,
) -> PeerExchange {
    let key = record_key(name, from, to);
    let e = |phase: &str, revision: u64, message: String| PeerExchange {
        from: from.to_string(),
        to: to.to_string(),
        phase: phase.to_string(),
        revision,
        message,
    };
    let source_error = seen
        .source_errors
        .get(&(name.to_string(), from.to_string()));
    let Some(r) = view.records.get(&key) else {
        let why = if let Some(err) = source_error {
            format!("{from}: {err}")
        } else if !view.keys.contains_key(to) {
            format!("waiting for {to}'s agent to present its key")
        } else if !view.keys.contains_key(from) {
            format!("waiting for {from}'s agent to ask for its MirrorPeers")
        } else {
            format!("waiting for {from} to seal its Secret")
        };
        return e(exchange::PENDING, 0, why);
    };
    if view.keys.get(to) != Some(&r.recipient_xkey) {
        return e(
            exchange::PENDING,
            r.revision,
            format!("sealed to an old key of {to}; waiting for {from} to seal again"),
        );
    }
    if view.keys.get(from) != Some(&r.sender_xkey) {
        return e(
            exchange::PENDING,
            r.revision,
            format!("sealed with an old key of {from}; waiting for {from} to seal again"),
        );
    }
    if r.applied_revision >= r.revision {
        let note = source_error.map_or(String::new(), |err| format!("{from}: {err}"));
        return e(exchange::APPLIED, r.revision, note);
    }
    if !r.applied_error.is_empty() {
        return e(
            exchange::DELIVERED,
            r.revision,
            format!("{to} could not apply it: {}", r.applied_error),
        );
    }
    if seen.delivered.contains(&key) {
        return e(exchange::DELIVERED, r.revision, String::new());
    }
    e(exchange::SEALED, r.revision, String::new())
}

#[cfg(test)]
mod tests;
