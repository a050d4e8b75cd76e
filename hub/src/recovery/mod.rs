//! The recovery window after a restore, as the API serves it: the core's follower of the
//! window and its orphans ([`flotilla_hub_core::recovery`], used by every cluster actor) and
//! `flotilla.v1.RecoveryService` over it ([`family`], [`grpc`]).

pub mod family;
pub mod grpc;

pub use flotilla_hub_core::recovery::*;
