//! Wires minted on a real chain: `run` in `sandbox` on anvil, the platform's
//! stablecoin deployed by `issuance deploy`, a simulated wire minted by the
//! chain's sender with the issuer key, its deposit confirmed, the mint
//! `COMPLETED` with one transaction: on both stores, and with two
//! instances racing on PostgreSQL while one is killed mid-way.

use crate::common;

use alloy::transports::http::reqwest::Method;
use alloy::{
    primitives::{Address, U256},
    providers::Provider,
};
use common::{
    CHAIN,
    api::send_json,
    chain_toml,
    cli::Env,
    db::{BACKENDS, Backend},
    dead_port,
    platform::{Coin, Platform, api_up, reconcile},
};
use serde_json::{Value, json};

#[tokio::test]
async fn a_wire_is_minted_to_the_clients_address_once_and_its_deposit_confirmed() {
    for backend in BACKENDS {
        // identity → compliance (the sandbox provider) → ACTIVE → fiat
        // enabled → account → mint instruction → a simulated wire.
        let mut platform = Platform::bare(backend).await;
        let port = dead_port();
        let _run = platform.run(port);
        platform.onboard_through_compliance(port).await;
        let id = platform.wire(port, "250.00").await;
        let mint = platform.completed(port, &id).await;

        // The stablecoin is at the client's address: minted once, by the issuer.
        assert_eq!(platform.balance().await, U256::from(250_000_000u64), "{backend:?}");
        assert_eq!(platform.supply().await, U256::from(250_000_000u64));
        let hash = mint["transaction_hash"].as_str().expect("the mint's transaction").to_string();
        let tx =
            platform.anvil.provider.get_transaction_by_hash(hash.parse().unwrap()).await.unwrap().unwrap();
        assert_eq!(tx.inner.signer(), platform.issuer, "the issuer signs the mint");

        // Its deposit, the one deposit of the account, CONFIRMED, named by the mint.
        let deposits = platform.get(port, "/v2/crypto/deposits?account_id=ada-1").await;
        let deposits = deposits["deposits"].as_array().unwrap().clone();
        assert_eq!(deposits.len(), 1, "{deposits:?}");
        assert_eq!(deposits[0]["id"], mint["deposit_id"]);
        assert_eq!(deposits[0]["status"], "CONFIRMED");
        assert_eq!(deposits[0]["amount"], "250");
        assert!(deposits[0]["transaction_hash"].as_str().unwrap().eq_ignore_ascii_case(&hash));

        // Clients see the mint and its deposit, never a transfer of theirs,
        // and are billed no gas for it.
        let events = platform.get(port, "/v2/events?limit=100").await["events"].as_array().unwrap().clone();
        let updates: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "mint_update")
            .map(|e| e["data"]["status"].as_str().unwrap())
            .collect();
        assert_eq!(updates.first(), Some(&"RECEIVED"), "{updates:?}");
        assert_eq!(updates.last(), Some(&"COMPLETED"), "{updates:?}");
        assert!(updates.contains(&"MINTING"), "{updates:?}");
        assert!(
            events.iter().all(|e| !e["type"].as_str().unwrap().starts_with("crypto_transfer")),
            "{events:?}"
        );
        assert_eq!(platform.get(port, "/v2/crypto/transfers").await["transfers"], json!([]));
        let usage = platform.get(port, "/v2/gas/usage").await;
        assert_eq!(usage["spent_usd"], "0", "{usage}");

        // The books balance: the dollars received were minted, and the
        // supply on chain is what the mint minted.
        let books = reconcile(&platform.env, 0);
        assert_eq!(books.as_array().unwrap().len(), 1, "{books}");
        let usdc = &books[0];
        assert_eq!(
            (usdc["chain"].as_str(), usdc["stablecoin_symbol"].as_str()),
            (Some(CHAIN.as_str()), Some("USDC"))
        );
        assert_eq!((usdc["fiat_received"].as_str(), usdc["minted"].as_str()), (Some("250.00"), Some("250")));
        assert_eq!((usdc["supply"].as_str(), usdc["agrees"].as_bool()), (Some("250"), Some(true)), "{usdc}");

        // A mint no wire backs (the issuer's key used outside the service)
        // is a difference reconcile names, and exits 1 for.
        let provider = &platform.anvil.provider;
        provider
            .raw_request::<_, Value>("anvil_impersonateAccount".into(), (platform.issuer,))
            .await
            .unwrap();
        let coin = Coin::new(platform.usdc, provider);
        let unbacked = coin.mint(Address::repeat_byte(0x42), U256::from(1_000_000u64));
        let pending = unbacked.from(platform.issuer).send().await.unwrap();
        assert!(pending.get_receipt().await.unwrap().status());
        let books = reconcile(&platform.env, 1);
        let message = books[0]["differences"][0]["message"].as_str().unwrap();
        assert!(
            message.contains("the supply on chain 251 is not what confirmed mints minted 250"),
            "{books}"
        );
    }
}

