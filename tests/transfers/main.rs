//! Gas-sponsored transfers on real nodes: every EVM route, requests over
//! HTTP, lying RPC answers, a topped-up address's queue, organization limits,
//! money that must not leave, Solana transfers.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod gas_cap;
mod money_paths;
mod org_limits;
mod reconcile_ledger;
mod send_faults;
mod settle_quorum;
mod solana_reconcile;
mod solana_settle_quorum;
mod solana_transfers;
mod top_up_queue;
mod transfer_requests;
mod transfers;
mod transfers_kms;
mod transfers_pkcs11;
