//! Chain files: one TOML per chain under `chains/`, loaded once and validated
//! strictly (`deny_unknown_fields`), with RPC endpoints overridable from the
//! environment so that keys never live in the repository.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

use crate::{
    amount::Amount,
    chain::{Chain, Family},
    redact::RpcUrl,
};

mod file;
mod time;

pub use time::Span;

/// The chain files of the repository, compiled in so the binary runs anywhere.
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_chains.rs"));
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read chain files in {path}")]
    ReadDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read chain file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid chain file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("chain {chain} is defined twice: {first} and {second}")]
    Duplicate { chain: Chain, first: PathBuf, second: PathBuf },
    #[error("no chain file for {0}")]
    Missing(Chain),
}

/// When a block's deposits count as `CONFIRMED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Confirmation {
    /// The node's `finalized` block tag (Solana: `finalized` commitment).
    Finalized,
    /// At least this many blocks on top of the deposit's block.
    Depth(u64),
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NativeAsset {
    pub symbol: String,
    pub decimals: u8,
}

/// How a Solana watcher finds transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Walk every slot (`getBlocks`, `getBlock`) and match all account keys:
    /// the way for many addresses.
    #[default]
    Blocks,
    /// Poll `getSignaturesForAddress` of each wallet and token account: the
    /// way for few addresses.
    Signatures,
}

/// How an EVM watcher finds native transfers to watched addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockReads {
    /// Every block with its transactions (`eth_getBlockByNumber` with full
    /// transactions), then the receipts of the transfers to watched
    /// addresses.
    #[default]
    Transactions,
    /// Every block with its transaction hashes, its receipts
    /// (`eth_getBlockReceipts`, which name each transaction's sender,
    /// recipient and status), then the transactions by hash of the
    /// successful ones to watched addresses, for their value. Cheaper for
    /// a node that serves receipts cheaply (anvil, for one); a node that
    /// refuses the method is read as with `Transactions`.
    Receipts,
}

/// A token the platform accepts on a chain. Transfers of any other token are
/// ignored: spam tokens are common.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetConfig {
    pub symbol: String,
    /// ERC-20 contract (EVM, normalised to EIP-55) or mint (Solana).
    pub contract_address: String,
    pub decimals: u8,
    /// Solana only: the token program that owns the mint.
    #[serde(default)]
    pub token_program: Option<String>,
    /// EVM only: the token implements EIP-3009 `transferWithAuthorization`
    /// (USDC does), so a segregated account's transfer needs no gas of its own.
    #[serde(default)]
    pub eip3009: bool,
    /// The platform issues this stablecoin: wires to its mint instructions
    /// are minted as it (see docs/issuance.md).
    #[serde(default)]
    pub issued: bool,
    /// An issued stablecoin's daily mint cap, in dollars (`"1000000"`): above
    /// it, in a UTC day, every mint waits for a second operator's approval.
    #[serde(default)]
    pub daily_mint_cap: Option<String>,
    /// Dollars one whole unit is worth (`"1"` for a dollar stablecoin):
    /// what a reconciliation repair of it is worth. Without it a repair of
    /// the token has no known worth and always waits for a second
    /// treasury operator.
    #[serde(default)]
    pub usd: Option<String>,
    /// EVM only: a native token at a precompile address with no bytecode
    /// (Base's B20 tokens since its Beryl upgrade). Its `Transfer` logs are
    /// deposits like any ERC-20's; without the mark, an asset whose
    /// address has no code refuses the start (see `evm::asset_code`).
    #[serde(default)]
    pub precompile: bool,
}

/// The address EIP-7708 logs every native transfer from, as an ERC-20
/// `Transfer(from, to, value)`: no token is there.
pub const EIP7708_SYSTEM: &str = "0xfffffffffffffffffffffffffffffffffffffffe";

