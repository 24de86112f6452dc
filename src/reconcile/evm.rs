//! Reconciling an EVM chain: balances read at one height (an archive node's
//! `eth_getBalance` and `balanceOf` at a block number), the ledger from the
//! store, and each difference located by bisection to the blocks where it
//! arose, whose movements the watcher's own decoder names (with call
//! traces where the node serves them).

use alloy::primitives::{Address, B256, I256, U256};

use super::{
    Anchor, Baseline, Divergence, Line, Movement, ReconcileError, Report, Term, Watched,
    locate::{self, Change},
    rules,
};
use crate::{
    amount::Amount,
    config::{ChainConfig, Confirmation},
    deposits::{
        resource::{Detected, Position},
        watch::WatchSet,
    },
    evm::{
        decode::{self, BlockInput, EvmAssets},
        rpc::EvmRpc,
    },
    rpc::RpcFailure,
    store::Store,
};

/// The blocks whose movements a line names at most.
const NAMED_BLOCKS: usize = 10;

/// What to reconcile: every watched address and asset, or those named.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub account: Option<String>,
    pub address: Option<String>,
    pub asset: Option<String>,
    pub at_block: Option<u64>,
}

/// An asset of the chain file: the native coin (`token` none) or a token.
#[derive(Debug, Clone)]
struct Asset {
    symbol: String,
    decimals: u8,
    token: Option<Address>,
}

/// Reconciles what `ask` names on the EVM chain of `config`.
pub async fn reconcile(
    store: &Store,
    rpc: &EvmRpc,
    config: &ChainConfig,
    ask: &Ask,
) -> Result<Report, ReconcileError> {
    let settled = settled(store, rpc, config).await?;
    let height = match ask.at_block {
        Some(block) if block > settled.indexed => {
            return Err(ReconcileError::Refused(format!(
                "block {block} is not indexed yet: {} is indexed through block {}",
                config.chain, settled.indexed
            )));
        }
        Some(block) => block,
        None => settled.height,
    };
    let assets = assets(config, ask.asset.as_deref())?;
    let mut report = Report { settled: settled.height, ..Report::default() };
    for watched in chosen(store, config, ask).await? {
        if watched.catching_up {
            report.skipped.push(format!("{}: its watch is still catching up", watched.address));
            continue;
        }
        // A baseline comes from a settled block, never above it.
        let start = watched.watch_from.unwrap_or_default().saturating_sub(1);
        let below = height.min(settled.height);
        if start > below {
            report.skipped.push(format!("{}: its watch starts after block {below}", watched.address));
            continue;
        }
        let Ok(owner) = watched.address.parse::<Address>() else {
            return Err(ReconcileError::Refused(format!("{} is not an address", watched.address)));
        };
        let terms = store.ledger_terms(config.chain, &watched.address, &config.native.symbol).await?;
        for asset in &assets {
            let mine: Vec<Term> = terms.iter().filter(|t| t.asset == asset.symbol).cloned().collect();
            let one = One {
                store,
                rpc,
                config,
                watched: &watched,
                owner,
                asset,
                terms: &mine,
                settled: settled.height,
            };
            match one.line(height).await {
                Ok((line, missed)) => {
                    report.lines.push(line);
                    report.missed.extend(missed);
                }
                Err(Failed::Read(failure)) => {
                    report.failed.push(format!("{} {}: {failure}", watched.address, asset.symbol))
                }
                Err(Failed::Skip(why)) => {
                    report.skipped.push(format!("{} {}: {why}", watched.address, asset.symbol))
                }
                Err(Failed::Other(error)) => return Err(error),
            }
        }
    }
    Ok(report)
}

/// The indexed height, and the settled one: the lowest of the confirmed
/// height (by the node's head and by the head the watcher recorded), the
/// indexed height and the block below the lowest `PENDING` deposit.
struct Settled {
    indexed: u64,
    height: u64,
}

async fn settled(store: &Store, rpc: &EvmRpc, config: &ChainConfig) -> Result<Settled, ReconcileError> {
    let chain = config.chain;
    let never = || ReconcileError::NotIndexed(chain);
    let state = store.chain_state(chain).await?.ok_or_else(never)?;
    let indexed = state.next_block.checked_sub(1).ok_or_else(never)?;
    let confirmed = match config.confirmation {
        Confirmation::Depth(depth) => rpc.head().await?.min(state.head).saturating_sub(depth),
        Confirmation::Finalized => {
            let tag = alloy::eips::BlockNumberOrTag::Finalized;
            rpc.tagged(tag).await?.ok_or_else(|| {
                RpcFailure::new(chain, "eth_getBlockByNumber", "missing_data", "no finalized block".into())
            })?
        }
    };
    let pending = store.lowest_pending_block(chain).await?.map_or(u64::MAX, |b| b.saturating_sub(1));
    Ok(Settled { indexed, height: confirmed.min(indexed).min(pending) })
}

