//! One chain file read: its TOML as written ([`ChainFile`]), the
//! environment's overrides, and every check a file passes before it is a
//! [`ChainConfig`].

use std::{path::Path, time::Duration};

use serde::Deserialize;

use super::{
    AssetConfig, BlockReads, ChainConfig, ConfigError, Confirmation, NativeAsset, Strategy, TransferConfig,
    defaults,
    time::{Either, Span, one_form},
};
use crate::{chain::Chain, redact::RpcUrl};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChainFile {
    chain: Chain,
    #[serde(default)]
    chain_id: Option<u64>,
    #[serde(default)]
    genesis_hash: Option<String>,
    rpc_urls: Vec<String>,
    #[serde(default)]
    confirm_quorum: Option<usize>,
    #[serde(default)]
    reconcile_every_secs: Option<f64>,
    #[serde(default)]
    reconcile_max_rps: Option<u32>,
    #[serde(default)]
    ws_url: Option<String>,
    confirmation: Confirmation,
    #[serde(default)]
    poll_interval_ms: Option<u64>,
    #[serde(default)]
    poll_interval_secs: Option<f64>,
    #[serde(default = "defaults::max_block_range")]
    max_block_range: u64,
    #[serde(default = "defaults::batch_size")]
    batch_size: usize,
    #[serde(default = "defaults::concurrency")]
    concurrency: usize,
    #[serde(default)]
    traces: bool,
    #[serde(default)]
    block_reads: Option<BlockReads>,
    #[serde(default)]
    start_block: Option<u64>,
    #[serde(default)]
    reorg_window: Option<u64>,
    #[serde(default)]
    reorg_window_secs: Option<f64>,
    #[serde(default)]
    eip7708_from_block: Option<u64>,
    #[serde(default)]
    dropped_after_blocks: Option<u64>,
    #[serde(default)]
    dropped_after_secs: Option<f64>,
    #[serde(default)]
    strategy: Option<Strategy>,
    #[serde(default)]
    max_lag_blocks: Option<u64>,
    #[serde(default)]
    max_lag_secs: Option<f64>,
    #[serde(default)]
    stale_after_ms: Option<u64>,
    #[serde(default)]
    stale_after_secs: Option<f64>,
    native: NativeAsset,
    #[serde(default)]
    assets: Vec<AssetConfig>,
    #[serde(default)]
    transfers: TransferConfig,
}

/// Reads the environment's overrides of a chain: `<CHAIN>_…` variables.
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

impl ChainConfig {
    /// Parses and validates one chain file; `env` supplies overrides such as
    /// `ETHEREUM_MAINNET_RPC_URLS` (comma-separated) and `ETHEREUM_MAINNET_WS_URL`.
    pub fn from_toml(text: &str, source: &Path, env: Env<'_>) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { path: source.to_path_buf(), message };
        let file = parse(text).map_err(invalid)?;
        let chain = file.chain;
        let (rpc_urls, ws_url) = endpoints(&file, env).map_err(invalid)?;
        let confirm_quorum = quorum(&file, &rpc_urls).map_err(invalid)?;
        let reconcile_every = match file.reconcile_every_secs {
            Some(secs) if secs < 1.0 => {
                return Err(invalid("reconcile_every_secs must be at least 1".into()));
            }
            Some(secs) => super::time::seconds(secs, "reconcile_every_secs").map_err(invalid)?,
            None => Duration::from_secs(3600),
        };
        let reconcile_max_rps = file.reconcile_max_rps.unwrap_or(20);
        if reconcile_max_rps == 0 {
            return Err(invalid("reconcile_max_rps must be at least 1".into()));
        }
        let (chain_id, genesis_hash) = network(&file, env).map_err(invalid)?;
        let stand_in = chain_id != file.chain_id || genesis_hash != file.genesis_hash;
        positive(&file).map_err(invalid)?;
        let times = times(&file).map_err(invalid)?;
        let transfers = transfers(&file, env).map_err(invalid)?;
        let assets = assets(&file).map_err(invalid)?;
        Ok(Self {
            chain,
            chain_id,
            genesis_hash,
            rpc_urls,
            confirm_quorum,
            reconcile_every,
            reconcile_max_rps,
            ws_url,
            confirmation: file.confirmation,
            poll_interval: times.poll_interval,
            max_block_range: file.max_block_range,
            batch_size: file.batch_size,
            concurrency: file.concurrency,
            traces: file.traces,
            block_reads: file.block_reads.unwrap_or_default(),
            start_block: file.start_block,
            reorg_window: times.reorg_window,
            eip7708_from_block: file.eip7708_from_block,
            stand_in,
            dropped_after: times.dropped_after,
            strategy: file.strategy.unwrap_or_default(),
            max_lag: times.max_lag,
            stale_after: times.stale_after,
            native: file.native,
            assets,
            transfers,
            source: source.to_path_buf(),
        })
    }
}

