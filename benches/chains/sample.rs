//! The `run` process under measure: started on the bench's store with the
//! shipped chain files pointed at the local nodes, asked `/readyz`, and
//! read from `/proc` while it works.

use std::{
    collections::HashMap,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use alloy::transports::http::reqwest::Client;

use crate::common::{
    OPERATOR_TOKEN,
    db::TEST_PII_KEY,
    dead_port,
    procs::{cpu_seconds, memory_mb, postgres_cpu, postgres_cpu_between},
};

pub struct Run {
    child: Child,
    readyz: String,
    client: Client,
}

/// What a window of work cost.
pub struct Figures {
    /// `run`'s CPU time over the window, in % of one core.
    pub cpu_percent: f64,
    /// `run`'s resident memory at the window's end, and its peak since it started.
    pub rss_mb: f64,
    pub peak_mb: f64,
    /// The local nodes' CPU time over the window (all of them), and PostgreSQL's.
    pub nodes_percent: f64,
    pub postgres_percent: f64,
}

impl Run {
    /// `run` of every compiled-in chain file, with `overrides` in its environment.
    pub fn spawn(database_url: &str, overrides: &[(String, String)]) -> Self {
        let port = dead_port();
        let log = std::env::temp_dir().join(format!("custody-indexer-bench-chains-{port}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_custody-indexer"))
            .arg("run")
            .env("DATABASE_URL", database_url)
            .env_remove("CUSTODY_INDEXER_CHAINS")
            .env("CUSTODY_INDEXER_LISTEN", format!("127.0.0.1:{port}"))
            .env("CUSTODY_INDEXER_PII_KEY", TEST_PII_KEY)
            .env("CUSTODY_INDEXER_OPERATOR_TOKEN", OPERATOR_TOKEN)
            .env("ALLOW_PRIVATE_WEBHOOK_URLS", "true")
            .env("RUST_LOG", "warn")
            .envs(overrides.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("custody-indexer run starts");
        eprintln!("run's log: {}", log.display());
        Self { child, readyz: format!("http://127.0.0.1:{port}/readyz"), client: Client::new() }
    }

    pub async fn ready(&self) -> bool {
        let answer = self.client.get(&self.readyz).send().await;
        answer.is_ok_and(|a| a.status().is_success())
    }

    /// Waits until every chain keeps up (`/readyz` answers 200).
    pub async fn wait_ready(&mut self, within: Duration) {
        let started = Instant::now();
        while !self.ready().await {
            assert!(self.child.try_wait().unwrap().is_none(), "run stopped before it was ready");
            assert!(started.elapsed() < within, "run was not ready within {within:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Reads `run`, the nodes `pids` and PostgreSQL over `window`.
    pub async fn measure(&self, window: Duration, pids: &[u32]) -> Figures {
        let pid = self.child.id();
        let nodes = || pids.iter().map(|pid| cpu_seconds(*pid)).sum::<f64>();
        let (mut postgres_before, mut postgres_after) = (HashMap::new(), HashMap::new());
        postgres_cpu(&mut postgres_before);
        let (cpu, nodes_cpu, started) = (cpu_seconds(pid), nodes(), Instant::now());
        tokio::time::sleep(window).await;
        let seconds = started.elapsed().as_secs_f64();
        postgres_cpu(&mut postgres_after);
        let percent = |used: f64| used / seconds * 100.0;
        Figures {
            cpu_percent: percent(cpu_seconds(pid) - cpu),
            rss_mb: memory_mb(pid, "VmRSS"),
            peak_mb: memory_mb(pid, "VmHWM"),
            nodes_percent: percent(nodes() - nodes_cpu),
            postgres_percent: percent(postgres_cpu_between(&postgres_before, &postgres_after)),
        }
    }

    /// Whether `run` was still running; it is stopped either way.
    pub fn stop(&mut self) -> bool {
        let running = self.child.try_wait().unwrap().is_none();
        let _ = self.child.kill();
        let _ = self.child.wait();
        running
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.stop();
    }
}
