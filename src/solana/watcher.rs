//! The Solana watcher: finds transactions by walking slots (`blocks`) or by
//! polling each address's signatures (`signatures`), records deposits seen at
//! `confirmed` as `PENDING`, and settles them once their slot is `finalized`
//! (`CONFIRMED`) or was skipped (`FAILED`).

use std::{collections::HashSet, sync::Arc, time::Duration};

use futures::{StreamExt, TryStreamExt, stream};
use solana_commitment_config::CommitmentConfig;
use solana_transaction_status_client_types::UiConfirmedBlock;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::{
    accounts::associated_token_accounts,
    decode::{self, SolanaAssets, SolanaWatchSet, TOKEN_2022_PROGRAM, TOKEN_PROGRAM},
    rpc::{RpcFailure, SolanaRpc},
};
use crate::{
    config::{ChainConfig, Strategy},
    coverage,
    deposit::Detected,
    redact::RpcUrl,
    store::{BlockRef, CursorMove, ScanCommit, Store},
    watch::WatchSet,
    watcher::{BackfillReport, Step, Tick, WatchError, follow, verify_endpoints},
};

mod history;
mod settle;

/// Slots listed below a scanned range to prove the answering node's ledger
/// reaches it; runs of skipped slots are far shorter.
const LEDGER_PROBE: u64 = 100;

/// Most signatures `getSignaturesForAddress` returns per page.
const PAGE: usize = 1000;

pub struct SolanaWatcher {
    config: ChainConfig,
    rpc: SolanaRpc,
    store: Store,
    assets: SolanaAssets,
    watch: SolanaWatchSet,
    /// Signatures strategy: the wallets and their token accounts.
    polled: Vec<String>,
    watch_version: Option<i64>,
}

struct Scanned {
    blocks: Vec<BlockRef>,
    deposits: Vec<Detected>,
}

impl SolanaWatcher {
    /// Checks every RPC URL's genesis hash against the chain file, then loads
    /// the watched wallets. A URL of another cluster is refused outright.
    pub async fn connect(config: ChainConfig, store: Store) -> Result<Self, WatchError> {
        let chain = config.chain;
        let expected = config.genesis_hash.clone().unwrap_or_default();
        let identify = |url: RpcUrl| async move { SolanaRpc::genesis_hash_of(chain, &url).await };
        let mismatch =
            |url, actual| WatchError::WrongCluster { chain, url, expected: expected.clone(), actual };
        verify_endpoints(chain, &config.rpc_urls, &expected, identify, mismatch).await?;
        let mut watcher = Self::history(config, store);
        watcher.refresh_watch().await?;
        Ok(watcher)
    }

    /// A watcher without wallets, for scanning the gaps of late-registered
    /// wallets (see [`crate::coverage`]) beside a connected one.
    pub fn history(config: ChainConfig, store: Store) -> Self {
        let rpc = SolanaRpc::new(config.chain, &config.rpc_urls);
        let assets = SolanaAssets::from_config(&config);
        Self {
            config,
            rpc,
            store,
            assets,
            watch: WatchSet::default(),
            polled: Vec::new(),
            watch_version: None,
        }
    }

    pub fn config(&self) -> &ChainConfig {
        &self.config
    }

    /// Loads wallets added since the last look; for the signatures strategy
    /// also their associated token accounts (every listed mint, both token
    /// programs) and any other token account they own.
    async fn refresh_watch(&mut self) -> Result<(), WatchError> {
        let version = self.store.accounts_version().await?;
        let seen = self.watch_version.unwrap_or(-1);
        if version == seen {
            return Ok(());
        }
        let mut wallets = Vec::new();
        self.store
            .watched_addresses_between(self.config.chain, seen, version, |address, account| {
                wallets.push((address, account));
            })
            .await?;
        if self.config.strategy == Strategy::Signatures {
            // Every RPC call first: a failure leaves the set as it was, to be
            // loaded again whole on the next step.
            let mut added = Vec::new();
            for (wallet, _) in &wallets {
                added.push(wallet.clone());
                added.extend(associated_token_accounts(wallet, self.assets.mints().map(|(mint, _)| mint)));
                for program in [TOKEN_PROGRAM, TOKEN_2022_PROGRAM] {
                    added.extend(self.rpc.token_accounts(wallet, program).await?);
                }
            }
            let known: HashSet<&String> = self.polled.iter().collect();
            let mut fresh: Vec<String> = added.into_iter().filter(|a| !known.contains(a)).collect();
            fresh.sort();
            fresh.dedup();
            self.polled.extend(fresh);
        }
        for (wallet, account) in &wallets {
            self.watch.insert(wallet, account, |a| Some(Box::from(a)));
        }
        self.watch_version = Some(version);
        info!(chain = %self.config.chain, added = wallets.len(), wallets = self.watch.len(), polled = self.polled.len(), "watching wallets");
        Ok(())
    }

