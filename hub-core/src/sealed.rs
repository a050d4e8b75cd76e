//! Sealed boxes between the hubs of one control plane: what keeps forwarded gRPC calls
//! ([`crate::grpc::forward`]) and shard calls' join tokens ([`crate::cluster::route`]) from
//! crossing NATS in clear, and lets a hub vouch for the caller it authenticated.
//!
//! Every hub of a control plane holds the same sealing key ([`SealingKey`], the secure
//! directory's `keys/sealing.xk` or `--sealing-key-file`), an NKeys curve key pair (X25519,
//! XSalsa20-Poly1305 boxes). Two kinds of box:
//!
//! - **Calls** ([`HubSeal::seal_call`]): sealed by the shared key to its own public key. Making
//!   or opening one needs the shared private key, so a box that opens was made by a hub of this
//!   control plane: what it says about the caller is the forwarding hub's word, which someone
//!   holding only `hub.creds` (and so reading and writing every subject of the hub account)
//!   can neither read nor forge.
//! - **Answers** ([`HubSeal::seal_answer`]): sealed to a reply key ([`ReplyKey`]) the asking hub
//!   made for that one call and sent inside the call box (or, for a shard call, with the call)
//!   — by the shared key, so only a hub of this control plane can make an answer that opens.
//!
//! Each plaintext starts with its purpose ([`Purpose`]): a box made for one use never opens as
//! another. A call box also carries a random id and its issue time; the holder runs each id
//! once, and no call older than its deadline plus the clock slack ([`ReplayGuard`]).
//!
//! A hub without a sealing key file has a key of its own that no other hub shares
//! ([`HubSeal::shared`] is false). It cannot make a call box another hub opens, so it forwards
//! calls in clear and never with a bearer token or a caller (the forwarder refuses those); its
//! answers are still sealed to the asker's reply key — by its own key, named in the answer —
//! so a passive listener reads no answer, though nothing proves which hub made it.

use crate::key::SealingKey;
use nkeys::XKey;
use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, SystemTime};
use thiserror::Error;

/// Default [`ReplayLimits::slack`] (`--inter-hub-clock-slack-seconds`).
pub const SLACK: Duration = Duration::from_secs(30);

/// Default [`ReplayLimits::capacity`] (`--inter-hub-replay-capacity`).
pub const REPLAY_CAPACITY: usize = 65_536;

/// What a holder of forwarded calls remembers to run each call once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayLimits {
    /// Call ids remembered at most; when full, the call expiring first is forgotten and every
    /// call expiring no later is refused as stale from then on (no id is ever run twice).
    pub capacity: usize,
    /// How much older than its deadline a call may be when it arrives, and how far the
    /// sender's clock may be ahead: the hubs' clocks must agree within this (NTP).
    pub slack: Duration,
}

impl Default for ReplayLimits {
    fn default() -> Self {
        Self {
            capacity: REPLAY_CAPACITY,
            slack: SLACK,
        }
    }
}

/// What a box is for: the first bytes of its plaintext.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A forwarded gRPC call (`InnerCall`).
    Call,
    /// A forwarded gRPC call's answer (`ForwardedReply`).
    Answer,
    /// A join token from the hub holding the cluster's shard (`JoinToken`).
    JoinToken,
    /// A push webhook forwarded to the controllers' hub (`GitWebhook`): sealed like a call.
    Webhook,
}

impl Purpose {
    fn tag(self) -> &'static [u8] {
        match self {
            Purpose::Call => b"flotilla/forwarded-call/2\n",
            Purpose::Answer => b"flotilla/forwarded-answer/2\n",
            Purpose::JoinToken => b"flotilla/join-token/1\n",
            Purpose::Webhook => b"flotilla/forwarded-webhook/1\n",
        }
    }
}

