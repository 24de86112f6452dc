//! The state directory of `dev` (default `.custody-indexer-dev/` in the
//! current directory): what a later `dev` reuses and what `dev deposit`
//! reads.
//!
//! | file | what | kept |
//! |---|---|---|
//! | `mnemonic` (0600) | the service's BIP-39 phrase: the sponsor's and the account's keys | until `--reset` |
//! | `pii.key` (0600) | the sandbox key personal data is sealed with, generated when `CUSTODY_INDEXER_PII_KEY` was not set at the first start | until `--reset` |
//! | `pii.key-id` | instead of `pii.key` when the first start had `CUSTODY_INDEXER_PII_KEY`: the id of that key, which every later start needs | until `--reset` |
//! | `seed.json` (0600) | organization, identity, account ids, the API key, the webhook secret | until `--reset` |
//! | `solana-funder.json`, `solana-mint.json` (0600) | the keypairs of the Solana deposit wallet and of the USDC mint | until `--reset` |
//! | `store.db` | the SQLite store | until `--reset` |
//! | `anvil-state.json` | the local EVM chain anvil loads when it starts: its last complete dump | until `--reset` |
//! | `anvil-state.next.json` | where anvil dumps its chain when it stops (and every minute); it replaces `anvil-state.json` at the next start once it reads as complete JSON, so a dump cut short never replaces a good one | until `--reset` |
//! | `solana-ledger.sqlite` (and its `.genesis`) | the local Solana network's blocks and accounts, written as it runs | until `--reset` |
//! | `ledgers.json` | the genesis hash and first block of each local chain the store indexes | with the store |
//! | `chains/*.toml` | the chain files of this run's local nodes | this run |
//! | `dev.json` (0600) | how to reach the running `dev`; removed when it stops | while it runs |
//! | `nats/` | with `--nats`, the local NATS server's streams | until `--reset` |
//! | `anvil.log`, `solana-node.log`, `nats.log` | the nodes' output | this run |

use std::{
    fs::{File, OpenOptions},
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use alloy::signers::local::coins_bip39::{English, Wordlist};
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::Summary;
use crate::{api_key, events::signing::Secret, keys::Phrase};

/// The directory and the lock that makes one `dev` its only user.
pub struct StateDir {
    pub path: PathBuf,
    _lock: Option<File>,
}

/// What a `dev` seeds its store with, the same on every run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Seed {
    pub organization: String,
    pub identity_id: String,
    pub account_id: String,
    pub api_key_id: String,
    pub api_key: String,
    pub webhook_secret: String,
}

/// The file naming the local chains the store indexes.
const LEDGERS: &str = "ledgers.json";

/// A local chain as the store knows it: a node that answers another
/// genesis hash runs another chain, one the store never saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub genesis_hash: String,
    /// The block indexing starts at (the chain file's `start_block`).
    pub start_block: u64,
}

pub type Ledgers = std::collections::BTreeMap<crate::chain::Chain, Ledger>;

/// What `dev.json` holds: the JSON line `dev --json` prints, and the
/// process serving it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Running {
    pub pid: u32,
    /// The nodes it started: a later `dev` ends those left behind when
    /// this one was killed without a chance to stop them.
    #[serde(default)]
    pub nodes: Vec<NodeProcess>,
    #[serde(flatten)]
    pub summary: Summary,
}

/// A node process, named by its id and its start time (in clock ticks
/// since boot): together they cannot name a later process that reused the id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeProcess {
    pub pid: u32,
    pub started: u64,
}

impl NodeProcess {
    /// The process `pid` as it runs now, if it does.
    pub fn of(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) may hold spaces and parentheses: count
        // from its closing one. The start time is field 22.
        let after = &stat[stat.rfind(')')? + 1..];
        // An exited process its parent has not reaped (state Z) runs nothing.
        if matches!(after.split_whitespace().next(), Some("Z" | "X")) {
            return None;
        }
        let started = after.split_whitespace().nth(19)?.parse().ok()?;
        Some(Self { pid, started })
    }
}

