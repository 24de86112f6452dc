//! The README and the pages of `docs/` run as written: every command block
//! (see `readme/markdown.rs` for how a block says how it runs) is executed
//! with bash against the test build, local nodes standing in for the public
//! chains through `<CHAIN>_RPC_URLS`, `<CHAIN>_CHAIN_ID` and
//! `<CHAIN>_GENESIS_HASH`, and its output is compared where the page shows it.

use crate::common;
#[path = "../readme/markdown.rs"]
mod markdown;
#[path = "../readme/shell.rs"]
mod shell;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use common::{Anvil, solana::SolanaNode};

/// Replacements of what a reader fills in: the addresses to watch.
const EVM_ADDRESS: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const SOLANA_WALLET: &str = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Local nodes in place of the chains the pages name.
struct Nodes {
    anvil: Anvil,
    solana: SolanaNode,
}

impl Nodes {
    async fn start() -> Self {
        Self { anvil: Anvil::start().await, solana: SolanaNode::start().await }
    }

    fn env(&self, api: &str) -> Vec<(String, String)> {
        let binary = PathBuf::from(env!("CARGO_BIN_EXE_custody-indexer"));
        let path =
            format!("{}:{}", binary.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
        [
            ("PATH", path),
            ("ETHEREUM_TESTNET_RPC_URLS", self.anvil.url()),
            ("ETHEREUM_TESTNET_CHAIN_ID", "31337".to_string()),
            ("SOLANA_DEVNET_RPC_URLS", self.solana.url.clone()),
            ("SOLANA_DEVNET_GENESIS_HASH", self.solana.genesis_hash.clone()),
            ("CUSTODY_INDEXER_LISTEN", api.to_string()),
            ("README_API", api.to_string()),
            ("CUSTODY_INDEXER_OPERATOR_TOKEN", common::OPERATOR_TOKEN.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// Runs one page in a fresh directory against fresh nodes; its failures.
async fn run_page(page: &Path) -> Vec<String> {
    let name = page.strip_prefix(repository()).unwrap_or(page).display().to_string();
    let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{name}: {e}"));
    let blocks = match markdown::blocks(&text) {
        Ok(blocks) => blocks,
        Err(error) => return vec![format!("{name}: {error}")],
    };
    if blocks.iter().all(|b| matches!(b.kind, markdown::Kind::Skip(_))) {
        return Vec::new();
    }
    let nodes = Nodes::start().await;
    let api = format!("127.0.0.1:{}", common::dead_port());
    let substitutions = [
        ("127.0.0.1:8080", api.clone()),
        ("0xYourAddress", EVM_ADDRESS.to_string()),
        ("YourSolanaWallet", SOLANA_WALLET.to_string()),
    ];
    let script = shell::script(&blocks, &substitutions);
    let dir = tempfile::tempdir().unwrap();
    let env = nodes.env(&api);
    let run = tokio::task::spawn_blocking({
        let dir = dir.path().to_path_buf();
        move || shell::run(&script, &dir, &env, Duration::from_secs(600))
    })
    .await
    .unwrap();
    shell::failures(&name, &blocks, &run)
}

fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repository().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repository().join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_and_the_docs_run_as_written() {
    let mut failures = Vec::new();
    for page in pages() {
        failures.extend(run_page(&page).await);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_page_of_docs_is_reachable_from_the_readme() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    for page in pages().into_iter().skip(1) {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        assert!(readme.contains(&format!("docs/{name}")), "README.md links no docs/{name}");
    }
    for link in readme.split("](docs/").skip(1) {
        let target = link.split([')', '#']).next().unwrap();
        assert!(
            repository().join("docs").join(target).exists(),
            "README.md links docs/{target}, which is missing"
        );
    }
    let lines = readme.lines().count();
    assert!(lines <= 260, "README.md has {lines} lines: move reference material to docs/");
}

/// A broken command fails its page's run, naming the page and the block's line.
#[tokio::test(flavor = "multi_thread")]
async fn a_broken_command_fails_naming_its_block() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("broken.md");
    std::fs::write(
        &page,
        "# Broken\n\n```sh\ncustody-indexer organizations create --id acme\n```\n\n```sh\ncargo run --release -- accounts add --account-id a --identity-id nobody --type SEGREGATED --address 0xYourAddress --chains ETHEREUM_TESTNET\n```\n",
    )
    .unwrap();
    let failures = run_page(&page).await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("broken.md:7: the block failed"), "{}", failures[0]);
    assert!(failures[0].contains("identity nobody not found"), "{}", failures[0]);

    std::fs::write(
        &page,
        "```sh\ncustody-indexer organizations list\n```\n\n```text\nno-such-organization\n```\n",
    )
    .unwrap();
    let failures = run_page(&page).await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("no line matching `no-such-organization`"), "{}", failures[0]);
}
