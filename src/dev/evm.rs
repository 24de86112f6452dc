//! What `dev` does on its anvil: deploys the test USDC (the EIP-3009 test
//! token of tests/contracts, 6 decimals), funds wallets and sends deposits
//! from anvil's unlocked dev accounts.

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, B256, Bytes, U256},
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::types::TransactionRequest,
    sol,
    sol_types::{SolCall, SolValue},
};
use anyhow::{Context, bail};

sol! {
    function mint(address to, uint256 value);
    function transfer(address to, uint256 value) returns (bool);
    function balanceOf(address owner) returns (uint256);
}

/// The compiled test token with EIP-3009 `transferWithAuthorization`, as USDC.
const TOKEN_ARTIFACT: &str = include_str!("../../tests/contracts/build/TestAuthToken.json");

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

    /// The test token: where a kept chain holds it (the deployer's first
    /// contract), else deployed there now as the deployer's first transaction.
    pub async fn place_usdc(&self) -> anyhow::Result<Address> {
        let first = self.accounts[DEPLOYER].create(0);
        if !self.provider.get_code_at(first).await?.is_empty() {
            return Ok(first);
        }
        let artifact: serde_json::Value = serde_json::from_str(TOKEN_ARTIFACT)?;
        let code = artifact["bytecode"].as_str().context("the token artifact has no bytecode")?;
        let mut code: Vec<u8> = alloy::primitives::hex::decode(code)?;
        code.extend(("USD Coin (dev)".to_string(), "USDC".to_string(), U256::from(6u8)).abi_encode_params());
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

    async fn token_balance(&self, token: Address, owner: Address) -> anyhow::Result<U256> {
        let input = balanceOfCall { owner }.abi_encode();
        let answer =
            self.provider.call(TransactionRequest::default().with_to(token).with_input(input)).await?;
        U256::abi_decode(&answer).context("balanceOf answered no number")
    }

    /// Sends `wei` from an unlocked dev account without waiting.
    async fn send_value(&self, from: Address, to: Address, wei: U256) -> anyhow::Result<B256> {
        let tx = TransactionRequest::default().with_from(from).with_to(to).with_value(wei);
        Ok(*self.provider.send_transaction(tx).await?.tx_hash())
    }

    async fn call(&self, from: Address, token: Address, input: Vec<u8>) -> anyhow::Result<B256> {
        let tx = TransactionRequest::default().with_from(from).with_to(token).with_input(Bytes::from(input));
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

    /// Tops up the platform's wallets with ETH and the depositor with USDC:
    /// a wallet holding half its amount or more is left as it is.
    pub async fn fund(
        &self,
        wallets: &[(Address, U256)],
        usdc: Address,
        usdc_raw: U256,
    ) -> anyhow::Result<()> {
        let deployer = self.accounts[DEPLOYER];
        let mut sent = Vec::new();
        for (to, wei) in wallets {
            if self.provider.get_balance(*to).await? < *wei / U256::from(2) {
                sent.push(self.send_value(deployer, *to, *wei).await?);
            }
        }
        let depositor = self.accounts[DEPOSITOR];
        if self.token_balance(usdc, depositor).await? < usdc_raw / U256::from(2) {
            sent.push(
                self.call(deployer, usdc, mintCall { to: depositor, value: usdc_raw }.abi_encode()).await?,
            );
        }
        for hash in sent {
            self.mined(hash).await?;
        }
        Ok(())
    }

    /// A deposit from the depositor: ETH when `token` is `None`, else the
    /// token (minted to the depositor first when it holds too little).
    pub async fn deposit(&self, to: Address, token: Option<Address>, raw: U256) -> anyhow::Result<B256> {
        let from = self.accounts[DEPOSITOR];
        let hash = match token {
            None => self.send_value(from, to, raw).await?,
            Some(token) => {
                if self.token_balance(token, from).await? < raw {
                    self.mined(self.call(from, token, mintCall { to: from, value: raw }.abi_encode()).await?)
                        .await?;
                }
                self.call(from, token, transferCall { to, value: raw }.abi_encode()).await?
            }
        };
        self.mined(hash).await?;
        Ok(hash)
    }
}
