use clap::Parser;
use custody_indexer::cli::{Cli, LogFormat};
use tracing_subscriber::EnvFilter;

/// mimalloc rather than the system allocator: a backfill allocates and frees
/// millions of short-lived rows, strings and JSON values, and glibc's
/// allocator spent a fifth of its CPU time there and kept freed memory in
/// per-thread arenas. Its `override` feature makes it the process's `malloc`
/// too, which the bundled SQLite allocates with (see docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let mut filter = EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    if !std::env::var("RUST_LOG").is_ok_and(|v| v.contains("async_nats")) {
        // The NATS client logs each reconnection attempt; the sink says once that it cannot publish.
        filter = filter.add_directive("async_nats=warn".parse().expect("a static directive"));
    }
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Json => logs.json().init(),
        LogFormat::Text => logs.init(),
    }
    match cli.execute().await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