/// A box that cannot be made or opened.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SealedError {
    /// This hub has no sealing key shared with the other hubs.
    #[error(
        "this hub has no sealing key shared with the other hubs (the secure directory's \
         keys/sealing.xk or --sealing-key-file): give every hub of the control plane the same one"
    )]
    NotShared,
    /// A public key on the wire is not a curve public key.
    #[error("{what} {key:?} is not a curve public key (X…)")]
    Key {
        /// Which key.
        what: &'static str,
        /// The key as sent.
        key: String,
    },
    /// Sealing failed.
    #[error("sealing failed")]
    Seal,
    /// The box does not open with this key: another control plane's key, or tampered with.
    #[error(
        "the box does not open with this hub's sealing key: the hubs do not share one (the \
         secure directory's keys/sealing.xk or --sealing-key-file), or it was tampered with"
    )]
    Open,
    /// The answer was sealed by a key that is not the control plane's.
    #[error("the answer was sealed by {sender}, not by the control plane's sealing key")]
    Sender {
        /// The sender key the answer names.
        sender: String,
    },
    /// The box opened but was made for something else.
    #[error("the box was made for another purpose than a {want:?}")]
    Purpose {
        /// What it was opened as.
        want: Purpose,
    },
}

/// This hub's side of the sealing: its sealing key and whether the other hubs share it.
#[derive(Clone, Debug)]
pub struct HubSeal {
    key: SealingKey,
    shared: bool,
}

impl HubSeal {
    /// Seals with `key`; shared with the other hubs when it was read from a file.
    pub fn new(key: SealingKey) -> Self {
        let shared = key.source.is_some();
        Self { key, shared }
    }

    /// Whether every hub of the control plane holds this key (it was read from a file): only
    /// then are calls sealed and callers vouched for.
    pub fn shared(&self) -> bool {
        self.shared
    }

    /// The public key answers are sealed by (`X…`).
    pub fn public(&self) -> &str {
        self.key.public()
    }

    /// The sealing key itself (hub Secrets sealed at rest, `protect` in hub templates).
    pub fn key(&self) -> &SealingKey {
        &self.key
    }

    /// A call box: `plain` sealed by the shared key to itself.
    pub fn seal_call(&self, plain: &[u8]) -> Result<Vec<u8>, SealedError> {
        self.seal_shared(Purpose::Call, plain)
    }

    /// Opens a call box made by a hub sharing this key.
    pub fn open_call(&self, sealed: &[u8]) -> Result<Vec<u8>, SealedError> {
        self.open_shared(Purpose::Call, sealed)
    }

    /// `plain` sealed for `purpose` by the shared key to itself (a call box's kind of box).
    pub fn seal_shared(&self, purpose: Purpose, plain: &[u8]) -> Result<Vec<u8>, SealedError> {
        if !self.shared {
            return Err(SealedError::NotShared);
        }
        let own = self.own_public()?;
        self.key
            .seal_to(&tagged(purpose, plain), &own)
            .ok_or(SealedError::Seal)
    }

    /// Opens a box made by [`HubSeal::seal_shared`] for `purpose` by a hub sharing this key.
    pub fn open_shared(&self, purpose: Purpose, sealed: &[u8]) -> Result<Vec<u8>, SealedError> {
        if !self.shared {
            return Err(SealedError::NotShared);
        }
        let own = self.own_public()?;
        let plain = self.key.open_from(sealed, &own).ok_or(SealedError::Open)?;
        untag(purpose, plain)
    }

    /// `plain` sealed for `purpose` to the asker's `reply_xkey`.
    pub fn seal_answer(
        &self,
        purpose: Purpose,
        plain: &[u8],
        reply_xkey: &str,
    ) -> Result<Vec<u8>, SealedError> {
        let recipient = XKey::from_public_key(reply_xkey).map_err(|_| SealedError::Key {
            what: "reply key",
            key: reply_xkey.chars().take(64).collect(),
        })?;
        self.key
            .seal_to(&tagged(purpose, plain), &recipient)
            .ok_or(SealedError::Seal)
    }

    fn own_public(&self) -> Result<XKey, SealedError> {
        XKey::from_public_key(self.key.public()).map_err(|_| SealedError::Key {
            what: "sealing key",
            key: self.key.public().to_string(),
        })
    }
}

/// A key pair an asking hub makes for one call: the answer is sealed to its public key.
pub struct ReplyKey {
    key: XKey,
    public: String,
}

