//! Reconciling an EVM chain: balances read at one height (an archive node's
//! `eth_getBalance` and `balanceOf` at a block number), the ledger from the
//! store, and each difference located by bisection to the blocks where it
//! arose, whose movements the watcher's own decoder names (with call
//! traces where the node serves them).

use alloy::primitives::{Address, I256, U256};

use super::{
    Anchor, Baseline, Divergence, Failed, Line, Movement, ReconcileError, Report, Term, Watched,
    anchors::{record_baseline, record_checkpoint},
    locate::{self, Change},
    rules,
};
use crate::{
    amount::Amount,
    config::{ChainConfig, Confirmation},
    deposits::resource::Detected,
    evm::rpc::EvmRpc,
    rpc::RpcFailure,
    store::{Store, reconcile_wallets::Funding},
};

mod named;

/// The blocks whose movements a line names at most.
const NAMED_BLOCKS: usize = 10;

/// What to reconcile: every watched address and asset, or those named.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub account: Option<String>,
    pub address: Option<String>,
    pub asset: Option<String>,
    pub at_block: Option<u64>,
    /// Only the addresses of this slice (`run`'s passes spread over the
    /// period); every one when none.
    pub slice: Option<super::slices::Slice>,
}

/// An asset of the chain file: the native coin (`token` none) or a token.
#[derive(Debug, Clone)]
pub(super) struct Asset {
    pub(super) symbol: String,
    decimals: u8,
    token: Option<Address>,
}

impl Asset {
    /// `owner`'s balance of this asset at the end of `block`.
    pub(super) async fn balance(&self, rpc: &EvmRpc, owner: Address, block: u64) -> Result<U256, RpcFailure> {
        match self.token {
            None => rpc.balance_at(owner, block).await,
            Some(token) => rpc.token_balance_at(token, owner, block).await,
        }
    }
}

/// Reconciles what `ask` names on the EVM chain of `config`.
pub async fn reconcile(
    store: &Store,
    rpc: &EvmRpc,
    config: &ChainConfig,
    ask: &Ask,
) -> Result<Report, ReconcileError> {
    let settled = settled(store, rpc, config).await?;
    let height = settled.height_for(ask.at_block, config)?;
    let assets = assets(config, ask.asset.as_deref())?;
    let mut report = Report { settled: settled.height, ..Report::default() };
    let compared = comparable(store, config, ask, (height, settled.height), &mut report).await?;
    // Every balance at the height first, batched.
    let pairs: Vec<(Address, Option<Address>)> =
        compared.iter().flat_map(|(_, owner)| assets.iter().map(|a| (*owner, a.token))).collect();
    let mut batched = rpc.balances_at(&pairs, height).await.into_iter();
    for (watched, owner) in compared {
        let terms = terms_of(store, config, &watched).await?;
        for asset in &assets {
            let known = batched.next().flatten().map(|balance| (height, balance));
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
                known,
            };
            match one.reconciled(height).await {
                Ok((line, missed)) => {
                    report.lines.push(line);
                    report.missed.extend(missed);
                }
                Err(failed) => failed.file(&mut report, &format!("{} {}", watched.address, asset.symbol))?,
            }
        }
    }
    Ok(report)
}

/// The addresses `ask` names that can be compared at `height` (no watch
/// catching up, no deposit still `PENDING` at or below it, a watch start
/// at or below `settled`), each with its address parsed; the others are
/// listed in `report` as skipped.
async fn comparable(
    store: &Store,
    config: &ChainConfig,
    ask: &Ask,
    (height, settled): (u64, u64),
    report: &mut Report,
) -> Result<Vec<(Watched, Address)>, ReconcileError> {
    let mut compared = Vec::new();
    let pending = store.pending_addresses_through(config.chain, height).await?;
    for watched in chosen(store, config, ask).await? {
        let address = &watched.address;
        // A baseline comes from a settled block, never above it.
        let start = watched.watch_from.unwrap_or_default().saturating_sub(1);
        let below = height.min(settled);
        let skipped = if watched.catching_up {
            Some(format!("{address}: its watch is still catching up"))
        } else if pending.iter().any(|p| p.eq_ignore_ascii_case(address)) {
            Some(format!("{address}: a deposit to it is still PENDING at block {height}"))
        } else if start > below {
            Some(format!("{address}: its watch starts after block {below}"))
        } else {
            None
        };
        if let Some(why) = skipped {
            report.skipped.push(why);
            continue;
        }
        let Ok(owner) = address.parse::<Address>() else {
            return Err(ReconcileError::Refused(format!("{address} is not an address")));
        };
        compared.push((watched, owner));
    }
    Ok(compared)
}