/// The assets of the chain file, or the one named.
fn assets(config: &ChainConfig, only: Option<&str>) -> Result<Vec<Asset>, ReconcileError> {
    let mut all =
        vec![Asset { symbol: config.native.symbol.clone(), decimals: config.native.decimals, token: None }];
    for asset in &config.assets {
        let token = asset.contract_address.parse().map_err(|_| {
            ReconcileError::Refused(format!("{}: {} is not an address", asset.symbol, asset.contract_address))
        })?;
        all.push(Asset { symbol: asset.symbol.clone(), decimals: asset.decimals, token: Some(token) });
    }
    match only {
        None => Ok(all),
        Some(symbol) => {
            let found: Vec<Asset> = all.into_iter().filter(|a| a.symbol == symbol).collect();
            if found.is_empty() {
                return Err(ReconcileError::Refused(format!("{symbol} is not an asset of {}", config.chain)));
            }
            Ok(found)
        }
    }
}

/// The watched addresses `ask` names: all of them, an account's, or one.
async fn chosen(store: &Store, config: &ChainConfig, ask: &Ask) -> Result<Vec<Watched>, ReconcileError> {
    let all = store.reconcile_watched(config.chain).await?;
    let named = match (&ask.account, &ask.address) {
        (Some(account), _) => all.into_iter().filter(|w| &w.account_id == account).collect::<Vec<_>>(),
        (None, Some(address)) => {
            all.into_iter().filter(|w| w.address.eq_ignore_ascii_case(address)).collect()
        }
        (None, None) => return Ok(all),
    };
    if named.is_empty() {
        let what = ask.account.as_ref().or(ask.address.as_ref()).cloned().unwrap_or_default();
        return Err(ReconcileError::Refused(format!("{what} is not watched on {}", config.chain)));
    }
    Ok(named)
}

/// Why one line could not be made: a read that failed (reported, the rest
/// goes on), or anything else (the reconciliation stops).
enum Failed {
    Read(RpcFailure),
    /// The line cannot be made at this height, for the reason given.
    Skip(String),
    Other(ReconcileError),
}

impl From<RpcFailure> for Failed {
    fn from(failure: RpcFailure) -> Self {
        Failed::Read(failure)
    }
}

impl From<crate::store::StoreError> for Failed {
    fn from(error: crate::store::StoreError) -> Self {
        Failed::Other(error.into())
    }
}

/// An address's asset compared at one height.
struct Compared {
    height: u64,
    source: Baseline,
    onchain: U256,
    ledger: I256,
    /// Where the difference arose; empty when it agrees.
    changes: Vec<Change>,
    reads: u32,
}

/// One address's asset.
struct One<'a> {
    store: &'a Store,
    rpc: &'a EvmRpc,
    config: &'a ChainConfig,
    watched: &'a Watched,
    owner: Address,
    asset: &'a Asset,
    terms: &'a [Term],
    /// No baseline is taken above it.
    settled: u64,
}

