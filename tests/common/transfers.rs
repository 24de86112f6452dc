//! A service with keys sending transfers on a real anvil: the EIP-3009 token
//! (USDC) and a plain one (TUSD) deployed, the platform's wallets funded,
//! `run` or `serve` started on a free port, optionally behind a fault proxy.

use std::time::Duration;

use alloy::{
    primitives::{Address, B256, U256},
    providers::Provider,
    transports::http::reqwest::Method,
};
use custody_indexer::{
    amount::Amount,
    store::{SentTransaction, Store},
};
use serde_json::{Value, json};

use super::{
    Anvil, CHAIN,
    anvil::Mined,
    api::{Answer, answers, send, send_json},
    chain_toml,
    cli::{Env, Process},
    db::{Backend, TestDb},
    dead_port, eventually,
    proxy::{self, FaultyRpc},
};
/// The service's keys: not anvil's dev mnemonic, so every wallet starts empty.
pub const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
pub const ETH: u128 = 1_000_000_000_000_000_000;
pub const DEPTH: u64 = 2;
/// USD per ETH in the tests' chain file: high enough that a few transfers
/// spend more than the 100 USD credit.
pub const ETH_USD: u128 = 10_000_000;

pub struct Setup {
    pub anvil: Anvil,
    pub env: Env,
    pub _db: TestDb,
    pub key: String,
    pub port: u16,
    pub tusd: Address,
    pub usdc: Address,
    pub sponsor: Address,
    pub omnibus: Address,
    /// An address outside the platform.
    pub outside: Address,
    /// Between the service and anvil, when asked for.
    pub proxy: Option<FaultyRpc>,
    /// The variables naming the service's keys: the mnemonic, or a token.
    pub keys: Vec<(String, String)>,
}

/// The variables of a service whose keys come from [`MNEMONIC`].
pub fn mnemonic_keys() -> Vec<(String, String)> {
    vec![("CUSTODY_INDEXER_MNEMONIC".into(), MNEMONIC.into())]
}

impl Setup {
    /// anvil with a plain token (TUSD) and an EIP-3009 one (USDC), organization
    /// `acme` with a key, and `transfers` lines for the chain file.
    pub async fn new(backend: Backend, transfers: &str) -> Self {
        Self::with_rpc(backend, transfers, false).await
    }

    /// As [`Setup::new`], the service reaching anvil through a fault proxy
    /// when `through_proxy`.
    pub async fn with_rpc(backend: Backend, transfers: &str, through_proxy: bool) -> Self {
        Self::with_keys(backend, transfers, through_proxy, mnemonic_keys()).await
    }

    /// As [`Setup::with_rpc`], the service's keys named by `keys`.
    pub async fn with_keys(
        backend: Backend,
        transfers: &str,
        through_proxy: bool,
        keys: Vec<(String, String)>,
    ) -> Self {
        let anvil = Anvil::start().await;
        let tusd = anvil.deploy_token("TUSD").await;
        let usdc = anvil.deploy_auth_token("USDC").await;
        let proxy = if through_proxy { Some(proxy::start(anvil.url()).await) } else { None };
        let mut toml = chain_toml(
            &[proxy.as_ref().map_or_else(|| anvil.url(), |p| p.url.clone())],
            Some(&tusd.to_string()),
            &format!("confirmation = {{ depth = {DEPTH} }}"),
        );
        toml.push_str(&format!(
            "\n[[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{usdc}\"\ndecimals = 6\neip3009 = true\n\
             \n[transfers]\nnative_usd = \"{ETH_USD}\"\n{transfers}\n"
        ));
        let mut env = Env::with_chain_file(&toml);
        let db = TestDb::new(backend).await;
        if backend == Backend::Postgres {
            env.database_url = db.url.clone();
        }
        let key = env.organization_with_key();
        let mut s = Self {
            anvil,
            env,
            _db: db,
            key,
            port: dead_port(),
            tusd,
            usdc,
            sponsor: Address::ZERO,
            omnibus: Address::ZERO,
            outside: Address::repeat_byte(0x42),
            proxy,
            keys,
        };
        // What an operator does first: list the wallets and fund them.
        let wallets: Value = serde_json::from_str(&s.cli(&["wallets", "list", "--json"])).unwrap();
        assert_eq!(wallets[0]["chain"], CHAIN.as_str());
        s.sponsor = wallets[0]["sponsor"].as_str().unwrap().parse().unwrap();
        s.omnibus = wallets[0]["omnibus"].as_str().unwrap().parse().unwrap();
        assert!(!s.anvil.accounts.contains(&s.sponsor));
        s.anvil.send_eth(s.anvil.accounts[0], s.sponsor, U256::from(100 * ETH)).await;
        s.anvil.send_eth(s.anvil.accounts[0], s.omnibus, U256::from(100 * ETH)).await;
        s
    }

