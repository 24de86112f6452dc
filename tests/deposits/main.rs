//! Deposits found on real nodes: the EVM and Solana watchers, transaction
//! versions, a deposit's identity, registration, a chain that stops, what a
//! wrong setup waits on, backends that lag, the platform's own transactions,
//! the binary on Solana.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod b20;
mod block_time;
mod chain_stop;
mod deposit_identity;
mod evm_watcher;
mod lagging_backends;
mod lagging_solana;
mod own_transactions;
mod quorum;
mod reconcile;
mod reconcile_batched;
mod reconcile_run;
mod reconcile_spread;
mod registration;
mod silent_waits;
mod solana_cli;
mod solana_quorum;
mod solana_reconcile_batched;
mod solana_versions;
mod solana_watcher;
mod todays_chains;