    /// One step: scan what is new at `confirmed`, then settle what became final.
    pub async fn tick(&mut self) -> Result<Tick, WatchError> {
        let chain = self.config.chain;
        self.refresh_watch().await?;
        let confirmed = self.rpc.slot(CommitmentConfig::confirmed()).await?;
        let finalized = self.rpc.slot(CommitmentConfig::finalized()).await?;
        metrics::gauge!("custody_indexer_head_block", "chain" => chain.as_str()).set(confirmed as f64);
        let tick = match self.config.strategy {
            Strategy::Blocks => self.tick_blocks(confirmed).await?,
            Strategy::Signatures => self.tick_signatures(confirmed).await?,
        };
        self.settle(finalized).await?;
        Ok(tick)
    }

    async fn tick_blocks(&mut self, confirmed: u64) -> Result<Tick, WatchError> {
        let chain = self.config.chain;
        let state = coverage::live_cursor(self, self.config.start_block, confirmed).await?;
        let (next, expected) = (state.next_block, Some(state.next_block));
        if next > confirmed {
            return Ok(Tick::Idle { head: confirmed, indexed: next - 1 });
        }
        let upper = confirmed.min(next.saturating_add(self.config.max_block_range - 1));
        let scanned = self.scan_slots(&self.watch, next, upper, CommitmentConfig::confirmed()).await?;
        // The cursor moves only as far as the answers provably cover (see
        // `covered_through`): a node lists blocks up to its own height only,
        // and a slot passed over would never be read.
        let listed = scanned.blocks.last().map(|block| block.number);
        let Some(to) = self.covered_through(next, upper, listed, CommitmentConfig::confirmed()).await? else {
            return Ok(Tick::Idle { head: confirmed, indexed: next.saturating_sub(1) });
        };
        let found = scanned.deposits.len();
        let commit = ScanCommit {
            chain,
            from: next,
            to,
            head: confirmed,
            blocks: scanned.blocks,
            deposits: scanned.deposits,
            confirmed_through: None,
            cursor: CursorMove::Live { expected, watch_version: self.watch_version.unwrap_or(0) },
            keep_blocks: self.config.reorg_window,
        };
        let changed = self.store.commit_scan(&commit).await?;
        metrics::gauge!("custody_indexer_indexed_block", "chain" => chain.as_str()).set(to as f64);
        if found > 0 {
            info!(%chain, from = next, to, found, changed = changed.len(), "scanned slots");
        } else {
            debug!(%chain, from = next, to, "scanned slots");
        }
        Ok(Tick::Scanned { from: next, to, head: confirmed, deposits: found, caught_up: upper == confirmed })
    }

    /// How far `from..=to` is provably read, given the last block a
    /// `getBlocks` answer listed in it: through that block, and further
    /// through the slots after it that a node shows to be empty by listing
    /// its next block beyond them. A backend behind lists neither, so slots it
    /// has not seen are never passed over; skipped slots cost one request.
    async fn covered_through(
        &self,
        from: u64,
        to: u64,
        listed: Option<u64>,
        commitment: CommitmentConfig,
    ) -> Result<Option<u64>, WatchError> {
        if listed == Some(to) {
            return Ok(listed);
        }
        let after = listed.map_or(from, |slot| slot + 1);
        Ok(match self.rpc.first_block(after, commitment).await? {
            Some(next_block) if next_block > after => Some(to.min(next_block - 1)),
            _ => listed,
        })
    }

