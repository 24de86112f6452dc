//! Events delivered: signed webhooks end to end, deliveries shared among
//! organizations and under several workers, waking on commit, the NATS sink.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod delivery_fairness;
mod delivery_leases;
mod delivery_wake;
mod nats_sink;
mod webhooks;
