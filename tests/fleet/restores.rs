//! Restore drills, on SQLite (`backup`) and PostgreSQL (`pg_dump -Fc`,
//! `pg_restore` into a new database), with anvil: deposits and transfers
//! flow, a backup is taken, more deposits arrive and two transfers
//! confirm, the store is restored and `run` starts again. Every deposit
//! and event comes back with the id it had; `health` says restored, naming
//! the lost range and the addresses whose transactions the store lost;
//! transfers are refused `503`; after `audit acknowledge-restore` and
//! `transfers recover` the two transfers are recorded once each, under the
//! accounts whose money they moved, reconciliation explains every debit,
//! and a new transfer is sent once.

use std::{path::Path, time::Duration};

use alloy::{primitives::U256, transports::http::reqwest::Method};
use custody_indexer::store::Store;
use serde_json::{Value, json};

use crate::common::{
    self, CHAIN,
    api::send_json,
    checkpoints::files,
    cli::terminate,
    cluster::{Cluster, order},
    db::{Backend, TestDb},
    eventually,
    fleet::Order,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_restored_from_its_backup_doubles_nothing_and_sends_nothing_twice() {
    drill(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_restored_from_its_dump_doubles_nothing_and_sends_nothing_twice() {
    drill(Backend::Postgres).await;
}

/// What the store held when it was read: each deposit of alice's with its
/// status, and every deposit event's id.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    deposits: Vec<(String, String)>,
    events: Vec<String>,
}

async fn seen(store: &Store) -> Seen {
    let mut deposits: Vec<(String, String)> = store
        .deposits_of_account("alice")
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.id.to_string(), d.status.as_str().to_string()))
        .collect();
    deposits.sort();
    let mut events: Vec<String> = store
        .events_after("acme", None, 1000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.envelope["type"].as_str().is_some_and(|t| t.starts_with("deposit")))
        .map(|e| e.id().to_string())
        .collect();
    events.sort();
    Seen { deposits, events }
}

async fn drill(backend: Backend) {
    let _machine = common::machine(false).await;
    let mut c = Cluster::start_on(backend, 0, 1, ((0, 0), "10s")).await;
    let kept = c.env.dir.path().join("checkpoints");
    std::fs::create_dir_all(&kept).unwrap();
    let key_file = c.env.dir.path().join("audit.key");
    let public = c.cli(&["audit", "keygen", "--out", key_file.to_str().unwrap()]).trim().to_string();
    c.extra_env = vec![
        ("CUSTODY_INDEXER_AUDIT_KEY_FILE".into(), key_file.display().to_string()),
        ("CUSTODY_INDEXER_AUDIT_CHECKPOINT_DIR".into(), kept.display().to_string()),
        ("CUSTODY_INDEXER_AUDIT_CHECKPOINT_SECS".into(), "1".into()),
    ];
    c.add_instance().await;

    // Before the backup: a deposit and a transfer.
    c.anvil.send_eth(c.anvil.accounts[1], c.alice, U256::from(5_000_000_000_000_000u64)).await;
    let first = c.post(0, &order("treasury", "ETH", 1_000_000_000_000_000)).await;
    c.all_confirmed(std::slice::from_ref(&first), "alice", 1, || mine(&c)).await;
    // The deciders, made before the backup as production makes them.
    let treasury = c.env.break_glass_key();
    let base = format!("http://127.0.0.1:{}", c.instances[0].port);
    let admin = c.env.admins(&base, c.store()).await.first.1;
    let backup = c.env.dir.path().join("backup.db");
    take_backup(&c, backend, &backup);
    let (backup_head, _) = c.store().audit_head().await.unwrap();

    // After it: another deposit, an audited decision, two transfers (the
    // omnibus wallet's ETH, a payer's USDC by authorization the sponsor sends).
    c.anvil.send_eth(c.anvil.accounts[1], c.alice, U256::from(7_000_000_000_000_000u64)).await;
    c.cli(&["organizations", "create", "--id", "globex", "--name", "Globex"]);
    let bob = c.create("bob", "SEGREGATED");
    let lost = [order("treasury", "ETH", 2_000_000_000_000_000), order("payer-0", "USDC", 3_000_000)];
    let mut ids = vec![first];
    for o in &lost {
        ids.push(c.post(0, o).await);
    }
    c.all_confirmed(&ids, "alice", 2, || mine(&c)).await;
    let before = seen(c.store()).await;
    assert_eq!(before.deposits.len(), 2, "{before:?}");
    let (head, _) = c.store().audit_head().await.unwrap();
    assert!(head > backup_head, "the log moved after the backup");
    let newest = eventually(Duration::from_secs(30), "a checkpoint of the head", || async {
        files(&kept).into_iter().rev().find(|k| k.seq >= head)
    })
    .await;
    let exited = terminate(&mut c.instances.remove(0).process);
    assert!(exited.success(), "{exited:?}");

    // The restore: the instance starts on yesterday's store.
    let (restored, _restored_db) = restore(&mut c, backend, &backup).await;
    c.add_instance().await;
    // An account made now never gets the keys of one made after the backup.
    let carol = c.create("carol", "SEGREGATED");
    assert_ne!(carol.to_lowercase(), bob.to_lowercase(), "a lost account's address given again");
    let store = Store::connect(&restored).await.unwrap();
    let lost_range = (backup_head, newest.seq);
    restored_until_recovered(&c, &store, (&kept, &public), lost_range, &before).await;
    let checkpoint = c.env.dir.path().join("lost-checkpoint.json");
    std::fs::write(&checkpoint, newest.json()).unwrap();
    recover(&c, &store, (&checkpoint, [admin.as_str(), treasury.as_str()]), lost_range, &lost).await;
    let said = eventually(Duration::from_secs(30), "health without the restore", || async {
        let said = health(&c, &kept, &public);
        (!said.1.contains("restored") && !said.1.contains("does not know")).then_some(said)
    })
    .await;
    assert!(said.0, "{}", said.1);
    sends_once_again(&c, &lost).await;
    let verified = c.env.output(&[
        "audit",
        "verify",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
        "--public-key",
        &public,
    ]);
    let text = String::from_utf8_lossy(&verified.stdout).to_string();
    assert!(
        text.contains(&format!("checkpoint seq {} ", newest.seq)) && text.contains("lost in a restore"),
        "{text}"
    );
}

