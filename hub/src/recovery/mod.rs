//! The recovery window after a restore, as the API serves it: the core's follower of the
//! window and its orphans ([`flotilla_hub_core::recovery`], used by every cluster actor),
//! `flotilla.v1.RecoveryService` over it ([`family`], [`grpc`]), and the dashboard's banner
//! while a window is open ([`banner`]).

pub mod banner;
pub mod family;
pub mod grpc;

pub use flotilla_hub_core::recovery::*;
