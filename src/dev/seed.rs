//! What `dev` places before the service starts: the test USDC on each local
//! chain, the chain files naming it, the platform's wallets funded, and the
//! store seeded with the organization, its API key, an `ACTIVE` identity,
//! an account whose keys the service holds and, when asked, a webhook.
//! A later wing (a sandbox bank minting to accounts) seeds here too.

use std::{collections::BTreeMap, path::Path};

use alloy::primitives::{Address, U256};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use solana_signer::Signer as _;

use super::{evm::LocalEvm, solana::LocalSolana, state::Seed, state::StateDir};
use crate::{
    account::AccountType,
    api_key,
    chain::Chain,
    config::{ChainConfig, Chains},
    environment::Environment,
    events::url::Policy,
    identity::{State, Type},
    keys::{KeyRef, Signer, account_addresses},
    pii::{Key, KeySource},
    store::{NewAccount, NewIdentity, Store},
};

/// The local EVM chain, labelled as the API's Sepolia.
pub const EVM_CHAIN: Chain = Chain::EthereumTestnet;
/// The local Solana network, labelled as the API's devnet.
pub const SOLANA_CHAIN: Chain = Chain::SolanaDevnet;
pub const USDC_DECIMALS: u8 = 6;

/// A token placed on a local chain, as the JSON line shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asset {
    pub symbol: String,
    pub contract_address: String,
    pub decimals: u8,
}

/// A local chain ready to index: its chain file's text and its token.
pub struct Placed {
    pub chain: Chain,
    pub rpc_url: String,
    pub usdc: Asset,
    pub toml: String,
}

/// Deploys the test USDC on anvil; the chain file confirms at depth 2
/// (anvil mines a block a second).
pub async fn place_evm(url: &str) -> anyhow::Result<Placed> {
    let evm = LocalEvm::connect(url).await?;
    let usdc = evm.deploy_usdc().await.context("deploying the test USDC on anvil")?.to_string();
    let toml = format!(
        "# The local anvil of `custody-indexer dev`, labelled as {EVM_CHAIN}.\n\
         chain = \"{EVM_CHAIN}\"\nchain_id = 31337\nrpc_urls = [\"{url}\"]\nconfirmation = {{ depth = 2 }}\n\
         poll_interval_ms = 250\nmax_block_range = 100\nstart_block = 0\n\
         native = {{ symbol = \"ETH\", decimals = 18 }}\n\n[transfers]\nnative_usd = \"3000\"\n\n\
         [[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{usdc}\"\ndecimals = {USDC_DECIMALS}\neip3009 = true\n"
    );
    let usdc = Asset { symbol: "USDC".into(), contract_address: usdc, decimals: USDC_DECIMALS };
    Ok(Placed { chain: EVM_CHAIN, rpc_url: url.into(), usdc, toml })
}

/// Creates the test USDC mint (its keypair and its authority, the deposit
/// funder, kept in the state directory) on the local Solana network.
pub async fn place_solana(url: &str, state: &StateDir) -> anyhow::Result<Placed> {
    let solana = LocalSolana::connect(url);
    let funder = super::solana::keypair(&*state.key_seed("solana-funder.json")?);
    let mint = super::solana::keypair(&*state.key_seed("solana-mint.json")?);
    solana.airdrop(&funder.pubkey(), 100 * super::solana::SOL).await?;
    solana.create_mint(&funder, &mint, USDC_DECIMALS).await?;
    let (genesis, first_slot) = (solana.genesis_hash().await?, solana.first_slot().await?);
    let usdc = mint.pubkey().to_string();
    let program = crate::solana::decode::TOKEN_PROGRAM;
    let toml = format!(
        "# The local Solana network of `custody-indexer dev`, labelled as {SOLANA_CHAIN}.\n\
         chain = \"{SOLANA_CHAIN}\"\ngenesis_hash = \"{genesis}\"\nrpc_urls = [\"{url}\"]\n\
         confirmation = \"finalized\"\npoll_interval_ms = 200\nstart_block = {first_slot}\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n\n[transfers]\nnative_usd = \"150\"\n\n\
         [[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{usdc}\"\ndecimals = {USDC_DECIMALS}\n\
         token_program = \"{program}\"\n"
    );
    let usdc = Asset { symbol: "USDC".into(), contract_address: usdc, decimals: USDC_DECIMALS };
    Ok(Placed { chain: SOLANA_CHAIN, rpc_url: url.into(), usdc, toml })
}

