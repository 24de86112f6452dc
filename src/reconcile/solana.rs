//! Reconciling a Solana chain: each watched wallet's lamports and its
//! balance of each mint of the chain file, read with the slot the answer
//! is at, against the ledger at that slot once the slot is finalized and
//! the watcher has indexed past it. Solana serves no balance at a past slot, so a
//! difference is located from the transactions of the wallet (and of its
//! token accounts) since the last slot it agreed at: each transaction's
//! pre- and post-balances give the wallet's change in its slot, and the
//! slots where that change is not the ledger's are the divergent ones,
//! their transactions named. The platform's wallets are reconciled beside
//! the watched ones, the sponsor's ledger counting the fee and rent of
//! every transaction it paid for, and funding from outside recorded
//! ([`funding`]).

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use alloy::primitives::{I256, U256};
use solana_commitment_config::CommitmentConfig;

use super::{
    Anchor, Baseline, Divergence, Failed, Line, Movement, ReconcileError, Report, Term, Watched,
    anchors::{record_baseline, record_checkpoint},
    evm::{self, Ask},
    locate::Change,
    rules,
};
use crate::{
    amount::Amount,
    config::ChainConfig,
    rpc::RpcFailure,
    solana::{
        decode,
        rpc::{ACCOUNTS_PER_CALL, AtSlot, SolanaRpc},
    },
    store::Store,
};

mod funding;

/// How long a balance read waits for the watcher to index past its slot.
const INDEXED_WITHIN: Duration = Duration::from_secs(60);

/// The transactions read to locate one difference at most.
const MAX_TRANSACTIONS: usize = 5_000;

/// A page of signatures.
const PAGE: usize = 1_000;

/// An asset of the chain file: lamports (`mint` none) or a mint.
#[derive(Debug, Clone)]
pub(super) struct Asset {
    pub(super) symbol: String,
    decimals: u8,
    mint: Option<String>,
}

/// Reconciles what `ask` names on the Solana chain of `config`: every
/// balance read first, then one wait until the highest slot read is
/// settled, then each line.
pub async fn reconcile(
    store: &Store,
    rpc: &SolanaRpc,
    config: &ChainConfig,
    ask: &Ask,
) -> Result<Report, ReconcileError> {
    if ask.at_block.is_some() {
        return Err(ReconcileError::Refused(format!(
            "{} serves no balance at a past slot: --at-block is for EVM chains",
            config.chain
        )));
    }
    let assets = assets(config, ask.asset.as_deref())?;
    let mut report = Report::default();
    let (wallets, catching_up): (Vec<Watched>, Vec<Watched>) =
        evm::chosen(store, config, ask).await?.into_iter().partition(|w| !w.catching_up);
    for watched in catching_up {
        report.skipped.push(format!("{}: its watch is still catching up", watched.address));
    }
    let read = read_balances(rpc, config, wallets, &assets, &mut report).await?;
    let highest = read.iter().map(|(_, _, at)| at.slot).max().unwrap_or_default();
    let settled = settled_past(store, rpc, config, highest).await;
    let pending = store.pending_addresses_through(config.chain, highest).await?;
    let (chain, native) = (config.chain, &config.native.symbol);
    // The reads are by address: its terms are read once.
    let mut terms: (String, Vec<Term>) = Default::default();
    for (watched, asset, at) in read {
        let what = format!("{} {}", watched.address, asset.symbol);
        if let Err(failed) = &settled {
            Failed::Skip(failed.clone()).file(&mut report, &what)?;
            continue;
        }
        if pending.contains(&watched.address) {
            let why = format!("a deposit to it is still PENDING at slot {highest} or below");
            Failed::Skip(why).file(&mut report, &what)?;
            continue;
        }
        if terms.0 != watched.address {
            let mut all = store.ledger_terms(chain, &watched.address, native).await?;
            all.extend(store.native_sent_terms(chain, &watched.address, native).await?);
            if watched.wallet.is_some() {
                all.extend(store.wallet_credit_terms(chain, &watched.address, native).await?);
            }
            terms = (watched.address.clone(), all);
        }
        let mine: Vec<Term> = terms.1.iter().filter(|t| t.asset == asset.symbol).cloned().collect();
        let one = One { store, rpc, config, watched: &watched, asset, terms: &mine };
        match one.reconciled(at).await {
            Ok(line) => report.lines.push(line),
            Err(failed) => failed.file(&mut report, &what)?,
        }
    }
    Ok(report)
}

