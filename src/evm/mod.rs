//! EVM chains: the RPC edge, pure decoding, and the watcher that scans blocks
//! into the store.

pub mod decode;
mod heads;
mod reorg;
pub mod rpc;
mod watcher;

pub use watcher::EvmWatcher;

pub use crate::watcher::{BackfillReport, Tick, WatchError};
