//! Reconciliation: does the ledger equal the chain? For each watched
//! address and each asset of the chain file, at one height, the balance the
//! chain holds is compared with what the store explains:
//!
//! ```text
//! ledger(h) = baseline (the balance before the watch began)
//!           + CONFIRMED deposits up to h
//!           + the platform's own transfers into it up to h (gas top-ups)
//!           − what the platform sent from it up to h (amounts and fees)
//! ```
//!
//! A platform wallet (the sponsor, the omnibus, the settlement wallet, the
//! issuer) is reconciled the same way from its first reconciliation, its
//! credits being the platform's transfers into it and the funding found
//! reaching it from outside.
//!
//! [`rules`] holds the pure sums and the exit code, [`baselines`] the
//! balances recorded when watching starts, [`locate`] the
//! bisection that finds the blocks where a difference arose, [`evm`] the
//! flow on an EVM chain, [`solana`] on a Solana chain, [`repair`] the missed credits recorded,
//! [`repairs`] the repairs operators ask for through the service,
//! [`background`] `run`'s periodic reconciliation and its alarms,
//! [`wallets`] the funding of platform wallets, audited; the rows
//! are in `store/reconcile/`.

pub mod alarms;
pub mod anchors;
pub mod background;
pub mod baselines;
pub mod evm;
pub mod locate;
pub mod reader;
pub mod repair;
pub mod repairs;
pub mod rules;
pub mod slices;
pub mod solana;
pub mod wallets;

use alloy::primitives::U256;
use serde::Serialize;

/// One term of an address's ledger in one asset: a movement the store
/// knows, at the block it happened in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub asset: String,
    pub block: u64,
    pub amount: U256,
    pub kind: TermKind,
}

/// What a [`Term`] is: value in, or value out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermKind {
    /// A `CONFIRMED` deposit.
    Deposit,
    /// Value the platform's own transaction moved in (a gas top-up, a
    /// cancellation's or a nonce filler's).
    Own,
    /// An amount a transfer sent from the address.
    Sent,
    /// The fee of a transaction the address sent (bumps, cancellations and
    /// reverted ones included; on OP-stack chains with the L1 data fee).
    Fee,
}

impl TermKind {
    pub fn is_credit(self) -> bool {
        matches!(self, TermKind::Deposit | TermKind::Own)
    }
}

/// Where a baseline came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Baseline {
    /// Recorded when the watch began.
    Recorded,
    /// Read at the watch start from an archive node.
    Archive,
    /// No node could read the watch start: the first reconciliation's
    /// balance, which agrees by construction.
    FirstReconciliation,
}

impl Baseline {
    pub fn as_str(self) -> &'static str {
        match self {
            Baseline::Recorded => "recorded",
            Baseline::Archive => "archive",
            Baseline::FirstReconciliation => "first_reconciliation",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Baseline::Recorded, Baseline::Archive, Baseline::FirstReconciliation]
            .into_iter()
            .find(|b| b.as_str() == text)
    }
}

/// A baseline or a checkpoint: a balance at the end of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    pub block: u64,
    pub balance: U256,
}

/// A watched address of the chain: `(address, account_id)` and whether its
/// watch is still catching up (a late registration's gap being scanned);
/// or a platform wallet (`wallet` its role, `account_id` empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub address: String,
    pub account_id: String,
    /// The platform wallet's role (`sponsor`, `omnibus`, `settlement`,
    /// `issuer`); `None` for an account's address.
    pub wallet: Option<String>,
    /// The first block whose deposits count.
    pub watch_from: Option<u64>,
    pub catching_up: bool,
}

/// A transfer of value found in a block where a difference arose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Movement {
    pub transaction_hash: String,
    pub block: u64,
    /// `in` or `out`.
    pub direction: &'static str,
    /// In the asset's unit, a decimal string.
    pub amount: String,
    /// `top_level`, `internal_call` or `token_log`.
    pub how: &'static str,
}

/// One line of `reconcile`'s answer: an address's asset at one height.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    pub chain: String,
    pub account_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wallet: Option<String>,
    pub address: String,
    pub asset: String,
    pub at_block: u64,
    pub onchain: String,
    pub ledger: String,
    pub difference: String,
    pub divergent_block: Option<u64>,
    /// Every block where the difference changed, with how much it changed
    /// (the first is `divergent_block`).
    pub divergent_blocks: Vec<Divergence>,
    pub baseline: Baseline,
    pub movements: Vec<Movement>,
    /// Balance reads the bisection made.
    pub reads: u32,
}

/// A block where the difference between the chain and the ledger changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    pub block: u64,
    /// How much the difference changed there, a signed decimal string.
    pub change: String,
}

/// What `reconcile` found: the lines, the addresses skipped while catching
/// up, the reads that failed, and the credits the decoder found in blocks
/// where a balance rose unexplained (what `--repair` records).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub lines: Vec<Line>,
    pub skipped: Vec<String>,
    pub failed: Vec<String>,
    #[serde(skip)]
    pub missed: Vec<crate::deposits::resource::Detected>,
    /// The settled height: confirmed, indexed, below every `PENDING`
    /// deposit. Nothing above it is ever repaired.
    #[serde(skip)]
    pub settled: u64,
}

