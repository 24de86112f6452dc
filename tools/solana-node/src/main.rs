//! Runs an offline surfpool network on 127.0.0.1 until killed, for tests.
//!
//! `custody-indexer-solana-node --rpc-port P --ws-port W [--slot-time-ms MS]`
//! prints `ready` on standard output once the RPC answers.

use std::process::ExitCode;

use surfpool_core::{start_local_surfnet, surfnet::svm::SurfnetSvm};
use surfpool_types::{
    SimnetEvent, SurfpoolConfig,
    types::{BlockProductionMode, RpcConfig, SimnetConfig},
};

fn arg(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

fn main() -> ExitCode {
    let (Some(rpc_port), Some(ws_port)) = (arg("--rpc-port"), arg("--ws-port")) else {
        eprintln!("usage: custody-indexer-solana-node --rpc-port P --ws-port W [--slot-time-ms MS]");
        return ExitCode::FAILURE;
    };
    let config = SurfpoolConfig {
        simnets: vec![SimnetConfig {
            offline_mode: true,
            remote_rpc_url: None,
            slot_time: arg("--slot-time-ms").unwrap_or(100),
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
    let (svm, events, geyser) = SurfnetSvm::default();
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
