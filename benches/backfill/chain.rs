//! A generated chain of blocks full of transfers to a set of recipients.

use std::time::Instant;

use alloy::{
    network::TransactionBuilder,
    primitives::{Address, B256, U256, keccak256},
    providers::Provider,
    rpc::{client::BatchRequest, types::TransactionRequest},
    sol_types::SolCall,
};

use crate::common::{Anvil, anvil::TestToken};

/// What a generated chain holds: every block `tokens` ERC-20 transfers and
/// `natives` native transfers, spread over `recipients` addresses.
pub struct Shape {
    pub blocks: u64,
    pub tokens: u64,
    pub natives: u64,
    pub recipients: u64,
}

pub struct Chain {
    pub anvil: Anvil,
    pub token: Address,
    pub recipients: Vec<Address>,
    /// Native transfers: the transactions whose receipts a scan reads.
    pub native: Vec<(u64, B256)>,
    pub last: u64,
    pub deposits: u64,
}

/// A watched or unwatched address, the same for the same seed.
pub fn address(seed: u64) -> Address {
    Address::from_word(keccak256(seed.to_be_bytes()))
}

pub async fn generate(shape: &Shape) -> Chain {
    let anvil = Anvil::start_with(&["--gas-limit", "100000000", "--disable-code-size-limit"]).await;
    let (whale, sender) = (anvil.accounts[0], anvil.accounts[1]);
    let token = anvil.deploy_token("TUSD").await;
    let instance = anvil.token(token);
    instance.mint(whale, U256::MAX >> 1).from(whale).send().await.unwrap().get_receipt().await.unwrap();
    let recipients: Vec<Address> = (0..shape.recipients).map(address).collect();
    let client = anvil.provider.client();
    client.request::<_, ()>("evm_setAutomine", (false,)).await.unwrap();
    let first = anvil.head().await + 1;
    let mut native = Vec::new();
    let started = Instant::now();
    let count = recipients.len() as u64;
    for n in 0..shape.blocks {
        let mut batch = BatchRequest::new(client);
        let mut token_waiters = Vec::new();
        let mut native_waiters = Vec::new();
        for i in 0..shape.tokens {
            let to = recipients[((n * shape.tokens + i) % count) as usize];
            let data = TestToken::transferCall { to, value: U256::from(1_000 + i) }.abi_encode();
            let tx = TransactionRequest::default()
                .with_from(whale)
                .with_to(token)
                .with_input(data)
                .with_gas_limit(80_000);
            token_waiters.push(batch.add_call::<_, B256>("eth_sendTransaction", &(tx,)).unwrap());
        }
        for i in 0..shape.natives {
            let to = recipients[((n * shape.natives + i + count / 2) % count) as usize];
            let tx = TransactionRequest::default()
                .with_from(sender)
                .with_to(to)
                .with_value(U256::from(7 + i))
                .with_gas_limit(21_000);
            native_waiters.push(batch.add_call::<_, B256>("eth_sendTransaction", &(tx,)).unwrap());
        }
        batch.send().await.unwrap();
        for waiter in token_waiters {
            waiter.await.unwrap();
        }
        for waiter in native_waiters {
            native.push((first + n, waiter.await.unwrap()));
        }
        client.request::<_, String>("evm_mine", ()).await.unwrap();
    }
    client.request::<_, ()>("evm_setAutomine", (true,)).await.unwrap();
    anvil.mine(2).await;
    let last = first + shape.blocks - 1;
    let deposits = shape.blocks * (shape.tokens + shape.natives);
    println!(
        "generated {} blocks ({first}..={last}) with {deposits} transfers to {count} addresses in {:.1} s",
        shape.blocks,
        started.elapsed().as_secs_f64()
    );
    Chain { anvil, token, recipients, native, last, deposits }
}