impl StateDir {
    /// `path`, created when missing (emptied first with `reset`), locked
    /// for this process: a second `dev` on it fails here, before it starts
    /// any node.
    pub fn open(path: &Path, reset: bool) -> anyhow::Result<Self> {
        std::fs::create_dir_all(path).with_context(|| format!("cannot create {}", path.display()))?;
        let path = path.canonicalize().with_context(|| format!("cannot resolve {}", path.display()))?;
        claim(&path)?;
        let lock = lock(&path)?;
        let state = Self { path, _lock: Some(lock) };
        state.end_orphans();
        if reset {
            state.empty()?;
        }
        Ok(state)
    }

    /// Removes what `dev` wrote here (`--reset`); anything else in the
    /// directory, which may be one a user named by mistake, is left alone.
    fn empty(&self) -> anyhow::Result<()> {
        const OURS: [&str; 16] = [
            "anvil-state.json",
            "anvil-state.next.json",
            "solana-ledger.sqlite",
            "solana-ledger.sqlite-wal",
            "solana-ledger.sqlite-shm",
            "solana-ledger.sqlite.genesis",
            "mnemonic",
            "pii.key",
            "pii.key-id",
            "seed.json",
            "solana-funder.json",
            "solana-mint.json",
            "dev.json",
            "anvil.log",
            "solana-node.log",
            "nats.log",
        ];
        self.fresh_store()?;
        let _ = std::fs::remove_file(self.file("store.db.lock"));
        for name in OURS {
            match std::fs::remove_file(self.file(name)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("cannot remove {name}"));
                }
                _ => {}
            }
        }
        for dir in [self.chains_dir(), self.file("nats")] {
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("cannot remove {}", dir.display()));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Ends the nodes of a `dev` that was killed (SIGKILL: no handler ran)
    /// and removes its `dev.json`. Holding the lock, this process knows that
    /// dev is gone; a node is ended only while the process of that id is
    /// the one that started then and still runs a node binary, so a reused
    /// process id is left alone.
    fn end_orphans(&self) {
        let Ok(text) = std::fs::read_to_string(self.file("dev.json")) else { return };
        if let Ok(stale) = serde_json::from_str::<Running>(&text) {
            for node in stale.nodes {
                if NodeProcess::of(node.pid) != Some(node) {
                    continue;
                }
                let pid = node.pid;
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
                let program = String::from_utf8_lossy(program);
                let nodes = ["anvil", "custody-indexer-solana-node", "nats-server"];
                if nodes.iter().any(|name| program.ends_with(name)) {
                    tracing::warn!(pid, %program, "ending a node the previous dev left running");
                    end(node);
                }
            }
        }
        let _ = std::fs::remove_file(self.file("dev.json"));
    }

    /// The state directory of a `dev` that may be running, unlocked.
    pub fn existing(path: &Path) -> anyhow::Result<Self> {
        let path = path.canonicalize().map_err(|_| not_running(path))?;
        Ok(Self { path, _lock: None })
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn database_url(&self) -> String {
        format!("sqlite://{}?mode=rwc", self.file("store.db").display())
    }

    pub fn chains_dir(&self) -> PathBuf {
        self.file("chains")
    }

    /// Removes the store and the record of the chains it indexed.
    pub fn fresh_store(&self) -> anyhow::Result<()> {
        for name in ["store.db", "store.db-wal", "store.db-shm", "store.db-journal", LEDGERS] {
            match std::fs::remove_file(self.file(name)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("cannot remove {name}"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The local chains the kept store indexes, by chain; `None` when there
    /// is no kept store (none yet, or one a `dev` made before it kept them).
    pub fn ledgers(&self) -> anyhow::Result<Option<Ledgers>> {
        if !self.file("store.db").exists() {
            return Ok(None);
        }
        match std::fs::read_to_string(self.file(LEDGERS)) {
            Ok(text) => Ok(Some(serde_json::from_str(&text).context("ledgers.json is not dev's")?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).context("reading ledgers.json"),
        }
    }

    /// Records the local chains the store indexes, once it holds them.
    pub fn record_ledgers(&self, ledgers: &Ledgers) -> anyhow::Result<()> {
        let path = self.file(LEDGERS);
        let temporary = self.file("ledgers.json.new");
        std::fs::write(&temporary, serde_json::to_string_pretty(ledgers)?)
            .with_context(|| format!("cannot write {}", temporary.display()))?;
        std::fs::rename(&temporary, &path).with_context(|| format!("cannot write {}", path.display()))
    }

    /// The service's phrase, generated on first use.
    pub fn mnemonic(&self) -> anyhow::Result<Phrase> {
        let path = self.file("mnemonic");
        if !path.exists() {
            write_secret(&path, new_phrase()?.as_bytes())?;
        }
        let text = Zeroizing::new(std::fs::read_to_string(&path).context("reading the mnemonic")?);
        Ok(Phrase::new(&text))
    }

    /// The ids and secrets the store is seeded with, made on first use.
    pub fn seed(&self) -> anyhow::Result<Seed> {
        let path = self.file("seed.json");
        if let Ok(text) = std::fs::read_to_string(&path) {
            return serde_json::from_str(&text)
                .with_context(|| format!("{} is not a dev seed", path.display()));
        }
        let key = api_key::generate();
        let seed = Seed {
            organization: "dev".into(),
            identity_id: "dev-identity".into(),
            account_id: "dev-account".into(),
            api_key_id: key.id,
            api_key: key.token,
            webhook_secret: Secret::generate().expose().to_string(),
        };
        write_secret(&path, serde_json::to_string_pretty(&seed)?.as_bytes())?;
        Ok(seed)
    }

    /// A 32-byte seed kept in `name`, generated on first use (a keypair's).
    pub fn key_seed(&self, name: &str) -> anyhow::Result<Zeroizing<[u8; 32]>> {
        let path = self.file(name);
        if !path.exists() {
            let mut bytes = Zeroizing::new([0u8; 32]);
            getrandom::fill(bytes.as_mut_slice()).context("no random source")?;
            let list: Vec<String> = bytes.iter().map(u8::to_string).collect();
            write_secret(&path, format!("[{}]", list.join(",")).as_bytes())?;
        }
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {name}"))?;
        let bytes: Zeroizing<Vec<u8>> =
            Zeroizing::new(serde_json::from_str(&text).with_context(|| format!("{name} is not a key seed"))?);
        Ok(Zeroizing::new(bytes.as_slice().try_into().with_context(|| format!("{name} is not 32 bytes"))?))
    }

    /// Removes `dev.json` when this process wrote it.
    pub fn withdraw(&self) {
        if self.running().is_ok_and(|r| r.pid == std::process::id()) {
            let _ = std::fs::remove_file(self.file("dev.json"));
        }
    }

    /// The running `dev` of this directory; an error naming what to start
    /// when none runs. A running `dev` holds the directory's lock, so a
    /// `dev.json` left by one that was killed (whose process id may since
    /// have been reused) is not taken for a running one.
    pub fn running(&self) -> anyhow::Result<Running> {
        let text = std::fs::read_to_string(self.file("dev.json")).map_err(|_| not_running(&self.path))?;
        let running: Running = serde_json::from_str(&text).context("dev.json is not a running dev's")?;
        if self._lock.is_none() && lock(&self.path).is_ok() {
            bail!("{} (its dev.json is a stopped dev's)", not_running(&self.path));
        }
        Ok(running)
    }
}

/// Ends `node` as `dev` stops its own: SIGTERM, on which anvil writes its
/// state, then SIGKILL if it is still there 30 s later.
fn end(node: NodeProcess) {
    let signal = |name: &str| {
        let _ = std::process::Command::new("kill").args([name, &node.pid.to_string()]).status();
    };
    signal("-TERM");
    for _ in 0..300 {
        if NodeProcess::of(node.pid) != Some(node) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    signal("-KILL");
}

/// Writes `dir/dev.json`: from now on `dev deposit` reaches this process.
pub fn announce(dir: &Path, summary: &Summary, nodes: &[u32]) -> anyhow::Result<()> {
    let nodes = nodes.iter().filter_map(|pid| NodeProcess::of(*pid)).collect();
    let running = Running { pid: std::process::id(), nodes, summary: summary.clone() };
    let path = dir.join("dev.json");
    let _ = std::fs::remove_file(&path);
    write_secret(&path, serde_json::to_string_pretty(&running)?.as_bytes())
}

fn not_running(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "no `custody-indexer dev` is running with the state directory {}: start one with \
         `custody-indexer dev --state-dir {}`",
        path.display(),
        path.display()
    )
}

/// The file that marks a directory as a `dev` state directory.
const MARKER: &str = ".custody-indexer-dev-state";

/// Makes `path` a state directory only its owner can read (it holds keys
/// and a store with secrets). A directory that is neither empty nor marked
/// as one is refused: `dev` removes and reuses files by name, and must not
/// do so in a directory it did not make (a checkout's `chains/`, a
/// production key named `pii.key`).
fn claim(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let marker = path.join(MARKER);
    if !marker.exists() {
        let mut entries =
            std::fs::read_dir(path).with_context(|| format!("cannot read {}", path.display()))?;
        if entries.next().is_some() {
            bail!(
                "{} is not empty and is not a dev state directory (it has no {MARKER}): give dev a new or \
                 empty --state-dir",
                path.display()
            );
        }
        std::fs::write(&marker, "custody-indexer dev state directory\n")
            .with_context(|| format!("cannot write {}", marker.display()))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot restrict {} to its owner", path.display()))
}

fn lock(path: &Path) -> anyhow::Result<File> {
    let lock_path = path.join("dev.lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("cannot open {}", lock_path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "another `custody-indexer dev` uses the state directory {}: stop it, or give this one \
             another --state-dir",
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", lock_path.display()))
        }
    }
}

/// Writes a file only its owner may read or write.
pub fn write_secret(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// A new 12-word BIP-39 phrase: 128 random bits and 4 bits of their SHA-256.
fn new_phrase() -> anyhow::Result<Zeroizing<String>> {
    let mut entropy = Zeroizing::new([0u8; 17]);
    getrandom::fill(&mut entropy[..16]).context("no random source")?;
    entropy[16] = Sha256::digest(&entropy[..16])[0];
    let mut phrase = Zeroizing::new(String::with_capacity(12 * 9));
    for n in 0..12 {
        let index = (0..11).fold(0usize, |index, bit| {
            let at = n * 11 + bit;
            index << 1 | usize::from(entropy[at / 8] >> (7 - at % 8) & 1)
        });
        if n > 0 {
            phrase.push(' ');
        }
        phrase.push_str(English::get(index).context("the BIP-39 word list")?);
    }
    Ok(phrase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_phrase_is_a_valid_bip39_phrase_each_time_different() {
        let (a, b) = (new_phrase().unwrap(), new_phrase().unwrap());
        assert_ne!(*a, *b);
        assert_eq!(a.split(' ').count(), 12);
        crate::keys::MnemonicSigner::from_phrase(&a).expect("a valid phrase");
    }

    #[test]
    fn secrets_are_written_for_their_owner_alone_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state"), false).unwrap();
        let seed = state.seed().unwrap();
        state.mnemonic().unwrap();
        for name in ["seed.json", "mnemonic"] {
            let mode = std::fs::metadata(state.file(name)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
        assert_eq!(state.seed().unwrap().api_key, seed.api_key, "kept between runs");
        let second = StateDir::open(&state.path, false).err().expect("locked while the first is open");
        assert!(second.to_string().contains("another `custody-indexer dev`"), "{second}");
    }
}
