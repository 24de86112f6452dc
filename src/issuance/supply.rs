//! An issued stablecoin as the chain holds it now: its supply and its
//! decimals (ERC-20 `totalSupply` and `decimals` on EVM, the SPL mint's
//! supply and decimals on Solana, `confirmed`). The chain file's RPC URLs
//! are tried in turn.

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, U256},
    providers::{Provider, ProviderBuilder},
    rpc::types::TransactionRequest,
    sol,
    sol_types::SolCall,
};
use solana_commitment_config::CommitmentConfig;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;

use crate::{
    chain::Family,
    config::{AssetConfig, ChainConfig},
    redact::redact_urls,
};

sol! {
    function totalSupply() external view returns (uint256);
    function decimals() external view returns (uint8);
}

/// What the chain says of an issued stablecoin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnChain {
    /// In the smallest unit.
    pub supply: U256,
    pub decimals: u8,
}

/// The supply and decimals of `asset` on `config`'s chain; the last node's
/// error when none answers, its URLs redacted (an RPC URL may hold a key,
/// and the error is printed).
pub async fn supply(config: &ChainConfig, asset: &AssetConfig) -> Result<OnChain, String> {
    let mut last = "the chain file lists no RPC URL".to_string();
    for url in &config.rpc_urls {
        let url = url.expose().as_str();
        let answer = match config.chain.family() {
            Family::Evm => evm(url, &asset.contract_address).await,
            Family::Solana => solana(url, &asset.contract_address).await,
        };
        match answer {
            Ok(supply) => return Ok(supply),
            Err(error) => last = redact_urls(&error),
        }
    }
    Err(last)
}

async fn evm(url: &str, token: &str) -> Result<OnChain, String> {
    let token: Address = token.parse().map_err(|e| format!("{token}: {e}"))?;
    let provider = ProviderBuilder::new().connect_http(url.parse().map_err(|e| format!("{e}"))?);
    let call = TransactionRequest::default().with_to(token).with_input(totalSupplyCall {}.abi_encode());
    let answer = provider.call(call).await.map_err(|e| format!("totalSupply of {token}: {e}"))?;
    let supply =
        totalSupplyCall::abi_decode_returns(&answer).map_err(|e| format!("totalSupply of {token}: {e}"))?;
    let call = TransactionRequest::default().with_to(token).with_input(decimalsCall {}.abi_encode());
    let answer = provider.call(call).await.map_err(|e| format!("decimals of {token}: {e}"))?;
    let decimals =
        decimalsCall::abi_decode_returns(&answer).map_err(|e| format!("decimals of {token}: {e}"))?;
    Ok(OnChain { supply, decimals })
}

async fn solana(url: &str, mint: &str) -> Result<OnChain, String> {
    let key = mint.parse().map_err(|e| format!("{mint}: {e}"))?;
    let rpc = RpcClient::new_with_commitment(url.to_string(), CommitmentConfig::confirmed());
    let supply = rpc.get_token_supply(&key).await.map_err(|e| format!("the supply of {mint}: {e}"))?;
    let decimals = supply.decimals;
    let supply = supply.amount.parse().map_err(|e| format!("the supply of {mint}: {e}"))?;
    Ok(OnChain { supply, decimals })
}
