//! What a scanned block range commits ([`ScanCommit`]), the types the
//! watchers build and the scan commit (`deposits`) and its upserts read.

use crate::{chain::Chain, deposits::resource::Detected};

/// A block as the watcher saw it, kept to detect reorgs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRef {
    pub number: u64,
    pub hash: String,
    pub parent_hash: String,
}

/// How a scan moves the live cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CursorMove {
    /// Live indexing: the cursor must still be at `expected` (`None`: no
    /// cursor yet) and moves past the scanned range; `watch_version` is the
    /// address-set version the range was matched against. Another writer
    /// having moved it first, or with a newer address set, is a
    /// [`crate::store::StoreError::Elsewhere`] and nothing is written.
    Live { expected: Option<u64>, watch_version: i64 },
    /// Solana's signatures strategy: the address's cursor must still be at
    /// `expected` and moves to `next` (a signature in `slot`).
    Address { address: String, expected: Option<String>, next: String, slot: u64 },
    /// Backfill: deposits only, the live cursor is left alone.
    Backfill,
    /// A gap of newly registered addresses: these `addresses`, at
    /// `gap_next == from` with this `live_from`, are done through the range.
    Gap { live_from: u64, addresses: Vec<String> },
}

/// Everything one scanned block range produced, committed atomically.
#[derive(Debug, Clone)]
pub struct ScanCommit {
    pub chain: Chain,
    /// Inclusive block range.
    pub from: u64,
    pub to: u64,
    /// The chain head when the range was scanned.
    pub head: u64,
    pub blocks: Vec<BlockRef>,
    pub deposits: Vec<Detected>,
    /// Deposits in blocks up to here satisfy the confirmation policy; a live
    /// commit also confirms the chain's pending deposits up to here.
    pub confirmed_through: Option<u64>,
    pub cursor: CursorMove,
    /// How many block hashes to keep below the range's end.
    pub keep_blocks: u64,
}
