//! The EVM JSON-RPC edge: alloy's client with its fallback layer over every
//! configured URL and its retry layer on top, plus the batched and adaptive
//! calls the watcher needs. Names that mirror the RPC stay in this module.
//!
//! Blocks, receipts and transactions are read into small projections of the
//! fields the indexer uses rather than alloy's full envelopes: OP-stack and
//! Polygon blocks carry transaction types that Ethereum's envelope refuses,
//! and the projection decodes faster.
//!
//! What the sender reads and sends (balances, nonces, fees, calls,
//! broadcasts) is in [`sending`].

mod block_receipts;
mod errors;
mod multicall;
mod paced;
mod projections;
mod recovery;
mod sending;

pub use crate::rpc::{Cause, RpcFailure};
use errors::{TransientPolicy, error_kind, is_range_too_large};
pub use multicall::{MULTICALL3, PER_CALL as BALANCES_PER_CALL};
pub use projections::{
    BlockReceipt, FeeReceipt, RpcBlock, RpcHeader, RpcReceipt, RpcReceiptLogs, RpcTransaction, TxStatus,
};
use projections::{FeeHeader, RpcBlockTime};
pub use recovery::{InBlock, RpcSentTx};

use std::{
    collections::{HashMap, HashSet},
    num::NonZeroUsize,
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    time::Duration,
};

use alloy::{
    primitives::{Address, B256, U64},
    rpc::{
        client::{ClientBuilder, RpcClient},
        types::{
            BlockNumberOrTag, Filter, Log,
            trace::geth::{GethDebugBuiltInTracerType, GethDebugTracingOptions, TraceResult},
        },
    },
    transports::{
        RpcError, TransportError,
        http::{Http, reqwest},
        layers::{FallbackLayer, RetryBackoffLayer},
    },
};
use futures::{StreamExt, TryStreamExt, stream};

pub use super::broadcast::Broadcast;
use super::broadcast::Broadcaster;
use crate::{
    chain::Chain,
    redact::{RpcUrl, redact_urls},
};

/// Every method the indexer calls. The fallback layer sends each of them to
/// one URL at a time, in order of health, instead of racing all URLs.
const METHODS: [&str; 15] = [
    "eth_chainId",
    "eth_getTransactionCount",
    "eth_maxPriorityFeePerGas",
    "eth_estimateGas",
    "eth_getBlockByHash",
    "eth_gasPrice",
    "eth_getBalance",
    "eth_call",
    "eth_blockNumber",
    "eth_getBlockByNumber",
    "eth_getLogs",
    "eth_getTransactionReceipt",
    "eth_getBlockReceipts",
    "eth_getTransactionByHash",
    "debug_traceBlockByHash",
];

pub struct EvmRpc {
    chain: Chain,
    client: RpcClient,
    /// Broadcasts go to each URL on their own: see [`Broadcaster`].
    broadcaster: Broadcaster,
    /// The `eth_getLogs` range providers currently accept; halved on refusal.
    log_range: AtomicU64,
    /// Set once a log arrives that its block's bloom does not admit: from
    /// then on logs are read per block by hash, blooms proving nothing.
    blooms_unreliable: AtomicBool,
    /// Set once the node refuses `eth_getBlockReceipts`: blocks are read
    /// with their transactions from then on.
    block_receipts_refused: AtomicBool,
    /// Steps in a row whose blocks could not be read by their receipts.
    block_receipt_failures: AtomicU32,
    batch_size: usize,
    concurrency: usize,
}

/// What an [`EvmRpc`] is built from.
struct Build<'a> {
    chain: Chain,
    urls: &'a [RpcUrl],
    max_block_range: u64,
    batch_size: usize,
    concurrency: usize,
    /// At most this many requests a second, when capped.
    pace: Option<u32>,
}

