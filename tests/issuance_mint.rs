//! Wires minted on a real chain: `run` in `sandbox` on anvil, the platform's
//! stablecoin deployed by `issuance deploy`, a simulated wire minted by the
//! chain's sender with the issuer key, its deposit confirmed, the mint
//! `COMPLETED` with one transaction: on both stores, and with two
//! instances racing on PostgreSQL while one is killed mid-way.

mod common;

use std::time::Duration;

use alloy::transports::http::reqwest::Method;
use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    sol,
};
use common::{
    CHAIN,
    anvil::Anvil,
    api::{send, send_json},
    chain_toml,
    cli::{Env, Process},
    db::{BACKENDS, Backend, TestDb},
    dead_port, eventually,
    transfers::{ETH, MNEMONIC},
};
use serde_json::{Value, json};

sol! {
    #[sol(rpc)]
    contract Coin {
        function totalSupply() external view returns (uint256);
        function balanceOf(address owner) external view returns (uint256);
        function mint(address to, uint256 value) external;
    }
}

/// Waits until the API on `port` answers.
async fn api_up(port: u16) {
    eventually(Duration::from_secs(30), "the API", || async {
        common::api::answers(&format!("http://127.0.0.1:{port}/healthz")).await.then_some(())
    })
    .await;
}

/// `issuance reconcile --json` with the exit code it must end with: the books.
fn reconcile(env: &Env, code: i32) -> Value {
    let out = env.command(&["issuance", "reconcile", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A platform whose USDC it issues on anvil, organization `acme`, and
/// once onboarded an `ACTIVE`, fiat-enabled identity with its account `ada-1`.
struct Platform {
    anvil: Anvil,
    env: Env,
    _db: TestDb,
    key: String,
    usdc: Address,
    issuer: Address,
    identity: String,
    account: Address,
}

impl Platform {
    /// With identity `ada` registered `ACTIVE` by an operator.
    async fn new(backend: Backend) -> Self {
        let mut platform = Self::bare(backend).await;
        platform.env.identity("acme", "ada");
        platform.onboard("ada");
        platform
    }

    /// The chain with the stablecoin deployed and organization `acme`.
    async fn bare(backend: Backend) -> Self {
        let anvil = Anvil::start().await;
        let toml = chain_toml(&[anvil.url()], None, "confirmation = { depth = 2 }")
            + "\n[transfers]\nnative_usd = \"3000\"\n";
        let mut env = Env::with_chain_file(&toml);
        let db = TestDb::new(backend).await;
        if backend == Backend::Postgres {
            env.database_url = db.url.clone();
        }
        let key = env.organization_with_key();
        let mut platform = Self {
            anvil,
            env,
            _db: db,
            key,
            usdc: Address::ZERO,
            issuer: Address::ZERO,
            identity: String::new(),
            account: Address::ZERO,
        };
        // The operator funds the sponsor (it deploys) and the issuer (it
        // pays for its mints), then places the stablecoin.
        let wallets: Value = serde_json::from_str(&platform.cli(&["wallets", "list", "--json"])).unwrap();
        let address = |role: &str| wallets[0][role].as_str().unwrap().parse::<Address>().unwrap();
        let (sponsor, issuer) = (address("sponsor"), address("issuer"));
        let anvil = &platform.anvil;
        anvil.send_eth(anvil.accounts[0], sponsor, U256::from(10 * ETH)).await;
        anvil.send_eth(anvil.accounts[0], issuer, U256::from(ETH)).await;
        let deploy = ["issuance", "deploy", "--chain", CHAIN.as_str(), "--symbol", "USDC", "--decimals", "6"];
        let printed = platform.cli(&deploy);
        std::fs::write(platform.env.chains.join("test.toml"), format!("{toml}\n{printed}")).unwrap();
        let usdc = printed.lines().find_map(|l| l.strip_prefix("contract_address = ")).unwrap();
        platform.usdc = usdc.trim_matches('"').parse().unwrap();
        platform.issuer = issuer;
        platform
    }

    /// A command with the keys; its output.
    fn cli(&self, args: &[&str]) -> String {
        let out = self.env.command(args).env("CUSTODY_INDEXER_MNEMONIC", MNEMONIC).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// The `ACTIVE` `identity` enabled for fiat and given account `ada-1`.
    fn onboard(&mut self, identity: &str) {
        let by = ["--organization", "acme", "--by", "kyc", "--reason", "wires"];
        self.cli(&[&["identities", "fiat", "enable", identity][..], &by].concat());
        let create =
            ["accounts", "create", "--organization", "acme", "--account-id", "ada-1", "--identity-id"];
        let account = self.cli(&[&create[..], &[identity, "--type", "SEGREGATED", "--json"]].concat());
        let account: Value = serde_json::from_str(&account).unwrap();
        self.account = account["addresses"][0]["address"].as_str().unwrap().parse().unwrap();
        self.identity = identity.to_string();
    }

    /// An identity created through the API, its KYC decided by the sandbox
    /// compliance provider of the `run` on `port`, then onboarded.
    async fn onboard_through_compliance(&mut self, port: u16) {
        api_up(port).await;
        let identity = json!({ "request_id": "ada", "type": "INDIVIDUAL", "label": "Ada" });
        let id = self.post(port, "/v2/identities", &identity).await["id"].as_str().unwrap().to_string();
        self.post(port, &format!("/v2/identities/{id}/compliance"), &common::api::kyc("Lovelace")).await;
        eventually(Duration::from_secs(30), "the identity ACTIVE", || async {
            let identity = self.get(port, &format!("/v2/identities/{id}")).await;
            (identity["status"] == "ACTIVE").then_some(())
        })
        .await;
        self.onboard(&id);
    }

    /// `run` in `sandbox` on `port`.
    fn run(&self, port: u16) -> Process {
        self.run_with(port, &[("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")])
    }

    /// `run` on `port` with the keys and `env`.
    fn run_with(&self, port: u16, env: &[(&str, &str)]) -> Process {
        let env = [&[("CUSTODY_INDEXER_MNEMONIC", MNEMONIC)], env].concat();
        self.env.listen("run", CHAIN, port, &env)
    }

    async fn get(&self, port: u16, path: &str) -> Value {
        let answer = send(Method::GET, &format!("http://127.0.0.1:{port}{path}"), Some(&self.key)).await;
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        answer.body
    }

    async fn post(&self, port: u16, path: &str, body: &Value) -> Value {
        let url = format!("http://127.0.0.1:{port}{path}");
        let answer = send_json(Method::POST, &url, Some(&self.key), Some(body)).await;
        assert!(answer.status == 200 || answer.status == 201, "{path}: {answer:?}");
        answer.body
    }

    /// A mint instruction for `ada-1`, once the API answers: its memo.
    async fn instruction(&self, port: u16) -> Value {
        api_up(port).await;
        let instruction = json!({ "request_id": uuid::Uuid::new_v4().to_string(), "identity_id": self.identity,
            "stablecoin_symbol": "USDC", "chain": CHAIN.as_str(), "mint_destination_address_id": "ada-1" });
        self.post(port, "/v2/issuance/mint-instructions", &instruction).await["memo_id"].clone()
    }

    /// A mint instruction for `ada-1` and a simulated wire of `amount` to
    /// it: the mint id.
    async fn wire(&self, port: u16, amount: &str) -> String {
        let memo = self.instruction(port).await;
        let wire = json!({ "amount": amount, "memo_id": memo, "currency": "USD", "payment_rail": "WIRE" });
        self.post(port, "/v2/simulation/fiat-deposit", &wire).await["mint_id"].as_str().unwrap().to_string()
    }

    /// Mines a block each poll until mint `id` is `COMPLETED`.
    async fn completed(&self, port: u16, id: &str) -> Value {
        eventually(Duration::from_secs(90), &format!("mint {id} COMPLETED"), || async {
            self.anvil.mine(1).await;
            let mint = self.get(port, &format!("/v2/issuance/mints/{id}")).await;
            assert_ne!(mint["status"], "FAILED", "{mint}");
            (mint["status"] == "COMPLETED").then_some(mint)
        })
        .await
    }

    async fn supply(&self) -> U256 {
        Coin::new(self.usdc, &self.anvil.provider).totalSupply().call().await.unwrap()
    }

    async fn balance(&self) -> U256 {
        Coin::new(self.usdc, &self.anvil.provider).balanceOf(self.account).call().await.unwrap()
    }
}

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
    platform.anvil.provider.raw_request::<_, Value>("evm_setAutomine".into(), (false,)).await.unwrap();
    let id = platform.wire(first, "1000.25").await;
    eventually(Duration::from_secs(60), "the mint transaction sent", || async {
        let pool: Value = platform.anvil.provider.raw_request("txpool_content".into(), ()).await.unwrap();
        (!pool["pending"].as_object().unwrap().is_empty()).then_some(())
    })
    .await;
    killed.0.kill().unwrap();
    killed.0.wait().unwrap();
    platform.anvil.provider.raw_request::<_, Value>("evm_setAutomine".into(), (true,)).await.unwrap();

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
    let bank = platform.env.dir.path().join("receiving-bank.json");
    std::fs::write(&bank, common::issuance::us_bank("000123456789").to_string()).unwrap();
    let port = dead_port();
    let _run = platform.run_with(
        port,
        &[
            ("CUSTODY_INDEXER_ENVIRONMENT", "production"),
            ("CUSTODY_INDEXER_RECEIVING_BANK", bank.to_str().unwrap()),
        ],
    );
    let memo = platform.instruction(port).await;
    let url = format!("http://127.0.0.1:{port}/v2/simulation/fiat-deposit");
    let body = json!({ "amount": "75.50", "memo_id": memo, "currency": "USD", "payment_rail": "WIRE" });
    let simulated = send_json(Method::POST, &url, Some(&platform.key), Some(&body)).await;
    assert_eq!(simulated.status, 404, "nothing is simulated in production: {simulated:?}");

    let operator = |args: &[&str]| {
        let out = platform.env.command(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let memo = memo.as_str().unwrap();
    let recorded = operator(&[
        "issuance",
        "wires",
        "record",
        "--memo-id",
        memo,
        "--amount",
        "75.50",
        "--reference",
        "FED-77",
        "--by",
        "ann",
        "--reason",
        "arrived at the bank",
    ]);
    assert!(recorded.contains("AWAITING_APPROVAL"), "{recorded}");
    let id = recorded.lines().last().unwrap().to_string();
    assert!(operator(&["issuance", "wires", "approve", "FED-77", "--by", "bo"]).contains("MINTING"));

    let mint = platform.completed(port, &id).await;
    assert!(mint["transaction_hash"].is_string() && mint["deposit_id"].is_string(), "{mint}");
    assert_eq!(platform.balance().await, U256::from(75_500_000u64));
    let books = reconcile(&platform.env, 0);
    assert_eq!(
        (books[0]["fiat_received"].as_str(), books[0]["supply"].as_str()),
        (Some("75.50"), Some("75.5"))
    );
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
