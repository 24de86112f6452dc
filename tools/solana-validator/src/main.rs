//! Runs Agave's test validator on the given RPC port (WebSocket on the next
//! one) until killed, and prints `ready` once it answers: the same command
//! line as tools/solana-node, so the tests run against either.
//!
//! Its RPC binds 0.0.0.0: run it inside a network namespace of its own
//! (scripts/solana-fidelity.sh does).

use std::process::ExitCode;

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
    let mut genesis = TestValidatorGenesis::default();
    genesis.rpc_port(rpc_port).ledger_path(&ledger);
    let (validator, _faucet) = genesis.start_async().await;
    println!("ready");
    let _keep = validator;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}