/// Each balance of `wallets` in `assets`, with the slot it is at: the
/// lamports batched; a read that fails filed in `report`.
pub(super) async fn read_balances<'a>(
    rpc: &SolanaRpc,
    config: &ChainConfig,
    wallets: Vec<Watched>,
    assets: &'a [Asset],
    report: &mut Report,
) -> Result<Vec<(Watched, &'a Asset, AtSlot)>, ReconcileError> {
    let mut lamports = match assets.iter().any(|a| a.mint.is_none()) {
        true => lamports_batched(rpc, config, &wallets).await,
        false => HashMap::new(),
    };
    let mut read = Vec::new();
    for watched in wallets {
        for asset in assets {
            let batched = asset.mint.is_none().then(|| lamports.remove(&watched.address)).flatten();
            let at = match batched {
                Some(at) => Ok(at),
                None => balance(rpc, &watched, asset).await,
            };
            match at {
                Ok(at) => read.push((watched.clone(), asset, at)),
                Err(failure) => {
                    Failed::from(failure).file(report, &format!("{} {}", watched.address, asset.symbol))?
                }
            }
        }
    }
    Ok(read)
}

/// The lamports of `wallets`, [`ACCOUNTS_PER_CALL`] to a request, by
/// address; a batch that fails is left out (each of its wallets is then
/// read on its own).
async fn lamports_batched(
    rpc: &SolanaRpc,
    config: &ChainConfig,
    wallets: &[Watched],
) -> HashMap<String, AtSlot> {
    let mut found = HashMap::new();
    for batch in wallets.chunks(ACCOUNTS_PER_CALL) {
        let addresses: Vec<String> = batch.iter().map(|w| w.address.clone()).collect();
        match rpc.lamports_at_slot(&addresses).await {
            Ok(read) => found.extend(addresses.into_iter().zip(read)),
            Err(failure) => {
                tracing::warn!(chain = %config.chain, wallets = addresses.len(), %failure,
                    "a batch of balances could not be read; each is read on its own")
            }
        }
    }
    found
}

/// Lamports, and the chain file's mints (or the one named).
pub(super) fn assets(config: &ChainConfig, only: Option<&str>) -> Result<Vec<Asset>, ReconcileError> {
    let mut all =
        vec![Asset { symbol: config.native.symbol.clone(), decimals: config.native.decimals, mint: None }];
    all.extend(config.assets.iter().map(|a| Asset {
        symbol: a.symbol.clone(),
        decimals: a.decimals,
        mint: Some(a.contract_address.clone()),
    }));
    super::pick(all, only, |a| &a.symbol, config.chain)
}

/// `watched`'s balance of `asset` and the slot it is at.
pub(super) async fn balance(rpc: &SolanaRpc, watched: &Watched, asset: &Asset) -> Result<AtSlot, RpcFailure> {
    match &asset.mint {
        None => rpc.balance_at_slot(&watched.address).await,
        Some(mint) => rpc.token_balance_at_slot(&watched.address, mint).await,
    }
}

