//! Several `run` instances on one PostgreSQL and one local Solana network
//! (a [`Fleet`]), with every sending route funded: the omnibus wallet (SOL,
//! TUSD), the sponsor (every fee, and the rent of the token accounts it
//! creates for destinations), and `SEGREGATED` payers holding SOL and TUSD.

use std::ops::{Deref, DerefMut};

use custody_indexer::chain::Chain;
use solana_commitment_config::CommitmentConfig;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use super::{
    fleet::{Fleet, Order},
    solana::{SOL, SolanaNode, TOKEN, ata, create_ata, key, mint_to, transfer_sol},
};

pub const SOLANA: Chain = Chain::SolanaDevnet;

/// Each payer's TUSD, and the omnibus wallet's, in base units (6 decimals).
const TOKENS: u64 = 1_000_000_000;

pub struct SolanaCluster {
    pub node: SolanaNode,
    pub fleet: Fleet,
    pub mint: Pubkey,
    pub sponsor: Pubkey,
    pub omnibus: Pubkey,
    /// A watched `SEGREGATED` account that receives deposits.
    pub alice: Pubkey,
    /// `SEGREGATED` accounts `payer-0`… holding SOL and TUSD.
    pub payers: Vec<Pubkey>,
    /// Holds SOL and TUSD from outside the platform; mints TUSD.
    pub outsider: Keypair,
}

impl Deref for SolanaCluster {
    type Target = Fleet;

    fn deref(&self) -> &Fleet {
        &self.fleet
    }
}

impl DerefMut for SolanaCluster {
    fn deref_mut(&mut self) -> &mut Fleet {
        &mut self.fleet
    }
}

impl SolanaCluster {
    /// Starts the network with a TUSD mint, one PostgreSQL, the wallets
    /// funded, `payers` payer accounts, and `count` `run` instances holding
    /// worker leases for `lease`.
    pub async fn start(count: usize, payers: usize, slow_ms: (u64, u64), lease: &'static str) -> Self {
        let node = SolanaNode::start().await;
        let outsider = node.funded(100 * SOL).await;
        let mint = node.create_mint(&outsider, TOKEN, 6).await;
        let genesis = node.genesis_hash.clone();
        let chain_file = move |url: &str| chain_file(url, &genesis, &mint);
        let fleet = Fleet::new(SOLANA, node.url.clone(), chain_file, slow_ms, lease).await;
        let (sponsor, omnibus) = fleet.wallets();
        let (sponsor, omnibus) = (key(&sponsor), key(&omnibus));
        assert_eq!(key(&fleet.create("treasury", "OMNIBUS")), omnibus);
        let mut cluster = Self {
            alice: key(&fleet.create("alice", "SEGREGATED")),
            payers: (0..payers).map(|i| key(&fleet.create(&format!("payer-{i}"), "SEGREGATED"))).collect(),
            node,
            fleet,
            mint,
            sponsor,
            omnibus,
            outsider,
        };
        cluster.fund().await;
        for _ in 0..count {
            cluster.add_instance().await;
        }
        cluster
    }

    async fn fund(&self) {
        let payer = &self.outsider;
        let from = payer.pubkey();
        let mut funded = vec![(self.sponsor, 20 * SOL, 0), (self.omnibus, 10 * SOL, 100 * TOKENS)];
        funded.extend(self.payers.iter().map(|p| (*p, 2 * SOL, TOKENS)));
        for (wallet, lamports, tokens) in funded {
            let mut instructions = vec![transfer_sol(&from, &wallet, lamports)];
            if tokens > 0 {
                instructions.push(create_ata(&from, &wallet, &self.mint, TOKEN));
                instructions.push(mint_to(
                    TOKEN,
                    &self.mint,
                    &ata(&wallet, &self.mint, TOKEN),
                    &from,
                    tokens,
                ));
            }
            self.node.send(&instructions, payer, &[]).await;
        }
    }

    /// A transfer of `raw` base units of `symbol` (SOL or TUSD) from
    /// `account` to a fresh wallet.
    pub fn order(account: &str, symbol: &'static str, raw: u64) -> Order {
        let to = Keypair::new().pubkey().to_string();
        let decimals = if symbol == "SOL" { 9 } else { 6 };
        Order { account: account.to_string(), symbol, raw: raw.into(), decimals, to }
    }

    /// Lamports of `wallet`, finalized.
    pub async fn lamports(&self, wallet: &Pubkey) -> u64 {
        let commitment = CommitmentConfig::finalized();
        self.node.rpc.get_balance_with_commitment(wallet, commitment).await.unwrap().value
    }

    /// TUSD of `wallet`'s associated token account, finalized; 0 without one.
    pub async fn tokens(&self, wallet: &Pubkey) -> u64 {
        let account = ata(wallet, &self.mint, TOKEN);
        let commitment = CommitmentConfig::finalized();
        let answer = self.node.rpc.get_token_account_balance_with_commitment(&account, commitment).await;
        answer.map_or(0, |balance| balance.value.amount.parse().unwrap())
    }

    /// What `order`'s destination holds of its asset.
    pub async fn received(&self, order: &Order) -> u64 {
        let to = key(&order.to);
        if order.symbol == "SOL" { self.lamports(&to).await } else { self.tokens(&to).await }
    }
}

/// The chain file of an instance reaching the network at `url`, TUSD
/// listed, finality `finalized`.
fn chain_file(url: &str, genesis_hash: &str, mint: &Pubkey) -> String {
    format!(
        "chain = \"{SOLANA}\"\ngenesis_hash = \"{genesis_hash}\"\nrpc_urls = [\"{url}\"]\n\
         confirmation = \"finalized\"\npoll_interval_ms = 100\nmax_block_range = 200\n\
         native = {{ symbol = \"SOL\", decimals = 9 }}\n\
         [[assets]]\nsymbol = \"TUSD\"\ncontract_address = \"{mint}\"\ndecimals = 6\n\
         token_program = \"{TOKEN}\"\n[transfers]\nnative_usd = \"150\"\n"
    )
}