#[tokio::test]
async fn a_mint_sender_killed_with_its_transaction_out_is_recovered_by_two_racing_instances_once() {
    let platform = Platform::new(Backend::Postgres).await;
    let (first, second, third) = (dead_port(), dead_port(), dead_port());
    let mut killed = platform.run(first);
    // No block is mined while the only instance signs and sends the mint:
    // it is killed with its transaction out and not included.
    platform.pause_mining().await;
    let id = platform.wire(first, "1000.25").await;
    platform.kill_with_transactions_out(&mut killed).await;

    // Two instances take over at once; whichever holds the chain's lease
    // follows the transaction already out, and neither mints again.
    let _racing = [platform.run(second), platform.run(third)];
    api_up(second).await;
    let mint = platform.completed(second, &id).await;
    assert_eq!(platform.supply().await, U256::from(1_000_250_000u64), "minted once");
    assert_eq!(platform.balance().await, U256::from(1_000_250_000u64));
    let store = platform.env.store().await;
    let transfer = store.mint_transfer(&id).await.unwrap().expect("the mint's transfer");
    let included: Vec<_> = store
        .transfer_transactions(&transfer)
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.block_number.is_some())
        .collect();
    assert_eq!(included.len(), 1, "one transaction of the mint is on chain: {included:?}");
    assert!(mint["transaction_hash"].as_str().unwrap().eq_ignore_ascii_case(&included[0].hash));
    let books = reconcile(&platform.env, 0);
    assert_eq!(
        (books[0]["minted"].as_str(), books[0]["supply"].as_str()),
        (Some("1000.25"), Some("1000.25"))
    );
}

