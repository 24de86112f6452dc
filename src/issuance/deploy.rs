//! `issuance deploy`: places the platform's stablecoin on a test chain, the
//! issuer key its only minter, and answers the chain-file lines that list
//! it as issued. On EVM it deploys `contracts/Stablecoin.sol` (the gas
//! sponsor pays); on Solana it creates an SPL Token mint whose mint
//! authority is the issuer (the sponsor pays the rent and the fee). Mainnet
//! chains are refused: a production stablecoin is deployed by the issuer's
//! own audited process, and then marked `issued = true` by hand.

use std::time::Duration;

use alloy::{
    consensus::{SignableTransaction, TxEip1559, TxEnvelope},
    eips::eip2718::Encodable2718,
    network::TransactionBuilder,
    primitives::{Address, Bytes, TxKind, U256},
    providers::{Provider, ProviderBuilder},
    rpc::types::TransactionRequest,
    sol_types::SolValue,
};
use anyhow::{Context, bail};
use solana_commitment_config::CommitmentConfig;
use solana_hash::Hash;
use solana_keypair::Keypair;
use solana_message::Message;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signer::Signer as _;
use solana_transaction::Transaction;

use crate::{
    chain::{Chain, Family},
    config::ChainConfig,
    keys::{KeyRef, Signer},
    solana::{
        decode::TOKEN_PROGRAM,
        instructions::{MINT_LEN, initialize_mint2, key},
    },
};

/// The compiled `contracts/Stablecoin.sol`.
const STABLECOIN_ARTIFACT: &str = include_str!("../../contracts/build/Stablecoin.json");

/// The stablecoin to place.
#[derive(Debug, Clone)]
pub struct Coin<'a> {
    pub symbol: &'a str,
    /// The token's name (EVM): the EIP-712 domain of its authorizations.
    pub name: &'a str,
    pub decimals: u8,
}

/// Where it was placed, and the `[[assets]]` lines naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployed {
    pub contract_address: String,
    pub toml: String,
}

/// Places `coin` on `config`'s chain with the issuer as minter.
pub async fn deploy(config: &ChainConfig, signer: &dyn Signer, coin: &Coin<'_>) -> anyhow::Result<Deployed> {
    if config.chain.is_mainnet() || Chain::mainnet_network(config.chain_id, config.genesis_hash.as_deref()) {
        bail!(
            "issuance deploy places test stablecoins: {} is a mainnet. Deploy a production stablecoin with your \
             own audited process (a minter role you can rotate, cap and pause, its key held apart from the \
             service's hot mnemonic), then mark it `issued = true` in the chain file",
            config.chain
        );
    }
    let url = config.rpc_urls.first().context("the chain file lists no RPC URL")?.expose().as_str();
    let (contract_address, extra) = match config.chain.family() {
        Family::Evm => (evm(url, signer, coin).await?, "eip3009 = true\n".to_string()),
        Family::Solana => {
            (solana(url, signer, coin).await?, format!("token_program = \"{TOKEN_PROGRAM}\"\n"))
        }
    };
    let toml = format!(
        "[[assets]]\nsymbol = \"{}\"\ncontract_address = \"{contract_address}\"\ndecimals = {}\n{extra}issued = true\n",
        coin.symbol, coin.decimals
    );
    Ok(Deployed { contract_address, toml })
}

/// The issuer's address on `chain`.
pub fn issuer(chain: Chain, signer: &dyn Signer) -> anyhow::Result<String> {
    Ok(signer.address(chain.family(), KeyRef::Issuer)?)
}

/// Deploys the Stablecoin contract from the sponsor, the issuer its minter.
async fn evm(url: &str, signer: &dyn Signer, coin: &Coin<'_>) -> anyhow::Result<String> {
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
    let pending =
        provider.send_raw_transaction(&envelope.encoded_2718()).await.context("sending the deployment")?;
    let receipt = pending
        .with_timeout(Some(Duration::from_secs(120)))
        .get_receipt()
        .await
        .context("the deployment was not mined within 2 minutes (is the sponsor funded?)")?;
    if !receipt.status() {
        bail!("the deployment {} reverted", receipt.transaction_hash);
    }
    let address: Address = receipt.contract_address.context("the deployment created no contract")?;
    Ok(address.to_checksum(None))
}

/// Creates an SPL Token mint (a new keypair's account, rent paid by the
/// sponsor) whose mint authority is the issuer.
async fn solana(url: &str, signer: &dyn Signer, coin: &Coin<'_>) -> anyhow::Result<String> {
    let rpc = RpcClient::new_with_commitment(url.to_string(), CommitmentConfig::confirmed());
    let sponsor = key(&signer.solana_address(KeyRef::Sponsor)?);
    let authority = key(&signer.solana_address(KeyRef::Issuer)?);
    let mint = Keypair::new();
    let rent = rpc.get_minimum_balance_for_rent_exemption(MINT_LEN as usize).await?;
    let create = solana_system_interface::instruction::create_account(
        &sponsor,
        &mint.pubkey(),
        rent,
        MINT_LEN,
        &key(TOKEN_PROGRAM),
    );
    let init = initialize_mint2(TOKEN_PROGRAM, &mint.pubkey(), &authority, coin.decimals);
    let blockhash: Hash = rpc.get_latest_blockhash().await?;
    let mut tx =
        Transaction::new_unsigned(Message::new_with_blockhash(&[create, init], Some(&sponsor), &blockhash));
    let data = tx.message_data();
    let signers = tx.message.header.num_required_signatures as usize;
    let keys: Vec<solana_pubkey::Pubkey> = tx.message.account_keys[..signers].to_vec();
    for (position, signer_key) in keys.into_iter().enumerate() {
        tx.signatures[position] = if signer_key == sponsor {
            signer.sign_solana(KeyRef::Sponsor, data.clone()).await?.into()
        } else {
            mint.sign_message(&data)
        };
    }
    rpc.send_and_confirm_transaction(&tx).await.context("creating the mint (is the sponsor funded?)")?;
    Ok(mint.pubkey().to_string())
}