impl std::fmt::Debug for ReplyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyKey")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl Default for ReplyKey {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplyKey {
    /// A new key pair.
    pub fn new() -> Self {
        let key = XKey::new();
        let public = key.public_key();
        Self { key, public }
    }

    /// Its public key, sent with the call (`X…`).
    pub fn public(&self) -> &str {
        &self.public
    }

    /// Opens an answer for `purpose` sealed by `sender_xkey`; where the hubs share the sealing
    /// key (`seal`), only an answer sealed by it opens.
    pub fn open(
        &self,
        seal: &HubSeal,
        purpose: Purpose,
        sealed: &[u8],
        sender_xkey: &str,
    ) -> Result<Vec<u8>, SealedError> {
        if seal.shared() && sender_xkey != seal.public() {
            return Err(SealedError::Sender {
                sender: sender_xkey.chars().take(64).collect(),
            });
        }
        let sender = XKey::from_public_key(sender_xkey).map_err(|_| SealedError::Key {
            what: "sender key",
            key: sender_xkey.chars().take(64).collect(),
        })?;
        let plain = self
            .key
            .open(sealed, &sender)
            .map_err(|_| SealedError::Open)?;
        untag(purpose, plain)
    }
}

fn tagged(purpose: Purpose, plain: &[u8]) -> Vec<u8> {
    let tag = purpose.tag();
    let mut out = Vec::with_capacity(tag.len() + plain.len());
    out.extend_from_slice(tag);
    out.extend_from_slice(plain);
    out
}

fn untag(want: Purpose, mut plain: Vec<u8>) -> Result<Vec<u8>, SealedError> {
    let tag = want.tag();
    if !plain.starts_with(tag) {
        return Err(SealedError::Purpose { want });
    }
    plain.drain(..tag.len());
    Ok(plain)
}

/// Why a call is not run.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Refusal {
    /// It was issued more than the slack in the future: the hubs' clocks disagree.
    #[error(
        "the call was issued {ahead:?} in this hub's future: the hubs' clocks disagree by more \
         than {slack:?} (run NTP, or raise --inter-hub-clock-slack-seconds)"
    )]
    Future {
        /// By how much.
        ahead: Duration,
        /// The slack allowed.
        slack: Duration,
    },
    /// Its deadline (plus the slack) has passed: a replay, or the hubs' clocks disagree.
    #[error(
        "the call is stale: issued {age:?} ago with a deadline of {deadline:?} (replayed, or the \
         hubs' clocks disagree by more than {slack:?})"
    )]
    Stale {
        /// How long ago it was issued.
        age: Duration,
        /// Its deadline.
        deadline: Duration,
        /// The slack allowed.
        slack: Duration,
    },
    /// Its id was run already.
    #[error("the call was run already (a replay)")]
    Replayed,
}

/// The call ids a holder has run, until their calls could no longer arrive.
#[derive(Debug)]
pub struct ReplayGuard {
    seen: HashSet<[u8; 16]>,
    by_expiry: BTreeSet<(SystemTime, [u8; 16])>,
    /// Calls expiring at or before this are refused: an id forgotten to stay within
    /// `capacity` expired no later.
    floor: SystemTime,
    capacity: usize,
    slack: Duration,
}

impl Default for ReplayGuard {
    fn default() -> Self {
        Self::within(ReplayLimits::default())
    }
}

impl ReplayGuard {
    /// Remembers at most `capacity` ids (at least one), with the default slack.
    pub fn new(capacity: usize) -> Self {
        Self::within(ReplayLimits {
            capacity,
            slack: SLACK,
        })
    }

    /// A guard within `limits`.
    pub fn within(limits: ReplayLimits) -> Self {
        Self {
            seen: HashSet::new(),
            by_expiry: BTreeSet::new(),
            floor: SystemTime::UNIX_EPOCH,
            capacity: limits.capacity.max(1),
            slack: limits.slack,
        }
    }

