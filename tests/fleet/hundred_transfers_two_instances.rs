//! Several `run` instances on one PostgreSQL sending a hundred transfers of
//! every route at once: see [`common::instances`]. It runs alone (`common::machine`).

use crate::common;

use common::{fleet::Scenario, instances::scenario};

#[tokio::test]
async fn two_instances_one_killed_send_a_hundred_transfers_of_every_route_once() {
    scenario(Scenario {
        instances: 2,
        kills: 1,
        per_route: 100,
        deposits: 4,
        slow_ms: (0, 0),
        lease: "10s",
        alone: true,
    })
    .await;
}
