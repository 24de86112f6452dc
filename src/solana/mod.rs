//! Solana: the RPC edge, pure decoding of `getTransaction` / `getBlock`
//! responses, and the watcher that scans by blocks or by signatures.

pub mod accounts;
pub mod decode;
pub mod rpc;
mod watcher;

pub use watcher::SolanaWatcher;
