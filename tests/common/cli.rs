//! Runs the `custody-indexer` binary against a temporary SQLite store and a
//! chains directory of the test's own.

use std::{
    path::PathBuf,
    process::{Child, Command, Output, Stdio},
};

use custody_indexer::{chain::Chain, store::Store};

/// The file, in an environment's directory, of the key pepper its
/// processes run with (see [`Env::with_key_pepper`]).
pub const KEY_PEPPER: &str = "key-pepper";
/// The tests' key pepper.
pub const TEST_KEY_PEPPER: &str = "custody-indexer test key pepper, 32 bytes or more";

pub struct Env {
    pub dir: tempfile::TempDir,
    pub database_url: String,
    pub chains: PathBuf,
}

impl Env {
    /// A store and a chains directory holding one chain file.
    pub fn with_chain_file(toml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let database_url = format!("sqlite://{}", dir.path().join("store.db").display());
        let chains = dir.path().join("chains");
        std::fs::create_dir_all(&chains).unwrap();
        std::fs::write(chains.join("test.toml"), toml).unwrap();
        let env = Self { dir, database_url, chains };
        env.with_key_pepper();
        env
    }

    /// Every process of this environment runs with the key pepper (the
    /// default: `production`, `run`'s default, requires one). The store's
    /// keys are keyed at the first start or key command, so keys made
    /// afterwards in the test's own process (which has no pepper) do not
    /// authenticate to them, nor theirs to a server of the test's process.
    pub fn with_key_pepper(&self) {
        std::fs::write(self.dir.path().join(KEY_PEPPER), TEST_KEY_PEPPER).unwrap();
    }

    /// Processes of this environment run without a pepper, as the test's
    /// own process does: for a sandbox store shared with it.
    pub fn without_key_pepper(&self) {
        let _ = std::fs::remove_file(self.dir.path().join(KEY_PEPPER));
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_custody-indexer"));
        command
            .args(args)
            .env("DATABASE_URL", &self.database_url)
            .env("CUSTODY_INDEXER_CHAINS", &self.chains)
            .env("RUST_LOG", "info")
            .env("CUSTODY_INDEXER_LISTEN", "127.0.0.1:0")
            .env("CUSTODY_INDEXER_PII_KEY", super::db::TEST_PII_KEY)
            .env("CUSTODY_INDEXER_OPERATOR_TOKEN", super::OPERATOR_TOKEN)
            .env_remove("CUSTODY_INDEXER_ENVIRONMENT")
            // Invitations are queued, never sent: the harness mints links.
            .env("CUSTODY_INDEXER_SMTP_URL", "smtp://127.0.0.1:9")
            .env("CUSTODY_INDEXER_EMAIL_FROM", "custody@platform.example")
            .env("CUSTODY_INDEXER_PUBLIC_URL", "https://custody.example")
            .env_remove("CUSTODY_INDEXER_KEY_PEPPER_FILE")
            // Production (the default) refuses keys the host can read; the
            // tests' keys are a mnemonic or SoftHSM, so they allow them
            // (tests/cli/local_keys.rs checks the refusal without).
            .env("CUSTODY_INDEXER_ALLOW_LOCAL_KEYS", "true")
            .current_dir(self.dir.path());
        let pepper = self.dir.path().join(KEY_PEPPER);
        if pepper.exists() {
            command.env("CUSTODY_INDEXER_KEY_PEPPER_FILE", pepper);
        }
        command
    }