async fn mine(c: &Cluster) {
    c.anvil.mine(1).await;
}

/// While restored: `health` says so, naming the lost range and each
/// address whose transactions the store lost; transfers are refused; every
/// deposit and event comes back with the id it had.
async fn restored_until_recovered(
    c: &Cluster,
    store: &Store,
    (kept, public): (&Path, &str),
    (backup_head, lost_at): (i64, i64),
    before: &Seen,
) {
    let said = health(c, kept, public);
    assert!(!said.0, "{}", said.1);
    let line = format!("restored: the audit log ends at {backup_head}, the last checkpoint is at {lost_at}");
    assert!(said.1.contains(&line), "{}", said.1);
    for address in [c.omnibus.to_checksum(None), c.sponsor.to_checksum(None)] {
        assert!(
            said.1.contains(&format!("{address} sent 1 transaction(s) the store does not know")),
            "{}",
            said.1
        );
    }
    assert_refused(c, &order("treasury", "ETH", 4_000_000_000_000_000)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let again = loop {
        mine(c).await;
        let now = seen(store).await;
        if now == *before {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deposits found again: {now:?}, before {before:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // A PENDING and a CONFIRMED event of each deposit (the payers' and
    // the omnibus wallet's funding among them), each with the id it had.
    assert!(again.events.len() >= 4, "{again:?}");
}

/// The admin acknowledges the restore, treasury recovers the chain,
/// through the service: the two transfers lost are recorded once each.
async fn recover(
    c: &Cluster,
    store: &Store,
    (checkpoint, [admin, treasury]): (&Path, [&str; 2]),
    (backup_head, lost_at): (i64, i64),
    lost: &[Order],
) {
    let server = format!("http://127.0.0.1:{}", c.instances[0].port);
    let decide = |key: &str, args: &[&str]| {
        let out = c
            .env
            .command(&[args, &["--server", &server]].concat())
            .env("CUSTODY_INDEXER_OPERATOR_KEY", key)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            c.env.run_logs()
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let acknowledge = ["audit", "acknowledge-restore", "--checkpoint", checkpoint.to_str().unwrap()];
    let acknowledged = decide(admin, &[&acknowledge[..], &["--reason", "restored from the backup"]].concat());
    // The log lost what it held after the backup; entries written since
    // the restore (carol's account) take their places.
    assert!(acknowledged.contains(&format!(" to {lost_at} were lost")), "{acknowledged}");
    let from: i64 =
        acknowledged.split("entries ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(from > backup_head && from <= lost_at, "{acknowledged}");
    assert_refused(c, &order("treasury", "ETH", 4_000_000_000_000_000)).await;
    let recovered =
        decide(treasury, &["transfers", "recover", "--chain", CHAIN.as_str(), "--reason", "drill"]);
    assert_recovered(store, &recovered, lost).await;
}

/// The gate opens: a new transfer is sent once, nothing twice, and
/// reconciliation explains every debit.
async fn sends_once_again(c: &Cluster, lost: &[Order]) {
    let next = order("treasury", "ETH", 4_000_000_000_000_000);
    let id = eventually(Duration::from_secs(30), "transfers accepted again", || async {
        let answer = post(c, &next).await;
        (answer.status == 201).then(|| answer.body["id"].as_str().unwrap().to_string())
    })
    .await;
    eventually(Duration::from_secs(120), "the new transfer CONFIRMED", || async {
        mine(c).await;
        (c.status(&id).await == "CONFIRMED").then_some(())
    })
    .await;
    for o in lost.iter().chain([&next]) {
        assert_eq!(c.received(o).await, U256::from(o.raw), "{o:?} received once");
    }
    let reconciled = c.env.output(&["reconcile", "--chain", CHAIN.as_str()]);
    let text = String::from_utf8_lossy(&reconciled.stdout).to_string()
        + &String::from_utf8_lossy(&reconciled.stderr);
    assert!(reconciled.status.success(), "reconciliation explains every debit: {text}");
}

/// The backup of `c`'s store at `file`: `backup` on SQLite while `run`
/// runs, `pg_dump -Fc` on PostgreSQL.
fn take_backup(c: &Cluster, backend: Backend, file: &Path) {
    match backend {
        Backend::Sqlite => {
            let said = c.cli(&["backup", file.to_str().unwrap()]);
            assert!(said.contains("backed up to"), "{said}");
        }
        Backend::Postgres => {
            let out = std::process::Command::new("pg_dump")
                .args(["-Fc", "-f", file.to_str().unwrap(), &c.db.url])
                .output()
                .unwrap();
            assert!(out.status.success(), "pg_dump: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

/// Puts the backup back, as a new store the instances are pointed at: a
/// copy of the SQLite file, or a new PostgreSQL database. Answers its URL,
/// and the database to drop at the end.
async fn restore(c: &mut Cluster, backend: Backend, file: &Path) -> (String, Option<TestDb>) {
    let (url, db) = match backend {
        Backend::Sqlite => {
            let path = c.env.dir.path().join("restored.db");
            std::fs::copy(file, &path).unwrap();
            (format!("sqlite://{}", path.display()), None)
        }
        Backend::Postgres => {
            let target = TestDb::unmigrated(Backend::Postgres).await;
            let out = std::process::Command::new("pg_restore")
                .args(["--no-owner", "-d", &target.url, file.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(out.status.success(), "pg_restore: {}", String::from_utf8_lossy(&out.stderr));
            (target.url.clone(), Some(target))
        }
    };
    c.env.database_url = url.clone();
    (url, db)
}

/// `health`'s verdict and text, the checkpoints read from `kept`.
fn health(c: &Cluster, kept: &Path, public: &str) -> (bool, String) {
    let out = c
        .env
        .command(&["health", "--chain", CHAIN.as_str(), "--audit-checkpoint-dir", kept.to_str().unwrap()])
        .env("CUSTODY_INDEXER_AUDIT_PUBLIC_KEY", public)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string())
}

async fn post(c: &Cluster, o: &Order) -> common::api::Answer {
    let body = json!({
        "request_id": uuid::Uuid::new_v4().to_string(), "account_id": o.account,
        "amount": custody_indexer::amount::Amount::from_raw(U256::from(o.raw), o.decimals).to_string(),
        "currency_symbol": o.symbol, "address_destination": { "address": o.to, "chain": CHAIN.as_str() },
    });
    let url = format!("http://127.0.0.1:{}/v2/crypto/transfers", c.instances[0].port);
    send_json(Method::POST, &url, Some(&c.key), Some(&body)).await
}

async fn assert_refused(c: &Cluster, o: &Order) {
    let answer = post(c, o).await;
    assert_eq!(answer.status, 503, "{:?}", answer.body);
    assert_eq!(answer.body["code"], "TRANSFERS_UNAVAILABLE", "{:?}", answer.body);
    let message = answer.body["message"].as_str().unwrap();
    assert!(!message.contains("0x"), "no platform or other tenant's address in a tenant's answer: {message}");
}

/// `transfers recover` listed the two transfers lost, each recorded once
/// under the account whose money it moved, `CONFIRMED`.
async fn assert_recovered(store: &Store, said: &str, lost: &[Order]) {
    let transfers = store.recovered_transactions(CHAIN).await.unwrap();
    assert_eq!(transfers.len(), 2, "{said}: {transfers:?}");
    for (o, account) in lost.iter().zip(["treasury", "payer-0"]) {
        let line = said.lines().find(|l| l.contains(&o.to)).unwrap_or_else(|| panic!("{o:?} in {said}"));
        assert!(line.ends_with("(CONFIRMED)"), "{line}");
        let id = line.split(' ').next().unwrap();
        let transfer: Value = serde_json::to_value(store.transfer(id).await.unwrap()).unwrap();
        assert_eq!(transfer["account_id"], account, "{transfer}");
        assert_eq!(transfer["status"], "CONFIRMED", "{transfer}");
        assert!(transfer["request_id"].as_str().unwrap().starts_with("recovered:0x"), "{transfer}");
    }
}
