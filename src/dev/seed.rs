//! What `dev` places before the service starts: its USDC on each local
//! chain (the platform's issued stablecoin, the issuer its only minter),
//! the chain files naming it, the platform's wallets funded, and the store
//! seeded with the organization, its API key, an `ACTIVE` and fiat-enabled
//! identity, an account whose keys the service holds and, when asked, a
//! webhook. USDC reaches accounts only as simulated wires minted
//! (`dev deposit --asset USDC`), so `issuance reconcile` balances.

use std::{collections::BTreeMap, path::Path};

use alloy::primitives::{Address, U256};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use solana_signer::Signer as _;

use super::{
    evm::LocalEvm,
    solana::LocalSolana,
    state::{Ledger, Ledgers, Seed, StateDir},
};
use crate::{
    account::AccountType,
    api_key,
    chain::Chain,
    config::{ChainConfig, Chains},
    environment::Environment,
    events::url::Policy,
    identity::{State, Type},
    keys::{KeyRef, Signer},
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

/// A local chain ready to index: its chain file's text, its token and the
/// chain's identity the store records.
pub struct Placed {
    pub chain: Chain,
    pub rpc_url: String,
    pub usdc: Asset,
    pub toml: String,
    pub ledger: Ledger,
}

/// Deploys the USDC `issuer` mints on anvil unless a kept chain holds it;
/// the chain file confirms at depth 2 (anvil mines a block a second).
pub async fn place_evm(url: &str, issuer: Address) -> anyhow::Result<Placed> {
    let evm = LocalEvm::connect(url).await?;
    let usdc = evm.place_usdc(issuer).await.context("deploying USDC on anvil")?.to_string();
    let ledger = Ledger { genesis_hash: evm.genesis_hash().await?, start_block: 0 };
    let toml = format!(
        "# The local anvil of `custody-indexer dev`, labelled as {EVM_CHAIN}.\n\
         chain = \"{EVM_CHAIN}\"\nchain_id = 31337\nrpc_urls = [\"{url}\"]\nconfirmation = {{ depth = 2 }}\n\
         poll_interval_ms = 250\nmax_block_range = 100\nstart_block = 0\n\
         native = {{ symbol = \"ETH\", decimals = 18 }}\n\n[transfers]\nnative_usd = \"3000\"\n\n\
         [[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{usdc}\"\ndecimals = {USDC_DECIMALS}\neip3009 = true\n\
         issued = true\n"
    );
    let usdc = Asset { symbol: "USDC".into(), contract_address: usdc, decimals: USDC_DECIMALS };
    Ok(Placed { chain: EVM_CHAIN, rpc_url: url.into(), usdc, toml, ledger })
}

/// Creates the USDC mint (its keypair kept in the state directory; the
/// issuer its mint authority; the deposit funder pays) on the local Solana
/// network unless it exists. Indexing starts at the network's first block,
/// or where the kept store's did (`kept`).
pub async fn place_solana(
    url: &str,
    state: &StateDir,
    kept: Option<&Ledger>,
    issuer: &solana_pubkey::Pubkey,
) -> anyhow::Result<Placed> {
    let solana = LocalSolana::connect(url);
    let funder = super::solana::keypair(&*state.key_seed("solana-funder.json")?);
    let mint = super::solana::keypair(&*state.key_seed("solana-mint.json")?);
    solana.top_up(&funder.pubkey(), 100 * super::solana::SOL).await?;
    solana.create_mint(&funder, &mint, issuer, USDC_DECIMALS).await?;
    let genesis_hash = solana.genesis_hash().await?;
    let start_block = match kept.filter(|k| k.genesis_hash == genesis_hash) {
        Some(kept) => kept.start_block,
        None => solana.first_slot().await?,
    };
    let usdc = mint.pubkey().to_string();
    let program = crate::solana::decode::TOKEN_PROGRAM;
    let toml = format!(
        "# The local Solana network of `custody-indexer dev`, labelled as {SOLANA_CHAIN}.\n\
         chain = \"{SOLANA_CHAIN}\"\ngenesis_hash = \"{genesis_hash}\"\nrpc_urls = [\"{url}\"]\n\
         confirmation = \"finalized\"\npoll_interval_ms = 200\nstart_block = {start_block}\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n\n[transfers]\nnative_usd = \"150\"\n\n\
         [[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{usdc}\"\ndecimals = {USDC_DECIMALS}\n\
         token_program = \"{program}\"\nissued = true\n"
    );
    let usdc = Asset { symbol: "USDC".into(), contract_address: usdc, decimals: USDC_DECIMALS };
    let ledger = Ledger { genesis_hash, start_block };
    Ok(Placed { chain: SOLANA_CHAIN, rpc_url: url.into(), usdc, toml, ledger })
}

/// A kept store goes on only with the chains it indexed: a local node that
/// answers another genesis hash lost its state (or the file holding it was
/// replaced), and the store's cursors, deposits and nonces would describe
/// blocks and balances that are not there.
pub fn check_kept(kept: &Ledgers, placed: &[Placed], dir: &Path) -> anyhow::Result<()> {
    for p in placed {
        let Some(known) = kept.get(&p.chain) else { continue };
        if known.genesis_hash != p.ledger.genesis_hash {
            let file = if p.chain == EVM_CHAIN { "anvil-state.json" } else { "solana-ledger.sqlite" };
            anyhow::bail!(
                "the local {chain} is not the chain the store in {dir} indexed (genesis hash {now}, the store's \
                 {known}): its node's state ({file}) was lost or replaced. `custody-indexer dev --reset` starts \
                 over with a new store, API key and account",
                chain = p.chain,
                dir = dir.display(),
                now = p.ledger.genesis_hash,
                known = known.genesis_hash,
            );
        }
    }
    Ok(())
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

/// Tops up the gas sponsor and the omnibus wallet of every local chain,
/// and the EVM issuer and settlement wallet (they pay for their mints and
/// refunds): a kept chain is funded once.
pub async fn fund(signer: &dyn Signer, placed: &[Placed]) -> anyhow::Result<()> {
    for p in placed {
        match p.chain {
            EVM_CHAIN => {
                let evm = LocalEvm::connect(&p.rpc_url).await?;
                let eth = U256::from(10u128).pow(U256::from(18));
                let wallets = [
                    (signer.evm_address(KeyRef::Sponsor)?, eth * U256::from(1000)),
                    (signer.evm_address(KeyRef::Omnibus)?, eth * U256::from(100)),
                    (signer.evm_address(KeyRef::Issuer)?, eth * U256::from(100)),
                    (signer.evm_address(KeyRef::Settlement)?, eth * U256::from(100)),
                ];
                evm.fund(&wallets).await.context("funding on anvil")?;
            }
            _ => {
                let solana = LocalSolana::connect(&p.rpc_url);
                for (key, sol) in [(KeyRef::Sponsor, 100), (KeyRef::Omnibus, 10)] {
                    let address = signer.solana_address(key)?.parse()?;
                    solana.top_up(&address, sol * super::solana::SOL).await?;
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
/// segregated key, so the same addresses) on every run. A `kept` store is
/// opened as it is. The account has an address on each of `chains` and of
/// the chains still `joining`. With `webhook_url`, a webhook at that URL is registered
/// unless the organization has one.
pub async fn seed_store(
    url: &str,
    (chains, joining): (&Chains, &[Chain]),
    signer: &dyn Signer,
    pii: Key,
    seed: &Seed,
    webhook_url: Option<&str>,
    kept: bool,
) -> anyhow::Result<Seeded> {
    let store = Store::open(url).await?;
    if !kept {
        crate::start::stamp_environment(&store, Environment::Sandbox).await?;
    }
    let store = crate::start::unlock_pii(&store, KeySource::Given(pii)).await?;
    let account = if kept {
        store.account(&seed.account_id).await.context("the kept store has no dev account: `dev --reset`")?
    } else {
        create_seeded(&store, (chains, joining), signer, seed).await?
    };
    let addresses: BTreeMap<Chain, String> = account
        .addresses
        .iter()
        .flat_map(|a| a.chains.iter().map(|chain| (*chain, a.address.clone())))
        .collect();
    for chain in chains.iter().map(|c| c.chain).filter(|c| !addresses.contains_key(c)) {
        tracing::warn!(
            %chain,
            "the dev account has no address on {chain}: its store was made while that chain's node could not \
             run; `custody-indexer dev --reset` makes a new account with both"
        );
    }
    let webhook = match webhook_url {
        Some(url) => Some(webhook(&store, &seed.organization, url, &seed.webhook_secret).await?),
        None => None,
    };
    store.close().await;
    Ok(Seeded { addresses, webhook })
}

/// The organization, its API key, the `ACTIVE` identity and the account.
async fn create_seeded(
    store: &Store,
    (chains, joining): (&Chains, &[Chain]),
    signer: &dyn Signer,
    seed: &Seed,
) -> anyhow::Result<crate::account::Account> {
    let org = seed.organization.as_str();
    crate::operators::tenants::create_bare_organization(store, org, Some("Dev organization")).await?;
    let hash = api_key::hash(&seed.api_key);
    let dev = crate::audit::Actor::local(Some("dev".into()));
    api_key::manage::create_with(store, org, "dev", (&seed.api_key_id, &hash), &dev).await?;
    let identity = NewIdentity {
        organization: org.into(),
        id: seed.identity_id.clone(),
        request_id: None,
        kind: Type::Individual,
        label: "Dev identity".into(),
        state: State::Active { rfi: false },
        actor: crate::identity::decide::trail_actor(&dev),
    };
    crate::identity::decide::import(store, &identity, &dev, "dev's identity").await?;
    let identity_of = (org, seed.identity_id.as_str());
    let fiat = crate::identity::decide::Decision::FiatEnable;
    crate::identity::decide::decide(store, chains, identity_of, fiat, &dev, "dev's identity takes wires")
        .await?;
    let account = NewAccount {
        id: seed.account_id.clone(),
        organization: org.into(),
        identity_id: seed.identity_id.clone(),
        request_id: None,
        kind: AccountType::Segregated,
        addresses: Vec::new(),
        watch_from: Default::default(),
    };
    // An address on each chain, the ones still joining too: their watch
    // starts when they join.
    let on = chains.iter().map(|c| c.chain).chain(joining.iter().copied());
    Ok(crate::keys::accounts::create(store, signer, on, account).await?)
}

/// The organization's webhook at `url`, registered (signed with `secret`)
/// unless it is already: (id, url).
async fn webhook(store: &Store, org: &str, url: &str, secret: &str) -> anyhow::Result<(String, String)> {
    let url = Policy::PRIVATE.check(url).await.context("--webhook-url")?;
    let existing = store.webhooks(Some(org)).await?.into_iter().find(|w| w.url == url.as_str());
    let id = match existing {
        Some(existing) => existing.id,
        None => {
            let by = crate::audit::Actor::local(Some("dev".into()));
            crate::webhooks::register(store, org, (url.as_str(), "dev"), secret, &by).await?.id
        }
    };
    Ok((id, url.to_string()))
}
