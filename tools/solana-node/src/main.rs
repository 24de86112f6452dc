//! Runs an offline surfpool network on 127.0.0.1 until killed, for tests.
//!
//! `custody-indexer-solana-node --rpc-port P --ws-port W [--slot-time-ms MS] [--ledger FILE]`
//! prints `ready` on standard output once the RPC answers. With `--ledger`
//! the network's blocks, transactions and accounts are kept in the SQLite
//! file FILE and a later start on the same file resumes that network (same
//! genesis hash, slots, balances); without it nothing outlives the process.

use std::process::ExitCode;

use surfpool_core::{
    start_local_surfnet,
    surfnet::svm::{SurfnetSvm, SurfnetSvmConfig},
};
use surfpool_types::{
    SimnetEvent, SurfpoolConfig,
    types::{BlockProductionMode, RpcConfig, SimnetConfig},
};

fn arg(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

fn text_arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn main() -> ExitCode {
    let (Some(rpc_port), Some(ws_port)) = (arg("--rpc-port"), arg("--ws-port")) else {
        eprintln!(
            "usage: custody-indexer-solana-node --rpc-port P --ws-port W [--slot-time-ms MS] [--ledger FILE]"
        );
        return ExitCode::FAILURE;
    };
    let slot_time = arg("--slot-time-ms").unwrap_or(100);
    let ledger = text_arg("--ledger");
    if ledger.is_some() {
        // Record the latest slot on every slot (surfpool's default is about
        // a minute of slots), so a restart resumes where the network stood.
        // SAFETY: no other thread runs yet.
        unsafe { std::env::set_var("SURFPOOL_CHECKPOINT_INTERVAL_SLOTS", "1") };
    }
    let resumed = ledger.as_deref().is_some_and(|path| std::path::Path::new(path).exists());
    let config = SurfpoolConfig {
        simnets: vec![SimnetConfig {
            offline_mode: true,
            remote_rpc_url: None,
            slot_time,
            block_production_mode: BlockProductionMode::Clock,
            ..SimnetConfig::default()
        }],
        rpc: RpcConfig {
            bind_host: "127.0.0.1".into(),
            bind_port: rpc_port as u16,
            ws_port: ws_port as u16,
            ..RpcConfig::default()
        },
        ..SurfpoolConfig::default()
    };
    let svm_config = SurfnetSvmConfig { slot_time, ..SurfnetSvmConfig::default() };
    let (mut svm, events, geyser) = match SurfnetSvm::new_with_db(ledger.as_deref(), svm_config) {
        Ok(built) => built,
        Err(error) => {
            eprintln!("cannot open the ledger {}: {error}", ledger.as_deref().unwrap_or("(memory)"));
            return ExitCode::FAILURE;
        }
    };
    if let Some(ledger) = &ledger {
        // The genesis hash is the network's identity: a resumed ledger keeps
        // the one it was created with (surfpool derives it from the time).
        let file = format!("{ledger}.genesis");
        let kept = std::fs::read_to_string(&file).ok().and_then(|text| text.trim().parse().ok());
        let genesis = match kept.filter(|_| resumed) {
            Some(genesis) => genesis,
            None => {
                let genesis = svm.genesis_config.hash();
                if let Err(error) = std::fs::write(&file, genesis.to_string()) {
                    eprintln!("cannot write {file}: {error}");
                    return ExitCode::FAILURE;
                }
                genesis
            }
        };
        svm.cached_genesis_hash = Some(genesis);
    }
    let (commands_tx, commands_rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        // Drain events so the channel does not grow; announce readiness once.
        while let Ok(event) = events.recv() {
            match event {
                SimnetEvent::CoreStarted(_) => println!("ready"),
                SimnetEvent::Aborted(reason) => eprintln!("aborted: {reason}"),
                SimnetEvent::ErrorLog(_, message) => eprintln!("error: {message}"),
                _ => {}
            }
        }
    });
    let run = start_local_surfnet(svm, config, commands_tx, commands_rx, geyser);
    match hiro_system_kit::nestable_block_on(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("surfnet stopped: {error}");
            ExitCode::FAILURE
        }
    }
}
