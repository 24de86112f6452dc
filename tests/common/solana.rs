//! A real local Solana network per test (surfpool, built by
//! scripts/install-solana-node.sh) and helpers that build SOL, SPL Token,
//! Token-2022 (with a transfer fee too), version-0 lookup-table and version-1
//! transactions against it.

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

#[allow(unused_imports)]
pub use custody_indexer::solana::instructions::{
    MINT_LEN, ata, create_ata, initialize_mint2, key, mint_to, transfer_checked, transfer_sol,
};
use solana_address_lookup_table_interface::{instruction as alt, state::AddressLookupTable};
use solana_commitment_config::CommitmentConfig;
use solana_instruction::{AccountMeta, Instruction};
use solana_keypair::Keypair;
use solana_message::{AddressLookupTableAccount, VersionedMessage, v0, v1};
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client_api::config::RpcSendTransactionConfig;
use solana_signer::Signer;
use solana_transaction::{Transaction, versioned::VersionedTransaction};

pub const TOKEN: &str = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
pub const TOKEN_2022: &str = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";
pub const SOL: u64 = 1_000_000_000;

/// The node binary: `SOLANA_NODE_BIN` or the cache the install script fills.
/// Missing, the tests fail: they never skip.
pub fn node_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("SOLANA_NODE_BIN") {
        return bin.into();
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let cached = home.join(".cache/custody-indexer/solana-node-target/debug/custody-indexer-solana-node");
    assert!(
        cached.exists(),
        "the Solana test node is missing: run scripts/install-solana-node.sh (or set SOLANA_NODE_BIN)"
    );
    cached
}

pub struct SolanaNode {
    child: Child,
    pub url: String,
    pub rpc: RpcClient,
    pub genesis_hash: String,
    /// The first slot of the node's ledger (`getFirstAvailableBlock`): the
    /// local network starts there, and nothing below it can be read.
    pub first_slot: u64,
}

impl Drop for SolanaNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The node's first available slot once it holds a block there: before its
/// first block the local network answers `getFirstAvailableBlock` with 0,
/// a slot it then never serves.
async fn first_block(rpc: &RpcClient) -> u64 {
    let started = Instant::now();
    loop {
        let first = rpc.get_first_available_block().await.unwrap();
        let listed = rpc.get_blocks_with_limit(first, 1).await.unwrap_or_default();
        if listed.first() == Some(&first) {
            return first;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the Solana test node produces no block");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The node started on free ports once it printed `ready`: the process and
/// its RPC port; or, when it exited first, the end of what it printed on
/// stderr.
fn spawn_node(slot_ms: u64) -> Result<(Child, u16), String> {
    let (rpc_port, ws_port) = (super::dead_port(), super::dead_port());
    let mut child = Command::new(node_bin())
        .args([
            "--rpc-port",
            &rpc_port.to_string(),
            "--ws-port",
            &ws_port.to_string(),
            "--slot-time-ms",
            &slot_ms.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the Solana test node starts");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line == "ready" {
                let _ = ready_tx.send(());
            }
        }
    });
    // Read all along (a full pipe would stop the node); the last lines kept.
    let said = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
    let kept = said.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut kept = kept.lock().unwrap();
            if kept.len() == 20 {
                kept.pop_front();
            }
            kept.push_back(line);
        }
    });
    match ready_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => Ok((child, rpc_port)),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let status = child.wait().unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let said = said.lock().unwrap().iter().cloned().collect::<Vec<_>>().join("\n");
            Err(format!("{status}: {said}"))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            panic!("the Solana test node is not ready within 60 s")
        }
    }
}

impl SolanaNode {
    pub async fn start() -> Self {
        Self::start_with_slot_time(50).await
    }

