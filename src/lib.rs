//! custody-indexer: watches EVM chains and Solana for deposits to custody
//! accounts and records each exactly once, `PENDING` → `CONFIRMED` (or
//! `FAILED` when a reorg drops it), in a SQLite or PostgreSQL store.

pub mod account;
pub mod alarm;
pub mod amount;
pub mod api;
pub mod api_key;
pub mod assets;
pub mod audit;
pub mod bank;
pub mod bank_import;
pub mod chain;
pub mod cli;
pub mod conditions;
pub mod config;
pub mod console;
pub mod conversions;
pub mod deposits;
pub mod dev;
pub mod environment;
pub mod events;
pub mod every;
pub mod evm;
pub mod family;
#[cfg(test)]
mod fixtures;
pub mod identity;
pub mod issuance;
pub mod keys;
pub mod lease;
pub mod mail;
pub mod operators;
pub mod people;
pub mod pii;
pub mod reconcile;
pub mod redact;
pub mod request_signature;
pub mod restore;
pub mod rpc;
pub mod schemas;
pub mod scrub;
pub mod server;
pub mod service;
pub mod solana;
pub mod start;
pub mod store;
pub mod telemetry;
pub mod transfers;
pub mod unknown;
pub mod webhooks;