impl EvmRpc {
    pub fn new(
        chain: Chain,
        urls: &[RpcUrl],
        max_block_range: u64,
        batch_size: usize,
        concurrency: usize,
    ) -> Self {
        Self::build(Build { chain, urls, max_block_range, batch_size, concurrency, pace: None })
    }

    /// A client of `urls` that sends at most `per_second` requests a
    /// second (a batch is one), one at a time: for a reader in the
    /// background that must leave the providers' rate to the watcher.
    pub fn paced(
        chain: Chain,
        urls: &[RpcUrl],
        max_block_range: u64,
        batch_size: usize,
        per_second: u32,
    ) -> Self {
        Self::build(Build {
            chain,
            urls,
            max_block_range,
            batch_size,
            concurrency: 1,
            pace: Some(per_second),
        })
    }

    fn build(Build { chain, urls, max_block_range, batch_size, concurrency, pace }: Build<'_>) -> Self {
        let http = http_client();
        let transports: Vec<_> =
            urls.iter().map(|u| Http::with_client(http.clone(), u.expose().clone())).collect();
        let count = NonZeroUsize::new(transports.len()).unwrap_or(NonZeroUsize::MIN);
        let fallback = tower::ServiceBuilder::new()
            .layer(
                FallbackLayer::default()
                    .with_active_transport_count(count)
                    .with_sequential_methods(METHODS.iter().map(|m| m.to_string()).collect::<HashSet<_>>()),
            )
            .service(transports);
        let retry = RetryBackoffLayer::new_with_policy(3, 250, u64::MAX, TransientPolicy);
        let client = match pace {
            Some(per_second) => ClientBuilder::default()
                .layer(retry)
                .layer(paced::PaceLayer::new(per_second))
                .transport(fallback, false),
            None => ClientBuilder::default().layer(retry).transport(fallback, false),
        };
        Self {
            chain,
            client,
            broadcaster: Broadcaster::new(&http, urls),
            log_range: AtomicU64::new(max_block_range.max(1)),
            blooms_unreliable: AtomicBool::new(false),
            block_receipts_refused: AtomicBool::new(false),
            block_receipt_failures: AtomicU32::new(0),
            batch_size,
            concurrency,
        }
    }

    /// A client for one URL alone, to check what that endpoint serves.
    pub fn single(chain: Chain, url: &RpcUrl) -> Self {
        Self::new(chain, std::slice::from_ref(url), 1, 1, 1)
    }

    fn failure(&self, method: &'static str, err: TransportError) -> RpcFailure {
        RpcFailure {
            chain: self.chain,
            method,
            message: redact_urls(&err.to_string()),
            kind: error_kind(&err),
            cause: if is_range_too_large(&err) { Cause::RangeTooLarge } else { Cause::Other },
            code: match &err {
                RpcError::ErrorResp(payload) => Some(payload.code),
                _ => None,
            },
        }
    }

    /// What the node answered lacks data it should have (a backend behind,
    /// say): asked again at once, then the step is retried.
    pub(crate) fn missing(&self, method: &'static str, message: String) -> RpcFailure {
        RpcFailure::new(self.chain, method, "missing_data", message)
    }

    /// The failure of a call by block hash: an error answer (a node that
    /// does not have the block, and another backend may) is missing data,
    /// unless it says the node pruned the data or does not serve the method.
    pub(crate) fn unknown_hash(&self, method: &'static str, error: TransportError) -> RpcFailure {
        let answered = matches!(error, RpcError::ErrorResp(_));
        let failure = self.failure(method, error);
        if answered && failure.kind == "rpc_error" {
            RpcFailure { kind: "missing_data", ..failure }
        } else {
            failure
        }
    }

    pub async fn chain_id(&self) -> Result<u64, RpcFailure> {
        let id: U64 =
            self.client.request_noparams("eth_chainId").await.map_err(|e| self.failure("eth_chainId", e))?;
        Ok(id.to())
    }