#[tokio::test]
async fn in_production_a_wire_recorded_and_approved_by_two_operators_mints_on_chain() {
    let platform = Platform::new(Backend::Sqlite).await;
    let port = dead_port();
    let _run = platform.run_production(port, &[]);
    let memo = platform.instruction(port).await;
    let url = format!("http://127.0.0.1:{port}/v2/simulation/fiat-deposit");
    let body = json!({ "amount": "75.50", "memo_id": memo, "currency": "USD", "payment_rail": "WIRE" });
    let simulated = send_json(Method::POST, &url, Some(&platform.key), Some(&body)).await;
    assert_eq!(simulated.status, 404, "nothing is simulated in production: {simulated:?}");

    // Operators are principals: two treasury operators and one of
    // compliance, made by an admin through the service.
    let [ann, bo, cy] = <[String; 3]>::try_from(
        platform.operators(port, &[("Ann", "treasury"), ("Bo", "treasury"), ("Cy", "compliance")]).await,
    )
    .unwrap();
    let text = |out: &std::process::Output| {
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    };
    let memo = memo.as_str().unwrap();
    let record =
        ["issuance", "wires", "record", "--memo-id", memo, "--amount", "75.50", "--reference", "FED-77"];
    let with_reason = [&record[..], &["--reason", "arrived at the bank"]].concat();
    // On a production store, nobody decides around the service.
    let direct = platform.env.command(&[&with_reason[..], &["--by", "ann"]].concat()).output().unwrap();
    assert!(!direct.status.success(), "{}", text(&direct));
    assert!(text(&direct).contains("CUSTODY_INDEXER_SERVER") && text(&direct).contains("--break-glass"));
    let recorded = platform.as_operator(port, &ann, &with_reason);
    assert!(
        recorded.status.success() && text(&recorded).contains("AWAITING_APPROVAL"),
        "{}",
        text(&recorded)
    );
    let id = String::from_utf8_lossy(&recorded.stdout).lines().last().unwrap().to_string();

    let approve = ["issuance", "wires", "approve", "FED-77"];
    let own = platform.as_operator(port, &ann, &approve);
    assert!(!own.status.success() && text(&own).contains("another operator"), "{}", text(&own));
    let compliance = platform.as_operator(port, &cy, &approve);
    assert!(
        text(&compliance).contains("403") && text(&compliance).contains("`treasury`"),
        "{}",
        text(&compliance)
    );
    // Break-glass is a person with a key, never the second pair of eyes.
    let glass = |key: Option<&str>, args: &[&str]| {
        let mut command = platform.env.command(&[args, &["--break-glass", "--reason", "urgent"]].concat());
        command.env_remove("CUSTODY_INDEXER_OPERATOR_KEY");
        if let Some(key) = key {
            command.env("CUSTODY_INDEXER_OPERATOR_KEY", key);
        }
        command.output().unwrap()
    };
    let keyless = glass(None, &approve);
    assert!(!keyless.status.success() && text(&keyless).contains("CUSTODY_INDEXER_OPERATOR_KEY"));
    let unroled = glass(Some(&cy), &approve);
    assert!(!unroled.status.success() && text(&unroled).contains("`treasury`"), "{}", text(&unroled));
    let by_bo = glass(Some(&bo), &approve);
    assert!(
        !by_bo.status.success() && text(&by_bo).contains("break-glass action never counts"),
        "{}",
        text(&by_bo)
    );
    let approved = platform.as_operator(port, &bo, &approve);
    assert!(text(&approved).contains("MINTING"), "{}", text(&approved));

    let mint = platform.completed(port, &id).await;
    assert!(mint["transaction_hash"].is_string() && mint["deposit_id"].is_string(), "{mint}");
    assert_eq!(platform.balance().await, U256::from(75_500_000u64));
    let books = reconcile(&platform.env, 0);
    assert_eq!(
        (books[0]["fiat_received"].as_str(), books[0]["supply"].as_str()),
        (Some("75.50"), Some("75.5"))
    );
    // A wire Ann records by breaking glass: Ann cannot approve it.
    let record_78 =
        ["issuance", "wires", "record", "--memo-id", memo, "--amount", "1.00", "--reference", "FED-78"];
    let recorded_78 = glass(Some(&ann), &record_78);
    assert!(recorded_78.status.success(), "{}", text(&recorded_78));
    let own =
        platform.as_operator(port, &ann, &["issuance", "wires", "refuse", "FED-78", "--reason", "mine"]);
    assert!(!own.status.success() && text(&own).contains("another operator"), "{}", text(&own));
    let refused =
        platform.as_operator(port, &bo, &["issuance", "wires", "refuse", "FED-78", "--reason", "no"]);
    assert!(refused.status.success(), "{}", text(&refused));
    // Each decision is in the audit log, attributed, and the chain holds.
    let log = platform.operator(&["audit", "list", "--json"]);
    let entries: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let decided: Vec<_> = entries
        .iter()
        .filter(|e| e["target_kind"] == "mint")
        .map(|e| (e["action"].as_str().unwrap(), e["actor_name"].as_str().unwrap()))
        .collect();
    let ann_glass =
        decided.iter().find(|(action, name)| *action == "wire.recorded" && name.starts_with("Ann (uid "));
    assert!(ann_glass.is_some(), "the break-glass record names Ann and the process's user: {log}");
    let decided: Vec<_> = decided.into_iter().filter(|(_, name)| !name.contains("(uid ")).collect();
    assert_eq!(decided, [("wire.recorded", "Ann"), ("wire.approved", "Bo"), ("wire.refused", "Bo")], "{log}");
    assert!(platform.operator(&["audit", "verify"]).contains("verified"));

    // A database owner makes Ann the approver of her own wire with plain
    // SQL: the books name the mint whose approval the log does not hold.
    let pool = sqlx::AnyPool::connect(&platform.env.database_url).await.unwrap();
    let ann_actor: String = sqlx::Row::get(
        &sqlx::query("SELECT recorded_by FROM mints WHERE id = $1").bind(&id).fetch_one(&pool).await.unwrap(),
        "recorded_by",
    );
    assert!(ann_actor.starts_with("operator:op_"), "{ann_actor}");
    sqlx::query("UPDATE mints SET approved_by = recorded_by WHERE id = $1")
        .bind(&id)
        .execute(&pool)
        .await
        .unwrap();
    let books = reconcile(&platform.env, 1);
    let found = books[0]["differences"].to_string();
    assert!(
        found.contains(&id) && found.contains(&format!("approval by {ann_actor} is not in the audit log")),
        "{found}"
    );
    // And a mint sent to the chain that no one approved.
    sqlx::query("UPDATE mints SET approved_by = NULL WHERE id = $1").bind(&id).execute(&pool).await.unwrap();
    let found = reconcile(&platform.env, 1)[0]["differences"].to_string();
    assert!(found.contains("sent to the chain without an approval"), "{found}");
}

#[test]
fn reconcile_names_a_node_it_cannot_read_without_its_key() {
    let url = format!("http://127.0.0.1:{}/v2/key-0123456789abcdef", dead_port());
    let usdc = "\n[[assets]]\nsymbol = \"USDC\"\ncontract_address = \"0x5FbDB2315678afecb367f032d93F642f64180aa3\"\n\
                decimals = 6\nissued = true\n";
    let env = Env::with_chain_file(&(chain_toml(&[url], None, "") + usdc));
    let out = env.command(&["issuance", "reconcile"]).output().unwrap();
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{printed}");
    assert!(printed.contains("cannot read the supply"), "{printed}");
    assert!(!printed.contains("key-0123456789abcdef"), "the RPC URL's key is not shown: {printed}");
}