/// The ledger terms of `watched`, every asset: a platform wallet's also
/// counts what the platform moved into it and the funding recorded.
async fn terms_of(
    store: &Store,
    config: &ChainConfig,
    watched: &Watched,
) -> Result<Vec<Term>, ReconcileError> {
    let (chain, native) = (config.chain, &config.native.symbol);
    let mut terms = store.ledger_terms(chain, &watched.address, native).await?;
    if watched.wallet.is_some() {
        terms.extend(store.wallet_credit_terms(chain, &watched.address, native).await?);
    }
    Ok(terms)
}

/// The indexed height, and the settled one: the lower of the confirmed
/// height (by the node's head and by the head the watcher recorded) and
/// the indexed height. An address with a deposit still `PENDING` at or
/// below it is skipped by the caller.
pub(super) struct Settled {
    pub(super) indexed: u64,
    pub(super) height: u64,
}

impl Settled {
    /// The height asked for, at most the indexed one; else the settled one.
    fn height_for(&self, at_block: Option<u64>, config: &ChainConfig) -> Result<u64, ReconcileError> {
        match at_block {
            Some(block) if block > self.indexed => Err(ReconcileError::Refused(format!(
                "block {block} is not indexed yet: {} is indexed through block {}",
                config.chain, self.indexed
            ))),
            Some(block) => Ok(block),
            None => Ok(self.height),
        }
    }
}

pub(super) async fn settled(
    store: &Store,
    rpc: &EvmRpc,
    config: &ChainConfig,
) -> Result<Settled, ReconcileError> {
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
    Ok(Settled { indexed, height: confirmed.min(indexed) })
}

/// The assets of the chain file, or the one named.
pub(super) fn assets(config: &ChainConfig, only: Option<&str>) -> Result<Vec<Asset>, ReconcileError> {
    let mut all =
        vec![Asset { symbol: config.native.symbol.clone(), decimals: config.native.decimals, token: None }];
    for asset in &config.assets {
        let token = asset.contract_address.parse().map_err(|_| {
            ReconcileError::Refused(format!("{}: {} is not an address", asset.symbol, asset.contract_address))
        })?;
        all.push(Asset { symbol: asset.symbol.clone(), decimals: asset.decimals, token: Some(token) });
    }
    super::pick(all, only, |a| &a.symbol, config.chain)
}

