//! Several `run` instances of a local Solana network on one PostgreSQL,
//! every RPC answer slowed past the worker lease's time to live: see
//! [`common::solana_instances`].

use crate::common;

use common::{fleet::Scenario, solana_instances::scenario};

#[tokio::test]
async fn two_slow_instances_one_killed_send_each_solana_transfer_of_every_route_once() {
    scenario(Scenario {
        instances: 2,
        kills: 1,
        per_route: 10,
        deposits: 4,
        slow_ms: (20, 1200),
        lease: "1s",
        alone: false,
    })
    .await;
}

#[tokio::test]
async fn three_slow_instances_two_killed_send_each_solana_transfer_of_every_route_once() {
    scenario(Scenario {
        instances: 3,
        kills: 2,
        per_route: 5,
        deposits: 4,
        slow_ms: (20, 1200),
        lease: "1s",
        alone: false,
    })
    .await;
}
