//! The Solana watcher: finds transactions by walking slots (`blocks`) or by
//! polling each address's signatures (`signatures`), records deposits seen at
//! `confirmed` as `PENDING`, and settles them once their slot is `finalized`
//! (`CONFIRMED`) or was skipped (`FAILED`).

use std::{collections::HashSet, sync::Arc, time::Duration};

use backon::Retryable;
use futures::{StreamExt, TryStreamExt, stream};
use solana_commitment_config::CommitmentConfig;
use solana_transaction_status_client_types::UiConfirmedBlock;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::{
    accounts::associated_token_accounts,
    decode::{self, SolanaAssets, SolanaWatchSet, TOKEN_2022_PROGRAM, TOKEN_PROGRAM},
    rpc::{Cause, MAX_BLOCKS_RANGE, RpcFailure, SolanaRpc},
};
use crate::{
    config::{ChainConfig, Strategy},
    deposits::commit,
    deposits::coverage,
    deposits::resource::Detected,
    deposits::watch::WatchSet,
    deposits::watcher::{Step, Tick, WatchError, follow, verify_endpoints},
    redact::RpcUrl,
    store::{BlockRef, CursorMove, ScanCommit, Store},
};

mod backfill;
mod history;
mod quorum;
mod settle;

/// Slots listed below a scanned range to prove, in the same answer, that the
/// answering node's ledger reaches it.
const LEDGER_PROBE: u64 = 100;

/// Slots listed below a range when [`LEDGER_PROBE`] showed no block there.
const WIDE_LEDGER_PROBE: u64 = 10_000;

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
    /// The cluster's slot time as measured while following it.
    block_time: Option<Duration>,
    /// Each RPC URL on its own, asked when a quorum must agree.
    providers: quorum::Providers,
}

struct Scanned {
    blocks: Vec<BlockRef>,
    deposits: Vec<Detected>,
    /// The highest block the answer listed below the scanned range.
    below: Option<u64>,
}

