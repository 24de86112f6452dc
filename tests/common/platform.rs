//! A platform that issues its USDC on a real anvil: the chain, the store,
//! organization `acme` with its API key, the stablecoin deployed by
//! `issuance deploy`, and an `ACTIVE`, fiat-enabled identity with its
//! account `ada-1`; `run` on it and the API's answers.

use std::time::Duration;

use alloy::transports::http::reqwest::Method;
use alloy::{
    primitives::{Address, U256},
    providers::Provider,
    sol,
};
use custody_indexer::environment::Environment;
use serde_json::{Value, json};

use super::{
    CHAIN,
    anvil::Anvil,
    api::{send, send_json},
    chain_toml,
    cli::{Env, Process},
    db::{Backend, TestDb},
    eventually,
    transfers::ETH,
};

sol! {
    #[sol(rpc)]
    contract Coin {
        function totalSupply() external view returns (uint256);
        function balanceOf(address owner) external view returns (uint256);
        function mint(address to, uint256 value) external;
    }
}

/// Waits until the API on `port` answers.
pub async fn api_up(port: u16) {
    eventually(Duration::from_secs(30), "the API", || async {
        super::api::answers(&format!("http://127.0.0.1:{port}/healthz")).await.then_some(())
    })
    .await;
}

/// `issuance reconcile --json` with the exit code it must end with: the books.
pub fn reconcile(env: &Env, code: i32) -> Value {
    let out = env.command(&["issuance", "reconcile", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A platform whose USDC it issues on anvil, organization `acme`, and
/// once onboarded an `ACTIVE`, fiat-enabled identity with its account `ada-1`.
pub struct Platform {
    pub anvil: Anvil,
    pub env: Env,
    pub _db: TestDb,
    pub key: String,
    pub usdc: Address,
    pub issuer: Address,
    pub identity: String,
    pub account: Address,
    /// The signer's variables every command and `run` gets: the mnemonic,
    /// or a token's (see [`Platform::with_keys`]).
    pub keys: Vec<(String, String)>,
}

impl Platform {
    /// With identity `ada` registered `ACTIVE` by an operator.
    pub async fn new(backend: Backend) -> Self {
        Self::with_keys(backend, super::transfers::mnemonic_keys()).await
    }

    /// As [`Platform::new`], every key where `keys` (a signer's variables)
    /// says.
    pub async fn with_keys(backend: Backend, keys: Vec<(String, String)>) -> Self {
        let mut platform = Self::bare_with_keys(backend, keys).await;
        platform.env.identity("acme", "ada");
        platform.onboard("ada");
        platform
    }

    /// The chain with the stablecoin deployed and organization `acme`.
    pub async fn bare(backend: Backend) -> Self {
        Self::bare_with_keys(backend, super::transfers::mnemonic_keys()).await
    }

    async fn bare_with_keys(backend: Backend, keys: Vec<(String, String)>) -> Self {
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
            keys,
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
    pub fn cli(&self, args: &[&str]) -> String {
        let out = self.env.command(args).envs(self.keys.clone()).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// The `ACTIVE` `identity` enabled for fiat and given account `ada-1`.
    pub fn onboard(&mut self, identity: &str) {
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
    pub async fn onboard_through_compliance(&mut self, port: u16) {
        api_up(port).await;
        let identity = json!({ "request_id": "ada", "type": "INDIVIDUAL", "label": "Ada" });
        let id = self.post(port, "/v2/identities", &identity).await["id"].as_str().unwrap().to_string();
        self.post(port, &format!("/v2/identities/{id}/compliance"), &super::api::kyc("Lovelace")).await;
        eventually(Duration::from_secs(30), "the identity ACTIVE", || async {
            let identity = self.get(port, &format!("/v2/identities/{id}")).await;
            (identity["status"] == "ACTIVE").then_some(())
        })
        .await;
        self.onboard(&id);
    }

    /// `run` in `sandbox` on `port`.
    pub fn run(&self, port: u16) -> Process {
        self.run_with(port, &[("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")])
    }

    /// `run` in `production` on `port`, its receiving bank a US bank
    /// account written beside the chain files, and `env`.
    pub fn run_production(&self, port: u16, env: &[(&str, &str)]) -> Process {
        let bank = self.env.dir.path().join("receiving-bank.json");
        std::fs::write(&bank, super::issuance::us_bank("000123456789").to_string()).unwrap();
        let bank = bank.to_str().unwrap();
        let production =
            [("CUSTODY_INDEXER_ENVIRONMENT", "production"), ("CUSTODY_INDEXER_RECEIVING_BANK", bank)];
        self.run_with(port, &[&production[..], env].concat())
    }

    /// `amount` USD wired and minted under a `run` on `port`, then the API
    /// alone (`serve`, sandbox) on the same port: a transfer accepted now
    /// is taken by no sender.
    pub async fn minted_then_serving(&self, port: u16, amount: &str) -> Process {
        let run = self.run(port);
        let mint = self.wire(port, amount).await;
        self.completed(port, &mint).await;
        drop(run);
        let keys: Vec<(&str, &str)> = self.keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let env = [&[("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")], &keys[..]].concat();
        let serve = self.env.listen("serve", CHAIN, port, &env);
        api_up(port).await;
        serve
    }

    /// Stops mining: transactions sent from now on wait in the pool.
    pub async fn pause_mining(&self) {
        let provider = &self.anvil.provider;
        provider.raw_request::<_, Value>("evm_setAutomine".into(), (false,)).await.unwrap();
    }

    /// Waits until a transaction waits in the pool, kills `run` with it
    /// out (not included), then mines again.
    pub async fn kill_with_transactions_out(&self, run: &mut Process) {
        eventually(Duration::from_secs(60), "a transaction sent", || async {
            let pool: Value = self.anvil.provider.raw_request("txpool_content".into(), ()).await.unwrap();
            (!pool["pending"].as_object().unwrap().is_empty()).then_some(())
        })
        .await;
        run.0.kill().unwrap();
        run.0.wait().unwrap();
        self.anvil.provider.raw_request::<_, Value>("evm_setAutomine".into(), (true,)).await.unwrap();
    }

    /// An operator's command, which must succeed: its output.
    pub fn operator(&self, args: &[&str]) -> String {
        let out = self.env.command(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Operators of this platform, one per `(name, role)`, made through the
    /// service on `port`: in `production` as production makes them (see
    /// [`super::governance`]), in `sandbox` by an admin made by the
    /// bootstrap; their keys, in order.
    pub async fn operators(&self, port: u16, people: &[(&str, &str)]) -> Vec<String> {
        let store = self.env.store().await;
        let production = store.environment().await.unwrap() != Some(Environment::Sandbox);
        let base = format!("http://127.0.0.1:{port}");
        let mut keys = Vec::new();
        if production {
            let admins = self.env.admins(&base, &store).await;
            for (name, role) in people {
                keys.push(super::governance::operator(&base, &store, &admins, name, role).await.1);
            }
            return keys;
        }
        let last_line = |out: std::process::Output| {
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap().lines().last().unwrap().to_string()
        };
        let create = |name: &str, role: &str| {
            let email = format!("{}@example.com", name.to_lowercase());
            ["operators", "create", "--name", name, "--email", &email, "--role", role].map(str::to_string)
        };
        let admin = last_line(
            self.env.command(&create("Admin", "admin").each_ref().map(String::as_str)).output().unwrap(),
        );
        for (name, role) in people {
            let args = create(name, role);
            keys.push(last_line(self.as_operator(port, &admin, &args.each_ref().map(String::as_str))));
        }
        keys
    }

    /// A command through the service on `port`, as the operator of `key`.
    pub fn as_operator(&self, port: u16, key: &str, args: &[&str]) -> std::process::Output {
        let mut command = self.env.command(args);
        command
            .env("CUSTODY_INDEXER_SERVER", format!("http://127.0.0.1:{port}"))
            .env("CUSTODY_INDEXER_OPERATOR_KEY", key);
        command.output().unwrap()
    }

    /// `run` on `port` with the keys and `env`.
    pub fn run_with(&self, port: u16, env: &[(&str, &str)]) -> Process {
        let keys: Vec<(&str, &str)> = self.keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.env.listen("run", CHAIN, port, &[&keys[..], env].concat())
    }

    pub async fn get(&self, port: u16, path: &str) -> Value {
        let answer = send(Method::GET, &format!("http://127.0.0.1:{port}{path}"), Some(&self.key)).await;
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        answer.body
    }

    pub async fn post(&self, port: u16, path: &str, body: &Value) -> Value {
        let url = format!("http://127.0.0.1:{port}{path}");
        let answer = send_json(Method::POST, &url, Some(&self.key), Some(body)).await;
        assert!(answer.status == 200 || answer.status == 201, "{path}: {answer:?}");
        answer.body
    }

    /// A mint instruction for `ada-1`, once the API answers: its memo.
    pub async fn instruction(&self, port: u16) -> Value {
        api_up(port).await;
        let instruction = json!({ "request_id": uuid::Uuid::new_v4().to_string(), "identity_id": self.identity,
            "stablecoin_symbol": "USDC", "chain": CHAIN.as_str(), "mint_destination_address_id": "ada-1" });
        self.post(port, "/v2/issuance/mint-instructions", &instruction).await["memo_id"].clone()
    }

    /// A mint instruction for `ada-1` and a simulated wire of `amount` to
    /// it: the mint id.
    pub async fn wire(&self, port: u16, amount: &str) -> String {
        let memo = self.instruction(port).await;
        let wire = json!({ "amount": amount, "memo_id": memo, "currency": "USD", "payment_rail": "WIRE" });
        self.post(port, "/v2/simulation/fiat-deposit", &wire).await["mint_id"].as_str().unwrap().to_string()
    }

    /// Mines a block each poll until mint `id` is `COMPLETED`.
    pub async fn completed(&self, port: u16, id: &str) -> Value {
        eventually(Duration::from_secs(90), &format!("mint {id} COMPLETED"), || async {
            self.anvil.mine(1).await;
            let mint = self.get(port, &format!("/v2/issuance/mints/{id}")).await;
            assert_ne!(mint["status"], "FAILED", "{mint}");
            (mint["status"] == "COMPLETED").then_some(mint)
        })
        .await
    }

    pub async fn supply(&self) -> U256 {
        Coin::new(self.usdc, &self.anvil.provider).totalSupply().call().await.unwrap()
    }

    pub async fn balance(&self) -> U256 {
        Coin::new(self.usdc, &self.anvil.provider).balanceOf(self.account).call().await.unwrap()
    }
}