/// The file as written, an error naming the key it is about.
fn parse(text: &str) -> Result<ChainFile, String> {
    let document = toml::Deserializer::parse(text).map_err(|e| e.message().to_string())?;
    serde_path_to_error::deserialize(document).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().message().to_string();
        // Unknown and missing fields name themselves.
        if path == "." || message.contains('`') { message } else { format!("{path}: {message}") }
    })
}

/// The RPC URLs (the environment's list, else the file's) and the
/// WebSocket URL.
fn endpoints(file: &ChainFile, env: Env<'_>) -> Result<(Vec<RpcUrl>, Option<RpcUrl>), String> {
    let chain = file.chain;
    let urls = match env(&format!("{chain}_RPC_URLS")) {
        Some(list) => list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
        None => file.rpc_urls.clone(),
    };
    if urls.is_empty() {
        return Err(format!("no rpc_urls (set them in the file or in {chain}_RPC_URLS)"));
    }
    let rpc_urls =
        urls.iter().map(|u| RpcUrl::parse(u).map_err(|e| e.to_string())).collect::<Result<Vec<_>, _>>()?;
    let ws_url = env(&format!("{chain}_WS_URL"))
        .or(file.ws_url.clone())
        .filter(|s| !s.trim().is_empty())
        .map(|u| RpcUrl::parse(&u).map_err(|e| e.to_string()))
        .transpose()?;
    if ws_url.as_ref().is_some_and(|u| !u.is_websocket()) {
        return Err("ws_url must be a ws:// or wss:// url".into());
    }
    Ok((rpc_urls, ws_url))
}

/// How many of the `urls` RPC URLs must agree on a deposit before it is
/// confirmed: 1 unless the file says more, never more than there are, and
/// then each on a host (and port) of its own: two keys or paths of one
/// provider would agree with themselves.
fn quorum(file: &ChainFile, urls: &[RpcUrl]) -> Result<usize, String> {
    let quorum = file.confirm_quorum.unwrap_or(1);
    let hosts: std::collections::HashSet<(Option<&str>, Option<u16>)> =
        urls.iter().map(|u| (u.expose().host_str(), u.expose().port_or_known_default())).collect();
    if quorum > 1 && hosts.len() < urls.len() {
        return Err(format!(
            "confirm_quorum = {quorum}: two RPC URLs reach the same host; a quorum needs independent providers"
        ));
    }
    let urls = urls.len();
    if quorum == 0 {
        return Err("confirm_quorum must be at least 1".into());
    }
    if quorum > urls {
        return Err(format!(
            "confirm_quorum = {quorum} asks more RPC URLs to agree than the {urls} configured \
             (rpc_urls, or {}_RPC_URLS)",
            file.chain
        ));
    }
    Ok(quorum)
}

/// The chain id (EVM) and genesis hash (Solana) the nodes must answer. The
/// environment's overrides, for a local node standing in for the chain, are
/// said at start: they lift the wrong-chain guard.
fn network(file: &ChainFile, env: Env<'_>) -> Result<(Option<u64>, Option<String>), String> {
    let chain = file.chain;
    let set = |key: String| env(&key).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let chain_id = match set(format!("{chain}_CHAIN_ID")) {
        Some(id) => {
            let id = id
                .parse::<u64>()
                .ok()
                .filter(|id| *id > 0)
                .ok_or_else(|| format!("{chain}_CHAIN_ID must be a positive integer, not {id:?}"))?;
            tracing::warn!(%chain, chain_id = id, "the chain id is overridden by {chain}_CHAIN_ID");
            Some(id)
        }
        None => file.chain_id,
    };
    let genesis_hash = match set(format!("{chain}_GENESIS_HASH")) {
        Some(hash) => {
            tracing::warn!(%chain, genesis_hash = %hash, "the genesis hash is overridden by {chain}_GENESIS_HASH");
            Some(hash)
        }
        None => file.genesis_hash.clone(),
    };
    let keys = crate::family::rules::ChainFileKeys {
        chain_id: chain_id.is_some(),
        genesis_hash: genesis_hash.is_some(),
        block_reads: file.block_reads.is_some(),
        eip7708_from_block: file.eip7708_from_block.is_some(),
    };
    crate::family::rules::chain_file(chain.family(), keys).map_err(String::from)?;
    Ok((chain_id, genesis_hash))
}