impl Scanned {
    /// What [`SolanaWatcher::covered_through`] starts from: the last block
    /// listed in the range, and the last one below it.
    fn known(&self) -> (Option<u64>, Option<u64>) {
        (self.blocks.last().map(|block| block.number), self.below)
    }
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
        if let Some(state) = watcher.store.chain_state(chain).await? {
            // The head seen before a restart: a backend behind it answers
            // no read as if the chain were still there.
            watcher.rpc.saw(state.head);
        }
        Ok(watcher)
    }

    /// A watcher without wallets, for scanning the gaps of late-registered
    /// wallets (see [`crate::coverage`]) beside a connected one.
    pub fn history(config: ChainConfig, store: Store) -> Self {
        let rpc = SolanaRpc::new(config.chain, &config.rpc_urls);
        let assets = SolanaAssets::from_config(&config);
        let providers = quorum::providers(&config);
        Self {
            providers,
            config,
            rpc,
            store,
            assets,
            watch: WatchSet::default(),
            polled: Vec::new(),
            watch_version: None,
            block_time: None,
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
        if self.config.confirm_quorum > 1 {
            self.confirm_on_quorum(finalized).await?;
        } else {
            self.settle(finalized).await?;
        }
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
        let Some(to) =
            self.covered_through(next, upper, scanned.known(), CommitmentConfig::confirmed()).await?
        else {
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
            keep_blocks: self.config.reorg_window.blocks_at_least(self.block_time).max(2),
        };
        let changed = commit::commit_scan(&self.store, &commit).await?;
        metrics::gauge!("custody_indexer_indexed_block", "chain" => chain.as_str()).set(to as f64);
        if found > 0 {
            info!(%chain, from = next, to, found, changed = changed.len(), "scanned slots");
        } else {
            debug!(%chain, from = next, to, "scanned slots");
        }
        Ok(Tick::Scanned { from: next, to, head: confirmed, deposits: found, caught_up: upper == confirmed })
    }

    /// How far `from..=to` is provably read, given the last block a
    /// `getBlocks` answer listed in it and `below`, a block listed under
    /// `from`: through the listed block, and further through the slots after
    /// it that one answer shows to be empty, by listing the last known block
    /// and the next one beyond them. A backend behind lists neither, and a
    /// pruned one does not list the known block, so slots none has read are
    /// never passed over; skipped slots cost one request.
    async fn covered_through(
        &self,
        from: u64,
        to: u64,
        (listed, below): (Option<u64>, Option<u64>),
        commitment: CommitmentConfig,
    ) -> Result<Option<u64>, WatchError> {
        if listed == Some(to) {
            return Ok(listed);
        }
        // Without a known block no answer vouched for the range (see
        // `vouched_listing`): nothing is passed over.
        let Some(known) = listed.or(below) else { return Ok(None) };
        let next = self.rpc.block_after(known, commitment).await?;
        Ok(match next {
            Some(next_block) if next_block > from => Some(to.min(next_block - 1)),
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
        let Some((slots, below)) = self.vouched_listing(from, to, commitment).await? else {
            // Read nothing rather than take unlisted slots for skipped ones,
            // and say so: retried, logged and shown in `health`.
            self.holds(from).await?;
            return Err(WatchError::Behind { chain, slot: from });
        };
        let fetches: Vec<_> = slots
            .iter()
            .map(|slot| async move {
                self.rpc.block(*slot, commitment).await.map(|b| (*slot, b)).map_err(|e| unavailable(e, *slot))
            })
            .collect();
        let blocks: Vec<(u64, UiConfirmedBlock)> =
            stream::iter(fetches).buffered(self.config.concurrency).try_collect().await?;
        let mut scanned = Scanned { blocks: Vec::with_capacity(blocks.len()), deposits: Vec::new(), below };
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

    /// The blocks of `from..=to` from one `getBlocks` answer that vouches
    /// for them, with the block it listed below `from`: a node lists only the
    /// blocks its ledger holds, so an answer listing `from` itself or a block
    /// below it shows the slots it leaves out are skipped. Asked again from
    /// further below when the first answer shows neither (a long run of
    /// skipped slots); `None` when no answer vouches. `getFirstAvailableBlock`
    /// never does: behind one URL it may come from another backend.
    async fn vouched_listing(
        &self,
        from: u64,
        to: u64,
        commitment: CommitmentConfig,
    ) -> Result<Option<(Vec<u64>, Option<u64>)>, WatchError> {
        let room = MAX_BLOCKS_RANGE.saturating_sub(to - from);
        for probe in [LEDGER_PROBE, WIDE_LEDGER_PROBE] {
            let listed = self.rpc.blocks(from.saturating_sub(probe.min(room)), to, commitment).await?;
            let below = listed.iter().copied().take_while(|slot| *slot < from).last();
            let slots: Vec<u64> = listed.into_iter().filter(|slot| *slot >= from).collect();
            if below.is_some() || slots.first() == Some(&from) {
                return Ok(Some((slots, below)));
            }
        }
        Ok(None)
    }

    /// Whether the node's ledger reaches `slot`, by `getFirstAvailableBlock`:
    /// a node that pruned it lists nothing there, which must never read as
    /// skipped slots.
    async fn holds(&self, slot: u64) -> Result<(), WatchError> {
        let first_available = self.rpc.first_available_block().await?;
        if slot < first_available {
            return Err(WatchError::Pruned { chain: self.config.chain, slot, first_available });
        }
        Ok(())
    }

    /// Reads every polled address, [`ChainConfig::concurrency`] at a time,
    /// each committing its own cursor: an address answered only by a
    /// backend behind is read again next step without holding the others
    /// back. Another failure fails the step once every address was read.
    async fn tick_signatures(&mut self, confirmed: u64) -> Result<Tick, WatchError> {
        let chain = self.config.chain;
        let this = &*self;
        let scans = stream::iter(this.polled.clone()).map(|address| async move {
            let result = this.scan_address(&address, confirmed).await;
            (address, result)
        });
        let results: Vec<_> = scans.buffer_unordered(this.config.concurrency).collect().await;
        let (mut found, mut behind, mut failed) = (0, Vec::new(), None);
        for (address, result) in results {
            match result {
                Ok(deposits) => found += deposits,
                Err(error) if error.is_lagging() => behind.push((address, error)),
                Err(error) => failed = failed.or(Some(error)),
            }
        }
        if let Some(error) = failed {
            return Err(error);
        }
        if !behind.is_empty() {
            metrics::counter!("custody_indexer_addresses_deferred_total", "chain" => chain.as_str())
                .increment(behind.len() as u64);
            if behind.len() == this.polled.len() {
                return Err(behind.remove(0).1);
            }
            let addresses: Vec<&str> = behind.iter().map(|(address, _)| address.as_str()).collect();
            info!(%chain, ?addresses, error = %behind[0].1, "answered by a backend behind; these addresses are read again next step");
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
        // Asked of nodes that know the cursor's signature (and, page after
        // page, each page's: `signatures` raises the freshest slot seen).
        let (until, floor) =
            cursor.as_ref().map_or((None, 0), |(signature, slot)| (Some(signature.as_str()), *slot));
        let mut signatures = Vec::new();
        let mut before: Option<String> = None;
        loop {
            let page = self.rpc.signatures(address, (before.as_deref(), until), PAGE, floor).await?;
            let full = page.len() == PAGE;
            before = page.last().map(|s| s.signature.clone());
            signatures.extend(page);
            if !full {
                break;
            }
        }
        let Some(newest) = signatures.first().cloned() else { return Ok(0) };
        let landed = signatures.iter().rev().filter(|s| s.err.is_none()).map(|s| s.signature.as_str());
        let deposits = self.decode_signatures(landed, at_once()).await?;
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
                expected: cursor.map(|(signature, _)| signature),
                next: newest.signature,
                slot: newest.slot,
            },
            keep_blocks: 0,
        };
        commit::commit_scan(&self.store, &commit).await?;
        if found > 0 {
            info!(%chain, address, signatures = signatures.len(), found, "scanned signatures");
        }
        Ok(found)
    }

    /// Fetches and decodes transactions by signature, in the given order.
    /// A transaction listed but not served yet is asked again, within
    /// `patience`, while a backend behind answers; then it fails the call.
    async fn decode_signatures<'a>(
        &self,
        signatures: impl Iterator<Item = &'a str>,
        patience: backon::ExponentialBuilder,
    ) -> Result<Vec<Detected>, WatchError> {
        let chain = self.config.chain;
        let fetch = |signature: &'a str| async move {
            let once = || async {
                let tx = self.rpc.transaction(signature).await?;
                // Listed but not served yet: asked again, or the next step reads it.
                tx.ok_or_else(|| WatchError::NotServedYet { chain, signature: signature.to_string() })
            };
            once.retry(patience)
                .when(WatchError::is_lagging)
                .notify(|error, _| debug!(%chain, %error, "a transaction is not served yet; asking again"))
                .await
        };
        let fetches: Vec<_> = signatures.map(fetch).collect();
        let results: Vec<_> = stream::iter(fetches).buffered(self.config.concurrency).collect().await;
        let mut deposits = Vec::new();
        for result in results {
            let tx = result?;
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

    /// Follows the cluster until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), WatchError> {
        follow(self, shutdown, Arc::new(Notify::new())).await
    }
}

/// Patience for `run`'s reads by signature: a transaction a backend behind
/// does not serve yet is asked again at once a few times (each request may
/// reach another backend); after that the address waits for the next step.
fn at_once() -> backon::ExponentialBuilder {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(10))
        .with_max_delay(Duration::from_millis(100))
        .with_max_times(8)
}

fn unavailable(error: RpcFailure, slot: u64) -> WatchError {
    if error.cause == Cause::SlotUnavailable {
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

    fn set_block_time(&mut self, block_time: Option<Duration>) {
        self.block_time = block_time;
    }

    async fn step(&mut self) -> Result<Tick, WatchError> {
        self.tick().await
    }
}
