//! The Solana family: how the service watches, sends on and reads a Solana
//! chain (see [`crate::family::seam::ChainFamily`]).

use std::{collections::BTreeSet, sync::Arc};

use alloy::primitives::U256;
use anyhow::Context;
use futures::future::{LocalBoxFuture, try_join_all};
use solana_commitment_config::CommitmentConfig;
use solana_hash::Hash;
use solana_keypair::Keypair;
use solana_message::Message;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signer::Signer as _;
use solana_transaction::Transaction;
use tokio_util::sync::CancellationToken;

use super::{
    SolanaSender, SolanaWatcher,
    decode::TOKEN_PROGRAM,
    instructions::{MINT_LEN, initialize_mint2, key},
    rpc::SolanaRpc,
};
use crate::{
    config::{ChainConfig, Strategy},
    deposits::{
        follow::{connect, with_gaps},
        watcher::{BackfillReport, WatchError},
    },
    family::seam::{ChainFamily, Coin, OnChain, Placed, Progress, Totals, sum},
    keys::{KeyRef, Signer},
    rpc::RpcFailure,
    store::Store,
    transfers::run_sender,
};

/// The Solana chains.
pub struct Solana;

#[async_trait::async_trait]
impl ChainFamily for Solana {
    async fn watch(
        &self,
        config: ChainConfig,
        store: Store,
        stop: CancellationToken,
    ) -> anyhow::Result<Result<(), WatchError>> {
        let Some(watcher) = connect(config.clone(), store.clone(), &stop, SolanaWatcher::connect).await?
        else {
            return Ok(Ok(()));
        };
        // The signatures strategy reads each address's whole history on
        // first sight: it has no gaps.
        let history = (config.strategy == Strategy::Blocks).then(|| SolanaWatcher::history(config, store));
        Ok(with_gaps(watcher.run(stop.clone()), history, &stop).await)
    }

    async fn send(
        &self,
        config: ChainConfig,
        store: Store,
        signer: Arc<dyn Signer>,
        stop: CancellationToken,
    ) {
        run_sender(SolanaSender::new(config, store, signer), stop).await
    }

    fn unit(&self) -> &'static str {
        "slots"
    }

    fn backfill<'a>(
        &'a self,
        config: ChainConfig,
        store: Store,
        (from, to): (u64, Option<u64>),
        progress: Progress<'a>,
    ) -> LocalBoxFuture<'a, Result<BackfillReport, WatchError>> {
        Box::pin(async move {
            SolanaWatcher::connect(config, store).await?.backfill_slots(from, to, progress).await
        })
    }

    fn backfill_address<'a>(
        &'a self,
        config: ChainConfig,
        store: Store,
        address: &'a str,
        (before, until): (Option<String>, Option<String>),
        progress: Progress<'a>,
    ) -> LocalBoxFuture<'a, anyhow::Result<BackfillReport>> {
        Box::pin(async move {
            let mut watcher = SolanaWatcher::connect(config, store).await?;
            Ok(watcher.backfill_address(address, before, until, progress).await?)
        })
    }

    fn balances(&self, c: &ChainConfig) -> Box<dyn Totals> {
        Box::new(SolanaRpc::new(c.chain, &c.rpc_urls))
    }

    async fn supply(&self, url: &str, mint: &str) -> Result<OnChain, String> {
        let key = mint.parse().map_err(|e| format!("{mint}: {e}"))?;
        let rpc = RpcClient::new_with_commitment(url.to_string(), CommitmentConfig::confirmed());
        let supply = rpc.get_token_supply(&key).await.map_err(|e| format!("the supply of {mint}: {e}"))?;
        let decimals = supply.decimals;
        let supply = supply.amount.parse().map_err(|e| format!("the supply of {mint}: {e}"))?;
        Ok(OnChain { supply, decimals })
    }

    /// Creates an SPL Token mint (a new keypair's account, rent paid by the
    /// sponsor) whose mint authority is the issuer.
    async fn deploy(&self, url: &str, signer: &dyn Signer, coin: &Coin<'_>) -> anyhow::Result<Placed> {
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
        let mut tx = Transaction::new_unsigned(Message::new_with_blockhash(
            &[create, init],
            Some(&sponsor),
            &blockhash,
        ));
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
        let extra_toml = format!("token_program = \"{TOKEN_PROGRAM}\"\n");
        Ok(Placed { contract_address: mint.pubkey().to_string(), extra_toml })
    }
}

/// Totals in the chain file's order over `addresses`: every token account
/// the wallets own under the programs of the listed mints counts.
#[async_trait::async_trait]
impl Totals for SolanaRpc {
    async fn totals(
        &self,
        config: &ChainConfig,
        addresses: &BTreeSet<&str>,
    ) -> Result<Vec<U256>, RpcFailure> {
        let programs: BTreeSet<&str> =
            config.assets.iter().map(|a| a.token_program.as_deref().unwrap_or(TOKEN_PROGRAM)).collect();
        let lamports = try_join_all(addresses.iter().map(|a| self.balance(a))).await?;
        let reads = addresses.iter().flat_map(|a| programs.iter().map(move |p| self.token_balances(a, p)));
        let accounts = try_join_all(reads).await?;
        let mut totals = vec![sum(lamports.into_iter().map(U256::from))];
        for asset in &config.assets {
            let of_mint = accounts.iter().flatten().filter(|(mint, _)| *mint == asset.contract_address);
            totals.push(sum(of_mint.map(|(_, amount)| U256::from(*amount))));
        }
        Ok(totals)
    }
}