    pub fn output(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// The key of an operator who may break glass on this store (roles
    /// `compliance` and `treasury`), made on first use as production makes
    /// operators (see [`super::governance`]) and kept in the environment's
    /// directory.
    pub fn break_glass_key(&self) -> String {
        let kept = self.dir.path().join("break-glass.key");
        if let Ok(key) = std::fs::read_to_string(&kept) {
            return key;
        }
        let key = self.production_operator("Glass", "compliance,treasury");
        std::fs::write(&kept, &key).unwrap();
        key
    }

    /// An operator of this production store named `name` with `roles`, made
    /// through a `serve` of its own as production makes operators (the
    /// admins made on first use and kept in the environment's directory):
    /// its key.
    pub fn production_operator(&self, name: &str, roles: &str) -> String {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                    runtime.block_on(async {
                        let port = super::dead_port();
                        let _serve = self.serve(port);
                        super::platform::api_up(port).await;
                        let base = format!("http://127.0.0.1:{port}");
                        let store = self.store().await;
                        let admins = self.admins(&base, &store).await;
                        let made = super::governance::operator(&base, &store, &admins, name, roles).await;
                        store.close().await;
                        made.1
                    })
                })
                .join()
                .unwrap()
        })
    }

    /// The admins of this production store past genesis, made on first use
    /// (the bootstrap from the store alone, a second admin during genesis)
    /// through the service at `base`.
    pub async fn admins(&self, base: &str, store: &Store) -> super::governance::Admins {
        let kept = self.dir.path().join("admins.json");
        if let Ok(text) = std::fs::read_to_string(&kept) {
            let [a, b, c, d]: [String; 4] = serde_json::from_str(&text).unwrap();
            return super::governance::Admins { first: (a, b), second: (c, d) };
        }
        let create = ["operators", "create", "--name", "First Admin", "--email", "first.admin@example.com"];
        let out = self.ok(&[&create[..], &["--role", "admin"]].concat());
        let id = out.lines().next().unwrap().split_whitespace().nth(1).unwrap().to_string();
        let key = out.lines().last().unwrap().to_string();
        let admins = super::governance::past_genesis(base, store, (id, key)).await;
        let kept_text =
            serde_json::to_string(&[&admins.first.0, &admins.first.1, &admins.second.0, &admins.second.1])
                .unwrap();
        std::fs::write(&kept, kept_text).unwrap();
        admins
    }

    /// `serve` alone on `port`, logging to a file of the test's directory;
    /// killed when dropped.
    pub fn serve(&self, port: u16) -> Process {
        let log = std::fs::File::create(self.dir.path().join(format!("serve-{}.log", uuid::Uuid::new_v4())))
            .unwrap();
        self.command(&["serve", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map(Process)
            .unwrap()
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.output(args);
        assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// The last lines of every `run` this environment spawned, for a
    /// failure's message.
    pub fn run_logs(&self) -> String {
        let mut logs: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("run-")))
            .collect();
        logs.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        let tail = |text: String| {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(60)..].join("\n")
        };
        logs.into_iter()
            .map(|p| {
                format!("--- {}\n{}", p.display(), tail(std::fs::read_to_string(&p).unwrap_or_default()))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn spawn_run(&self, chain: Chain) -> Process {
        let log =
            std::fs::File::create(self.dir.path().join(format!("run-{}.log", uuid::Uuid::new_v4()))).unwrap();
        Process(
            self.command(&["run", "--chain", chain.as_str()])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    }

    /// Creates organization `acme` with one API key; returns the key's secret.
    pub fn organization_with_key(&self) -> String {
        self.ok(&["organizations", "create", "--id", "acme", "--name", "Acme Treasury"]);
        let out = self.ok(&["api-keys", "create", "--organization", "acme", "--name", "monitoring"]);
        let secret = out.lines().last().unwrap().to_string();
        assert!(secret.starts_with("cik_") && !secret.contains(' '), "{out}");
        secret
    }

    /// `run` or `serve` of `chain` on `port`, logging to a file of the test's
    /// directory; killed when dropped, so a failing test leaves nothing running.
    pub fn listen(&self, command: &str, chain: Chain, port: u16, env: &[(&str, &str)]) -> Process {
        let log =
            std::fs::File::create(self.dir.path().join(format!("{command}-{}.log", uuid::Uuid::new_v4())))
                .unwrap();
        self.command(&[command, "--chain", chain.as_str(), "--listen", &format!("127.0.0.1:{port}")])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map(Process)
            .unwrap()
    }

    /// The store, its personal data under the tests' key.
    pub async fn store(&self) -> Store {
        super::db::unlocked(&Store::open(&self.database_url).await.unwrap()).await
    }

    pub fn add_account(&self, id: &str, address: &str, chain: Chain) {
        self.add_account_of("default", id, "SEGREGATED", address, chain);
    }

    /// An `ACTIVE` identity `id` of `organization`, registered by an
    /// operator once (again: nothing happens).
    pub fn identity(&self, organization: &str, id: &str) {
        self.identity_in(organization, id, "ACTIVE");
    }

    /// An identity registered by an operator in `status` (once).
    pub fn identity_in(&self, organization: &str, id: &str, status: &str) {
        let args = [
            "identities",
            "import",
            "--organization",
            organization,
            "--id",
            id,
            "--type",
            "INDIVIDUAL",
            "--status",
            status,
            "--by",
            "test",
            "--reason",
            "test setup",
        ];
        let mut out = self.output(&args);
        if String::from_utf8_lossy(&out.stderr).contains("this is a production store") {
            // A store a `run` stamped production: registered in an emergency.
            let glass = [&args[..args.len() - 4], &["--break-glass", "--reason", "test setup"]].concat();
            out = self
                .command(&glass)
                .env("CUSTODY_INDEXER_OPERATOR_KEY", self.break_glass_key())
                .output()
                .unwrap();
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() || stderr.contains("already exists"), "{args:?} failed: {stderr}");
    }

    /// Account `id` of the default organization, `SEGREGATED`, with
    /// `address` on the test chain watched from block `from`.
    pub fn add_account_from(&self, id: &str, address: &str, from: u64) {
        self.identity("default", "identity-1");
        let from = from.to_string();
        self.ok(&[
            "accounts",
            "add",
            "--account-id",
            id,
            "--identity-id",
            "identity-1",
            "--type",
            "SEGREGATED",
            "--address",
            address,
            "--chains",
            super::CHAIN.as_str(),
            "--from-block",
            &from,
        ]);
    }

    /// An account of `organization` with one address on `chain`.
    pub fn add_account_of(&self, organization: &str, id: &str, kind: &str, address: &str, chain: Chain) {
        self.identity(organization, "identity-1");
        self.ok(&[
            "accounts",
            "add",
            "--organization",
            organization,
            "--account-id",
            id,
            "--identity-id",
            "identity-1",
            "--type",
            kind,
            "--address",
            address,
            "--chains",
            chain.as_str(),
        ]);
    }
}

/// A child process killed when dropped.
pub struct Process(pub Child);

impl std::ops::Deref for Process {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Process {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// SIGTERM, then the exit status.
pub fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let sent = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(sent.success());
    child.wait().unwrap()
}
