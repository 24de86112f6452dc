//! What `dev` does on its local Solana network: creates its USDC mint (SPL
//! Token, 6 decimals, the issuer its mint authority, its keypair kept in the
//! state directory so its address stays the same), airdrops SOL and sends
//! SOL deposits from a funder wallet. USDC reaches accounts only through
//! issuance.

use std::time::Duration;

use anyhow::{Context, bail};
use solana_commitment_config::CommitmentConfig;
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signer::Signer;
use solana_transaction::Transaction;

use crate::solana::{
    decode::TOKEN_PROGRAM,
    instructions::{MINT_LEN, initialize_mint2, key, transfer_sol},
};

pub const SOL: u64 = 1_000_000_000;

pub struct LocalSolana {
    pub rpc: RpcClient,
}

impl LocalSolana {
    pub fn connect(url: &str) -> Self {
        Self { rpc: RpcClient::new_with_commitment(url.to_string(), CommitmentConfig::confirmed()) }
    }

    pub async fn genesis_hash(&self) -> anyhow::Result<String> {
        Ok(self.rpc.get_genesis_hash().await.context("the local Solana network's genesis hash")?.to_string())
    }

    /// The first slot the node holds a block at: below it nothing can be read.
    pub async fn first_slot(&self) -> anyhow::Result<u64> {
        for _ in 0..300 {
            let first = self.rpc.get_first_available_block().await?;
            if self.rpc.get_blocks_with_limit(first, 1).await.unwrap_or_default().first() == Some(&first) {
                return Ok(first);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("the local Solana network produces no block")
    }

    /// Airdrops `lamports` to `to` and waits until it is confirmed.
    pub async fn airdrop(&self, to: &Pubkey, lamports: u64) -> anyhow::Result<()> {
        let signature = self.rpc.request_airdrop(to, lamports).await.context("airdrop")?;
        for _ in 0..300 {
            if self.rpc.confirm_transaction(&signature).await? {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("the airdrop to {to} was not confirmed within 30 s")
    }

    /// Airdrops `lamports` to `to` unless it holds half of that or more.
    pub async fn top_up(&self, to: &Pubkey, lamports: u64) -> anyhow::Result<()> {
        if self.rpc.get_balance(to).await? < lamports / 2 {
            self.airdrop(to, lamports).await?;
        }
        Ok(())
    }

    async fn send(
        &self,
        instructions: &[Instruction],
        payer: &Keypair,
        signers: &[&Keypair],
    ) -> anyhow::Result<String> {
        let blockhash = self.rpc.get_latest_blockhash().await?;
        let mut all = vec![payer];
        all.extend_from_slice(signers);
        let tx = Transaction::new_signed_with_payer(instructions, Some(&payer.pubkey()), &all, blockhash);
        Ok(self.rpc.send_and_confirm_transaction(&tx).await?.to_string())
    }

    /// Creates the mint `mint` (`authority` mints; `payer` pays) unless it exists.
    pub async fn create_mint(
        &self,
        payer: &Keypair,
        mint: &Keypair,
        authority: &Pubkey,
        decimals: u8,
    ) -> anyhow::Result<()> {
        if self.rpc.get_account(&mint.pubkey()).await.is_ok() {
            return Ok(());
        }
        let rent = self.rpc.get_minimum_balance_for_rent_exemption(MINT_LEN as usize).await?;
        let create = solana_system_interface::instruction::create_account(
            &payer.pubkey(),
            &mint.pubkey(),
            rent,
            MINT_LEN,
            &key(TOKEN_PROGRAM),
        );
        let init = initialize_mint2(TOKEN_PROGRAM, &mint.pubkey(), authority, decimals);
        self.send(&[create, init], payer, &[mint]).await.context("creating the USDC mint")?;
        Ok(())
    }

    /// A SOL deposit from `funder` to `to`: its signature.
    pub async fn deposit(&self, funder: &Keypair, to: &Pubkey, lamports: u64) -> anyhow::Result<String> {
        if self.rpc.get_balance(&funder.pubkey()).await? < SOL + lamports {
            self.airdrop(&funder.pubkey(), 10 * SOL + lamports).await?;
        }
        self.send(&[transfer_sol(&funder.pubkey(), to, lamports)], funder, &[]).await
    }
}

/// The keypair of a 32-byte secret.
pub fn keypair(secret: &[u8; 32]) -> Keypair {
    Keypair::new_from_array(*secret)
}