    /// A node producing a slot every `slot_ms` milliseconds. A node that
    /// exits before it is ready (a port taken between choosing it and
    /// binding it) is started again on other ports, twice at most.
    pub async fn start_with_slot_time(slot_ms: u64) -> Self {
        let mut exits = Vec::new();
        let (child, rpc_port) = loop {
            match spawn_node(slot_ms) {
                Ok(started) => break started,
                Err(said) if exits.len() < 2 => exits.push(said),
                Err(said) => {
                    exits.push(said);
                    panic!("the Solana test node exited before it was ready, 3 times: {exits:#?}")
                }
            }
        };
        let url = format!("http://127.0.0.1:{rpc_port}");
        let rpc = RpcClient::new_with_commitment(url.clone(), CommitmentConfig::confirmed());
        let started = Instant::now();
        let genesis_hash = loop {
            if let Ok(hash) = rpc.get_genesis_hash().await {
                break hash.to_string();
            }
            assert!(started.elapsed() < Duration::from_secs(30), "the Solana test node does not answer");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let first_slot = first_block(&rpc).await;
        Self { child, url, rpc, genesis_hash, first_slot }
    }

    /// The node process's id, for benchmarks that read its CPU time.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub async fn slot(&self, commitment: CommitmentConfig) -> u64 {
        self.rpc.get_slot_with_commitment(commitment).await.unwrap()
    }

