//! Several `run` instances on one PostgreSQL, every RPC answer slowed past
//! the worker lease's time to live: see [`common::instances`].

use crate::common;

use common::{fleet::Scenario, instances::scenario};

#[tokio::test]
async fn two_slow_instances_one_killed_send_each_transfer_of_every_route_once() {
    scenario(Scenario {
        instances: 2,
        kills: 1,
        per_route: 3,
        deposits: 4,
        slow_ms: (20, 1200),
        lease: "1s",
        alone: false,
    })
    .await;
}

#[tokio::test]
async fn three_slow_instances_two_killed_send_each_transfer_of_every_route_once() {
    scenario(Scenario {
        instances: 3,
        kills: 2,
        per_route: 3,
        deposits: 5,
        slow_ms: (20, 1200),
        lease: "1s",
        alone: false,
    })
    .await;
}
