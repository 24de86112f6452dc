//! What every chain family provides, behind one trait ([`ChainFamily`]). A
//! family is a folder (`src/evm/`, `src/solana/`) whose `family.rs`
//! implements it, plus one arm in [`super::of`] and its address rules in
//! [`super::rules`].

use std::{collections::BTreeSet, sync::Arc};

use alloy::primitives::U256;
use futures::future::LocalBoxFuture;
use tokio_util::sync::CancellationToken;

use crate::{
    config::ChainConfig,
    deposits::watcher::{BackfillReport, WatchError},
    keys::Signer,
    restore::lost::{Unknown, WitnessError},
    rpc::RpcFailure,
    store::Store,
};

/// How a scan reports its way: blocks (slots) done, deposits found.
pub type Progress<'a> = &'a (dyn Fn(u64, usize) + Sync);

/// A token as the chain holds it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnChain {
    /// In the smallest unit.
    pub supply: U256,
    pub decimals: u8,
}

/// A stablecoin to place on a test chain.
#[derive(Debug, Clone)]
pub struct Coin<'a> {
    pub symbol: &'a str,
    /// The token's name (EVM): the EIP-712 domain of its authorizations.
    pub name: &'a str,
    pub decimals: u8,
}

/// Where a stablecoin was placed, and the chain-file keys its `[[assets]]`
/// entry needs beyond symbol, address and decimals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub contract_address: String,
    pub extra_toml: String,
}

/// A chain family: how the service watches, sends on and reads a chain of it.
#[async_trait::async_trait]
pub trait ChainFamily: Send + Sync {
    /// Follows the chain until `stop`: connects (again while no RPC URL
    /// answers), then runs the watcher with the gap scans of late-registered
    /// addresses beside it. The outer error refuses the start (a
    /// configuration to correct); the inner one is why the watcher cannot
    /// continue.
    async fn watch(
        &self,
        config: ChainConfig,
        store: Store,
        stop: CancellationToken,
    ) -> anyhow::Result<Result<(), WatchError>>;

    /// Sends the chain's transfers until `stop`.
    async fn send(&self, config: ChainConfig, store: Store, signer: Arc<dyn Signer>, stop: CancellationToken);

    /// What a backfill range counts: `blocks` or `slots`.
    fn unit(&self) -> &'static str;

    /// Scans the range `from..=to` (default: up to what is confirmed) once,
    /// beside the live watcher (a command's own future: not sent between
    /// threads).
    fn backfill<'a>(
        &'a self,
        config: ChainConfig,
        store: Store,
        range: (u64, Option<u64>),
        progress: Progress<'a>,
    ) -> LocalBoxFuture<'a, Result<BackfillReport, WatchError>>;

    /// Reads one address's whole history (`before`, `until`: signatures that
    /// bound it), for a family that reads histories by address.
    fn backfill_address<'a>(
        &'a self,
        config: ChainConfig,
        _store: Store,
        _address: &'a str,
        _bounds: (Option<String>, Option<String>),
        _progress: Progress<'a>,
    ) -> LocalBoxFuture<'a, anyhow::Result<BackfillReport>> {
        Box::pin(async move { anyhow::bail!("{}: --address applies to Solana chains only", config.chain) })
    }

    /// The reader of the chain's balances.
    fn balances(&self, config: &ChainConfig) -> Box<dyn Totals>;

    /// The supply and decimals of `token` through the node at `url`.
    async fn supply(&self, url: &str, token: &str) -> Result<OnChain, String>;

    /// Places `coin` through the node at `url`, the issuer key its only
    /// minter, the sponsor paying.
    async fn deploy(&self, url: &str, signer: &dyn Signer, coin: &Coin<'_>) -> anyhow::Result<Placed>;

    /// Every address of a platform-held key that sent transactions the
    /// store does not know (see [`crate::restore::chains`]); none where the
    /// family does not tell.
    async fn lost_senders(
        &self,
        _store: &Store,
        _config: &ChainConfig,
    ) -> Result<Vec<Unknown>, WitnessError> {
        Ok(Vec::new())
    }

    /// Counts the transactions of each platform wallet the store keeps no
    /// count of yet, from now on; how many wallets.
    async fn count_wallets(&self, _store: &Store, _config: &ChainConfig) -> Result<usize, WitnessError> {
        Ok(0)
    }
}

/// A transfer as acceptance asks the chain about it: `amount` (smallest
/// unit) of the coin (`token: None`) or of a token, `from` the source.
#[derive(Debug, Clone, Copy)]
pub struct Move<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub token: Option<&'a str>,
    pub amount: U256,
}

/// A call that needs more gas than one transaction may carry: `needed`
/// when the node's estimate says how much (one that stops at the cap says
/// only that it is more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GasBeyondCap {
    pub needed: Option<u64>,
    pub cap: u64,
}

impl std::fmt::Display for GasBeyondCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.needed {
            Some(needed) => write!(f, "the transfer needs {needed} gas, "),
            None => write!(f, "the transfer needs more gas than its estimate allows, "),
        }?;
        write!(f, "more than the {} one transaction may use (EIP-7825)", self.cap)
    }
}

/// What acceptance reads of a chain: balances, and whether a transfer's
/// call fits in a transaction.
#[async_trait::async_trait]
pub trait Totals: Send + Sync {
    /// The totals over `addresses` of the chain's coin, then of each token
    /// of its file in file order, in the smallest unit.
    async fn totals(&self, config: &ChainConfig, addresses: &BTreeSet<&str>)
    -> Result<Vec<U256>, RpcFailure>;

    /// The gas `transfer`'s call needs when it is more than one transaction
    /// may carry (EVM since EIP-7825), so acceptance refuses it; `None` when
    /// it fits, where the family has no such cap, or where the node answers
    /// that the call would fail (the sender judges that when it sends). `Err`
    /// is the node's own trouble, asked again first.
    async fn gas_beyond_cap(&self, _transfer: &Move<'_>) -> Result<Option<GasBeyondCap>, RpcFailure> {
        Ok(None)
    }
}

/// The saturating sum of balances.
pub fn sum(values: impl IntoIterator<Item = U256>) -> U256 {
    values.into_iter().fold(U256::ZERO, |total, v| total.saturating_add(v))
}
