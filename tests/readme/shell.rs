//! Runs a page's command blocks with bash, in order, in one shell: the
//! variables one block sets are there for the next, as in a reader's
//! terminal. `cargo run --release -- …` and `cargo run -- …` run the test
//! build instead of building, `custody-indexer` is the test build on `PATH`, and the
//! README's `127.0.0.1:8080` is the address the test gave the API.

use std::{
    fmt::Write as _,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use super::markdown::{Block, Kind, missing_line};

const PRELUDE: &str = r#"set -euo pipefail
cargo() {
  if [ "${1-}" = run ] && [ "${2-}" = --release ] && [ "${3-}" = -- ]; then
    shift 3; custody-indexer "$@"
  elif [ "${1-}" = run ] && [ "${2-}" = -- ]; then
    shift 2; custody-indexer "$@"
  else
    command cargo "$@"
  fi
}
export -f cargo
servers=()
stop_servers() {
  for pid in "${servers[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for pid in "${servers[@]}"; do wait "$pid" 2>/dev/null || true; done
  # The group's shell ends at once; the service in it drains first (its
  # listener answers for a second or more after SIGTERM): wait for the
  # whole group, as a supervisor waits for its process, before the next
  # server takes the port.
  for pid in "${servers[@]}"; do
    for _ in $(seq 1 400); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
  done
  : > "$README_PIDS"
}
trap stop_servers EXIT
wait_api() {
  for _ in $(seq 1 1200); do
    curl -sf "http://$README_API/readyz" >/dev/null && return 0
    kill -0 "$1" 2>/dev/null || { echo "the server of block $2 exited:" >&2; cat "server-$2.log" >&2; return 1; }
    sleep 0.1
  done
  echo "the server of block $2 was not ready within 120 s:" >&2; cat "server-$2.log" >&2; return 1
}
"#;

fn marker(index: usize) -> String {
    format!("@@readme-block {index}@@")
}

/// The script for a page: each block after its marker, servers detached.
pub fn script(blocks: &[Block], substitutions: &[(&str, String)]) -> String {
    let mut script = PRELUDE.to_string();
    for (index, block) in blocks.iter().enumerate() {
        let mut code = block.code.clone();
        for (from, to) in substitutions {
            code = code.replace(from, to);
        }
        writeln!(script, "echo '{}'", marker(index)).unwrap();
        match &block.kind {
            Kind::Run => script.push_str(&code),
            Kind::Skip(_) => {}
            Kind::Server => {
                let quoted = code.replace('\'', r"'\''");
                script.push_str("stop_servers\nservers=()\n");
                writeln!(script, "setsid bash -c 'set -euo pipefail\n{quoted}' > server-{index}.log 2>&1 &")
                    .unwrap();
                writeln!(script, "servers+=($!)\necho $! >> \"$README_PIDS\"\nwait_api $! {index}").unwrap();
            }
        }
        script.push('\n');
    }
    script
}

/// What a page's run printed, split by block.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The index of the last block that started.
    pub fn last_block(&self) -> Option<usize> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("@@readme-block ")?.strip_suffix("@@")?.parse().ok())
            .next_back()
    }

    pub fn printed_by(&self, index: usize) -> &str {
        let start = self.stdout.find(&marker(index)).map_or(self.stdout.len(), |at| at + marker(index).len());
        let rest = &self.stdout[start..];
        rest.find(&marker(index + 1)).map_or(rest, |end| &rest[..end])
    }
}

/// What a page's shell inherits from the test's environment: nothing that
/// could point its commands at a real store, key or chain (`DATABASE_URL`,
/// `CUSTODY_INDEXER_MNEMONIC`, another chain's `*_RPC_URLS`…).
const INHERITED: &[&str] =
    &["HOME", "USER", "LANG", "TMPDIR", "CUSTODY_INDEXER_CACHE", "ANVIL_BIN", "SOLANA_NODE_BIN"];

/// Runs the script in `dir`; whatever happens, the servers it started are
/// stopped (SIGTERM to their process groups, then SIGKILL).
pub fn run(script: &str, dir: &Path, env: &[(String, String)], timeout: Duration) -> Run {
    use std::os::unix::process::CommandExt;
    let pids = dir.join("servers.pids");
    let child = Command::new("bash")
        .process_group(0)
        .env_clear()
        .envs(INHERITED.iter().filter_map(|k| Some((k, std::env::var_os(k)?))))
        .env("README_PIDS", &pids)
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash starts");
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    // Until `wait_with_output` reaps it, the shell's pid cannot be reused.
    let watchdog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(timeout) {
            let _ = Command::new("kill").args(["-TERM", "--", &format!("-{pid}")]).status();
        }
    });
    let output = child.wait_with_output().expect("bash runs");
    drop(done);
    let _ = watchdog.join();
    stop_leftover_servers(&pids);
    Run {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Stops the servers a shell killed by the watchdog could not stop: each
/// listed process group whose leader still runs with this page's
/// `README_PIDS` (a pid reused by another process is left alone).
fn stop_leftover_servers(pids: &Path) {
    let marker = format!("README_PIDS={}", pids.display());
    for server in std::fs::read_to_string(pids).unwrap_or_default().lines().map(str::trim) {
        let environ = std::fs::read(format!("/proc/{server}/environ")).unwrap_or_default();
        if !environ.split(|b| *b == 0).any(|entry| entry == marker.as_bytes()) {
            continue;
        }
        let group = format!("-{server}");
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        std::thread::sleep(Duration::from_millis(500));
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
    }
}

/// Every failure of a page's run, with the block and line it came from.
pub fn failures(page: &str, blocks: &[Block], run: &Run) -> Vec<String> {
    let mut failures = Vec::new();
    if !run.success {
        let at = run.last_block().and_then(|i| blocks.get(i));
        let line = at.map_or(0, |b| b.line);
        let code = at.map_or("", |b| b.code.as_str());
        failures.push(format!(
            "{page}:{line}: the block failed\n{code}--- stdout\n{}\n--- stderr\n{}",
            run.stdout, run.stderr
        ));
        return failures;
    }
    for (index, block) in blocks.iter().enumerate() {
        let Some(expected) = &block.output else { continue };
        let printed = run.printed_by(index);
        if let Some(line) = missing_line(expected, printed) {
            failures.push(format!(
                "{page}:{}: the block printed no line matching `{line}`; it printed:\n{printed}",
                block.line
            ));
        }
    }
    failures
}
