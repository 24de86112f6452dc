//! A store of watched accounts, and the real binary's backfill over a copy of it.

use std::{
    collections::HashMap,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use custody_indexer::{account::AccountAddress, store::NewAccount};
use sqlx::{Connection, Executor, PgConnection};

pub use crate::common::procs::cpu_seconds;
use crate::{
    chain::{Chain, address},
    common::{
        self, CHAIN, chains_dir,
        db::{Backend, TEST_PII_KEY, TestDb, admin_url},
        procs::{memory_mb, postgres_cpu, postgres_cpu_between},
    },
};

/// A migrated store holding `watched` accounts, every recipient among them,
/// that each round copies.
pub struct Template {
    db: TestDb,
    pub setup_seconds: f64,
}

pub async fn template(backend: Backend, chain: &Chain, watched: u64) -> Template {
    let db = TestDb::new(backend).await;
    let setup = Instant::now();
    let recipients = chain.recipients.len() as u64;
    let accounts: Vec<NewAccount> = (0..watched)
        .map(|i| {
            let address = if i < recipients { chain.recipients[i as usize] } else { address(1_000_000 + i) };
            common::numbered_account(
                i,
                vec![AccountAddress { chains: vec![CHAIN], address: address.to_string() }],
            )
        })
        .collect();
    common::numbered_identities(&db.store).await;
    for chunk in accounts.chunks(100_000) {
        custody_indexer::keys::accounts::add_accounts(&db.store, chunk).await.unwrap();
    }
    // Closing the last connection checkpoints SQLite's WAL into the file; a
    // PostgreSQL template must have no connection left.
    db.store.close().await;
    Template { db, setup_seconds: setup.elapsed().as_secs_f64() }
}

pub struct Run {
    pub scan_seconds: f64,
    pub found: u64,
    pub peak_rss_mb: f64,
    /// CPU seconds of the backfill process (its whole run, setup included).
    pub cpu: f64,
    /// CPU seconds of the PostgreSQL server meanwhile (0 on SQLite).
    pub postgres_cpu: f64,
}

/// A fresh copy of the template: a file, or a database made from it.
async fn copy(template: &Template, dir: &Path) -> String {
    match template.db.url.strip_prefix("sqlite://") {
        Some(path) => {
            let db = dir.join("round.db");
            std::fs::copy(path, &db).unwrap();
            format!("sqlite://{}", db.display())
        }
        None => {
            let (base, name) = template.db.url.rsplit_once('/').unwrap();
            let copy = format!("{name}_round");
            let mut admin = PgConnection::connect(&admin_url()).await.unwrap();
            admin.execute(format!("DROP DATABASE IF EXISTS {copy}").as_str()).await.unwrap();
            // A session the template's store left idle would keep it from being copied.
            let ended = format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"
            );
            admin.execute(ended.as_str()).await.unwrap();
            admin.execute(format!("CREATE DATABASE {copy} TEMPLATE {name}").as_str()).await.unwrap();
            format!("{base}/{copy}")
        }
    }
}

async fn remove(url: &str) {
    match url.strip_prefix("sqlite://") {
        Some(path) => {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{path}{suffix}"));
            }
        }
        None => {
            let name = url.rsplit_once('/').unwrap().1;
            let mut admin = PgConnection::connect(&admin_url()).await.unwrap();
            admin.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str()).await.unwrap();
        }
    }
}

/// Runs the real binary's backfill over the whole chain on a copy of `template`.
pub async fn backfill(chain: &Chain, template: &Template, dir: &Path, settings: &str) -> Run {
    let url = copy(template, dir).await;
    let chains = chains_dir(dir, &[chain.anvil.url()], Some(&chain.token.to_checksum(None)), settings);
    // BENCH_PERF=DIR: the backfill runs under `perf record`, its profile
    // written to DIR (the peak memory is then perf's).
    let mut command = match std::env::var("BENCH_PERF") {
        Ok(out) => {
            let file = format!(
                "{out}/backfill-{}.perf",
                if url.starts_with("sqlite") { "sqlite" } else { "postgres" }
            );
            let mut perf = Command::new("perf");
            perf.args([
                "record",
                "-F",
                "250",
                "--call-graph",
                "dwarf,16384",
                "-o",
                &file,
                "--",
                env!("CARGO_BIN_EXE_custody-indexer"),
            ]);
            perf
        }
        Err(_) => Command::new(env!("CARGO_BIN_EXE_custody-indexer")),
    };
    let mut child = command
        .args(["backfill", "--chain", CHAIN.as_str(), "--from", "0", "--to", &chain.last.to_string()])
        .env("DATABASE_URL", &url)
        .env("CUSTODY_INDEXER_CHAINS", &chains)
        .env("CUSTODY_INDEXER_PII_KEY", TEST_PII_KEY)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut peak = 0f64;
    let mut cpu = 0f64;
    let (mut postgres_before, mut postgres) = (HashMap::new(), HashMap::new());
    postgres_cpu(&mut postgres_before);
    while child.try_wait().unwrap().is_none() {
        cpu = cpu.max(cpu_seconds(child.id()));
        postgres_cpu(&mut postgres);
        peak = peak.max(memory_mb(child.id(), "VmHWM"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let postgres_cpu = postgres_cpu_between(&postgres_before, &postgres);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let line = String::from_utf8(output.stdout).unwrap();
    // "… (N blocks in S s, R blocks/s): D deposits found, …"
    let scan_seconds: f64 =
        line.split(" blocks in ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    let found: u64 = line.split("): ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    remove(&url).await;
    Run { scan_seconds, found, peak_rss_mb: peak, cpu, postgres_cpu }
}
