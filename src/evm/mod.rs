//! EVM chains: the RPC edge, pure decoding, the watcher that scans blocks
//! into the store, and the sender of gas-sponsored transfers.

pub mod asset_code;
mod broadcast;
mod completeness;
pub mod decode;
pub mod family;
mod heads;
mod ranges;
mod reorg;
pub mod rpc;
mod sender;
mod watcher;
mod witness;

pub use sender::EvmSender;
pub use watcher::EvmWatcher;

pub use crate::deposits::watcher::{BackfillReport, Tick, WatchError};