    /// Fetches and decodes the blocks of `from..=to` at `commitment` for the
    /// wallets of `watch`. A slot the node lists but cannot return stops the
    /// scan: the cursor never moves past a slot that was not read.
    async fn scan_slots(
        &self,
        watch: &SolanaWatchSet,
        from: u64,
        to: u64,
        commitment: CommitmentConfig,
    ) -> Result<Scanned, WatchError> {
        let chain = self.config.chain;
        // A node lists only the blocks its ledger holds: the same answer must
        // list one below `from` too (or `from` be the cluster's first slot),
        // else the slots it left out may be pruned there rather than skipped.
        let listed = self.rpc.blocks(from.saturating_sub(LEDGER_PROBE), to, commitment).await?;
        let reaches = listed.first().is_some_and(|first| *first < from)
            || from <= self.rpc.first_available_block().await?;
        if !reaches {
            let message = "the answering node's ledger does not reach it".to_string();
            return Err(WatchError::SlotUnavailable { chain, slot: from, message });
        }
        let slots: Vec<u64> = listed.into_iter().filter(|slot| *slot >= from).collect();
        let fetches: Vec<_> = slots
            .iter()
            .map(|slot| async move {
                self.rpc.block(*slot, commitment).await.map(|b| (*slot, b)).map_err(|e| unavailable(e, *slot))
            })
            .collect();
        let blocks: Vec<(u64, UiConfirmedBlock)> =
            stream::iter(fetches).buffered(self.config.concurrency).try_collect().await?;
        let mut scanned = Scanned { blocks: Vec::with_capacity(blocks.len()), deposits: Vec::new() };
        for (slot, block) in &blocks {
            let at = decode::Slot {
                chain,
                slot: *slot,
                block_hash: &block.blockhash,
                block_time: block.block_time.unwrap_or_default().max(0) as u64,
            };
            for tx in block.transactions.iter().flatten() {
                scanned.deposits.extend(decode::deposits_in_transaction(at, tx, watch, &self.assets));
            }
            scanned.blocks.push(BlockRef {
                number: *slot,
                hash: block.blockhash.clone(),
                parent_hash: block.previous_blockhash.clone(),
            });
        }
        Ok(scanned)
    }

    async fn tick_signatures(&mut self, confirmed: u64) -> Result<Tick, WatchError> {
        let mut found = 0;
        for address in self.polled.clone() {
            found += self.scan_address(&address, confirmed).await?;
        }
        Ok(if found > 0 {
            Tick::Scanned {
                from: confirmed,
                to: confirmed,
                head: confirmed,
                deposits: found,
                caught_up: true,
            }
        } else {
            Tick::Idle { head: confirmed, indexed: confirmed }
        })
    }

    /// Reads an address's signatures newer than its cursor, decodes their
    /// transactions and commits the deposits with the moved cursor.
    async fn scan_address(&self, address: &str, confirmed: u64) -> Result<usize, WatchError> {
        let chain = self.config.chain;
        let cursor = self.store.address_cursor(chain, address).await?;
        let mut signatures = Vec::new();
        let mut before: Option<String> = None;
        loop {
            let page = self.rpc.signatures(address, before.as_deref(), cursor.as_deref(), PAGE).await?;
            let full = page.len() == PAGE;
            before = page.last().map(|s| s.signature.clone());
            signatures.extend(page);
            if !full {
                break;
            }
        }
        let Some(newest) = signatures.first().cloned() else { return Ok(0) };
        let deposits = self
            .decode_signatures(
                signatures.iter().rev().filter(|s| s.err.is_none()).map(|s| s.signature.as_str()),
            )
            .await?;
        let found = deposits.len();
        let commit = ScanCommit {
            chain,
            from: signatures.last().map_or(newest.slot, |s| s.slot),
            to: newest.slot,
            head: confirmed,
            blocks: Vec::new(),
            deposits,
            confirmed_through: None,
            cursor: CursorMove::Address {
                address: address.to_string(),
                expected: cursor,
                next: newest.signature,
                slot: newest.slot,
            },
            keep_blocks: 0,
        };
        self.store.commit_scan(&commit).await?;
        if found > 0 {
            info!(%chain, address, signatures = signatures.len(), found, "scanned signatures");
        }
        Ok(found)
    }

