//! Several `run` instances on one PostgreSQL and one anvil (a [`Fleet`]),
//! with every sending route's wallets funded: the omnibus wallet
//! (ETH, TUSD), the sponsor, and `SEGREGATED` payers holding TUSD (sent
//! with a gas top-up) and USDC (sent by EIP-3009 authorization).

use std::ops::{Deref, DerefMut};

use alloy::{
    primitives::{Address, U256},
    providers::Provider,
};

use super::{
    Anvil, CHAIN,
    anvil::Mined,
    chain_toml,
    db::Backend,
    fleet::{Fleet, Order},
    transfers::ETH,
};

/// Each payer's TUSD and USDC, in base units (6 decimals).
const PAYER_TOKENS: u64 = 1_000_000_000;

/// A transfer of `raw` base units of `symbol` from `account` to a fresh
/// address: paid twice, it shows.
pub fn order(account: &str, symbol: &'static str, raw: u128) -> Order {
    let to = Address::left_padding_from(&uuid::Uuid::new_v4().into_bytes());
    let decimals = if symbol == "ETH" { 18 } else { 6 };
    Order { account: account.to_string(), symbol, raw, decimals, to: to.to_string() }
}

pub struct Cluster {
    pub anvil: Anvil,
    pub fleet: Fleet,
    pub tusd: Address,
    pub usdc: Address,
    pub sponsor: Address,
    pub omnibus: Address,
    /// A watched `SEGREGATED` account that receives deposits.
    pub alice: Address,
    /// `SEGREGATED` accounts `payer-0`… holding TUSD and USDC.
    pub payers: Vec<Address>,
}

impl Deref for Cluster {
    type Target = Fleet;

    fn deref(&self) -> &Fleet {
        &self.fleet
    }
}

impl DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut Fleet {
        &mut self.fleet
    }
}

impl Cluster {
    /// Starts anvil with both tokens, one PostgreSQL, the wallets funded,
    /// `payers` payer accounts, and `count` `run` instances holding worker
    /// leases for `lease`.
    pub async fn start(count: usize, payers: usize, slow_ms: (u64, u64), lease: &'static str) -> Self {
        Self::start_on(Backend::Postgres, count, payers, (slow_ms, lease)).await
    }

    /// [`Cluster::start`] on `backend` (SQLite holds one instance).
    pub async fn start_on(
        backend: Backend,
        count: usize,
        payers: usize,
        (slow_ms, lease): ((u64, u64), &'static str),
    ) -> Self {
        let anvil = Anvil::start().await;
        let tusd = anvil.deploy_token("TUSD").await;
        let usdc = anvil.deploy_auth_token("USDC").await;
        let chain_file = move |url: &str| chain_file(url, tusd, usdc);
        let fleet = Fleet::new_on(backend, CHAIN, anvil.url(), chain_file, (slow_ms, lease)).await;
        let address = |text: String| text.parse::<Address>().unwrap();
        let (sponsor, omnibus) = fleet.wallets();
        let (sponsor, omnibus) = (address(sponsor), address(omnibus));
        assert_eq!(address(fleet.create("treasury", "OMNIBUS")), omnibus);
        let mut cluster = Self {
            alice: address(fleet.create("alice", "SEGREGATED")),
            payers: (0..payers).map(|i| address(fleet.create(&format!("payer-{i}"), "SEGREGATED"))).collect(),
            anvil,
            fleet,
            tusd,
            usdc,
            sponsor,
            omnibus,
        };
        cluster.fund().await;
        for _ in 0..count {
            cluster.add_instance().await;
        }
        cluster
    }

    async fn fund(&self) {
        let (rich, minter) = (self.anvil.accounts[0], self.anvil.accounts[5]);
        for wallet in [self.sponsor, self.omnibus] {
            self.anvil.send_eth(rich, wallet, U256::from(1000 * ETH)).await;
        }
        let tokens = U256::from(PAYER_TOKENS);
        self.anvil.token(self.tusd).mint(self.omnibus, tokens * U256::from(100)).from(minter).mined().await;
        for payer in &self.payers {
            for token in [self.tusd, self.usdc] {
                self.anvil.token(token).mint(*payer, tokens).from(minter).mined().await;
            }
        }
    }

    /// What `order`'s destination holds of its asset.
    pub async fn received(&self, order: &Order) -> U256 {
        let to: Address = order.to.parse().unwrap();
        match order.symbol {
            "ETH" => self.anvil.provider.get_balance(to).await.unwrap(),
            "TUSD" => self.anvil.token(self.tusd).balanceOf(to).call().await.unwrap(),
            _ => self.anvil.token(self.usdc).balanceOf(to).call().await.unwrap(),
        }
    }

    /// `address`'s transactions mined, and counted with the pending ones.
    pub async fn nonces(&self, address: Address) -> (u64, u64) {
        let provider = &self.anvil.provider;
        let mined = provider.get_transaction_count(address).await.unwrap();
        (mined, provider.get_transaction_count(address).pending().await.unwrap())
    }
}

/// The chain file of an instance reaching anvil at `url`: TUSD and USDC
/// (EIP-3009) listed.
fn chain_file(url: &str, tusd: Address, usdc: Address) -> String {
    let mut toml = chain_toml(&[url.to_string()], Some(&tusd.to_string()), "confirmation = { depth = 2 }");
    toml.push_str(&format!(
        "\n[[assets]]\nsymbol = \"USDC\"\ncontract_address = \"{usdc}\"\ndecimals = 6\neip3009 = true\n\
         \n[transfers]\nnative_usd = \"2000\"\n"
    ));
    toml
}