    pub async fn head(&self) -> Result<u64, RpcFailure> {
        let n: U64 = self
            .client
            .request_noparams("eth_blockNumber")
            .await
            .map_err(|e| self.failure("eth_blockNumber", e))?;
        Ok(n.to())
    }

    /// The number of the block the node reports under `tag` (e.g. `finalized`).
    pub async fn tagged(&self, tag: BlockNumberOrTag) -> Result<Option<u64>, RpcFailure> {
        let header: Option<RpcHeader> = self
            .client
            .request("eth_getBlockByNumber", (tag, false))
            .await
            .map_err(|e| self.failure("eth_getBlockByNumber", e))?;
        Ok(header.map(|h| h.number.to()))
    }

    /// The timestamp of block `number`, in seconds; a block the node does not
    /// have is an error (retried later), never a guess.
    pub async fn block_time(&self, number: u64) -> Result<u64, RpcFailure> {
        const METHOD: &str = "eth_getBlockByNumber";
        let header: Option<RpcBlockTime> = self
            .client
            .request(METHOD, (BlockNumberOrTag::Number(number), false))
            .await
            .map_err(|e| self.failure(METHOD, e))?;
        header
            .map(|h| h.timestamp.to())
            .ok_or_else(|| self.missing(METHOD, format!("block {number} is not available")))
    }

    pub fn chain(&self) -> Chain {
        self.chain
    }

    /// Full blocks `from..=to`, in order, fetched in concurrent JSON-RPC batches.
    pub async fn blocks(&self, from: u64, to: u64) -> Result<Vec<RpcBlock>, RpcFailure> {
        self.with_bodies(self.by_numbers(&(from..=to).collect::<Vec<_>>(), true).await?)
    }

    /// The blocks, if each was answered with its body: one listing no
    /// transaction while its header says it holds some (see
    /// [`RpcBlock::body_missing`]) is missing data, never an empty block.
    fn with_bodies<T>(&self, blocks: Vec<RpcBlock<T>>) -> Result<Vec<RpcBlock<T>>, RpcFailure> {
        match blocks.iter().find(|block| block.body_missing()) {
            Some(block) => Err(self.missing(
                "eth_getBlockByNumber",
                format!(
                    "block {} was answered without its transactions, though its transactionsRoot is {}",
                    block.number, block.transactions_root
                ),
            )),
            None => Ok(blocks),
        }
    }

    /// Headers `from..=to`, in order.
    pub async fn headers(&self, numbers: &[u64]) -> Result<Vec<RpcHeader>, RpcFailure> {
        self.by_numbers(numbers, false).await
    }

    /// `eth_getBlockByNumber(n, full)` of each of `numbers`, in order, in
    /// concurrent JSON-RPC batches.
    async fn by_numbers<T>(&self, numbers: &[u64], full: bool) -> Result<Vec<T>, RpcFailure>
    where
        T: serde::de::DeserializeOwned + Send + Sync + Unpin + std::fmt::Debug + 'static,
    {
        let batches: Vec<_> =
            numbers.chunks(self.batch_size).map(|chunk| self.batch_by_number::<T>(chunk, full)).collect();
        let results: Vec<Vec<T>> = stream::iter(batches).buffered(self.concurrency).try_collect().await?;
        Ok(results.into_iter().flatten().collect())
    }

    async fn batch_by_number<
        T: serde::de::DeserializeOwned + Send + Sync + Unpin + std::fmt::Debug + 'static,
    >(
        &self,
        numbers: &[u64],
        full: bool,
    ) -> Result<Vec<T>, RpcFailure> {
        const METHOD: &str = "eth_getBlockByNumber";
        let mut batch = self.client.new_batch();
        let mut waiters = Vec::with_capacity(numbers.len());
        for n in numbers {
            let params = (BlockNumberOrTag::Number(*n), full);
            waiters
                .push(batch.add_call::<_, Option<T>>(METHOD, &params).map_err(|e| self.failure(METHOD, e))?);
        }
        batch.send().await.map_err(|e| self.failure(METHOD, e))?;
        let mut out = Vec::with_capacity(waiters.len());
        for (waiter, n) in waiters.into_iter().zip(numbers) {
            match waiter.await.map_err(|e| self.failure(METHOD, e))? {
                Some(block) => out.push(block),
                // The node does not have the block (yet, or any more): retry later.
                None => return Err(self.missing(METHOD, format!("block {n} is not available"))),
            }
        }
        Ok(out)
    }