    /// Whether the call `id`, issued at `issued` with `deadline`, may run at `now`; if so it
    /// is remembered.
    pub fn admit(
        &mut self,
        id: [u8; 16],
        issued: SystemTime,
        deadline: Duration,
        now: SystemTime,
    ) -> Result<(), Refusal> {
        let slack = self.slack;
        if let Ok(ahead) = issued.duration_since(now)
            && ahead > slack
        {
            return Err(Refusal::Future { ahead, slack });
        }
        let expiry = issued + deadline + slack;
        let age = now.duration_since(issued).unwrap_or_default();
        if now > expiry || expiry <= self.floor {
            return Err(Refusal::Stale {
                age,
                deadline,
                slack,
            });
        }
        while let Some(first) = self.by_expiry.first().copied()
            && first.0 < now
        {
            self.by_expiry.remove(&first);
            self.seen.remove(&first.1);
        }
        if !self.seen.insert(id) {
            return Err(Refusal::Replayed);
        }
        self.by_expiry.insert((expiry, id));
        while self.seen.len() > self.capacity {
            let Some(first) = self.by_expiry.pop_first() else {
                break;
            };
            self.seen.remove(&first.1);
            self.floor = self.floor.max(first.0);
        }
        Ok(())
    }

    /// How many ids it holds.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> HubSeal {
        let dir = tempfile::tempdir().unwrap();
        let key = SealingKey::from_file(&dir.path().join("sealing.xk")).unwrap();
        HubSeal::new(key)
    }

    #[test]
    fn a_call_opens_only_with_the_shared_key_and_untampered() {
        let seal = shared();
        let boxed = seal.seal_call(b"the call").unwrap();
        assert_eq!(seal.open_call(&boxed).unwrap(), b"the call");
        assert!(
            !boxed.windows(8).any(|w| w == b"the call"),
            "the call is not in clear"
        );
        // The same key on another hub opens it: a clone shares the key.
        assert_eq!(seal.clone().open_call(&boxed).unwrap(), b"the call");

        let other = shared();
        assert_eq!(other.open_call(&boxed), Err(SealedError::Open));
        let mut tampered = boxed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert_eq!(seal.open_call(&tampered), Err(SealedError::Open));
        assert_eq!(seal.open_call(b"xkv1 short"), Err(SealedError::Open));

        // A hub with a key of its own neither makes nor opens calls.
        let alone = HubSeal::new(SealingKey::ephemeral());
        assert!(!alone.shared());
        assert_eq!(alone.seal_call(b"x"), Err(SealedError::NotShared));
        assert_eq!(alone.open_call(&boxed), Err(SealedError::NotShared));
    }

    #[test]
    fn a_box_made_for_one_purpose_does_not_open_as_another() {
        let seal = shared();
        let reply = ReplyKey::new();
        let answer = seal
            .seal_answer(Purpose::Answer, b"status", reply.public())
            .unwrap();
        assert_eq!(
            reply.open(&seal, Purpose::JoinToken, &answer, seal.public()),
            Err(SealedError::Purpose {
                want: Purpose::JoinToken
            })
        );
        // A box sealed to the shared key by someone else (an agent's sealed token) is no call.
        let stranger = XKey::new();
        let own = XKey::from_public_key(seal.public()).unwrap();
        let forged = stranger
            .seal(b"flotilla/forwarded-call/2\nx", &own)
            .unwrap();
        assert_eq!(seal.open_call(&forged), Err(SealedError::Open));
    }

    #[test]
    fn an_answer_opens_only_with_its_reply_key_and_from_the_shared_key() {
        let seal = shared();
        let reply = ReplyKey::new();
        let boxed = seal
            .seal_answer(Purpose::JoinToken, b"SUAseed", reply.public())
            .unwrap();
        assert_eq!(
            reply
                .open(&seal, Purpose::JoinToken, &boxed, seal.public())
                .unwrap(),
            b"SUAseed"
        );
        // Another call's reply key does not open it.
        let wrong = ReplyKey::new();
        assert_eq!(
            wrong.open(&seal, Purpose::JoinToken, &boxed, seal.public()),
            Err(SealedError::Open)
        );
        // An answer made by a key that is not the control plane's is refused, even sealed to
        // the right reply key: someone holding hub.creds cannot answer in a hub's name.
        let forger = HubSeal::new(SealingKey::ephemeral());
        let forged = forger
            .seal_answer(Purpose::JoinToken, b"SUAforged", reply.public())
            .unwrap();
        assert!(matches!(
            reply.open(&seal, Purpose::JoinToken, &forged, forger.public()),
            Err(SealedError::Sender { .. })
        ));
        // Named as the shared key, it does not open.
        assert_eq!(
            reply.open(&seal, Purpose::JoinToken, &forged, seal.public()),
            Err(SealedError::Open)
        );
        // Between hubs without a shared key, the sender is the one the answer names.
        let alone = HubSeal::new(SealingKey::ephemeral());
        assert_eq!(
            reply
                .open(&alone, Purpose::JoinToken, &forged, forger.public())
                .unwrap(),
            b"SUAforged"
        );
        assert!(matches!(
            seal.seal_answer(Purpose::Answer, b"x", "not a key"),
            Err(SealedError::Key { .. })
        ));
    }

    const T0: Duration = Duration::from_secs(1_800_000_000);

    fn at(offset: Duration) -> SystemTime {
        SystemTime::UNIX_EPOCH + T0 + offset
    }

    #[test]
    fn a_call_runs_once_and_only_within_its_deadline() {
        let mut guard = ReplayGuard::new(16);
        let deadline = Duration::from_secs(10);
        let now = at(Duration::from_secs(5));
        guard
            .admit([1; 16], at(Duration::ZERO), deadline, now)
            .unwrap();
        assert_eq!(
            guard.admit([1; 16], at(Duration::ZERO), deadline, now),
            Err(Refusal::Replayed)
        );
        // Past its deadline and the slack: stale, whatever its id.
        let late = at(deadline + SLACK + Duration::from_secs(1));
        assert!(matches!(
            guard.admit([2; 16], at(Duration::ZERO), deadline, late),
            Err(Refusal::Stale { .. })
        ));
        // A sender's clock ahead by more than the slack.
        assert!(matches!(
            guard.admit([3; 16], now + SLACK * 2, deadline, now),
            Err(Refusal::Future { .. })
        ));
        // Within the slack ahead is fine.
        guard
            .admit([4; 16], now + SLACK / 2, deadline, now)
            .unwrap();
        // Expired ids are forgotten as time passes.
        guard.admit([5; 16], late, deadline, late).unwrap();
        assert_eq!(guard.len(), 2, "id 1 expired; 4 and 5 remain");
    }

    #[test]
    fn a_full_guard_forgets_the_first_to_expire_and_refuses_its_replay() {
        let mut guard = ReplayGuard::new(2);
        let now = at(Duration::ZERO);
        guard
            .admit([1; 16], now, Duration::from_secs(1), now)
            .unwrap();
        guard
            .admit([2; 16], now, Duration::from_secs(20), now)
            .unwrap();
        guard
            .admit([3; 16], now, Duration::from_secs(30), now)
            .unwrap();
        assert_eq!(guard.len(), 2);
        // Id 1 was forgotten, but its replay is refused as stale, not run again.
        assert!(matches!(
            guard.admit([1; 16], now, Duration::from_secs(1), now),
            Err(Refusal::Stale { .. })
        ));
        // A new call expiring later still runs.
        guard
            .admit([4; 16], now, Duration::from_secs(30), now)
            .unwrap();
        assert_eq!(
            guard.admit([3; 16], now, Duration::from_secs(30), now),
            Err(Refusal::Replayed)
        );
    }

    #[test]
    fn a_configured_slack_is_the_one_judged_and_named() {
        let now = SystemTime::now();
        let deadline = Duration::from_secs(10);
        let mut guard = ReplayGuard::within(ReplayLimits {
            capacity: 8,
            slack: Duration::from_secs(120),
        });
        // Sixty seconds ahead: within two minutes of slack.
        assert!(
            guard
                .admit([1; 16], now + Duration::from_secs(60), deadline, now)
                .is_ok()
        );
        let e = guard
            .admit([2; 16], now + Duration::from_secs(180), deadline, now)
            .unwrap_err();
        assert!(e.to_string().contains("120s"), "{e}");
        assert!(
            e.to_string().contains("--inter-hub-clock-slack-seconds"),
            "{e}"
        );
    }
}
