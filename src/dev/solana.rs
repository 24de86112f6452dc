//! What `dev` does on its local Solana network: creates the test USDC mint
//! (SPL Token, 6 decimals, its keypair kept in the state directory so its
//! address stays the same), airdrops SOL and sends deposits from a funder
//! wallet that is the mint's authority.

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
    instructions::{
        MINT_LEN, ata, create_ata, initialize_mint2, key, mint_to, transfer_checked, transfer_sol,
    },
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

    /// Creates the mint `mint` (6 decimals, `authority` mints) unless it exists.
    pub async fn create_mint(&self, authority: &Keypair, mint: &Keypair, decimals: u8) -> anyhow::Result<()> {
        if self.rpc.get_account(&mint.pubkey()).await.is_ok() {
            return Ok(());
        }
        let rent = self.rpc.get_minimum_balance_for_rent_exemption(MINT_LEN as usize).await?;
        let create = solana_system_interface::instruction::create_account(
            &authority.pubkey(),
            &mint.pubkey(),
            rent,
            MINT_LEN,
            &key(TOKEN_PROGRAM),
        );
        let init = initialize_mint2(TOKEN_PROGRAM, &mint.pubkey(), &authority.pubkey(), decimals);
        self.send(&[create, init], authority, &[mint]).await.context("creating the USDC mint")?;
        Ok(())
    }

    /// A deposit from `funder` to `to`: SOL when `mint` is `None`, else the
    /// token, minted to the funder's token account first and sent with
    /// `TransferChecked` to `to`'s associated token account (created when
    /// missing). Returns the signature.
    pub async fn deposit(
        &self,
        funder: &Keypair,
        to: &Pubkey,
        mint: Option<(&Pubkey, u8)>,
        raw: u64,
    ) -> anyhow::Result<String> {
        if self.rpc.get_balance(&funder.pubkey()).await? < SOL + raw {
            self.airdrop(&funder.pubkey(), 10 * SOL + raw).await?;
        }
        let instructions = match mint {
            None => vec![transfer_sol(&funder.pubkey(), to, raw)],
            Some((mint, decimals)) => {
                let (from, into) = (ata(&funder.pubkey(), mint, TOKEN_PROGRAM), ata(to, mint, TOKEN_PROGRAM));
                vec![
                    create_ata(&funder.pubkey(), &funder.pubkey(), mint, TOKEN_PROGRAM),
                    mint_to(TOKEN_PROGRAM, mint, &from, &funder.pubkey(), raw),
                    create_ata(&funder.pubkey(), to, mint, TOKEN_PROGRAM),
                    transfer_checked(TOKEN_PROGRAM, &from, mint, &into, &funder.pubkey(), raw, decimals),
                ]
            }
        };
        self.send(&instructions, funder, &[]).await
    }
}

/// The keypair of a 32-byte secret.
pub fn keypair(secret: &[u8; 32]) -> Keypair {
    Keypair::new_from_array(*secret)
}
