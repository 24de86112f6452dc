//! A real anvil node per test, on a free 127.0.0.1 port.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use alloy::{
    contract::{CallBuilder, CallDecoder},
    network::TransactionBuilder,
    primitives::{Address, B256, Bytes, U256},
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::types::{TransactionReceipt, TransactionRequest},
    sol,
};

sol!(
    #[sol(rpc)]
    TestToken,
    "tests/contracts/build/TestToken.json"
);
sol!(
    #[allow(clippy::too_many_arguments)]
    #[sol(rpc)]
    TestAuthToken,
    "tests/contracts/build/TestAuthToken.json"
);
sol!(
    #[sol(rpc)]
    HeavyToken,
    "tests/contracts/build/HeavyToken.json"
);
sol!(
    #[sol(rpc)]
    Forwarder,
    "tests/contracts/build/Forwarder.json"
);
sol!(
    #[sol(rpc)]
    Multicall3Reads,
    "tests/contracts/build/Multicall3Reads.json"
);

/// Sends a contract call and waits for its receipt.
pub trait Mined {
    fn mined(self) -> impl std::future::Future<Output = TransactionReceipt>;
}

impl<P: Provider, D: CallDecoder> Mined for CallBuilder<P, D> {
    async fn mined(self) -> TransactionReceipt {
        self.send().await.unwrap().get_receipt().await.unwrap()
    }
}

pub struct Anvil {
    child: Child,
    pub port: u16,
    pub provider: DynProvider,
    /// anvil's funded, unlocked dev accounts.
    pub accounts: Vec<Address>,
}

/// The anvil binary: `ANVIL_BIN`, the cache `scripts/install-anvil.sh` fills,
/// or `anvil` on the PATH. Missing, the tests fail: they never skip.
pub fn anvil_bin() -> PathBuf {
    super::binary("ANVIL_BIN", "anvil-1.7.1/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil", "anvil")
        .expect("anvil not found: run scripts/install-anvil.sh (or set ANVIL_BIN)")
}

impl Anvil {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// The anvil process's id, for benchmarks that read its CPU time.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// anvil with `args`, on a free port. One that exits before it answers
    /// (the port taken between choosing and binding it) is started again on
    /// another, twice at most: a test never talks to another test's node.
    pub async fn start_with(args: &[&str]) -> Self {
        let mut attempts = 0;
        let (child, port, provider) = loop {
            attempts += 1;
            let port = super::dead_port();
            let mut child = Command::new(anvil_bin())
                .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--accounts", "10"])
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("anvil starts");
            let url = format!("http://127.0.0.1:{port}");
            let provider = ProviderBuilder::new().connect_http(url.parse().unwrap()).erased();
            let started = Instant::now();
            let exited = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break Some(status);
                }
                if provider.get_chain_id().await.is_ok() {
                    break None;
                }
                assert!(started.elapsed() < Duration::from_secs(30), "anvil did not answer on port {port}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            match exited {
                None => break (child, port, provider),
                Some(status) => assert!(attempts < 3, "anvil exited before it answered, 3 times: {status}"),
            }
        };
        let accounts = provider.get_accounts().await.unwrap();
        Self { child, port, provider, accounts }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    pub async fn head(&self) -> u64 {
        self.provider.get_block_number().await.unwrap()
    }

    pub async fn mine(&self, blocks: u64) {
        self.provider.raw_request::<_, ()>("anvil_mine".into(), (U256::from(blocks),)).await.unwrap();
    }

    /// Sends native value from an unlocked dev account; returns the mined tx hash.
    pub async fn send_eth(&self, from: Address, to: Address, wei: U256) -> B256 {
        let tx = TransactionRequest::default().with_from(from).with_to(to).with_value(wei);
        let receipt = self.provider.send_transaction(tx).await.unwrap().get_receipt().await.unwrap();
        assert!(receipt.status());
        receipt.transaction_hash
    }

    pub async fn deploy_token(&self, symbol: &str) -> Address {
        TestToken::deploy_builder(&self.provider, format!("Test {symbol}"), symbol.to_string(), 6)
            .from(self.accounts[0])
            .deploy()
            .await
            .unwrap()
    }

    /// A token with EIP-3009 `transferWithAuthorization`, like USDC.
    pub async fn deploy_auth_token(&self, symbol: &str) -> Address {
        TestAuthToken::deploy_builder(&self.provider, format!("Test {symbol}"), symbol.to_string(), 6)
            .from(self.accounts[0])
            .deploy()
            .await
            .unwrap()
    }

    /// Turns the token at `token` into a [`HeavyToken`] (its balances kept)
    /// whose transfers burn `gas` more.
    pub async fn make_heavy(&self, token: Address, gas: u64) {
        let heavy = HeavyToken::deploy_builder(&self.provider, "Heavy".to_string(), "HVY".to_string(), 6)
            .from(self.accounts[0])
            .deploy()
            .await
            .unwrap();
        let code = self.provider.get_code_at(heavy).await.unwrap();
        self.provider.raw_request::<_, ()>("anvil_setCode".into(), (token, code)).await.unwrap();
        let heavy = HeavyToken::new(token, self.provider.clone());
        let set = heavy.setBurn(U256::from(gas)).from(self.accounts[0]);
        assert!(set.send().await.unwrap().get_receipt().await.unwrap().status());
    }

    pub fn token(&self, address: Address) -> TestToken::TestTokenInstance<DynProvider> {
        TestToken::new(address, self.provider.clone())
    }

    pub async fn deploy_forwarder(&self) -> Address {
        Forwarder::deploy_builder(&self.provider).from(self.accounts[0]).deploy().await.unwrap()
    }

    /// Places Multicall3's reads at its address on every chain, which
    /// anvil leaves empty.
    pub async fn place_multicall3(&self) {
        let deployed =
            Multicall3Reads::deploy_builder(&self.provider).from(self.accounts[0]).deploy().await.unwrap();
        let code = self.provider.get_code_at(deployed).await.unwrap();
        let at = custody_indexer::evm::rpc::MULTICALL3;
        self.provider.raw_request::<_, ()>("anvil_setCode".into(), (at, code)).await.unwrap();
    }

    pub fn forwarder(&self, address: Address) -> Forwarder::ForwarderInstance<DynProvider> {
        Forwarder::new(address, self.provider.clone())
    }

    pub async fn raw_transaction(&self, hash: B256) -> Bytes {
        self.provider.raw_request("eth_getRawTransactionByHash".into(), (hash,)).await.unwrap()
    }

    /// Replaces the last `depth` blocks; `reinclude` puts raw transactions back
    /// into the new blocks at the given offsets.
    pub async fn reorg(&self, depth: u64, reinclude: Vec<(Bytes, u64)>) {
        self.provider.raw_request::<_, ()>("anvil_reorg".into(), (depth, reinclude)).await.unwrap();
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