/// Waits until `slot` is finalized and the watcher has indexed past it
/// with no deposit still `PENDING` at or below it: the ledger then holds
/// every deposit the balances read at or below it hold. Why not, when
/// `slot` is not finalized and indexed within [`INDEXED_WITHIN`]; a
/// deposit still `PENDING` then (one providers dispute, say) holds back
/// only its wallet's lines, which the caller skips, never the chain's.
async fn settled_past(store: &Store, rpc: &SolanaRpc, config: &ChainConfig, slot: u64) -> Result<(), String> {
    let chain = config.chain;
    let deadline = tokio::time::Instant::now() + INDEXED_WITHIN;
    loop {
        let finalized = rpc.slot(CommitmentConfig::finalized()).await.map_err(|e| e.to_string())?;
        let next = store.chain_state(chain).await.map_err(|e| e.to_string())?.map_or(0, |s| s.next_block);
        let ready = finalized >= slot && next > slot;
        let pending = store.pending_addresses_through(chain, slot).await.map_err(|e| e.to_string())?;
        if ready && pending.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            if ready {
                return Ok(());
            }
            return Err(format!(
                "the balance is at slot {slot}, and it is not settled yet (finalized slot {finalized}, the \
                 watcher's next slot {next}): reconcile again"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A transaction that changed the wallet's balance, in its slot.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Moved {
    signature: String,
    slot: u64,
    change: i128,
}

/// A wallet's asset compared at one slot: where it diverged and the
/// transactions read to find out.
struct Compared {
    slot: u64,
    onchain: U256,
    ledger: I256,
    source: Baseline,
    changes: Vec<Change>,
    movements: Vec<Movement>,
    reads: u32,
}

/// One wallet's asset.
struct One<'a> {
    store: &'a Store,
    rpc: &'a SolanaRpc,
    config: &'a ChainConfig,
    watched: &'a Watched,
    asset: &'a Asset,
    terms: &'a [Term],
}

impl One<'_> {
    /// The recorded baseline, or this read's balance (the first
    /// reconciliation's: no node serves a balance at a past slot).
    async fn baseline(&self, read: &AtSlot) -> Result<(Anchor, Baseline), Failed> {
        let (chain, address, symbol) = (self.config.chain, &self.watched.address, &self.asset.symbol);
        if let Some(found) = self.store.reconcile_baseline(chain, address, symbol).await? {
            return Ok(found);
        }
        let at = Anchor { block: read.slot, balance: U256::from(read.amount) };
        Ok(record_baseline(self.store, chain, address, symbol, at, Baseline::FirstReconciliation).await?)
    }

    /// The line of a balance read at a settled slot; a platform wallet's
    /// once the funding found reaching it from outside is recorded
    /// ([`funding`]), counted and the line made again.
    async fn reconciled(&self, read: AtSlot) -> Result<Line, Failed> {
        let (line, changes, moved) = self.line(read.clone()).await?;
        if self.watched.wallet.is_none() || changes.is_empty() {
            return Ok(line);
        }
        let own = self.store.platform_transactions(self.config.chain, &funding::credits(&moved)).await?;
        let found = funding::outside(&changes, &moved, &own, (&self.watched.address, &self.asset.symbol));
        if found.is_empty() {
            return Ok(line);
        }
        super::wallets::record_funding(self.store, self.config.chain, self.watched, &found).await?;
        let terms = super::wallets::with_funding(self.terms, &found);
        let (mut again, _, _) = One { terms: &terms, ..*self }.line(read).await?;
        again.movements = line.movements;
        Ok(again)
    }

    /// The line of a balance read at a settled slot, the slots where it
    /// diverged and the transactions read to find them.
    async fn line(&self, read: AtSlot) -> Result<(Line, Vec<Change>, Vec<Moved>), Failed> {
        let (baseline, source) = self.baseline(&read).await?;
        if read.slot < baseline.block {
            return Err(Failed::Skip(format!(
                "its baseline is at slot {}, after the balance's",
                baseline.block
            )));
        }
        let onchain = U256::from(read.amount);
        let ledger = rules::ledger_at(baseline, self.terms, read.slot);
        let difference = rules::signed(onchain) - ledger;
        let mut compared = Compared {
            slot: read.slot,
            onchain,
            ledger,
            source,
            changes: Vec::new(),
            movements: Vec::new(),
            reads: 0,
        };
        let mut moved = Vec::new();
        if difference.is_zero() {
            let (chain, address, symbol) = (self.config.chain, &self.watched.address, &self.asset.symbol);
            let at = Anchor { block: read.slot, balance: onchain };
            record_checkpoint(self.store, chain, address, symbol, at).await?;
        } else {
            let from = self.last_agreement(baseline).await?;
            match self.moved(&read, from).await {
                Ok(found) => {
                    moved = found;
                    compared.reads = moved.len() as u32;
                    (compared.changes, compared.movements) = self.divergences(&moved, from, read.slot);
                }
                // Too many transactions to locate it: the difference is
                // reported all the same (it counts as differing), its slots
                // unnamed, never left out as skipped.
                Err(Failed::Skip(why)) => tracing::warn!(chain = %self.config.chain,
                    address = self.watched.address, asset = self.asset.symbol, %why, "a difference not located"),
                Err(other) => return Err(other),
            }
        }
        let changes = compared.changes.clone();
        Ok((self.make_line(compared), changes, moved))
    }

    /// The checkpoint's slot when the ledger still gives its balance there
    /// (a term recorded since in an older slot moves it), else the
    /// baseline's.
    async fn last_agreement(&self, baseline: Anchor) -> Result<u64, Failed> {
        let (chain, address, symbol) = (self.config.chain, &self.watched.address, &self.asset.symbol);
        let checkpoint = self.store.reconcile_checkpoint(chain, address, symbol).await?;
        Ok(match checkpoint.filter(|c| c.block > baseline.block) {
            Some(c) if rules::ledger_at(baseline, self.terms, c.block) == rules::signed(c.balance) => c.block,
            _ => baseline.block,
        })
    }

    /// The transactions after slot `from` up to the read's slot that changed
    /// the wallet's balance of the asset: the wallet's own signatures for
    /// lamports, its token accounts' for a mint.
    async fn moved(&self, read: &AtSlot, from: u64) -> Result<Vec<Moved>, Failed> {
        let addresses = match self.asset.mint {
            None => vec![self.watched.address.clone()],
            Some(_) => read.accounts.clone(),
        };
        let mut signatures: BTreeMap<String, u64> = BTreeMap::new();
        for address in &addresses {
            let mut before: Option<String> = None;
            loop {
                let page = self.rpc.signatures(address, (before.as_deref(), None), PAGE, read.slot).await?;
                let older = page.iter().any(|s| s.slot <= from);
                for s in page.iter().filter(|s| s.slot > from && s.slot <= read.slot) {
                    signatures.insert(s.signature.clone(), s.slot);
                }
                if signatures.len() > MAX_TRANSACTIONS {
                    return Err(Failed::Skip(format!(
                        "more than {MAX_TRANSACTIONS} transactions since slot {from}: too many to locate the difference"
                    )));
                }
                match page.last() {
                    Some(last) if !older && page.len() == PAGE => before = Some(last.signature.clone()),
                    _ => break,
                }
            }
        }
        let mut moved = Vec::new();
        for (signature, slot) in signatures {
            let Some(tx) = self.rpc.transaction(&signature).await? else {
                let message = format!("{signature} is listed but not served");
                return Err(
                    RpcFailure::new(self.config.chain, "getTransaction", "missing_data", message).into()
                );
            };
            let change =
                decode::balance_change(&tx.transaction, &self.watched.address, self.asset.mint.as_deref());
            if change != 0 {
                moved.push(Moved { signature, slot, change });
            }
        }
        Ok(moved)
    }

    /// The slots after `from` up to `height` where the wallet's change on
    /// chain is not the ledger's, with how much, and their transactions.
    fn divergences(&self, moved: &[Moved], from: u64, height: u64) -> (Vec<Change>, Vec<Movement>) {
        let mut by_slot: BTreeMap<u64, I256> = BTreeMap::new();
        for m in moved {
            *by_slot.entry(m.slot).or_default() += I256::try_from(m.change).unwrap_or_default();
        }
        for t in self.terms.iter().filter(|t| t.block > from && t.block <= height) {
            let amount = rules::signed(t.amount);
            *by_slot.entry(t.block).or_default() -= if t.kind.is_credit() { amount } else { -amount };
        }
        let changes: Vec<Change> = by_slot
            .into_iter()
            .filter(|(_, by)| !by.is_zero())
            .map(|(block, by)| Change { block, by })
            .collect();
        let decimals = self.asset.decimals;
        let movements = moved
            .iter()
            .filter(|m| changes.iter().any(|c| c.block == m.slot))
            .map(|m| Movement {
                transaction_hash: m.signature.clone(),
                block: m.slot,
                direction: if m.change > 0 { "in" } else { "out" },
                amount: Amount::from_raw(U256::from(m.change.unsigned_abs()), decimals).to_string(),
                how: "balance_change",
            })
            .collect();
        (changes, movements)
    }

    fn make_line(&self, compared: Compared) -> Line {
        let Compared { slot, onchain, ledger, source, changes, movements, reads } = compared;
        let decimals = self.asset.decimals;
        let signed = |value: I256| rules::decimal(value, decimals);
        Line {
            chain: self.config.chain.as_str().to_string(),
            account_id: self.watched.wallet.is_none().then(|| self.watched.account_id.clone()),
            wallet: self.watched.wallet.clone(),
            address: self.watched.address.clone(),
            asset: self.asset.symbol.clone(),
            at_block: slot,
            onchain: Amount::from_raw(onchain, decimals).to_string(),
            ledger: signed(ledger),
            difference: signed(rules::signed(onchain) - ledger),
            divergent_block: changes.first().map(|c| c.block),
            divergent_blocks: changes
                .iter()
                .map(|c| Divergence { block: c.block, change: signed(c.by) })
                .collect(),
            baseline: source,
            movements,
            reads,
        }
    }
}