    /// `Transfer` logs of the given contracts in `from..=to`. A range the
    /// provider refuses as too large is split in halves, and the smaller
    /// range is kept for later calls.
    pub async fn logs(
        &self,
        from: u64,
        to: u64,
        contracts: &[Address],
        topic0: B256,
    ) -> Result<Vec<Log>, RpcFailure> {
        let mut out = Vec::new();
        let mut start = from;
        while start <= to {
            let range = self.log_range.load(Ordering::Relaxed).max(1);
            let end = to.min(start.saturating_add(range - 1));
            let filter = Filter::new()
                .from_block(start)
                .to_block(end)
                .address(contracts.to_vec())
                .event_signature(topic0);
            match self.client.request::<_, Vec<Log>>("eth_getLogs", (filter,)).await {
                Ok(logs) => {
                    out.extend(logs);
                    start = end + 1;
                }
                Err(err) => {
                    let failure = self.failure("eth_getLogs", err);
                    if failure.cause != Cause::RangeTooLarge || end == start {
                        return Err(failure);
                    }
                    let width = end - start + 1;
                    let smaller = (width / 2).max(1);
                    tracing::warn!(chain = %self.chain, from = start, to = end, new_range = smaller, "provider refused the log range; narrowing it");
                    self.log_range.store(smaller, Ordering::Relaxed);
                }
            }
        }
        Ok(out)
    }

    /// Receipts of the given transactions, in order, fetched in concurrent
    /// JSON-RPC batches.
    pub async fn receipts(&self, hashes: &[B256]) -> Result<Vec<RpcReceipt>, RpcFailure> {
        const METHOD: &str = "eth_getTransactionReceipt";
        let found: Vec<Option<RpcReceipt>> = self.by_hash(METHOD, hashes).await?;
        let missing = |hash: &B256| self.missing(METHOD, format!("no receipt for mined transaction {hash}"));
        found.into_iter().zip(hashes).map(|(receipt, hash)| receipt.ok_or_else(|| missing(hash))).collect()
    }

    /// The receipts of `hashes` with their logs, in order.
    pub async fn receipts_with_logs(&self, hashes: &[B256]) -> Result<Vec<RpcReceiptLogs>, RpcFailure> {
        const METHOD: &str = "eth_getTransactionReceipt";
        let found: Vec<Option<RpcReceiptLogs>> = self.by_hash(METHOD, hashes).await?;
        let missing = |hash: &B256| self.missing(METHOD, format!("no receipt for mined transaction {hash}"));
        found.into_iter().zip(hashes).map(|(receipt, hash)| receipt.ok_or_else(|| missing(hash))).collect()
    }

    /// Where each transaction stands now.
    pub async fn transaction_status(&self, hashes: &[B256]) -> Result<HashMap<B256, TxStatus>, RpcFailure> {
        let found: Vec<Option<RpcTransaction>> = self.by_hash("eth_getTransactionByHash", hashes).await?;
        let status = |tx: Option<RpcTransaction>| match tx {
            None => TxStatus::Unknown,
            Some(tx) => tx.block_number.map_or(TxStatus::Pending, |n| TxStatus::Mined(n.to())),
        };
        Ok(hashes.iter().copied().zip(found.into_iter().map(status)).collect())
    }

