//! The local nodes of the ten shipped chains: an anvil per EVM chain with the
//! chain's id, its block rate and the bench token's code at each of the
//! chain file's asset addresses, and a local Solana network per Solana chain.

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, U256},
    providers::Provider,
    rpc::types::{TransactionReceipt, TransactionRequest},
};
use custody_indexer::{
    chain::{Chain, Family},
    config::{ChainConfig, Chains},
};
use futures::future::join_all;

use crate::common::{
    Anvil,
    anvil::TestToken,
    solana::{SOL, SolanaNode},
};

/// Block times: each chain's mainnet rate today (Base at 200 ms since its
/// Denim upgrade), Optimism at 250 ms too (the fast profile), or Base at
/// its rate before Denim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Mainnet,
    Fast,
    BeforeDenim,
}

impl Profile {
    pub const ALL: [Profile; 3] = [Profile::Mainnet, Profile::Fast, Profile::BeforeDenim];

    pub fn name(self) -> &'static str {
        match self {
            Profile::Mainnet => "mainnet",
            Profile::Fast => "fast",
            Profile::BeforeDenim => "before-denim",
        }
    }

    /// Seconds between blocks (slots on Solana).
    pub fn block_time(self, chain: Chain) -> f64 {
        use Chain::*;
        match (chain, self) {
            (EthereumMainnet | EthereumTestnet, _) => 12.0,
            (PolygonMainnet | PolygonAmoy, _) => 2.0,
            (BaseMainnet | BaseSepolia, Profile::BeforeDenim) => 2.0,
            (BaseMainnet | BaseSepolia, _) => 0.2,
            (OptimismMainnet | OptimismSepolia, Profile::Fast) => 0.25,
            (OptimismMainnet | OptimismSepolia, _) => 2.0,
            (SolanaMainnet | SolanaDevnet, _) => 0.4,
        }
    }
}

pub struct EvmNode {
    pub chain: Chain,
    pub anvil: Anvil,
    pub block_time: f64,
    /// The chain file's token addresses, each holding the bench token.
    pub tokens: Vec<Address>,
}

pub struct SolanaChain {
    pub chain: Chain,
    pub node: SolanaNode,
    pub payer: solana_keypair::Keypair,
}

pub struct Nodes {
    pub evm: Vec<EvmNode>,
    pub solana: Vec<SolanaChain>,
}

impl Nodes {
    /// One node per shipped chain, ready to carry transfers.
    pub async fn start(chains: &Chains, profile: Profile) -> Self {
        let evm = chains.iter().filter(|c| c.family() == Family::Evm);
        let evm = join_all(evm.map(|config| evm_node(config, profile.block_time(config.chain)))).await;
        let mut solana = Vec::new();
        for config in chains.iter().filter(|c| c.family() == Family::Solana) {
            let slot_ms = (profile.block_time(config.chain) * 1000.0) as u64;
            let node = SolanaNode::start_with_slot_time(slot_ms).await;
            let payer = node.funded(1_000 * SOL).await;
            solana.push(SolanaChain { chain: config.chain, node, payer });
        }
        Self { evm, solana }
    }

    /// The environment that points `run`'s shipped chain files at these
    /// nodes: `<CHAIN>_RPC_URLS`, and `<CHAIN>_GENESIS_HASH` on Solana.
    pub fn overrides(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        for node in &self.evm {
            env.push((format!("{}_RPC_URLS", node.chain.as_str()), node.anvil.url()));
        }
        for solana in &self.solana {
            env.push((format!("{}_RPC_URLS", solana.chain.as_str()), solana.node.url.clone()));
            env.push((format!("{}_GENESIS_HASH", solana.chain.as_str()), solana.node.genesis_hash.clone()));
        }
        env
    }

    pub fn pids(&self) -> Vec<u32> {
        self.evm.iter().map(|n| n.anvil.pid()).chain(self.solana.iter().map(|s| s.node.pid())).collect()
    }
}

/// Mines the transaction `tx` at once, whatever the block rate.
async fn mined(anvil: &Anvil, tx: TransactionRequest) -> TransactionReceipt {
    let pending = anvil.provider.send_transaction(tx).await.unwrap();
    anvil.mine(1).await;
    let receipt = pending.get_receipt().await.unwrap();
    assert!(receipt.status(), "a setup transaction of the bench failed");
    receipt
}

async fn evm_node(config: &ChainConfig, block_time: f64) -> EvmNode {
    let chain_id = config.chain_id.expect("an EVM chain file names its chain id").to_string();
    let anvil = Anvil::start_with(&["--chain-id", &chain_id, "--block-time", &block_time.to_string()]).await;
    let from = anvil.accounts[0];
    let deploy = TestToken::deploy_builder(&anvil.provider, "Bench".to_string(), "BENCH".to_string(), 6)
        .into_transaction_request()
        .with_from(from);
    let deployed = mined(&anvil, deploy).await.contract_address.unwrap();
    let code = anvil.provider.get_code_at(deployed).await.unwrap();
    let mut tokens = Vec::new();
    for asset in &config.assets {
        let token: Address = asset.contract_address.parse().unwrap();
        anvil.provider.raw_request::<_, ()>("anvil_setCode".into(), (token, code.clone())).await.unwrap();
        let mint =
            anvil.token(token).mint(anvil.accounts[1], U256::from(u128::MAX)).into_transaction_request();
        mined(&anvil, mint.with_from(from)).await;
        tokens.push(token);
    }
    EvmNode { chain: config.chain, anvil, block_time, tokens }
}