    /// Waits until `slot` is finalized.
    pub async fn wait_finalized(&self, slot: u64) {
        let started = Instant::now();
        while self.slot(CommitmentConfig::finalized()).await < slot {
            assert!(started.elapsed() < Duration::from_secs(60), "slot {slot} was not finalized");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The slot of a confirmed transaction.
    pub async fn slot_of(&self, signature: &str) -> u64 {
        let signature = signature.parse().unwrap();
        let statuses = self.rpc.get_signature_statuses(&[signature]).await.unwrap().value;
        statuses[0].as_ref().expect("a known transaction").slot
    }

    /// A new keypair holding `lamports` from the faucet.
    pub async fn funded(&self, lamports: u64) -> Keypair {
        let keypair = Keypair::new();
        let signature = self.rpc.request_airdrop(&keypair.pubkey(), lamports).await.unwrap();
        let started = Instant::now();
        while !self.rpc.confirm_transaction(&signature).await.unwrap() {
            assert!(started.elapsed() < Duration::from_secs(30), "airdrop not confirmed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        keypair
    }

    /// Signs and sends a legacy transaction, waiting for confirmation.
    pub async fn send(&self, instructions: &[Instruction], payer: &Keypair, signers: &[&Keypair]) -> String {
        let blockhash = self.rpc.get_latest_blockhash().await.unwrap();
        let mut all: Vec<&Keypair> = vec![payer];
        all.extend(signers.iter().copied());
        let tx = Transaction::new_signed_with_payer(instructions, Some(&payer.pubkey()), &all, blockhash);
        self.rpc.send_and_confirm_transaction(&tx).await.unwrap().to_string()
    }

    /// Sends a transaction that fails on chain (preflight skipped) and waits
    /// until it is recorded.
    pub async fn send_failing(&self, instructions: &[Instruction], payer: &Keypair) -> String {
        let blockhash = self.rpc.get_latest_blockhash().await.unwrap();
        let tx = Transaction::new_signed_with_payer(instructions, Some(&payer.pubkey()), &[payer], blockhash);
        let config = RpcSendTransactionConfig { skip_preflight: true, ..Default::default() };
        let signature = self.rpc.send_transaction_with_config(&tx, config).await.unwrap();
        self.wait_failed(&signature.to_string()).await
    }

    /// Signs and sends a version-0 transaction that resolves accounts through
    /// the given lookup tables.
    pub async fn send_v0(
        &self,
        instructions: &[Instruction],
        payer: &Keypair,
        tables: &[AddressLookupTableAccount],
    ) -> String {
        let blockhash = self.rpc.get_latest_blockhash().await.unwrap();
        let message = v0::Message::try_compile(&payer.pubkey(), instructions, tables, blockhash).unwrap();
        assert!(!message.address_table_lookups.is_empty(), "the message uses the lookup table");
        let tx = VersionedTransaction::try_new(VersionedMessage::V0(message), &[payer]).unwrap();
        self.rpc.send_and_confirm_transaction(&tx).await.unwrap().to_string()
    }

    /// Creates a lookup table holding `addresses` and waits until it is usable.
    pub async fn lookup_table(&self, payer: &Keypair, addresses: Vec<Pubkey>) -> AddressLookupTableAccount {
        let slot = self.slot(CommitmentConfig::finalized()).await;
        let (create, table) = alt::create_lookup_table(payer.pubkey(), payer.pubkey(), slot);
        let extend = alt::extend_lookup_table(table, payer.pubkey(), Some(payer.pubkey()), addresses.clone());
        self.send(&[create, extend], payer, &[]).await;
        // Addresses added in a slot are usable from the next one.
        let after = self.slot(CommitmentConfig::confirmed()).await + 2;
        while self.slot(CommitmentConfig::confirmed()).await < after {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let account = self.rpc.get_account(&table).await.unwrap();
        let state = AddressLookupTable::deserialize(&account.data).unwrap();
        assert_eq!(state.addresses.len(), addresses.len());
        AddressLookupTableAccount { key: table, addresses }
    }

    /// A new mint of `program` (SPL Token or Token-2022) with `payer` as authority.
    pub async fn create_mint(&self, payer: &Keypair, program: &str, decimals: u8) -> Pubkey {
        let mint = Keypair::new();
        let rent = self.rpc.get_minimum_balance_for_rent_exemption(MINT_LEN as usize).await.unwrap();
        let create = solana_system_interface::instruction::create_account(
            &payer.pubkey(),
            &mint.pubkey(),
            rent,
            MINT_LEN,
            &key(program),
        );
        let init = initialize_mint2(program, &mint.pubkey(), &payer.pubkey(), decimals);
        self.send(&[create, init], payer, &[&mint]).await;
        mint.pubkey()
    }
}

impl SolanaNode {
    /// Signs and sends a version-1 transaction (SIMD-0385: static keys, the
    /// compute budget in the message's config) paying `priority_fee`
    /// lamports, waiting for confirmation.
    pub async fn send_v1(
        &self,
        instructions: &[Instruction],
        payer: &Keypair,
        signers: &[&Keypair],
        priority_fee: u64,
    ) -> String {
        let tx = self.v1_transaction(instructions, payer, signers, priority_fee).await;
        self.rpc.send_and_confirm_transaction(&tx).await.unwrap().to_string()
    }

    /// A signed version-1 transaction on the latest blockhash.
    pub async fn v1_transaction(
        &self,
        instructions: &[Instruction],
        payer: &Keypair,
        signers: &[&Keypair],
        priority_fee: u64,
    ) -> VersionedTransaction {
        let blockhash = self.rpc.get_latest_blockhash().await.unwrap();
        // Unset, a version-1 limit is 0: ask for what a legacy transaction
        // may use.
        let config = v1::TransactionConfig::empty()
            .with_priority_fee(priority_fee)
            .with_compute_unit_limit(400_000)
            .with_loaded_accounts_data_size_limit(64 * 1024 * 1024);
        let message =
            v1::Message::try_compile_with_config(&payer.pubkey(), instructions, blockhash, config).unwrap();
        let mut all: Vec<&Keypair> = vec![payer];
        all.extend(signers.iter().copied());
        VersionedTransaction::try_new(VersionedMessage::V1(message), &all).unwrap()
    }

    /// The version the node serves a confirmed transaction as.
    pub async fn version_of(
        &self,
        signature: &str,
    ) -> Option<solana_transaction::versioned::TransactionVersion> {
        let config = solana_rpc_client_api::config::RpcTransactionConfig {
            encoding: None,
            commitment: Some(CommitmentConfig::confirmed()),
            max_supported_transaction_version: Some(1),
        };
        let tx = self.rpc.get_transaction_with_config(&signature.parse().unwrap(), config).await.unwrap();
        tx.transaction.version
    }

    /// Sends a version-1 transaction that fails on chain (preflight skipped)
    /// and waits until it is recorded.
    pub async fn send_v1_failing(&self, instructions: &[Instruction], payer: &Keypair) -> String {
        let tx = self.v1_transaction(instructions, payer, &[], 0).await;
        let config = RpcSendTransactionConfig { skip_preflight: true, ..Default::default() };
        let signature = self.rpc.send_transaction_with_config(&tx, config).await.unwrap();
        self.wait_failed(&signature.to_string()).await
    }

    /// Waits until the node records `signature`, which must have failed.
    async fn wait_failed(&self, signature: &str) -> String {
        let parsed = signature.parse().unwrap();
        let started = Instant::now();
        loop {
            let status = self.rpc.get_signature_statuses(&[parsed]).await.unwrap().value[0].clone();
            if let Some(status) = status {
                assert!(status.err.is_some(), "the transaction was meant to fail");
                return signature.to_string();
            }
            assert!(started.elapsed() < Duration::from_secs(30), "failing transaction not recorded");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A new Token-2022 mint with a transfer fee of `basis_points` (at most
    /// `maximum_fee` base units), `payer` its mint and fee authority.
    pub async fn create_fee_mint(
        &self,
        payer: &Keypair,
        decimals: u8,
        basis_points: u16,
        maximum_fee: u64,
    ) -> Pubkey {
        // Mint (82 bytes) padded to an account's 165, the account type, and
        // the TransferFeeConfig extension: type and length (4) and 108 bytes.
        const LEN: usize = 165 + 1 + 4 + 108;
        let mint = Keypair::new();
        let rent = self.rpc.get_minimum_balance_for_rent_exemption(LEN).await.unwrap();
        let create = solana_system_interface::instruction::create_account(
            &payer.pubkey(),
            &mint.pubkey(),
            rent,
            LEN as u64,
            &key(TOKEN_2022),
        );
        // TransferFeeExtension (26) / InitializeTransferFeeConfig (0): config
        // and withdraw authorities, basis points, maximum fee.
        let mut fee = vec![26, 0, 1];
        fee.extend_from_slice(payer.pubkey().as_ref());
        fee.push(1);
        fee.extend_from_slice(payer.pubkey().as_ref());
        fee.extend_from_slice(&basis_points.to_le_bytes());
        fee.extend_from_slice(&maximum_fee.to_le_bytes());
        let accounts = vec![AccountMeta::new(mint.pubkey(), false)];
        let init_fee = Instruction::new_with_bytes(key(TOKEN_2022), &fee, accounts);
        let init = initialize_mint2(TOKEN_2022, &mint.pubkey(), &payer.pubkey(), decimals);
        self.send(&[create, init_fee, init], payer, &[&mint]).await;
        mint.pubkey()
    }
}

/// The token program's `CloseAccount` (9): `account`'s lamports go to
/// `destination`, signed by its owner.
pub fn close_account(program: &str, account: &Pubkey, destination: &Pubkey, owner: &Pubkey) -> Instruction {
    token_payout(program, vec![9], account, destination, owner)
}

/// The token program's `UnwrapLamports` (45) of all of a wrapped-SOL
/// account's lamports above its rent to `destination`.
pub fn unwrap_lamports(program: &str, account: &Pubkey, destination: &Pubkey, owner: &Pubkey) -> Instruction {
    token_payout(program, vec![45, 0], account, destination, owner)
}

fn token_payout(
    program: &str,
    data: Vec<u8>,
    account: &Pubkey,
    destination: &Pubkey,
    owner: &Pubkey,
) -> Instruction {
    Instruction::new_with_bytes(
        key(program),
        &data,
        vec![
            AccountMeta::new(*account, false),
            AccountMeta::new(*destination, false),
            AccountMeta::new_readonly(*owner, true),
        ],
    )
}

/// The token program's `SyncNative` (17): a wrapped-SOL account's token
/// amount follows the lamports sent to it.
pub fn sync_native(program: &str, account: &Pubkey) -> Instruction {
    Instruction::new_with_bytes(key(program), &[17], vec![AccountMeta::new(*account, false)])
}