/// The counts and intervals that must be positive, the confirmation depth
/// and the reorg window.
fn positive(file: &ChainFile) -> Result<(), String> {
    if file.poll_interval_ms == Some(0)
        || file.max_lag_blocks == Some(0)
        || file.stale_after_ms == Some(0)
        || file.max_block_range == 0
        || file.batch_size == 0
        || file.concurrency == 0
    {
        return Err("poll_interval_ms, max_lag_blocks, stale_after_ms, max_block_range, batch_size and concurrency must be positive".into());
    }
    if file.confirmation == Confirmation::Depth(0) {
        return Err("confirmation depth must be at least 1".into());
    }
    if file.reorg_window.is_some_and(|blocks| blocks < 2) {
        return Err("reorg_window must be at least 2".into());
    }
    Ok(())
}

/// The settings that mean time, each from the one form the file gives.
struct Times {
    poll_interval: Duration,
    stale_after: Duration,
    max_lag: Span,
    dropped_after: Span,
    reorg_window: Span,
}

fn times(file: &ChainFile) -> Result<Times, String> {
    let duration = |form| match form {
        Some(Either::Old(ms)) => Some(Duration::from_millis(ms)),
        Some(Either::Secs(d)) => Some(d),
        None => None,
    };
    let span = |form, default| match form {
        Some(Either::Old(blocks)) => Span::Blocks(blocks),
        Some(Either::Secs(d)) => Span::Time(d),
        None => Span::Blocks(default),
    };
    let poll =
        one_form(file.poll_interval_ms, file.poll_interval_secs, "poll_interval_ms", "poll_interval_secs")?;
    let poll_interval = duration(poll).ok_or("missing poll_interval_secs (or poll_interval_ms)")?;
    let stale = one_form(file.stale_after_ms, file.stale_after_secs, "stale_after_ms", "stale_after_secs")?;
    let stale_after = duration(stale).unwrap_or_else(|| defaults::stale_after(poll_interval));
    let lag = one_form(file.max_lag_blocks, file.max_lag_secs, "max_lag_blocks", "max_lag_secs")?;
    let dropped = one_form(
        file.dropped_after_blocks,
        file.dropped_after_secs,
        "dropped_after_blocks",
        "dropped_after_secs",
    )?;
    let window = one_form(file.reorg_window, file.reorg_window_secs, "reorg_window", "reorg_window_secs")?;
    Ok(Times {
        poll_interval,
        stale_after,
        max_lag: span(lag, defaults::max_lag_blocks()),
        dropped_after: span(dropped, defaults::dropped_after_blocks()),
        reorg_window: span(window, defaults::reorg_window()),
    })
}

/// The `[transfers]` table, its price overridden by `<CHAIN>_NATIVE_USD`.
fn transfers(file: &ChainFile, env: Env<'_>) -> Result<TransferConfig, String> {
    let mut transfers = file.transfers.clone();
    if let Some(price) = env(&format!("{}_NATIVE_USD", file.chain)) {
        transfers.native_usd = Some(price.trim().to_string());
    }
    if transfers.native_usd.is_some() && transfers.native_usd_micros().is_none() {
        return Err("transfers.native_usd must be a decimal price with at most 6 decimal places".into());
    }
    if transfers.max_fee_per_gas == 0 {
        return Err("transfers.max_fee_per_gas must be positive".into());
    }
    if transfers.fee_bump_percent < 10 {
        return Err("transfers.fee_bump_percent must be at least 10".into());
    }
    Ok(transfers)
}