    /// `method(hash)` for each of `hashes`, in order, in concurrent JSON-RPC
    /// batches of `batch_size`.
    async fn by_hash<T>(&self, method: &'static str, hashes: &[B256]) -> Result<Vec<Option<T>>, RpcFailure>
    where
        T: serde::de::DeserializeOwned + Send + Sync + Unpin + std::fmt::Debug + 'static,
    {
        self.batched(method, hashes, |hash| (*hash,), |e| self.failure(method, e)).await
    }

    /// `method(params(hash))` for each of `hashes`, in order, in concurrent
    /// JSON-RPC batches of `batch_size`; `failed` turns an answer's error
    /// into the call's failure.
    async fn batched<P, T>(
        &self,
        method: &'static str,
        hashes: &[B256],
        params: impl Fn(&B256) -> P,
        failed: impl Fn(TransportError) -> RpcFailure,
    ) -> Result<Vec<T>, RpcFailure>
    where
        P: serde::Serialize + Clone + std::fmt::Debug + Send + Sync + Unpin + 'static,
        T: serde::de::DeserializeOwned + Send + Sync + Unpin + std::fmt::Debug + 'static,
    {
        let (params, failed) = (&params, &failed);
        let batches: Vec<_> = hashes
            .chunks(self.batch_size)
            .map(|chunk| async move {
                let mut batch = self.client.new_batch();
                let mut waiters = Vec::with_capacity(chunk.len());
                for hash in chunk {
                    waiters.push(
                        batch.add_call::<_, T>(method, &params(hash)).map_err(|e| self.failure(method, e))?,
                    );
                }
                // The transport fails a whole batch holding an error
                // answer with that answer: `failed` judges it as its call's.
                batch.send().await.map_err(failed)?;
                let mut out = Vec::with_capacity(waiters.len());
                for waiter in waiters {
                    out.push(waiter.await.map_err(failed)?);
                }
                Ok::<_, RpcFailure>(out)
            })
            .collect();
        let results: Vec<Vec<T>> = stream::iter(batches).buffered(self.concurrency).try_collect().await?;
        Ok(results.into_iter().flatten().collect())
    }

    /// Call traces of every transaction in a block (`callTracer`), asked by
    /// hash so that a backend on another fork cannot answer for the number.
    pub async fn traces(&self, hash: B256) -> Result<Vec<TraceResult>, RpcFailure> {
        const METHOD: &str = "debug_traceBlockByHash";
        let options =
            GethDebugTracingOptions::default().with_tracer(GethDebugBuiltInTracerType::CallTracer.into());
        self.client.request(METHOD, (hash, options)).await.map_err(|e| self.failure(METHOD, e))
    }

    /// Whether this chain's blooms were caught not admitting a log.
    pub fn blooms_unreliable(&self) -> bool {
        self.blooms_unreliable.load(Ordering::Relaxed)
    }

    pub fn distrust_blooms(&self) {
        if !self.blooms_unreliable.swap(true, Ordering::Relaxed) {
            tracing::warn!(chain = %self.chain, "a log its block's bloom does not admit: reading logs per block by hash from now on");
        }
    }

    /// `Transfer` logs of the given contracts in each block, asked by block
    /// hash (EIP-234) in batches: a node that lacks a block answers an error
    /// for it, never an empty list, so each answer is complete.
    pub async fn logs_by_hash(
        &self,
        hashes: &[B256],
        contracts: &[Address],
        topic0: B256,
    ) -> Result<Vec<Vec<Log>>, RpcFailure> {
        const METHOD: &str = "eth_getLogs";
        let filter = |hash: &B256| {
            (Filter::new().at_block_hash(*hash).address(contracts.to_vec()).event_signature(topic0),)
        };
        // EIP-234: a node answers an error for a block hash it does not have.
        let failed = |e| self.unknown_hash(METHOD, e);
        self.batched(METHOD, hashes, filter, failed).await
    }
}

/// The HTTP client of every RPC URL: bounded waits, no redirects (a
/// redirect could carry the URL's key elsewhere).
pub(super) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a reqwest client with static settings builds")
}
