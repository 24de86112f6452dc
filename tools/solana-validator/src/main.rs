//! Runs Agave's test validator on the given RPC port (WebSocket on the next
//! one) until killed, and prints `ready` once it answers: the same command
//! line as tools/solana-node, so the tests run against either.
//!
//! Its RPC binds 0.0.0.0: run it inside a network namespace of its own
//! (scripts/solana-fidelity.sh does).

use std::process::ExitCode;

use solana_faucet::faucet::run_local_faucet_for_tests;
use solana_keypair::Keypair;
use solana_net_utils::SocketAddrSpace;
use solana_rpc::rpc::JsonRpcConfig;
use solana_test_validator::TestValidatorGenesis;

fn arg(name: &str) -> Option<u16> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

#[tokio::main]
async fn main() -> ExitCode {
    let Some(rpc_port) = arg("--rpc-port") else {
        eprintln!("usage: custody-indexer-solana-validator --rpc-port P [--ws-port W] [--slot-time-ms MS]");
        return ExitCode::FAILURE;
    };
    let ledger = std::env::temp_dir().join(format!("custody-indexer-validator-{rpc_port}"));
    let _ = std::fs::remove_dir_all(&ledger);
    // A faucet on 127.0.0.1 for requestAirdrop, funded by the mint.
    let mint = Keypair::new();
    let faucet = run_local_faucet_for_tests(mint.insecure_clone(), None, 0);
    let mut genesis = TestValidatorGenesis::default();
    // Transaction history (getBlock, getTransaction, getSignaturesForAddress)
    // is off unless asked for.
    let rpc = JsonRpcConfig { enable_rpc_transaction_history: true, ..JsonRpcConfig::default_for_test() };
    genesis.rpc_config(rpc).rpc_port(rpc_port).ledger_path(&ledger).faucet_addr(Some(faucet));
    let validator = match genesis.start_async_with_mint_address(&mint, SocketAddrSpace::Unspecified).await {
        Ok(validator) => validator,
        Err(error) => {
            eprintln!("validator did not start: {error}");
            return ExitCode::FAILURE;
        }
    };
    println!("ready");
    let _keep = validator;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}
