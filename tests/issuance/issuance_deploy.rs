//! `issuance deploy` on real local chains: the stablecoin placed on anvil
//! and on the local Solana network with the issuer key its only minter,
//! the printed lines a chain file takes as an issued asset; mainnets
//! refused; `wallets list` naming the issuer.

use crate::common;

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, U256},
    providers::Provider,
    rpc::types::TransactionRequest,
    sol,
    sol_types::SolCall,
};
use common::{anvil::Anvil, chain_toml, cli::Env, solana::SolanaNode};
use custody_indexer::{
    chain::Chain,
    config::ChainConfig,
    keys::{KeyRef, MnemonicSigner, Signer},
};
use serde_json::Value;
use solana_pubkey::Pubkey;

/// anvil's phrase: the sponsor is anvil's funded dev account 0.
const PHRASE: &str = "test test test test test test test test test test test junk";

sol! {
    function minter() returns (address);
    function totalSupply() returns (uint256);
    function balanceOf(address owner) returns (uint256);
    function decimals() returns (uint8);
    function symbol() returns (string);
    function mint(address to, uint256 value);
}

fn deploy(env: &Env, chain: Chain) -> std::process::Output {
    env.command(&[
        "issuance",
        "deploy",
        "--chain",
        chain.as_str(),
        "--symbol",
        "USDC",
        "--decimals",
        "6",
        "--name",
        "USD Coin",
    ])
    .env("CUSTODY_INDEXER_MNEMONIC", PHRASE)
    .output()
    .unwrap()
}

/// The chain file `toml` with the printed lines appended, loaded.
fn with_printed(toml: &str, printed: &str) -> ChainConfig {
    let text = format!("{toml}\n{printed}");
    ChainConfig::from_toml(&text, std::path::Path::new("chain.toml"), &|_| None).unwrap()
}

async fn call<C: SolCall>(anvil: &Anvil, token: Address, call: C) -> C::Return {
    let input = call.abi_encode();
    let answer =
        anvil.provider.call(TransactionRequest::default().with_to(token).with_input(input)).await.unwrap();
    C::abi_decode_returns(&answer).unwrap()
}

#[tokio::test]
async fn on_evm_the_issuer_alone_mints_the_deployed_stablecoin() {
    let anvil = Anvil::start().await;
    let toml = chain_toml(&[anvil.url()], None, "");
    let env = Env::with_chain_file(&toml);
    let out = deploy(&env, Chain::EthereumTestnet);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8(out.stdout).unwrap();
    let config = with_printed(&toml, &printed);
    let asset = config.assets.iter().find(|a| a.symbol == "USDC").expect("the printed asset");
    assert!(asset.issued && asset.eip3009 && asset.decimals == 6, "{printed}");
    let token: Address = asset.contract_address.parse().unwrap();

    let signer = MnemonicSigner::from_phrase(PHRASE).unwrap();
    let issuer = signer.evm_address(KeyRef::Issuer).unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains(&issuer.to_checksum(None)));
    assert_eq!(call(&anvil, token, minterCall {}).await, issuer);
    assert_eq!(call(&anvil, token, decimalsCall {}).await, 6);
    assert_eq!(call(&anvil, token, symbolCall {}).await, "USDC");

    // The sponsor that deployed it cannot mint; the issuer can.
    let holder = Address::repeat_byte(0x42);
    let mint = mintCall { to: holder, value: U256::from(250_000_000u64) }.abi_encode();
    let from_sponsor =
        TransactionRequest::default().with_from(anvil.accounts[0]).with_to(token).with_input(mint.clone());
    let refused = anvil.provider.estimate_gas(from_sponsor).await.unwrap_err().to_string();
    assert!(refused.contains("only the minter mints"), "{refused}");
    let _: Value = anvil
        .provider
        .raw_request("anvil_setBalance".into(), (issuer, U256::from(10u128.pow(18))))
        .await
        .unwrap();
    let _: Value = anvil.provider.raw_request("anvil_impersonateAccount".into(), (issuer,)).await.unwrap();
    let from_issuer = TransactionRequest::default().with_from(issuer).with_to(token).with_input(mint);
    let receipt = anvil.provider.send_transaction(from_issuer).await.unwrap().get_receipt().await.unwrap();
    assert!(receipt.status());
    assert_eq!(call(&anvil, token, balanceOfCall { owner: holder }).await, U256::from(250_000_000u64));
    assert_eq!(call(&anvil, token, totalSupplyCall {}).await, U256::from(250_000_000u64));

    // wallets list names the issuer beside the sponsor and the omnibus wallet.
    let wallets =
        env.command(&["wallets", "list", "--json"]).env("CUSTODY_INDEXER_MNEMONIC", PHRASE).output().unwrap();
    let wallets: Value = serde_json::from_slice(&wallets.stdout).unwrap();
    assert_eq!(wallets[0]["issuer"], issuer.to_checksum(None));
    assert_ne!(wallets[0]["issuer"], wallets[0]["sponsor"]);
}

#[tokio::test]
async fn on_solana_the_issuer_is_the_mint_authority() {
    let node = SolanaNode::start().await;
    let signer = MnemonicSigner::from_phrase(PHRASE).unwrap();
    let sponsor: Pubkey = signer.solana_address(KeyRef::Sponsor).unwrap().parse().unwrap();
    let airdrop = node.rpc.request_airdrop(&sponsor, 10_000_000_000).await.unwrap();
    while !node.rpc.confirm_transaction(&airdrop).await.unwrap() {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let toml = format!(
        "chain = \"SOLANA_DEVNET\"\ngenesis_hash = \"{}\"\nrpc_urls = [\"{}\"]\nconfirmation = \"finalized\"\npoll_interval_ms = 200\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n",
        node.genesis_hash, node.url
    );
    let env = Env::with_chain_file(&toml);
    let out = deploy(&env, Chain::SolanaDevnet);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config = with_printed(&toml, &String::from_utf8(out.stdout).unwrap());
    let asset = config.assets.iter().find(|a| a.symbol == "USDC").unwrap();
    assert!(asset.issued && asset.decimals == 6);
    let mint: Pubkey = asset.contract_address.parse().unwrap();
    let account = node.rpc.get_account(&mint).await.unwrap();
    assert_eq!(account.owner.to_string(), asset.token_program.clone().unwrap());
    // SPL Token's Mint: COption<Pubkey> authority (4 + 32), supply (8), decimals (1).
    let issuer: Pubkey = signer.solana_address(KeyRef::Issuer).unwrap().parse().unwrap();
    assert_eq!(&account.data[0..4], &[1, 0, 0, 0], "a mint authority is set");
    assert_eq!(&account.data[4..36], issuer.as_ref(), "the issuer is the mint authority");
    assert_eq!(u64::from_le_bytes(account.data[36..44].try_into().unwrap()), 0, "nothing minted yet");
    assert_eq!(account.data[44], 6);
}

#[test]
fn mainnets_are_refused() {
    let env = Env::with_chain_file(
        &chain_toml(&["http://127.0.0.1:1".to_string()], None, "")
            .replace("ETHEREUM_TESTNET", "ETHEREUM_MAINNET")
            .replace("chain_id = 31337", "chain_id = 1"),
    );
    let out = deploy(&env, Chain::EthereumMainnet);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("ETHEREUM_MAINNET is a mainnet"), "{stderr}");
    assert!(stderr.contains("held apart from the service's hot mnemonic"), "{stderr}");
}