/// How the platform sends gas-sponsored transfers on a chain.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferConfig {
    /// How long after submission a transfer may take to be included before it
    /// is cancelled and `DROPPED`.
    #[serde(default = "defaults::window", deserialize_with = "time::secs")]
    pub window_secs: Duration,
    /// An accepted transfer not submitted within this long (the chain was
    /// unreachable, no sender ran) fails instead of leaving much later.
    #[serde(default = "defaults::window", deserialize_with = "time::secs")]
    pub submit_within_secs: Duration,
    /// A transaction not included after this long is sent again with a higher fee.
    #[serde(default = "defaults::rebroadcast_after", deserialize_with = "time::secs")]
    pub rebroadcast_after_secs: Duration,
    /// How much each re-broadcast raises the fee, in percent (at least 10, the
    /// replacement minimum of EVM nodes).
    #[serde(default = "defaults::fee_bump_percent")]
    pub fee_bump_percent: u64,
    /// EVM: the highest `maxFeePerGas` the platform pays, in wei.
    #[serde(default = "defaults::max_fee_per_gas")]
    pub max_fee_per_gas: u64,
    /// The USD price of one native coin used to value fees in the gas ledger
    /// (a decimal string); `<CHAIN>_NATIVE_USD` overrides it. Without a price
    /// the chain takes no transfers.
    #[serde(default)]
    pub native_usd: Option<String>,
}

impl Default for TransferConfig {
    fn default() -> Self {
        Self {
            window_secs: defaults::window(),
            submit_within_secs: defaults::window(),
            rebroadcast_after_secs: defaults::rebroadcast_after(),
            fee_bump_percent: defaults::fee_bump_percent(),
            max_fee_per_gas: defaults::max_fee_per_gas(),
            native_usd: None,
        }
    }
}

impl TransferConfig {
    pub fn window(&self) -> Duration {
        self.window_secs
    }

    pub fn rebroadcast_after(&self) -> Duration {
        self.rebroadcast_after_secs
    }

    /// The native coin's price in micro-USD per coin, if configured.
    pub fn native_usd_micros(&self) -> Option<u128> {
        let price = self.native_usd.as_deref()?;
        Amount::parse(price, 6).ok().map(|a| a.raw().to::<u128>())
    }
}

mod defaults {
    use std::time::Duration;

    pub fn window() -> Duration {
        Duration::from_secs(300)
    }
    pub fn rebroadcast_after() -> Duration {
        Duration::from_secs(30)
    }
    pub fn fee_bump_percent() -> u64 {
        20
    }
    /// 500 gwei.
    pub fn max_fee_per_gas() -> u64 {
        500_000_000_000
    }
    pub fn max_block_range() -> u64 {
        500
    }
    pub fn batch_size() -> usize {
        50
    }
    pub fn concurrency() -> usize {
        4
    }
    pub fn reorg_window() -> u64 {
        256
    }
    pub fn dropped_after_blocks() -> u64 {
        64
    }
    pub fn max_lag_blocks() -> u64 {
        100
    }
    /// A chain is stale when no step succeeded for ten poll intervals, and
    /// never sooner than a minute.
    pub fn stale_after(poll_interval: Duration) -> Duration {
        poll_interval.saturating_mul(10).max(Duration::from_secs(60))
    }
}

/// One chain's validated configuration.
#[derive(Debug, Clone)]
pub struct ChainConfig {
    pub chain: Chain,
    /// EVM: the id `eth_chainId` must answer.
    pub chain_id: Option<u64>,
    /// Solana: the cluster's genesis hash.
    pub genesis_hash: Option<String>,
    pub rpc_urls: Vec<RpcUrl>,
    /// EVM: how many RPC URLs must answer the same block and the same
    /// deposit before it is confirmed (`confirm_quorum`, default 1).
    pub confirm_quorum: usize,
    /// EVM: how often `run` reconciles every watched address with the
    /// chain (`reconcile_every_secs`, default an hour).
    pub reconcile_every: Duration,
    /// EVM: the most requests a second that reconciliation sends
    /// (`reconcile_max_rps`, default 20); it wins over the period.
    pub reconcile_max_rps: u32,
    pub ws_url: Option<RpcUrl>,
    pub confirmation: Confirmation,
    pub poll_interval: Duration,
    /// Most blocks asked of one `eth_getLogs`; halved when a provider refuses.
    pub max_block_range: u64,
    /// Blocks per JSON-RPC batch.
    pub batch_size: usize,
    /// Batches in flight at once.
    pub concurrency: usize,
    /// Follow internal native transfers with `debug_traceBlockByNumber`.
    pub traces: bool,
    /// EVM: how blocks are read for native transfers.
    pub block_reads: BlockReads,
    /// Where `run` starts on a chain it has never indexed (default: the head).
    pub start_block: Option<u64>,
    /// How much recent history (block hashes) is kept to find a reorg's
    /// common ancestor; at least 2 blocks.
    pub reorg_window: Span,
    /// EVM only: the first block whose native transfers emit EIP-7708's
    /// `Transfer` logs; from it on, native deposits are read from them
    /// (internal transfers included, without traces) instead of from
    /// transaction values and traces.
    pub eip7708_from_block: Option<u64>,
    /// Whether the environment overrides the chain id or the genesis hash:
    /// a local node stands in for the chain (see `<CHAIN>_CHAIN_ID`), so the
    /// chain's own contracts may not be on it.
    pub stand_in: bool,
    /// A reorged deposit whose transaction is still pending this much later
    /// is `FAILED`.
    pub dropped_after: Span,
    /// Solana: how transactions are found.
    pub strategy: Strategy,
    /// Health: how far the indexed height may trail the head.
    pub max_lag: Span,
    /// Health: how long a chain may go without a successful step.
    pub stale_after: Duration,
    pub native: NativeAsset,
    pub assets: Vec<AssetConfig>,
    pub transfers: TransferConfig,
    /// Where the file came from, for error messages.
    pub source: PathBuf,
}

