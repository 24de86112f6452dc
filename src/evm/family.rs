//! The EVM family: how the service watches, sends on and reads an EVM chain
//! (see [`crate::family::seam::ChainFamily`]).

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718,
    network::TransactionBuilder,
    primitives::{Address, Bytes, TxKind, U256},
    providers::{Provider, ProviderBuilder},
    rpc::types::TransactionRequest,
    sol,
    sol_types::{SolCall, SolValue},
};
use anyhow::{Context, bail};
use futures::future::{LocalBoxFuture, try_join_all};
use tokio_util::sync::CancellationToken;

use super::{EvmSender, EvmWatcher, rpc::EvmRpc};
use crate::{
    config::ChainConfig,
    deposits::{
        follow::{connect, with_gaps},
        watcher::{BackfillReport, WatchError},
    },
    family::seam::{ChainFamily, Coin, GasBeyondCap, Move, OnChain, Placed, Progress, Totals, sum},
    keys::{KeyRef, Signer},
    restore::lost::{Unknown, WitnessError},
    rpc::RpcFailure,
    store::Store,
    transfers::run_sender,
};

/// The compiled `contracts/Stablecoin.sol`.
const STABLECOIN_ARTIFACT: &str = include_str!("../../contracts/build/Stablecoin.json");

sol! {
    function totalSupply() external view returns (uint256);
    function decimals() external view returns (uint8);
    function transfer(address to, uint256 value) external returns (bool);
}

/// The EVM chains.
pub struct Evm;

#[async_trait::async_trait]
impl ChainFamily for Evm {
    async fn watch(
        &self,
        config: ChainConfig,
        store: Store,
        stop: CancellationToken,
    ) -> anyhow::Result<Result<(), WatchError>> {
        let Some(watcher) = connect(config.clone(), store.clone(), &stop, EvmWatcher::connect).await? else {
            return Ok(Ok(()));
        };
        let history = EvmWatcher::history(config, store);
        Ok(with_gaps(watcher.run(stop.clone()), Some(history), &stop).await)
    }

    async fn send(
        &self,
        config: ChainConfig,
        store: Store,
        signer: Arc<dyn Signer>,
        stop: CancellationToken,
    ) {
        run_sender(EvmSender::new(config, store, signer), stop).await
    }

    fn unit(&self) -> &'static str {
        "blocks"
    }

    fn backfill<'a>(
        &'a self,
        config: ChainConfig,
        store: Store,
        (from, to): (u64, Option<u64>),
        progress: Progress<'a>,
    ) -> LocalBoxFuture<'a, Result<BackfillReport, WatchError>> {
        Box::pin(async move { EvmWatcher::connect(config, store).await?.backfill(from, to, progress).await })
    }

    fn balances(&self, c: &ChainConfig) -> Box<dyn Totals> {
        Box::new(EvmRpc::new(c.chain, &c.rpc_urls, c.max_block_range, c.batch_size, c.concurrency))
    }

    async fn supply(&self, url: &str, token: &str) -> Result<OnChain, String> {
        let token: Address = token.parse().map_err(|e| format!("{token}: {e}"))?;
        let provider = ProviderBuilder::new().connect_http(url.parse().map_err(|e| format!("{e}"))?);
        let call = TransactionRequest::default().with_to(token).with_input(totalSupplyCall {}.abi_encode());
        let answer = provider.call(call).await.map_err(|e| format!("totalSupply of {token}: {e}"))?;
        let supply = totalSupplyCall::abi_decode_returns(&answer)
            .map_err(|e| format!("totalSupply of {token}: {e}"))?;
        let call = TransactionRequest::default().with_to(token).with_input(decimalsCall {}.abi_encode());
        let answer = provider.call(call).await.map_err(|e| format!("decimals of {token}: {e}"))?;
        let decimals =
            decimalsCall::abi_decode_returns(&answer).map_err(|e| format!("decimals of {token}: {e}"))?;
        Ok(OnChain { supply, decimals })
    }

    /// Deploys `contracts/Stablecoin.sol` from the sponsor, the issuer its
    /// minter.
    async fn lost_senders(&self, store: &Store, config: &ChainConfig) -> Result<Vec<Unknown>, WitnessError> {
        super::witness::unknown(store, config).await
    }

    async fn count_wallets(&self, store: &Store, config: &ChainConfig) -> Result<usize, WitnessError> {
        super::witness::count_platform_wallets(store, config).await
    }

    async fn deploy(&self, url: &str, signer: &dyn Signer, coin: &Coin<'_>) -> anyhow::Result<Placed> {
        let provider = ProviderBuilder::new().connect_http(url.parse()?);
        let (sponsor, minter) = (signer.evm_address(KeyRef::Sponsor)?, signer.evm_address(KeyRef::Issuer)?);
        let artifact: serde_json::Value = serde_json::from_str(STABLECOIN_ARTIFACT)?;
        let code = artifact["bytecode"].as_str().context("the Stablecoin artifact has no bytecode")?;
        let mut input = alloy::primitives::hex::decode(code)?;
        let args = (coin.name.to_string(), coin.symbol.to_string(), U256::from(coin.decimals), minter);
        input.extend(args.abi_encode_params());
        let input = Bytes::from(input);
        let request = TransactionRequest::default().with_from(sponsor).with_deploy_code(input.clone());
        let gas = provider.estimate_gas(request).await.context("estimating the deployment")?;
        let fees = provider.estimate_eip1559_fees().await?;
        let tx = TxEip1559 {
            chain_id: provider.get_chain_id().await?,
            nonce: provider.get_transaction_count(sponsor).pending().await?,
            gas_limit: gas + gas / 5,
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
            to: TxKind::Create,
            value: U256::ZERO,
            access_list: Default::default(),
            input,
        };
        let signature = signer.sign_evm_hash(KeyRef::Sponsor, tx.signature_hash()).await?;
        let envelope = TxEnvelope::from(tx.into_signed(signature));
        let pending = provider
            .send_raw_transaction(&envelope.encoded_2718())
            .await
            .context("sending the deployment")?;
        let receipt = pending
            .with_timeout(Some(Duration::from_secs(120)))
            .get_receipt()
            .await
            .context("the deployment was not mined within 2 minutes (is the sponsor funded?)")?;
        if !receipt.status() {
            bail!("the deployment {} reverted", receipt.transaction_hash);
        }
        let address: Address = receipt.contract_address.context("the deployment created no contract")?;
        let contract_address = address.to_checksum(None);
        Ok(Placed { contract_address, extra_toml: "eip3009 = true\n".to_string() })
    }
}

