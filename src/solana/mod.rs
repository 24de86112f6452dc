//! Solana: the RPC edge, pure decoding of `getTransaction` / `getBlock`
//! responses, the watcher that scans by blocks or by signatures, and the
//! sender of sponsored transfers.

pub mod accounts;
pub mod decode;
pub mod family;
mod finality;
pub mod instructions;
pub mod rpc;
mod send_answers;
mod sender;
mod watcher;

pub use sender::SolanaSender;
pub use watcher::SolanaWatcher;
