//! What the node allows: JSON-RPC loops that decode and store nothing.

use std::time::{Duration, Instant};

use alloy::{
    primitives::B256,
    providers::{DynProvider, Provider, ProviderBuilder},
    rpc::{
        client::{BatchRequest, RpcClientInner},
        types::{BlockNumberOrTag, Filter},
    },
    sol_types::SolEvent,
};
use futures::{StreamExt, stream};
use serde_json::value::RawValue;

use crate::{BATCH, CONCURRENCY, RANGE, chain::Chain, common::anvil::TestToken};

/// The same requests a backfill with the sparse case's settings makes.
pub async fn same_requests(chain: &Chain) -> Duration {
    let client = chain.anvil.provider.client();
    let started = Instant::now();
    let mut start = 0;
    while start <= chain.last {
        let end = chain.last.min(start + RANGE - 1);
        let numbers: Vec<u64> = (start..=end).collect();
        let blocks = numbers.chunks(BATCH).map(|chunk| {
            batch(client, chunk.iter().map(|n| ("eth_getBlockByNumber", block_params(*n))).collect())
        });
        let blocks = stream::iter(blocks.collect::<Vec<_>>()).buffered(CONCURRENCY).collect::<Vec<_>>();
        let logs = client.request::<_, Box<RawValue>>("eth_getLogs", (transfers(chain, start, end),));
        let (_, logs) = tokio::join!(blocks, logs);
        logs.unwrap();
        let receipts: Vec<B256> =
            chain.native.iter().filter(|(n, _)| (start..=end).contains(n)).map(|(_, h)| *h).collect();
        for chunk in receipts.chunks(BATCH) {
            let calls = chunk.iter().map(|h| ("eth_getTransactionReceipt", serde_json::json!([h]))).collect();
            batch(client, calls).await;
        }
        start = end + 1;
    }
    started.elapsed()
}

/// Every log by `eth_getLogs` in 500-block chunks from 2 clients, and beside
/// it every block with its transactions and its `eth_getBlockReceipts`, 25
/// blocks a batch from 2 other clients: everything a dense backfill could
/// need, read as fast as the node serves it.
pub async fn everything(chain: &Chain) -> Duration {
    let connect = || -> DynProvider {
        ProviderBuilder::new().connect_http(chain.anvil.url().parse().unwrap()).erased()
    };
    let (log_clients, block_clients) = ([connect(), connect()], [connect(), connect()]);
    let started = Instant::now();
    let ranges = |size: u64| {
        (0..=chain.last)
            .step_by(size as usize)
            .map(move |s| (s, chain.last.min(s + size - 1)))
            .collect::<Vec<_>>()
    };
    let logs = ranges(500).into_iter().enumerate().map(|(i, (start, end))| {
        let client = log_clients[i % 2].client();
        async move {
            client.request::<_, Box<RawValue>>("eth_getLogs", (transfers(chain, start, end),)).await.unwrap();
        }
    });
    let blocks = ranges(25).into_iter().enumerate().map(|(i, (start, end))| {
        let client = block_clients[i % 2].client();
        let calls = (start..=end)
            .flat_map(|n| {
                [
                    ("eth_getBlockByNumber", block_params(n)),
                    ("eth_getBlockReceipts", serde_json::json!([BlockNumberOrTag::Number(n)])),
                ]
            })
            .collect();
        batch(client, calls)
    });
    let logs = stream::iter(logs.collect::<Vec<_>>()).buffer_unordered(2).collect::<Vec<_>>();
    let blocks = stream::iter(blocks.collect::<Vec<_>>()).buffer_unordered(2).collect::<Vec<_>>();
    tokio::join!(logs, blocks);
    started.elapsed()
}

fn transfers(chain: &Chain, start: u64, end: u64) -> Filter {
    Filter::new()
        .from_block(start)
        .to_block(end)
        .address(chain.token)
        .event_signature(TestToken::Transfer::SIGNATURE_HASH)
}

fn block_params(number: u64) -> serde_json::Value {
    serde_json::json!([BlockNumberOrTag::Number(number), true])
}

/// The calls of one JSON-RPC batch: method and parameters.
type Calls = Vec<(&'static str, serde_json::Value)>;

/// One JSON-RPC batch, every answer read in full and dropped.
async fn batch(client: &RpcClientInner, calls: Calls) {
    let mut batch = BatchRequest::new(client);
    let waiters: Vec<_> = calls
        .into_iter()
        .map(|(method, params)| batch.add_call::<_, Box<RawValue>>(method, &params).unwrap())
        .collect();
    batch.send().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
}

/// What each kind of request costs the node over the whole chain, one kind
/// at a time, 2 in flight: seconds and the node's CPU seconds, on stderr.
pub async fn costs(chain: &Chain) {
    let client = chain.anvil.provider.client();
    let numbers: Vec<u64> = (0..=chain.last).collect();
    let natives: Vec<B256> = chain.native.iter().map(|(_, h)| *h).collect();
    let kinds: [(&str, Vec<Calls>); 6] = [
        (
            "blocks with transaction hashes only, 50 a batch",
            numbers
                .chunks(BATCH)
                .map(|c| {
                    c.iter()
                        .map(|n| {
                            ("eth_getBlockByNumber", serde_json::json!([BlockNumberOrTag::Number(*n), false]))
                        })
                        .collect()
                })
                .collect(),
        ),
        (
            "eth_getTransactionByHash of native transfers, 50 a batch",
            natives
                .chunks(BATCH)
                .map(|c| c.iter().map(|h| ("eth_getTransactionByHash", serde_json::json!([h]))).collect())
                .collect(),
        ),
        (
            "blocks with transactions, 50 a batch",
            numbers
                .chunks(BATCH)
                .map(|c| c.iter().map(|n| ("eth_getBlockByNumber", block_params(*n))).collect())
                .collect(),
        ),
        (
            "eth_getBlockReceipts, 50 a batch",
            numbers
                .chunks(BATCH)
                .map(|c| {
                    c.iter()
                        .map(|n| ("eth_getBlockReceipts", serde_json::json!([BlockNumberOrTag::Number(*n)])))
                        .collect()
                })
                .collect(),
        ),
        (
            "eth_getTransactionReceipt of native transfers, 50 a batch",
            natives
                .chunks(BATCH)
                .map(|c| c.iter().map(|h| ("eth_getTransactionReceipt", serde_json::json!([h]))).collect())
                .collect(),
        ),
        (
            "eth_getLogs, 100 blocks a call",
            numbers
                .chunks(100)
                .map(|c| {
                    let filter = transfers(chain, c[0], *c.last().unwrap());
                    vec![("eth_getLogs", serde_json::to_value([filter]).unwrap())]
                })
                .collect(),
        ),
    ];
    for (kind, batches) in kinds {
        let before = crate::run::cpu_seconds(chain.anvil.pid());
        let started = Instant::now();
        stream::iter(batches.into_iter().map(|calls| batch(client, calls)))
            .buffer_unordered(2)
            .collect::<Vec<_>>()
            .await;
        eprintln!(
            "cost: {kind}: {:.2} s, node {:.2} CPU s",
            started.elapsed().as_secs_f64(),
            crate::run::cpu_seconds(chain.anvil.pid()) - before
        );
    }
}