/// Totals in the chain file's order over `addresses`.
#[async_trait::async_trait]
impl Totals for EvmRpc {
    async fn totals(
        &self,
        config: &ChainConfig,
        addresses: &BTreeSet<&str>,
    ) -> Result<Vec<U256>, RpcFailure> {
        let owners: Vec<Address> = addresses.iter().filter_map(|a| a.parse().ok()).collect();
        let tokens: Vec<Address> =
            config.assets.iter().filter_map(|a| a.contract_address.parse().ok()).collect();
        let mut totals = Vec::with_capacity(1 + tokens.len());
        totals.push(sum(try_join_all(owners.iter().map(|o| self.balance(*o))).await?));
        for token in tokens {
            totals.push(sum(try_join_all(owners.iter().map(|o| self.token_balance(token, *o))).await?));
        }
        Ok(totals)
    }

    /// `eth_estimateGas` of the call from the source: the value transfer,
    /// or the token's `transfer` (a sponsored EIP-3009 transfer's
    /// `transferWithAuthorization` costs about as much more as checking a
    /// signature, and the sender refuses it above the cap too). A node's
    /// own trouble is asked again twice, a quarter and half a second later.
    async fn gas_beyond_cap(&self, transfer: &Move<'_>) -> Result<Option<GasBeyondCap>, RpcFailure> {
        let address = |a: &str| a.parse::<Address>().ok();
        let (Some(from), Some(to)) = (address(transfer.from), address(transfer.to)) else {
            return Ok(None);
        };
        let (to, value, input) = match transfer.token.map(address) {
            None => (to, transfer.amount, Bytes::new()),
            Some(None) => return Ok(None),
            Some(Some(token)) => {
                (token, U256::ZERO, Bytes::from(transferCall { to, value: transfer.amount }.abi_encode()))
            }
        };
        let cap = super::sender::MAX_TRANSACTION_GAS;
        let mut waits = [Duration::from_millis(250), Duration::from_millis(500)].into_iter();
        loop {
            match self.estimate_gas(from, to, value, &input).await {
                Ok(needed) if needed > cap => return Ok(Some(GasBeyondCap { needed: Some(needed), cap })),
                Ok(_) => return Ok(None),
                // A revert (code 3) is the call's own answer, whatever its
                // reason reads like.
                Err(failure)
                    if failure.kind == "rpc_error"
                        && failure.code != Some(3)
                        && super::sender::allowance_beyond_cap(&failure.message).is_some() =>
                {
                    return Ok(Some(GasBeyondCap { needed: None, cap }));
                }
                Err(failure)
                    if failure.kind == "rpc_error"
                        && super::sender::about_transaction(failure.code, &failure.message) =>
                {
                    return Ok(None);
                }
                Err(failure) => match waits.next() {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return Err(failure),
                },
            }
        }
    }
}