impl ChainConfig {
    pub fn family(&self) -> Family {
        self.chain.family()
    }

    /// The height up to which a scan confirms the deposits it records:
    /// `confirmed`, unless a quorum of providers must agree on each first
    /// (then none: the watcher's quorum step confirms them).
    pub fn confirmed_on_scan(&self, confirmed: Option<u64>) -> Option<u64> {
        if self.confirm_quorum > 1 { None } else { confirmed }
    }

    /// The asset with this symbol, native included, with its decimals.
    pub fn decimals_of(&self, symbol: &str) -> Option<u8> {
        if self.native.symbol == symbol {
            return Some(self.native.decimals);
        }
        self.assets.iter().find(|a| a.symbol == symbol).map(|a| a.decimals)
    }
}

/// All configured chains, keyed by chain.
#[derive(Debug, Clone, Default)]
pub struct Chains(BTreeMap<Chain, ChainConfig>);

impl Chains {
    /// Loads `dir/*.toml`, or the compiled-in files of the repository's
    /// `chains/` when `dir` is `None`. Environment overrides apply to both.
    pub fn load(dir: Option<&Path>) -> Result<Self, ConfigError> {
        let env = |key: &str| std::env::var(key).ok();
        let mut files = Vec::new();
        match dir {
            None => {
                for (name, text) in embedded::CHAINS {
                    files.push((PathBuf::from(format!("chains/{name}")), text.to_string()));
                }
            }
            Some(dir) => {
                let read_dir = std::fs::read_dir(dir)
                    .map_err(|source| ConfigError::ReadDir { path: dir.into(), source })?;
                let mut paths: Vec<PathBuf> = read_dir
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                    .collect();
                paths.sort();
                for path in paths {
                    let text = std::fs::read_to_string(&path)
                        .map_err(|source| ConfigError::Read { path: path.clone(), source })?;
                    files.push((path, text));
                }
            }
        }
        let mut chains = BTreeMap::new();
        for (path, text) in files {
            let config = ChainConfig::from_toml(&text, &path, &env)?;
            if let Some(first) = chains.get(&config.chain) {
                let first: &ChainConfig = first;
                return Err(ConfigError::Duplicate {
                    chain: config.chain,
                    first: first.source.clone(),
                    second: path,
                });
            }
            chains.insert(config.chain, config);
        }
        Ok(Self(chains))
    }

    pub fn get(&self, chain: Chain) -> Result<&ChainConfig, ConfigError> {
        self.0.get(&chain).ok_or(ConfigError::Missing(chain))
    }

    pub fn iter(&self) -> impl Iterator<Item = &ChainConfig> {
        self.0.values()
    }

    pub fn insert(&mut self, config: ChainConfig) {
        self.0.insert(config.chain, config);
    }

    /// These chains alone, of those configured.
    pub fn only(&self, chains: &[Chain]) -> Chains {
        Chains(self.0.iter().filter(|(c, _)| chains.contains(c)).map(|(c, v)| (*c, v.clone())).collect())
    }
}

#[cfg(test)]
mod tests;