/// The assets, their contracts normalised, each symbol once and printable,
/// an issued stablecoin's cap and decimals checked.
fn assets(file: &ChainFile) -> Result<Vec<AssetConfig>, String> {
    let printable = |symbol: &str| !symbol.trim().is_empty() && !symbol.contains(char::is_control);
    if let Some(bad) = std::iter::once(&file.native.symbol)
        .chain(file.assets.iter().map(|a| &a.symbol))
        .find(|s| !printable(s))
    {
        return Err(format!("symbol {bad:?} must be printable text, not empty"));
    }
    let mut assets: Vec<AssetConfig> = Vec::with_capacity(file.assets.len());
    for asset in &file.assets {
        let mut asset = asset.clone();
        let symbol = asset.symbol.clone();
        asset.contract_address =
            crate::family::rules::normalize(file.chain.family(), &asset.contract_address)
                .map_err(|e| format!("asset {symbol}: {e}"))?;
        if symbol == file.native.symbol || assets.iter().any(|a| a.symbol == symbol) {
            return Err(format!("asset symbol {symbol} is listed twice"));
        }
        if let Some(cap) = &asset.daily_mint_cap {
            if !asset.issued {
                return Err(format!("asset {symbol}: daily_mint_cap needs issued = true"));
            }
            crate::amount::Cents::parse(cap).map_err(|e| format!("asset {symbol}: daily_mint_cap: {e}"))?;
        }
        if let Some(usd) = &asset.usd {
            crate::amount::Amount::parse(usd, 6).map_err(|e| format!("asset {symbol}: usd: {e}"))?;
        }
        if asset.contract_address.eq_ignore_ascii_case(super::EIP7708_SYSTEM) {
            return Err(format!(
                "asset {symbol}: {} is where EIP-7708 logs native transfers, not a token",
                super::EIP7708_SYSTEM
            ));
        }
        if asset.precompile && !crate::family::rules::block_ledger(file.chain.family()) {
            return Err(format!("asset {symbol}: precompile is for EVM assets"));
        }
        if asset.issued && asset.decimals < 2 {
            return Err(format!(
                "asset {symbol}: an issued stablecoin needs 2 decimals or more to mint cents"
            ));
        }
        assets.push(asset);
    }
    Ok(assets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evm(quorum: &str, urls: &str) -> String {
        format!(
            r#"
            chain = "ETHEREUM_TESTNET"
            chain_id = 11155111
            rpc_urls = [{urls}]
            {quorum}
            confirmation = {{ depth = 12 }}
            poll_interval_secs = 2
            native = {{ symbol = "ETH", decimals = 18 }}
            "#
        )
    }

    #[test]
    fn confirm_quorum_is_one_unless_set_and_never_more_than_the_urls() {
        let two = r#""https://a.example", "https://b.example""#;
        let env_three = |key: &str| {
            (key == "ETHEREUM_TESTNET_RPC_URLS")
                .then(|| "https://a.example,https://b.example,https://c.example".into())
        };
        let none = |_: &str| None;
        let cases: [(&str, &str, Env<'_>, Result<usize, &str>); 7] = [
            ("", two, &none, Ok(1)),
            ("confirm_quorum = 2", two, &none, Ok(2)),
            ("confirm_quorum = 3", two, &none, Err("more RPC URLs to agree than the 2 configured")),
            ("confirm_quorum = 3", two, &env_three, Ok(3)),
            ("confirm_quorum = 0", two, &none, Err("at least 1")),
            ("confirm_quorum = 2", r#""https://a.example""#, &none, Err("ETHEREUM_TESTNET_RPC_URLS")),
            (
                "confirm_quorum = 2",
                r#""https://a.example/k1", "https://a.example/k2""#,
                &none,
                Err("same host"),
            ),
        ];
        for (line, urls, env, expected) in cases {
            let loaded = ChainConfig::from_toml(&evm(line, urls), Path::new("x.toml"), env);
            match (loaded, expected) {
                (Ok(config), Ok(quorum)) => assert_eq!(config.confirm_quorum, quorum, "{line}"),
                (Err(error), Err(says)) => assert!(error.to_string().contains(says), "{line}: {error}"),
                (loaded, expected) => panic!("{line}: {loaded:?} where {expected:?} was expected"),
            }
        }
        let solana = include_str!("../../chains/solana-devnet.toml").replacen(
            "rpc_urls",
            "confirm_quorum = 2\nrpc_urls",
            1,
        );
        let env =
            |key: &str| (key == "SOLANA_DEVNET_RPC_URLS").then(|| "http://a.example,http://b.example".into());
        let config = ChainConfig::from_toml(&solana, Path::new("s.toml"), &env).unwrap();
        assert_eq!(config.confirm_quorum, 2, "Solana deposits too are confirmed on a quorum");
        let one = |key: &str| (key == "SOLANA_DEVNET_RPC_URLS").then(|| "http://a.example".into());
        let error = ChainConfig::from_toml(&solana, Path::new("s.toml"), &one).unwrap_err().to_string();
        assert!(error.contains("SOLANA_DEVNET_RPC_URLS"), "{error}");
    }
}