    /// Fetches and decodes transactions by signature, in the given order.
    async fn decode_signatures<'a>(
        &self,
        signatures: impl Iterator<Item = &'a str>,
    ) -> Result<Vec<Detected>, WatchError> {
        let chain = self.config.chain;
        let fetches: Vec<_> = signatures.map(|s| async move { (s, self.rpc.transaction(s).await) }).collect();
        let results: Vec<_> = stream::iter(fetches).buffered(self.config.concurrency).collect().await;
        let mut deposits = Vec::new();
        for (signature, result) in results {
            let Some(tx) = result? else {
                // Listed but not served yet: the next step reads it.
                return Err(WatchError::NotServedYet { chain, signature: signature.to_string() });
            };
            let at = decode::Slot {
                chain,
                slot: tx.slot,
                block_hash: "",
                block_time: tx.block_time.unwrap_or_default().max(0) as u64,
            };
            deposits.extend(decode::deposits_in_transaction(at, &tx.transaction, &self.watch, &self.assets));
        }
        Ok(deposits)
    }

    /// Scans finalized slots `from..=to` (default: up to the finalized slot)
    /// without touching the live cursor. Idempotent, safe beside `run`.
    pub async fn backfill_slots(
        &mut self,
        from: u64,
        to: Option<u64>,
        progress: &(dyn Fn(u64, usize) + Sync),
    ) -> Result<BackfillReport, WatchError> {
        let chain = self.config.chain;
        self.refresh_watch().await?;
        let finalized = self.rpc.slot(CommitmentConfig::finalized()).await?;
        let to = to.unwrap_or(finalized);
        if to > finalized {
            return Err(WatchError::AboveConfirmed { chain, to, confirmed: finalized });
        }
        if from > to {
            return Err(WatchError::EmptyRange { chain, from, to });
        }
        let started = std::time::Instant::now();
        let mut report = BackfillReport { from, to, ..Default::default() };
        let mut start = from;
        while start <= to {
            let end = to.min(start + self.config.max_block_range - 1);
            let scanned = self.scan_slots(&self.watch, start, end, CommitmentConfig::finalized()).await?;
            let listed = scanned.blocks.last().map(|block| block.number);
            // Only what the answers provably cover; the rest is asked again.
            let Some(through) =
                self.covered_through(start, end, listed, CommitmentConfig::finalized()).await?
            else {
                tokio::time::sleep(self.config.poll_interval).await;
                continue;
            };
            let commit = backfill_commit(chain, start, through, finalized, scanned.deposits);
            report.deposits_changed += self.store.commit_scan(&commit).await?.len();
            report.deposits_found += commit.deposits.len();
            report.blocks += through - start + 1;
            progress(report.blocks, report.deposits_found);
            start = through + 1;
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Reads an address's signature history (newest first, from `before`
    /// down to `until`, both optional) and records its deposits.
    pub async fn backfill_address(
        &mut self,
        address: &str,
        before: Option<String>,
        until: Option<String>,
        progress: &(dyn Fn(u64, usize) + Sync),
    ) -> Result<BackfillReport, WatchError> {
        let chain = self.config.chain;
        self.refresh_watch().await?;
        let finalized = self.rpc.slot(CommitmentConfig::finalized()).await?;
        let started = std::time::Instant::now();
        let mut report = BackfillReport::default();
        let mut before = before;
        loop {
            let page = self.rpc.signatures(address, before.as_deref(), until.as_deref(), PAGE).await?;
            let (Some(newest), Some(oldest)) = (page.first(), page.last()) else { break };
            report.to = report.to.max(newest.slot);
            report.from = if report.blocks == 0 { oldest.slot } else { report.from.min(oldest.slot) };
            let deposits = self
                .decode_signatures(
                    page.iter().rev().filter(|s| s.err.is_none()).map(|s| s.signature.as_str()),
                )
                .await?;
            let commit = backfill_commit(chain, oldest.slot, newest.slot, finalized, deposits);
            report.deposits_changed += self.store.commit_scan(&commit).await?.len();
            report.deposits_found += commit.deposits.len();
            report.blocks += page.len() as u64;
            progress(report.blocks, report.deposits_found);
            if page.len() < PAGE {
                break;
            }
            before = Some(oldest.signature.clone());
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Follows the cluster until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), WatchError> {
        follow(self, shutdown, Arc::new(Notify::new())).await
    }
}

fn backfill_commit(
    chain: crate::chain::Chain,
    from: u64,
    to: u64,
    finalized: u64,
    deposits: Vec<Detected>,
) -> ScanCommit {
    ScanCommit {
        chain,
        from,
        to,
        head: finalized,
        blocks: Vec::new(),
        deposits,
        confirmed_through: Some(finalized),
        cursor: CursorMove::Backfill,
        keep_blocks: 0,
    }
}

fn unavailable(error: RpcFailure, slot: u64) -> WatchError {
    if error.slot_unavailable {
        WatchError::SlotUnavailable { chain: error.chain, slot, message: error.message }
    } else {
        error.into()
    }
}

impl Step for SolanaWatcher {
    fn chain(&self) -> crate::chain::Chain {
        self.config.chain
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn poll_interval(&self) -> Duration {
        self.config.poll_interval
    }

    async fn step(&mut self) -> Result<Tick, WatchError> {
        self.tick().await
    }
}