impl One<'_> {
    /// The chain's balance at the end of `block`.
    async fn onchain(&self, block: u64) -> Result<U256, RpcFailure> {
        match self.asset.token {
            None => self.rpc.balance_at(self.owner, block).await,
            Some(token) => self.rpc.token_balance_at(token, self.owner, block).await,
        }
    }

    /// `onchain − ledger` at the end of `block`.
    async fn difference(&self, baseline: Anchor, block: u64) -> Result<I256, RpcFailure> {
        Ok(rules::difference(self.onchain(block).await?, baseline, self.terms, block))
    }

    /// The recorded baseline; or, first, the balance read at the end of
    /// the block before the watch began; or, where no node can read that
    /// far back, the balance at the height (at the settled height at most:
    /// a baseline is kept for good, and an unsettled block may still go).
    async fn baseline(&self, height: u64) -> Result<(Anchor, Baseline), Failed> {
        let (chain, address, symbol) = (self.config.chain, &self.watched.address, &self.asset.symbol);
        if let Some(found) = self.store.reconcile_baseline(chain, address, symbol).await? {
            return Ok(found);
        }
        // Never below the watch start: the caller skips a height under it.
        let block = self.watched.watch_from.unwrap_or_default().saturating_sub(1);
        let (at, source) = match self.onchain(block).await {
            Ok(balance) => (Anchor { block, balance }, Baseline::Archive),
            // The node answered that it does not serve that block's state
            // (not an archive node): the balance now, said so.
            Err(failure) if failure.kind == "rpc_error" => {
                let at = height.min(self.settled);
                (Anchor { block: at, balance: self.onchain(at).await? }, Baseline::FirstReconciliation)
            }
            Err(failure) => return Err(failure.into()),
        };
        Ok(self.store.record_baseline(chain, address, symbol, at, source).await?)
    }

    /// Where `f` was last zero: the checkpoint when it still agrees (a
    /// later credit in an older block moves the ledger), else the baseline.
    async fn last_agreement(&self, baseline: Anchor, height: u64) -> Result<(u64, u32), Failed> {
        let (chain, address, symbol) = (self.config.chain, &self.watched.address, &self.asset.symbol);
        let checkpoint = self.store.reconcile_checkpoint(chain, address, symbol).await?;
        match checkpoint.filter(|c| c.block > baseline.block && c.block < height) {
            Some(c) if self.difference(baseline, c.block).await?.is_zero() => Ok((c.block, 1)),
            Some(_) => Ok((baseline.block, 1)),
            None => Ok((baseline.block, 0)),
        }
    }

    /// The balance and the ledger at `height` and, when they differ, the
    /// blocks where the difference arose.
    async fn compare(&self, height: u64) -> Result<Compared, Failed> {
        let (baseline, source) = self.baseline(height).await?;
        if height < baseline.block {
            return Err(Failed::Skip(format!(
                "its baseline is at block {}, after the height",
                baseline.block
            )));
        }
        let onchain = self.onchain(height).await?;
        let ledger = rules::ledger_at(baseline, self.terms, height);
        let difference = rules::signed(onchain) - ledger;
        let mut compared = Compared { height, source, onchain, ledger, changes: Vec::new(), reads: 0 };
        if difference.is_zero() {
            let at = Anchor { block: height, balance: onchain };
            let (chain, address, symbol) = (self.config.chain, &self.watched.address, &self.asset.symbol);
            self.store.record_checkpoint(chain, address, symbol, at).await?;
        } else {
            let (from, checked) = self.last_agreement(baseline, height).await?;
            let read = |block: u64| self.difference(baseline, block);
            let (found, bisected) = locate::locate((from, I256::ZERO), (height, difference), read).await?;
            (compared.changes, compared.reads) = (found, checked + bisected);
        }
        Ok(compared)
    }

    /// The line of this address's asset at `height`, and the credits found
    /// in the blocks where its balance rose unexplained.
    async fn line(&self, height: u64) -> Result<(Line, Vec<Detected>), Failed> {
        let compared = self.compare(height).await?;
        let (mut movements, mut missed) = (Vec::new(), Vec::new());
        for change in compared.changes.iter().take(NAMED_BLOCKS) {
            let (moved, credits) = self.movements(change.block).await?;
            movements.extend(moved);
            missed.extend(self.unrecorded(change, credits));
        }
        Ok((self.make_line(&compared, movements), missed))
    }

    fn make_line(&self, compared: &Compared, movements: Vec<Movement>) -> Line {
        let decimals = self.asset.decimals;
        let signed = |value: I256| rules::decimal(value, decimals);
        let changes = &compared.changes;
        Line {
            chain: self.config.chain.as_str().to_string(),
            account_id: Some(self.watched.account_id.clone()),
            wallet: None,
            address: self.watched.address.clone(),
            asset: self.asset.symbol.clone(),
            at_block: compared.height,
            onchain: Amount::from_raw(compared.onchain, decimals).to_string(),
            ledger: signed(compared.ledger),
            difference: signed(rules::signed(compared.onchain) - compared.ledger),
            divergent_block: changes.first().map(|c| c.block),
            divergent_blocks: changes
                .iter()
                .map(|c| Divergence { block: c.block, change: signed(c.by) })
                .collect(),
            baseline: compared.source,
            movements,
            reads: compared.reads,
        }
    }

    /// The decoded credits of a block where the difference rose, when
    /// they explain that rise exactly once what the ledger already counts
    /// there is taken away; none otherwise (a rise the decoder cannot name,
    /// or credits a node made up beyond what the balance shows).
    fn unrecorded(&self, change: &Change, credits: Vec<Detected>) -> Vec<Detected> {
        if !change.by.is_positive() {
            return Vec::new();
        }
        let decoded: Vec<U256> = credits.iter().map(|d| d.amount.raw()).collect();
        if rules::unrecorded(self.terms, change.block, &decoded) == change.by { credits } else { Vec::new() }
    }

    /// What moved this asset into or out of the address in `block`: the
    /// watcher's decoder over the block, its logs and (where the node
    /// serves them) its call traces, for what came in; the address's own
    /// transactions and the token's logs from it, for what went out.
    /// The credits are the decoder's own findings, as a scan would record
    /// them.
    async fn movements(&self, number: u64) -> Result<(Vec<Movement>, Vec<Detected>), RpcFailure> {
        let blocks = self.rpc.blocks(number, number).await?;
        let Some(block) = blocks.first() else { return Ok((Vec::new(), Vec::new())) };
        let hashes: Vec<B256> = block.transactions.iter().map(|tx| tx.hash).collect();
        let receipts = self.rpc.receipts_with_logs(&hashes).await?;
        let succeeded: decode::Succeeded =
            receipts.iter().filter(|r| r.receipt.succeeded()).map(|r| r.receipt.transaction_hash).collect();
        let assets = EvmAssets::from_config(self.config);
        let contracts = assets.contracts();
        let logs = if contracts.is_empty() {
            Vec::new()
        } else {
            let answered =
                self.rpc.logs_by_hash(&[block.hash], &contracts, decode::transfer_topic()).await?.concat();
            transfer_logs(answered, &receipts, &contracts)
        };
        let traces = self.rpc.traces(block.hash).await.ok();
        let watch = WatchSet::build(
            vec![(self.watched.address.clone(), self.watched.account_id.clone())],
            |a: &str| a.parse::<Address>().ok(),
        );
        let input = BlockInput { block, succeeded: &succeeded, logs: &logs, traces: traces.as_deref() };
        let credits: Vec<Detected> = decode::deposits_in_block(self.config.chain, &input, &watch, &assets)
            .into_iter()
            .filter(|d| d.currency_symbol == self.asset.symbol)
            .collect();
        let mut found: Vec<Movement> = credits
            .iter()
            .map(|d| Movement {
                transaction_hash: d.tx_hash.clone(),
                block: number,
                direction: "in",
                amount: d.amount.to_string(),
                how: how(&d.position),
            })
            .collect();
        found.extend(outflows(block, &logs, &succeeded, self.owner, self.asset));
        Ok((found, credits))
    }
}

