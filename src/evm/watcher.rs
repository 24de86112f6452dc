//! The EVM watcher: scans block ranges into the store, moves deposits to
//! `CONFIRMED` under the chain's policy, and follows the head.

use std::{collections::HashMap, sync::Arc, time::Duration};

use alloy::{
    primitives::{Address, B256},
    rpc::types::{BlockNumberOrTag, Log},
};
use backon::{ExponentialBuilder, Retryable};
use futures::{StreamExt, TryStreamExt, stream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::{
    completeness,
    decode::{self, BlockInput, EvmAssets, EvmWatchSet, Succeeded},
    rpc::{EvmRpc, RpcBlock, RpcFailure, RpcReceipt},
};
use crate::{
    config::{BlockReads, ChainConfig, Confirmation, Span},
    deposits::{
        commit, coverage,
        resource::Detected,
        watch::WatchSet,
        watcher::{Step, Tick, WatchError, follow, verify_endpoints},
    },
    redact::RpcUrl,
    store::{BlockRef, CursorMove, ScanCommit, Store},
};

mod backfill;
mod quorum;

/// A scanned range before it is committed.
struct Scanned {
    blocks: Vec<BlockRef>,
    deposits: Vec<Detected>,
}

pub struct EvmWatcher {
    config: ChainConfig,
    rpc: EvmRpc,
    store: Store,
    assets: EvmAssets,
    contracts: Vec<Address>,
    watch: EvmWatchSet,
    watch_version: Option<i64>,
    /// The chain's block time as measured while following it.
    block_time: Option<Duration>,
    /// Each RPC URL on its own, asked when a quorum must agree.
    providers: quorum::Providers,
}

impl EvmWatcher {
    /// Checks every RPC URL's chain id, then loads the watched addresses. A
    /// URL answering another chain's id is refused outright; one that does
    /// not answer stays as a fallback, but at least one must answer.
    pub async fn connect(config: ChainConfig, store: Store) -> Result<Self, WatchError> {
        let chain = config.chain;
        let expected = config.chain_id.unwrap_or_default();
        let identify = |url: RpcUrl| async move { EvmRpc::single(chain, &url).chain_id().await };
        let mismatch = |url, actual| WatchError::WrongChain { chain, url, expected, actual };
        verify_endpoints(chain, &config.rpc_urls, &expected, identify, mismatch).await?;
        let mut watcher = Self::history(config, store);
        watcher.refresh_watch().await?;
        Ok(watcher)
    }

    /// A watcher without addresses, for scanning the gaps of late-registered
    /// addresses (see [`crate::coverage`]) beside a connected one.
    pub fn history(config: ChainConfig, store: Store) -> Self {
        let rpc = EvmRpc::new(
            config.chain,
            &config.rpc_urls,
            config.max_block_range,
            config.batch_size,
            config.concurrency,
        );
        let assets = EvmAssets::from_config(&config);
        let contracts = assets.contracts();
        let watch = WatchSet::default();
        let providers = quorum::providers(&config);
        Self {
            config,
            rpc,
            store,
            assets,
            contracts,
            watch,
            watch_version: None,
            block_time: None,
            providers,
        }
    }

    pub fn config(&self) -> &ChainConfig {
        &self.config
    }

    /// The blocks of `span` at the chain's measured block time; until it is
    /// measured, as many as the fastest chain makes (more kept, never less).
    pub(super) fn blocks_of(&self, span: Span) -> u64 {
        span.blocks_at_least(self.block_time)
    }

    pub(super) fn rpc(&self) -> &EvmRpc {
        &self.rpc
    }

    /// Loads the addresses added since the last look, so an account added
    /// while `run` runs is watched from the next step on. Addresses are never
    /// removed, so increments are enough.
    async fn refresh_watch(&mut self) -> Result<(), WatchError> {
        let version = self.store.accounts_version().await?;
        let seen = self.watch_version.unwrap_or(-1);
        if version == seen {
            return Ok(());
        }
        let watch = &mut self.watch;
        let added = self
            .store
            .watched_addresses_between(self.config.chain, seen, version, |address, account| {
                watch.insert(&address, &account, |a| a.parse().ok())
            })
            .await?;
        self.watch_version = Some(version);
        info!(chain = %self.config.chain, added, watched = self.watch.len(), "watching addresses");
        Ok(())
    }

    /// The highest block whose deposits satisfy the confirmation policy.
    async fn confirmed_height(&self, head: u64) -> Result<Option<u64>, WatchError> {
        Ok(match self.config.confirmation {
            Confirmation::Depth(depth) => head.checked_sub(depth),
            Confirmation::Finalized => self.rpc.tagged(BlockNumberOrTag::Finalized).await?,
        })
    }

    /// Fetches and decodes `from..=to` for the addresses of `watch`, without
    /// writing anything. Every read is checked to be complete for the range
    /// (see [`super::completeness`]): each request may land on a backend
    /// that is behind.
    async fn scan(&self, watch: &EvmWatchSet, from: u64, to: u64) -> Result<Scanned, WatchError> {
        let chain = self.config.chain;
        let topic = decode::transfer_topic();
        let by_range = self.contracts.is_empty() || self.rpc.blooms_unreliable();
        let logs = async {
            if by_range {
                Ok(Vec::new())
            } else {
                self.rpc.logs(from, to, &self.contracts, topic).await.map_err(WatchError::from)
            }
        };
        let ((blocks, succeeded), logs) = tokio::try_join!(self.read_blocks(watch, from, to), logs)?;
        check_linked(&blocks).map_err(|detail| WatchError::Inconsistent { chain, detail })?;

        let mut logs_by_block: HashMap<u64, Vec<Log>> = HashMap::new();
        for log in logs {
            let number = log.block_number.unwrap_or_default();
            let index = number.checked_sub(from).map(|i| i as usize);
            let expected = index.and_then(|i| blocks.get(i)).map(|b| b.hash);
            if log.block_hash.is_none() || log.block_hash != expected {
                let detail = format!("log of block {number} does not match the block's hash");
                return Err(WatchError::Inconsistent { chain, detail });
            }
            logs_by_block.entry(number).or_default().push(log);
        }
        self.complete_logs(&blocks, &mut logs_by_block).await?;

        // From EIP-7708 on, the logs hold every native transfer: no traces.
        // The blocks ascend, so the traced ones are a prefix, and the i-th
        // trace is the i-th block's.
        let traced = if self.config.traces {
            blocks.iter().take_while(|b| !self.assets.native_logged(b.number.to())).count()
        } else {
            0
        };
        let calls: Vec<_> = blocks[..traced].iter().map(|b| self.rpc.traces(b.hash)).collect();
        let traces = stream::iter(calls).buffered(self.config.concurrency).try_collect::<Vec<_>>().await?;

        let mut deposits = Vec::new();
        for (i, block) in blocks.iter().enumerate() {
            let logs = logs_by_block.get(&block.number.to()).map(Vec::as_slice).unwrap_or_default();
            if let Some(hash) = decode::unlogged_value(block, logs, &succeeded, watch, &self.assets) {
                let number: u64 = block.number.to();
                let detail = format!(
                    "transaction {hash} of block {number} sends value to a watched address without its \
                     EIP-7708 log: the logs answer is incomplete, or eip7708_from_block precedes the fork"
                );
                return Err(WatchError::Inconsistent { chain, detail });
            }
            let input =
                BlockInput { block, succeeded: &succeeded, logs, traces: traces.get(i).map(Vec::as_slice) };
            deposits.extend(decode::deposits_in_block(chain, &input, watch, &self.assets));
        }
        let blocks = blocks
            .iter()
            .map(|b| BlockRef {
                number: b.number.to(),
                hash: b.hash.to_string(),
                parent_hash: b.parent_hash.to_string(),
            })
            .collect();
        Ok(Scanned { blocks, deposits })
    }

    /// The blocks `from..=to`, each with its transactions as far as they
    /// may send native value to `watch`, and which of those succeeded: read
    /// as the chain's `block_reads` says. A step whose blocks cannot be read
    /// by their receipts (an answer refused by every check, an error) reads
    /// them with their transactions; a node that refuses
    /// `eth_getBlockReceipts`, or answers it wrongly too many steps in a row
    /// (see [`receipts_answered_wrong`]), is read so from then on.
    async fn read_blocks(
        &self,
        watch: &EvmWatchSet,
        from: u64,
        to: u64,
    ) -> Result<(Vec<RpcBlock>, Succeeded), WatchError> {
        let mut failed_the_method = false;
        if self.config.block_reads == BlockReads::Receipts && !self.rpc.block_receipts_refused() {
            match self.read_by_receipts(watch, from, to).await {
                Ok(read) => {
                    self.rpc.block_receipts_served();
                    return Ok(read);
                }
                Err(WatchError::Rpc(failure))
                    if failure.kind == "method_unsupported" && failure.method == "eth_getBlockReceipts" =>
                {
                    self.rpc.refuse_block_receipts("the node does not serve eth_getBlockReceipts");
                }
                Err(error) => {
                    let chain = self.config.chain;
                    warn!(%chain, from, to, %error, "blocks not read by their receipts; reading them with their transactions");
                    failed_the_method = receipts_answered_wrong(&error);
                }
            }
        }
        let blocks = again_if_missing(|| self.rpc.blocks(from, to)).await?;
        let asked: Vec<(B256, B256)> = blocks
            .iter()
            .flat_map(|b| decode::native_candidates(b, watch).into_iter().map(|tx| (tx, b.hash)))
            .collect();
        let receipts = if asked.is_empty() { Vec::new() } else { self.candidate_receipts(&asked).await? };
        if failed_the_method {
            self.rpc.block_receipts_failed();
        }
        Ok((blocks, decode::succeeded(&receipts)))
    }

    /// The receipts of the native candidates `(transaction, block)`, each
    /// of its transaction and of the block it was read in: an answer from
    /// a backend on another fork or for another transaction is asked again
    /// as missing.
    async fn candidate_receipts(&self, asked: &[(B256, B256)]) -> Result<Vec<RpcReceipt>, RpcFailure> {
        let hashes: Vec<B256> = asked.iter().map(|(tx, _)| *tx).collect();
        again_if_missing(|| async {
            let receipts = self.rpc.receipts(&hashes).await?;
            decode::check_receipts(asked, &receipts)
                .map_err(|detail| self.rpc.missing("eth_getTransactionReceipt", detail))?;
            Ok(receipts)
        })
        .await
    }

    /// Blocks with their transaction hashes and receipts, then the
    /// transactions by hash of the successful ones to watched addresses,
    /// for their value. Receipts that are not each block's own, one per
    /// transaction, are asked again as missing.
    async fn read_by_receipts(
        &self,
        watch: &EvmWatchSet,
        from: u64,
        to: u64,
    ) -> Result<(Vec<RpcBlock>, Succeeded), WatchError> {
        let read = move || async move {
            let blocks = self.rpc.block_hashes(from, to).await?;
            let hashes: Vec<B256> = blocks.iter().map(|b| b.hash).collect();
            let receipts = self.rpc.block_receipts(&hashes).await?;
            decode::from_receipts(blocks, receipts)
                .map_err(|detail| self.rpc.missing("eth_getBlockReceipts", detail))
        };
        let (mut blocks, succeeded) = again_if_missing(read).await?;
        let candidates: Vec<B256> =
            blocks.iter().flat_map(|b| decode::value_candidates(b, &succeeded, watch)).collect();
        if !candidates.is_empty() {
            let read = again_if_missing(|| self.rpc.transactions(&candidates)).await?;
            let chain = self.config.chain;
            decode::fill_values(&mut blocks, &candidates, read)
                .map_err(|detail| WatchError::Inconsistent { chain, detail })?;
        }
        Ok((blocks, succeeded))
    }

    /// Reads again, by block hash, the logs of every block whose bloom the
    /// answer does not satisfy; on a chain whose blooms proved unreliable,
    /// of every block. Without listed contracts there is nothing to read.
    async fn complete_logs(
        &self,
        blocks: &[RpcBlock],
        logs: &mut HashMap<u64, Vec<Log>>,
    ) -> Result<(), WatchError> {
        if self.contracts.is_empty() {
            return Ok(());
        }
        let audit = completeness::audit(blocks, logs, &self.contracts, decode::transfer_topic());
        if audit.blooms_unreliable {
            self.rpc.distrust_blooms();
        }
        let reread: Vec<&RpcBlock> = if self.rpc.blooms_unreliable() {
            blocks.iter().collect()
        } else {
            audit.suspect.iter().map(|i| &blocks[*i]).collect()
        };
        if reread.is_empty() {
            return Ok(());
        }
        let chain = self.config.chain;
        metrics::counter!("custody_indexer_log_rereads_total", "chain" => chain.as_str())
            .increment(reread.len() as u64);
        debug!(%chain, blocks = reread.len(), "reading logs by block hash");
        let hashes: Vec<B256> = reread.iter().map(|b| b.hash).collect();
        let topic = decode::transfer_topic();
        let fresh = again_if_missing(|| self.rpc.logs_by_hash(&hashes, &self.contracts, topic)).await?;
        for (block, block_logs) in reread.into_iter().zip(fresh) {
            logs.insert(block.number.to(), block_logs);
        }
        Ok(())
    }

    /// One step of live indexing: detect a reorg, or scan the next range up to
    /// the head and commit it with the cursor; then confirm what the policy
    /// allows and settle deposits whose blocks were reorged away.
    pub async fn tick(&mut self) -> Result<Tick, WatchError> {
        let chain = self.config.chain;
        self.refresh_watch().await?;
        let head = self.rpc.head().await?;
        metrics::gauge!("custody_indexer_head_block", "chain" => chain.as_str()).set(head as f64);
        let confirmed = self.confirmed_height(head).await?;
        let state = coverage::live_cursor(self, self.config.start_block, head).await?;
        let (next, expected) = (state.next_block, Some(state.next_block));

        if next > head {
            if let Some(ancestor) = self.check_tip(next, head).await? {
                return Ok(Tick::Reorged { common_ancestor: ancestor });
            }
            if let Some(through) = confirmed.map(|c| c.min(next - 1)) {
                self.confirm(through).await?;
            }
            self.settle_orphans(next - 1).await?;
            return Ok(Tick::Idle { head, indexed: next - 1 });
        }

        let to = head.min(next.saturating_add(self.config.max_block_range - 1));
        let scanned = self.scan(&self.watch, next, to).await?;
        if let Some(expected_next) = expected
            && let Some(ancestor) = self.check_parent(expected_next, &scanned.blocks[0]).await?
        {
            return Ok(Tick::Reorged { common_ancestor: ancestor });
        }
        let found = scanned.deposits.len();
        let commit = ScanCommit {
            chain,
            from: next,
            to,
            head,
            blocks: scanned.blocks,
            deposits: scanned.deposits,
            confirmed_through: self.config.confirmed_on_scan(confirmed.map(|c| c.min(to))),
            cursor: CursorMove::Live { expected, watch_version: self.watch_version.unwrap_or(0) },
            keep_blocks: self.blocks_of(self.config.reorg_window).max(2),
        };
        let changed = commit::commit_scan(&self.store, &commit).await?;
        metrics::gauge!("custody_indexer_indexed_block", "chain" => chain.as_str()).set(to as f64);
        if found > 0 || !changed.is_empty() {
            info!(%chain, from = next, to, found, changed = changed.len(), "scanned range");
        } else {
            debug!(%chain, from = next, to, "scanned range");
        }
        if self.config.confirm_quorum > 1
            && let Some(through) = confirmed.map(|c| c.min(to))
        {
            self.confirm_on_quorum(through).await?;
        }
        self.settle_orphans(to).await?;
        Ok(Tick::Scanned { from: next, to, head, deposits: found, caught_up: to == head })
    }

    /// Confirms the pending deposits of blocks up to `through`: at once,
    /// or as a quorum of providers agrees.
    async fn confirm(&self, through: u64) -> Result<(), WatchError> {
        if self.config.confirm_quorum > 1 {
            return self.confirm_on_quorum(through).await;
        }
        commit::confirm_through(&self.store, self.config.chain, through).await?;
        Ok(())
    }

    /// Follows the chain until `shutdown` (see [`crate::deposits::watcher::follow`]),
    /// woken early by `newHeads` when the chain file gives a WebSocket URL.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), WatchError> {
        let heads = Arc::new(Notify::new());
        if let Some(url) = self.config.ws_url.clone() {
            tokio::spawn(super::heads::follow_heads(self.config.chain, url, heads.clone(), shutdown.clone()));
        }
        follow(self, shutdown, heads).await
    }
}

