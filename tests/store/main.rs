//! The stores on SQLite and PostgreSQL: deposits and cursors, worker leases,
//! a transfer's lineage, the gas ledger, compliance rounds, personal data at
//! rest, the outbox's retention, webhook signing keys.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod compliance_rounds;
mod gas_ledger;
mod outbox_retention;
mod pii;
mod reconcile;
mod store;
mod transfer_lineage;
mod webhook_keys;
mod worker_leases;