/// The token `Transfer` logs of a block: those the logs answer holds and
/// those its receipts hold, once each (by transaction and log index), so
/// that a log one answer left out is still decoded.
fn transfer_logs(
    answered: Vec<alloy::rpc::types::Log>,
    receipts: &[crate::evm::rpc::RpcReceiptLogs],
    contracts: &[Address],
) -> Vec<alloy::rpc::types::Log> {
    let topic = decode::transfer_topic();
    let key = |log: &alloy::rpc::types::Log| (log.transaction_hash, log.log_index);
    let mut seen: std::collections::HashSet<_> = answered.iter().map(key).collect();
    let mut logs = answered;
    for log in receipts.iter().flat_map(|r| &r.logs) {
        let transfer = contracts.contains(&log.address()) && log.topics().first() == Some(&topic);
        if transfer && seen.insert(key(log)) {
            logs.push(log.clone());
        }
    }
    logs.sort_by_key(|log| log.log_index);
    logs
}

/// What left `owner` in `block` in `asset`: its own successful
/// transactions' value, or the token's `Transfer` logs from it.
fn outflows(
    block: &crate::evm::rpc::RpcBlock,
    logs: &[alloy::rpc::types::Log],
    succeeded: &decode::Succeeded,
    owner: Address,
    asset: &Asset,
) -> Vec<Movement> {
    let number = block.number.to();
    let amount = |raw: U256| Amount::from_raw(raw, asset.decimals).to_string();
    let out = |hash: String, raw: U256, how: &'static str| Movement {
        transaction_hash: hash,
        block: number,
        direction: "out",
        amount: amount(raw),
        how,
    };
    match asset.token {
        None => block
            .transactions
            .iter()
            .filter(|tx| tx.from == owner && succeeded.contains(&tx.hash) && !tx.value.is_zero())
            .map(|tx| out(tx.hash.to_string(), tx.value, "top_level"))
            .collect(),
        Some(token) => logs
            .iter()
            .filter(|log| log.address() == token && log.topics().get(1) == Some(&owner.into_word()))
            .map(|log| {
                let raw = U256::from_be_slice(log.data().data.get(..32).unwrap_or_default());
                out(log.transaction_hash.unwrap_or_default().to_string(), raw, "token_log")
            })
            .collect(),
    }
}

/// How a decoded movement moved: a transaction's own value, a token's
/// `Transfer` log, or a contract's internal call.
fn how(position: &Position) -> &'static str {
    match position {
        Position::Trace(_) => "internal_call",
        Position::Log(_) => "token_log",
        _ => "top_level",
    }
}
