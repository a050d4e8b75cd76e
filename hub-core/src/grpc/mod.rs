//! What every gRPC service of the hub passes through, whichever family serves it: the API
//! builder ([`api`]), the table of what each method needs ([`access`]), bearer tokens and roles
//! ([`auth`]), each identity's share of the server ([`capacity`]), name checks and the
//! rejected-call counter ([`guard`]), services that exist only on the hub holding the
//! controllers ([`late`]) and the forwarding of their calls to that hub ([`forward`]); the
//! audit lines of refused authentications, bounded per source ([`refused`]).

pub mod access;
pub mod api;
pub mod auth;
pub mod capacity;
pub mod forward;
pub mod guard;
pub mod late;
pub mod refused;