    /// A command with the keys in its environment.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut command = self.env.command(args);
        command.envs(self.keys.iter().map(|(k, v)| (k, v)));
        if args.contains(&"--break-glass") {
            command.env("CUSTODY_INDEXER_OPERATOR_KEY", self.env.break_glass_key());
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// `accounts create` of `acme`; returns the account's address.
    pub fn create_account(&self, id: &str, kind: &str) -> Address {
        self.env.identity("acme", &format!("identity-{id}"));
        let out = self.cli(&[
            "accounts",
            "create",
            "--organization",
            "acme",
            "--account-id",
            id,
            "--identity-id",
            &format!("identity-{id}"),
            "--type",
            kind,
            "--json",
        ]);
        let account: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(account["type"], kind);
        assert_eq!(account["addresses"][0]["chains"], json!([CHAIN.as_str()]));
        account["addresses"][0]["address"].as_str().unwrap().parse().unwrap()
    }

    /// `run` (or `serve`) with the keys, waiting until the API answers.
    pub async fn start(&self, command: &str) -> Process {
        let keys: Vec<(&str, &str)> = self.keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let process = self.env.listen(command, CHAIN, self.port, &keys);
        let healthz = format!("http://127.0.0.1:{}/healthz", self.port);
        eventually(Duration::from_secs(30), "the API", || async { answers(&healthz).await.then_some(()) })
            .await;
        process
    }

    pub async fn get(&self, path: &str) -> Answer {
        send(Method::GET, &format!("http://127.0.0.1:{}{path}", self.port), Some(&self.key)).await
    }

    pub async fn post(&self, body: &Value) -> Answer {
        let url = format!("http://127.0.0.1:{}/v2/crypto/transfers", self.port);
        send_json(Method::POST, &url, Some(&self.key), Some(body)).await
    }

    /// Posts a transfer that must be accepted; returns its id.
    pub async fn transfer(&self, account: &str, amount: &str, symbol: &str, to: Address) -> String {
        let body = json!({
            "request_id": uuid::Uuid::new_v4().to_string(),
            "account_id": account,
            "amount": amount,
            "currency_symbol": symbol,
            "address_destination": { "address": to.to_string(), "chain": CHAIN.as_str() },
        });
        let answer = self.post(&body).await;
        assert_eq!(answer.status, 201, "{body}: {:?}", answer.body);
        assert_eq!(answer.body["status"], "ACCEPTED");
        answer.body["id"].as_str().unwrap().to_string()
    }

    /// Waits until the transfer reaches `status`, mining a block each poll
    /// when `mine`; returns it as the API serves it.
    pub async fn until(&self, id: &str, status: &str, mine: bool) -> Value {
        eventually(Duration::from_secs(60), &format!("transfer {id} {status}"), || async {
            if mine {
                self.anvil.mine(1).await;
            }
            let transfer = self.get(&format!("/v2/crypto/transfers/{id}")).await.body;
            assert!(
                transfer["status"] == status
                    || !["CONFIRMED", "FAILED", "DROPPED"].contains(&transfer["status"].as_str().unwrap()),
                "{id} ended {transfer} instead of {status}; the runs' logs:\n{}",
                self.env.run_logs()
            );
            (transfer["status"] == status).then_some(transfer)
        })
        .await
    }

    pub async fn eth(&self, address: Address) -> U256 {
        self.anvil.provider.get_balance(address).await.unwrap()
    }

    pub async fn tokens(&self, token: Address, owner: Address) -> U256 {
        self.anvil.token(token).balanceOf(owner).call().await.unwrap()
    }

    /// `gasUsed × effectiveGasPrice` of a transaction, from its receipt.
    pub async fn fee(&self, hash: &str) -> U256 {
        let receipt = self
            .anvil
            .provider
            .get_transaction_receipt(hash.parse::<B256>().unwrap())
            .await
            .unwrap()
            .unwrap();
        U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price)
    }

    /// The transfer's transactions that made it into a block.
    /// Two segregated accounts, `alice` and `bob`, holding 10 TUSD each;
    /// `run` started; one TUSD sent from each and confirmed, each after the
    /// sponsor's top-up and from its account's own address (the keys'
    /// addresses, whatever holds them): `(alice, bob, run, store)`.
    pub async fn two_accounts_sent(&self) -> (Address, Address, Process, Store) {
        let alice = self.create_account("alice", "SEGREGATED");
        let bob = self.create_account("bob", "SEGREGATED");
        let minter = self.anvil.accounts[5];
        for holder in [alice, bob] {
            self.anvil.token(self.tusd).mint(holder, U256::from(10_000_000)).from(minter).mined().await;
        }
        let run = self.start("run").await;
        let first = [
            self.transfer("alice", "1", "TUSD", self.outside).await,
            self.transfer("bob", "1", "TUSD", self.outside).await,
        ];
        for id in &first {
            self.until(id, "CONFIRMED", true).await;
        }
        let store = self.env.store().await;
        for (id, account) in first.iter().zip([alice, bob]) {
            let senders: Vec<String> =
                self.included(&store, id).await.into_iter().map(|x| x.sender).collect();
            assert_eq!(
                senders,
                [self.sponsor.to_string(), account.to_string()],
                "{id}: top-up, then the transfer"
            );
        }
        (alice, bob, run, store)
    }

    pub async fn included(&self, store: &Store, id: &str) -> Vec<SentTransaction> {
        store
            .transfer_transactions(id)
            .await
            .unwrap()
            .into_iter()
            .filter(|t| t.block_number.is_some())
            .collect()
    }
}

/// `raw` wei as micro-USD at [`ETH_USD`], rounded half up: what the ledger must hold.
pub fn usd_micros(wei: U256) -> U256 {
    let price = U256::from(ETH_USD * 1_000_000);
    (wei * price + U256::from(ETH / 2)) / U256::from(ETH)
}

pub fn usd(micros: U256) -> String {
    Amount::from_raw(micros, 6).to_string()
}