/// The watched addresses `ask` names: all of them, an account's, or one.
pub(super) async fn chosen(
    store: &Store,
    config: &ChainConfig,
    ask: &Ask,
) -> Result<Vec<Watched>, ReconcileError> {
    let mut all = store.reconcile_watched(config.chain).await?;
    // The platform's wallets, of the chain's family.
    if ask.account.is_none() {
        let family = crate::family::rules::name(config.family());
        all.extend(store.reconcile_wallets(config.chain, family).await?);
    }
    if let Some(slice) = ask.slice {
        all.retain(|w| slice.holds(&w.address));
    }
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

/// One line and what its located credits are: an account's missed
/// deposits, or a platform wallet's funding.
struct Found {
    line: Line,
    missed: Vec<Detected>,
    funding: Vec<Funding>,
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
#[derive(Clone, Copy)]
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
    /// The balance at a height, read already (batched).
    known: Option<(u64, U256)>,
}

impl One<'_> {
    /// The chain's balance at the end of `block`.
    async fn onchain(&self, block: u64) -> Result<U256, RpcFailure> {
        match self.known {
            Some((at, balance)) if at == block => Ok(balance),
            _ => self.asset.balance(self.rpc, self.owner, block).await,
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
        // A platform wallet has no watch start: the platform never knew
        // what it held before, so its first reconciliation is its baseline.
        if self.watched.wallet.is_some() {
            let at = height.min(self.settled);
            let anchor = Anchor { block: at, balance: self.onchain(at).await? };
            return Ok(record_baseline(
                self.store,
                chain,
                address,
                symbol,
                anchor,
                Baseline::FirstReconciliation,
            )
            .await?);
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
        Ok(record_baseline(self.store, chain, address, symbol, at, source).await?)
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
            record_checkpoint(self.store, chain, address, symbol, at).await?;
        } else {
            let (from, checked) = self.last_agreement(baseline, height).await?;
            let read = |block: u64| self.difference(baseline, block);
            let (found, bisected) = locate::locate((from, I256::ZERO), (height, difference), read).await?;
            (compared.changes, compared.reads) = (found, checked + bisected);
        }
        Ok(compared)
    }

    /// The line of this address's asset at `height`, and the credits found
    /// in the blocks where its balance rose unexplained: an account's
    /// missed deposits, or the funding that reached a platform wallet.
    async fn line(&self, height: u64) -> Result<Found, Failed> {
        let compared = self.compare(height).await?;
        let (mut movements, mut missed, mut funding) = (Vec::new(), Vec::new(), Vec::new());
        for change in compared.changes.iter().take(NAMED_BLOCKS) {
            let (moved, credits) = self.movements(change.block).await?;
            movements.extend(moved);
            if self.watched.wallet.is_none() {
                missed.extend(self.unrecorded(change, credits));
            } else if change.block <= self.settled {
                funding.extend(self.funding(change, credits).await?);
            }
        }
        Ok(Found { line: self.make_line(&compared, movements), missed, funding })
    }

    /// The credits of a block where a platform wallet's difference rose
    /// that came from outside the platform, when they name that rise
    /// exactly; none otherwise.
    async fn funding(&self, change: &Change, credits: Vec<Detected>) -> Result<Vec<Funding>, Failed> {
        if !change.by.is_positive() {
            return Ok(Vec::new());
        }
        let hashes: Vec<String> = credits.iter().map(|d| d.tx_hash.clone()).collect();
        let own = self.store.platform_transactions(self.config.chain, &hashes).await?;
        let outside: Vec<Detected> = credits.into_iter().filter(|d| !own.contains(&d.tx_hash)).collect();
        let sum = outside.iter().fold(I256::ZERO, |sum, d| sum + rules::signed(d.amount.raw()));
        if sum != change.by {
            return Ok(Vec::new());
        }
        Ok(outside
            .into_iter()
            .map(|d| Funding {
                tx_hash: d.tx_hash,
                position: d.position.to_string(),
                asset: d.currency_symbol,
                block: d.block_number,
                amount: d.amount.raw(),
            })
            .collect())
    }

    /// The line at `height` and the missed deposits found, once the
    /// funding found reaching a platform wallet is recorded.
    async fn reconciled(&self, height: u64) -> Result<(Line, Vec<Detected>), Failed> {
        let Found { line, missed, funding } = self.line(height).await?;
        if funding.is_empty() {
            return Ok((line, missed));
        }
        Ok((self.funded(height, line, &funding).await?, missed))
    }

    /// Records `funding` of this platform wallet and reconciles it again
    /// with it counted: the line that agrees where the funding explains
    /// the difference, naming the movements `first` found.
    async fn funded(&self, height: u64, first: Line, funding: &[Funding]) -> Result<Line, Failed> {
        super::wallets::record_funding(self.store, self.config.chain, self.watched, funding).await?;
        let terms = super::wallets::with_funding(self.terms, funding);
        let again = One { terms: &terms, ..*self };
        let mut line = again.line(height).await?.line;
        line.movements = first.movements;
        Ok(line)
    }

    fn make_line(&self, compared: &Compared, movements: Vec<Movement>) -> Line {
        let decimals = self.asset.decimals;
        let signed = |value: I256| rules::decimal(value, decimals);
        let changes = &compared.changes;
        Line {
            chain: self.config.chain.as_str().to_string(),
            account_id: self.watched.wallet.is_none().then(|| self.watched.account_id.clone()),
            wallet: self.watched.wallet.clone(),
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
}
