//! Issuance's test fixtures: a chain whose USDC the platform issues, the
//! API over it in either environment, identities with or without the fiat
//! entitlement, accounts, and a valid US bank account.

use custody_indexer::keys::accounts;
use custody_indexer::{
    account::{AccountAddress, AccountType},
    chain::Chain,
    config::Chains,
    environment::Environment,
    identity::{State, Type},
    store::{NewAccount, NewIdentity},
};
use serde_json::{Value, json};

use super::{
    api::{Answer, App, spawn_configured},
    chain_config,
    db::Backend,
};

pub const CHAIN: Chain = Chain::EthereumTestnet;
pub const USDC: &str = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
pub const ADDRESS: &str = "0x00000000000000000000000000000000000000A1";

/// Sepolia as a chain file names it, with USDC issued by the platform and
/// another token that is not.
pub fn chains() -> Chains {
    chains_with("")
}

/// As [`chains`], with `extra` lines on the USDC entry (a `daily_mint_cap`).
pub fn chains_with(extra: &str) -> Chains {
    let usdc = format!(
        "[[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{USDC}\"\ndecimals = 6\nissued = true\n{extra}"
    );
    let tusd = Some("0x00000000000000000000000000000000000000b0");
    let mut chains = Chains::default();
    chains.insert(chain_config(&["http://127.0.0.1:1".to_string()], tusd, &usdc));
    chains
}

pub async fn app(backend: Backend, environment: Environment, bank: Option<Value>) -> App {
    app_on(backend, chains(), environment, bank).await
}

/// The API over `chains`.
pub async fn app_on(backend: Backend, chains: Chains, environment: Environment, bank: Option<Value>) -> App {
    spawn_configured(backend, chains, |state| {
        state.with_compliance(environment, Default::default()).with_receiving_bank(bank)
    })
    .await
}

/// An identity of `organization`; `ACTIVE` or in onboarding, fiat-enabled or not.
pub async fn identity(app: &App, organization: &str, id: &str, active: bool, fiat: bool) {
    let state = if active { State::Active { rfi: false } } else { State::CREATED };
    let new = NewIdentity {
        organization: organization.into(),
        id: id.into(),
        request_id: None,
        kind: Type::Individual,
        label: id.into(),
        state,
        actor: "operator:test".into(),
    };
    custody_indexer::identity::register::create_identity(app.store(), &new).await.unwrap();
    if fiat {
        assert!(super::set_fiat(app.store(), organization, id, true, "kyc done").await.unwrap());
    }
}

pub async fn account(app: &App, organization: &str, identity: &str, id: &str, addresses: &[&str]) {
    let addresses =
        addresses.iter().map(|a| AccountAddress { chains: vec![CHAIN], address: (*a).into() }).collect();
    let new = NewAccount {
        id: id.into(),
        organization: organization.into(),
        identity_id: identity.into(),
        request_id: None,
        kind: AccountType::Segregated,
        addresses,
        watch_from: Default::default(),
    };
    accounts::add_account(app.store(), new).await.unwrap();
}

pub fn us_bank(account_number: &str) -> Value {
    json!({
        "bank_name": "Chase", "account_holder_name": "Ada Lovelace", "type": "CHECKING",
        "routing_number": "021000021", "account_number": account_number, "account_owner_type": "INDIVIDUAL",
        "address": { "street_line_1": "1 Main St", "city": "New York", "postal_code": "10001",
                     "country": "US", "region_code": "NY" }
    })
}

pub fn refused(answer: &Answer, status: u16, code: &str, mentions: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.body["code"], code, "{answer:?}");
    let message = answer.body["message"].as_str().unwrap_or_default();
    assert!(message.contains(mentions), "{mentions:?} not in {message:?}");
}

pub fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    keys
}

/// The command line over a store whose `identity-1` is fiat-enabled and
/// has the mint instruction `mi-1` for its account `acc-1`, on a chain
/// file whose USDC the platform issues: the CLI and the instruction's memo.
pub async fn instructed() -> (super::cli::Env, String) {
    let asset = format!(
        "\n[[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{USDC}\"\ndecimals = 6\nissued = true\n"
    );
    let env = super::cli::Env::with_chain_file(
        &(super::chain_toml(&["http://127.0.0.1:1".to_string()], None, "") + &asset),
    );
    env.add_account_of("default", "acc-1", "SEGREGATED", ADDRESS, CHAIN);
    env.ok(&["identities", "fiat", "enable", "identity-1", "--by", "ann", "--reason", "checked"]);
    let memo = custody_indexer::issuance::new_memo_id();
    let instruction = custody_indexer::issuance::MintInstruction {
        id: "mi-1".into(),
        identity_id: "identity-1".into(),
        request_id: "r-1".into(),
        stablecoin_symbol: "USDC".into(),
        chain: CHAIN,
        mint_destination_address_id: "acc-1".into(),
        payment_rail: custody_indexer::issuance::PAYMENT_RAIL,
        fiat_currency_symbol: custody_indexer::issuance::FIAT_CURRENCY,
        memo_id: memo.clone(),
        bank_account_details: json!({}),
        label: None,
    };
    let new = custody_indexer::store::NewMintInstruction {
        organization: "default".into(),
        instruction,
        destination_address: ADDRESS.into(),
    };
    custody_indexer::issuance::requested::create_mint_instruction(&env.store().await, &new)
        .await
        .unwrap()
        .unwrap();
    (env, memo)
}