impl Step for EvmWatcher {
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

/// A backend behind answers `null` (or, by block hash, an error) for what it
/// lacks, and the next request may reach another backend: a missing block,
/// receipt or block's logs is asked again a few times at once before the
/// whole step is retried.
async fn again_if_missing<T, F, Fut>(call: F) -> Result<T, RpcFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RpcFailure>>,
{
    let again = ExponentialBuilder::default().with_min_delay(Duration::from_millis(25)).with_max_times(3);
    call.retry(again).when(|e: &RpcFailure| e.kind == "missing_data").await
}

/// Whether a step's failure to read blocks by their receipts counts toward
/// reading them with their transactions for good: `eth_getBlockReceipts`
/// failed, or answered receipts that are not the block's. A block or a
/// transaction by hash answered by a backend behind or from another fork
/// says nothing of the node's receipts: such a step falls back alone.
fn receipts_answered_wrong(error: &WatchError) -> bool {
    matches!(error, WatchError::Rpc(failure) if failure.method == "eth_getBlockReceipts")
}

/// Consecutive blocks must link by parent hash; a break means the node
/// switched forks between two reads.
fn check_linked(blocks: &[RpcBlock]) -> Result<(), String> {
    for pair in blocks.windows(2) {
        if pair[1].parent_hash != pair[0].hash {
            return Err(format!("block {} does not extend block {}", pair[1].number, pair[0].number));
        }
    }
    Ok(())
}