/// Writes the chain files into `dir` (replacing the previous run's) and
/// loads them, without the `<CHAIN>_RPC_URLS` overrides of the environment:
/// these chains are the local nodes, whatever the shell says.
pub fn chain_files(dir: &Path, placed: &[Placed]) -> anyhow::Result<Chains> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut chains = Chains::default();
    for p in placed {
        let path = dir.join(format!("{}.toml", p.chain.as_str().to_lowercase().replace('_', "-")));
        std::fs::write(&path, &p.toml).with_context(|| format!("cannot write {}", path.display()))?;
        chains.insert(ChainConfig::from_toml(&p.toml, &path, &|_| None)?);
    }
    Ok(chains)
}

/// Funds the gas sponsor and the omnibus wallet of every local chain, and
/// the EVM depositor with USDC.
pub async fn fund(signer: &dyn Signer, placed: &[Placed]) -> anyhow::Result<()> {
    for p in placed {
        match p.chain {
            EVM_CHAIN => {
                let evm = LocalEvm::connect(&p.rpc_url).await?;
                let eth = U256::from(10u128).pow(U256::from(18));
                let wallets = [
                    (signer.evm_address(KeyRef::Sponsor)?, eth * U256::from(1000)),
                    (signer.evm_address(KeyRef::Omnibus)?, eth * U256::from(100)),
                ];
                let usdc: Address = p.usdc.contract_address.parse()?;
                evm.fund(&wallets, usdc, U256::from(1_000_000_000_000u64))
                    .await
                    .context("funding on anvil")?;
            }
            _ => {
                let solana = LocalSolana::connect(&p.rpc_url);
                for (key, sol) in [(KeyRef::Sponsor, 100), (KeyRef::Omnibus, 10)] {
                    let address = signer.solana_address(key)?.parse()?;
                    solana.airdrop(&address, sol * super::solana::SOL).await?;
                }
            }
        }
    }
    Ok(())
}

/// What the store was seeded with.
pub struct Seeded {
    pub addresses: BTreeMap<Chain, String>,
    pub webhook: Option<(String, String)>,
}

/// Seeds a new store in `sandbox`, its personal data sealed with `pii`:
/// the same organization, API key, identity and account (the first
/// segregated key, so the same addresses) on every run.
pub async fn seed_store(
    url: &str,
    chains: &Chains,
    signer: &dyn Signer,
    pii: Key,
    seed: &Seed,
    webhook_url: Option<&str>,
) -> anyhow::Result<Seeded> {
    let store = Store::open(url).await?;
    store.stamp_environment(Environment::Sandbox).await?;
    let store = store.unlock_pii(KeySource::Given(pii)).await?;
    let org = seed.organization.as_str();
    store.create_organization(org, Some("Dev organization")).await?;
    store.create_api_key(org, "dev", &seed.api_key_id, &api_key::hash(&seed.api_key)).await?;
    let identity = NewIdentity {
        organization: org.into(),
        id: seed.identity_id.clone(),
        request_id: None,
        kind: Type::Individual,
        label: "Dev identity".into(),
        state: State::Active { rfi: false },
        actor: "operator:dev".into(),
    };
    store.create_identity(&identity).await?;
    let account = NewAccount {
        id: seed.account_id.clone(),
        organization: org.into(),
        identity_id: seed.identity_id.clone(),
        request_id: None,
        kind: AccountType::Segregated,
        addresses: Vec::new(),
        watch_from: Default::default(),
    };
    let (account, _) = store
        .add_keyed_account(account, |index| account_addresses(signer, chains, KeyRef::Account(index)))
        .await?;
    let addresses = account
        .addresses
        .iter()
        .flat_map(|a| a.chains.iter().map(|chain| (*chain, a.address.clone())))
        .collect();
    let webhook = match webhook_url {
        Some(url) => {
            let url = Policy { allow_private: true }.check(url).await.context("--webhook-url")?;
            let created = store.create_webhook(org, url.as_str(), "dev", &seed.webhook_secret).await?;
            Some((created.id, url.to_string()))
        }
        None => None,
    };
    store.close().await;
    Ok(Seeded { addresses, webhook })
}
