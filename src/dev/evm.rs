//! What `dev` does on its anvil: deploys its USDC (the platform's issued
//! stablecoin, `contracts/Stablecoin.sol`, 6 decimals, the issuer its only
//! minter), funds wallets and sends native deposits from anvil's unlocked
//! dev accounts. USDC reaches accounts only through issuance.

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, B256, U256},
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::types::TransactionRequest,
    sol_types::SolValue,
};
use anyhow::{Context, bail};

/// The platform's stablecoin, with EIP-3009 `transferWithAuthorization`.
const STABLECOIN_ARTIFACT: &str = include_str!("../../contracts/build/Stablecoin.json");

/// anvil's dev account that deploys the token and funds the platform.
pub const DEPLOYER: usize = 0;
/// anvil's dev account `dev deposit` sends from: not the sponsor's.
pub const DEPOSITOR: usize = 1;

pub struct LocalEvm {
    pub provider: DynProvider,
    pub accounts: Vec<Address>,
}

impl LocalEvm {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let provider = ProviderBuilder::new().connect_http(url.parse()?).erased();
        let accounts = provider.get_accounts().await.with_context(|| format!("anvil at {url}"))?;
        if accounts.len() <= DEPOSITOR {
            bail!("anvil at {url} has no unlocked dev accounts");
        }
        Ok(Self { provider, accounts })
    }

    /// The USDC `issuer` mints: where a kept chain holds it (the
    /// deployer's first contract), else deployed there now as the
    /// deployer's first transaction.
    pub async fn place_usdc(&self, issuer: Address) -> anyhow::Result<Address> {
        let first = self.accounts[DEPLOYER].create(0);
        if !self.provider.get_code_at(first).await?.is_empty() {
            return Ok(first);
        }
        let artifact: serde_json::Value = serde_json::from_str(STABLECOIN_ARTIFACT)?;
        let code = artifact["bytecode"].as_str().context("the Stablecoin artifact has no bytecode")?;
        let mut code: Vec<u8> = alloy::primitives::hex::decode(code)?;
        let args = ("USD Coin (dev)".to_string(), "USDC".to_string(), U256::from(6u8), issuer);
        code.extend(args.abi_encode_params());
        let tx = TransactionRequest::default().with_from(self.accounts[DEPLOYER]).with_deploy_code(code);
        let receipt = self.provider.send_transaction(tx).await?.get_receipt().await?;
        receipt.contract_address.context("the token deployment created no contract")
    }

    /// The hash of block 0: the chain's identity (anvil's is new each time
    /// it starts without a state file).
    pub async fn genesis_hash(&self) -> anyhow::Result<String> {
        let genesis = self.provider.get_block_by_number(0.into()).await?.context("anvil has no block 0")?;
        Ok(genesis.header.hash.to_string())
    }

    /// Sends `wei` from an unlocked dev account without waiting.
    async fn send_value(&self, from: Address, to: Address, wei: U256) -> anyhow::Result<B256> {
        let tx = TransactionRequest::default().with_from(from).with_to(to).with_value(wei);
        Ok(*self.provider.send_transaction(tx).await?.tx_hash())
    }

    /// Waits until `hash` is mined and succeeded.
    pub async fn mined(&self, hash: B256) -> anyhow::Result<()> {
        for _ in 0..300 {
            if let Some(receipt) = self.provider.get_transaction_receipt(hash).await? {
                if !receipt.status() {
                    bail!("transaction {hash} reverted");
                }
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        bail!("transaction {hash} was not mined within 30 s")
    }

    /// Tops up the platform's wallets with ETH: a wallet holding half its
    /// amount or more is left as it is.
    pub async fn fund(&self, wallets: &[(Address, U256)]) -> anyhow::Result<()> {
        let deployer = self.accounts[DEPLOYER];
        let mut sent = Vec::new();
        for (to, wei) in wallets {
            if self.provider.get_balance(*to).await? < *wei / U256::from(2) {
                sent.push(self.send_value(deployer, *to, *wei).await?);
            }
        }
        for hash in sent {
            self.mined(hash).await?;
        }
        Ok(())
    }

    /// An ETH deposit from the depositor.
    pub async fn deposit(&self, to: Address, wei: U256) -> anyhow::Result<B256> {
        let hash = self.send_value(self.accounts[DEPOSITOR], to, wei).await?;
        self.mined(hash).await?;
        Ok(hash)
    }
}