/// Why one line could not be made: a read that failed (reported, the rest
/// goes on), a line that cannot be made at this height (skipped, for the
/// reason given), or anything else (the reconciliation stops).
enum Failed {
    Read(crate::rpc::RpcFailure),
    Skip(String),
    Other(ReconcileError),
}

impl Failed {
    /// Files the failure of `what`'s line in `report`; anything else than
    /// a read or a skip stops the reconciliation.
    fn file(self, report: &mut Report, what: &str) -> Result<(), ReconcileError> {
        match self {
            Failed::Read(failure) => report.failed.push(format!("{what}: {failure}")),
            Failed::Skip(why) => report.skipped.push(format!("{what}: {why}")),
            Failed::Other(error) => return Err(error),
        }
        Ok(())
    }
}

impl From<crate::rpc::RpcFailure> for Failed {
    fn from(failure: crate::rpc::RpcFailure) -> Self {
        Failed::Read(failure)
    }
}

impl From<crate::store::StoreError> for Failed {
    fn from(error: crate::store::StoreError) -> Self {
        Failed::Other(error.into())
    }
}

/// The assets of `all` that `only` names (all of them when it names none);
/// an asset the chain does not list is refused.
fn pick<A>(
    all: Vec<A>,
    only: Option<&str>,
    symbol: impl Fn(&A) -> &str,
    chain: crate::chain::Chain,
) -> Result<Vec<A>, ReconcileError> {
    let Some(wanted) = only else { return Ok(all) };
    let found: Vec<A> = all.into_iter().filter(|a| symbol(a) == wanted).collect();
    if found.is_empty() {
        return Err(ReconcileError::Refused(format!("{wanted} is not an asset of {chain}")));
    }
    Ok(found)
}

/// Why a reconciliation could not be made at all.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Rpc(#[from] crate::rpc::RpcFailure),
    #[error("{0}")]
    Refused(String),
    /// Nothing of the chain is indexed yet: there is no height to
    /// reconcile at (a `run` that just started, say).
    #[error("{0} was never indexed: `run` or `backfill` it first")]
    NotIndexed(crate::chain::Chain),
}

impl ReconcileError {
    /// Whether trying again may help: a node or the store that did not
    /// answer, or another writer that came first ([`StoreError::retryable`]);
    /// never a refused request.
    pub fn retryable(&self) -> bool {
        match self {
            ReconcileError::Store(e) => e.retryable(),
            ReconcileError::Rpc(e) => e.retryable(),
            ReconcileError::Refused(_) | ReconcileError::NotIndexed(_) => false,
        }
    }
}

/// A chain's last background reconciliation, as kept.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Run {
    pub chain: String,
    /// When it ended, RFC 3339.
    pub at: String,
    #[serde(skip)]
    pub at_micros: i64,
    /// When it began.
    #[serde(skip)]
    pub started_micros: i64,
    /// How long the pass took, from its first slice's start to its last
    /// slice's end: more than the period when `reconcile_max_rps` holds
    /// it back.
    pub took_ms: u64,
    /// The slices it was spread over.
    pub slices: u64,
    /// The period set (`reconcile_every_secs`), and the period achieved:
    /// the time since the pass before it began (null for the first pass
    /// kept).
    pub every_ms: u64,
    pub period_ms: Option<u64>,
    /// The height reconciled.
    pub at_block: u64,
    /// The (address, asset) lines compared, and how many of them differ.
    pub lines: u64,
    pub differ: u64,
    /// Reads that failed, and addresses skipped (still catching up).
    pub failed: u64,
    pub skipped: u64,
    /// `differences`: each differing line as `reconcile --json` prints it;
    /// `failed`: each failed read, named.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

/// Money that left a watched address without the platform: a block where
/// its balance fell by more than its ledger explains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Debit {
    pub chain: String,
    pub address: String,
    pub asset: String,
    pub block: u64,
    pub account_id: Option<String>,
    /// The platform wallet's role, for a platform wallet.
    pub wallet: Option<String>,
    /// How much the difference fell there, a negative decimal string.
    pub change: String,
    /// The transactions seen leaving the address in that block.
    pub transactions: Vec<String>,
}

/// The last reconciliation as `health` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reconciled {
    /// RFC 3339.
    pub at: String,
    pub seconds_ago: u64,
    pub took_ms: u64,
    /// The period set, and achieved (see [`Run`]).
    pub every_ms: u64,
    pub period_ms: Option<u64>,
    pub at_block: u64,
    pub lines: u64,
    pub differ: u64,
    pub failed: u64,
    /// Addresses not compared (a watch catching up, a deposit still
    /// `PENDING`): named in the run's `detail.skipped`.
    pub skipped: u64,
}

