//! An issued stablecoin's supply as the chain holds it now: ERC-20
//! `totalSupply` on EVM, the SPL mint's supply on Solana (`confirmed`).
//! The chain file's RPC URLs are tried in turn.

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
}

/// The supply of `asset` on `config`'s chain, smallest unit; the last
/// node's error when none answers, its URLs redacted (an RPC URL may hold
/// a key, and the error is printed).
pub async fn supply(config: &ChainConfig, asset: &AssetConfig) -> Result<U256, String> {
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

async fn evm(url: &str, token: &str) -> Result<U256, String> {
    let token: Address = token.parse().map_err(|e| format!("{token}: {e}"))?;
    let provider = ProviderBuilder::new().connect_http(url.parse().map_err(|e| format!("{e}"))?);
    let call = TransactionRequest::default().with_to(token).with_input(totalSupplyCall {}.abi_encode());
    let answer = provider.call(call).await.map_err(|e| format!("totalSupply of {token}: {e}"))?;
    totalSupplyCall::abi_decode_returns(&answer).map_err(|e| format!("totalSupply of {token}: {e}"))
}

async fn solana(url: &str, mint: &str) -> Result<U256, String> {
    let key = mint.parse().map_err(|e| format!("{mint}: {e}"))?;
    let rpc = RpcClient::new_with_commitment(url.to_string(), CommitmentConfig::confirmed());
    let supply = rpc.get_token_supply(&key).await.map_err(|e| format!("the supply of {mint}: {e}"))?;
    supply.amount.parse().map_err(|e| format!("the supply of {mint}: {e}"))
}