impl Reconciled {
    pub fn of(run: &Run, now_micros: i64) -> Self {
        Reconciled {
            at: run.at.clone(),
            seconds_ago: (now_micros.saturating_sub(run.at_micros).max(0) / 1_000_000) as u64,
            took_ms: run.took_ms,
            every_ms: run.every_ms,
            period_ms: run.period_ms,
            at_block: run.at_block,
            lines: run.lines,
            differ: run.differ,
            failed: run.failed,
            skipped: run.skipped,
        }
    }

    /// `reconciled 12 s ago at block 100 (in 3.1 s, every 3600 s of 3600
    /// s set): 3 differ`; the period achieved once two passes were kept.
    pub fn line(&self) -> String {
        let failed = if self.failed > 0 { format!(", {} reads failed", self.failed) } else { String::new() };
        let skipped = if self.skipped > 0 { format!(", {} skipped", self.skipped) } else { String::new() };
        let took = self.took_ms as f64 / 1000.0;
        let every = match self.period_ms {
            Some(achieved) => format!(", every {} s of {} s set", achieved / 1000, self.every_ms / 1000),
            None => String::new(),
        };
        format!(
            "reconciled {} s ago at block {} (in {took:.1} s{every}): {} differ{failed}{skipped}",
            self.seconds_ago, self.at_block, self.differ
        )
    }

    /// Whether passes come further apart than set (by more than a tenth,
    /// or a second): `reconcile_max_rps` holds them back, or they fail.
    pub fn behind(&self) -> bool {
        self.period_ms.is_some_and(|achieved| achieved > self.every_ms + (self.every_ms / 10).max(1000))
    }

    /// Whether no pass was kept for two periods (passes that never end: a
    /// restart again and again, slices that keep failing).
    pub fn stale(&self) -> bool {
        self.every_ms > 0 && self.seconds_ago.saturating_mul(1000) > 2 * self.every_ms
    }

    /// A warning when balances differ from the ledger, reads failed, no
    /// pass was kept for two periods, or passes come further apart than set.
    pub fn warning(&self, chain: crate::chain::Chain) -> Option<String> {
        let see =
            format!("see GET /operator/v1/reconciliation or `custody-indexer reconcile --chain {chain}`");
        if self.differ > 0 || self.failed > 0 {
            return Some(format!("{}: {see}", self.line()));
        }
        if self.stale() {
            return Some(format!("{}: no pass was kept for two periods since", self.line()));
        }
        self.behind().then(|| {
            format!(
                "{}: passes come further apart than reconcile_every_secs; raise reconcile_max_rps or the period",
                self.line()
            )
        })
    }
}

/// A credit the watcher missed, as a repair names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Credit {
    pub transaction_hash: String,
    /// Which transfer of its transaction (`native`, `trace:0.1`, `log:…`).
    pub position: String,
    pub block: u64,
    pub account_id: String,
    pub address: String,
    pub asset: String,
    /// In the asset's unit, a decimal string.
    pub amount: String,
}

impl Credit {
    pub fn of(detected: &crate::deposits::resource::Detected) -> Self {
        Credit {
            transaction_hash: detected.tx_hash.clone(),
            position: detected.position.to_string(),
            block: detected.block_number,
            account_id: detected.account_id.clone(),
            address: detected.account_address.clone(),
            asset: detected.currency_symbol.clone(),
            amount: detected.amount.to_string(),
        }
    }
}

/// What a repair reconciled: the chain's addresses, narrowed as asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RepairScope {
    pub account_id: Option<String>,
    pub address: Option<String>,
    pub asset: Option<String>,
}

/// Where a repair stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RepairStatus {
    /// Worth more than `--repair-second-operator-above`: waits for a
    /// second treasury operator.
    AwaitingApproval,
    /// Its credits recorded as deposits.
    Applied,
    /// Refused by a second treasury operator: nothing recorded.
    Refused,
}

impl RepairStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RepairStatus::AwaitingApproval => "AWAITING_APPROVAL",
            RepairStatus::Applied => "APPLIED",
            RepairStatus::Refused => "REFUSED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [RepairStatus::AwaitingApproval, RepairStatus::Applied, RepairStatus::Refused]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A repair a treasury operator asked for through the service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Repair {
    pub id: String,
    pub chain: String,
    pub scope: RepairScope,
    /// The missed credits the requester's reconciliation found.
    pub credits: Vec<Credit>,
    /// Their worth in dollars, a decimal string; null when the chain file
    /// prices none of a native credit (no `native_usd`).
    pub usd: Option<String>,
    pub status: RepairStatus,
    /// Who asked (`operator:<id>`), as the request recorded it (a decision
    /// reads the requester from the audit log).
    pub requested_by: String,
    pub reason: String,
    pub decided_by: Option<String>,
    /// The deposits it recorded.
    pub deposits: Vec<String>,
    /// RFC 3339.
    pub created_at: String,
    pub decided_at: Option<String>,
}
