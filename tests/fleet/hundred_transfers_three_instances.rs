//! Three `run` instances on one PostgreSQL sending a hundred transfers of
//! every route at once, two holders killed: see [`common::instances`]. It
//! runs alone (`common::machine`).

use crate::common;

use common::{fleet::Scenario, instances::scenario};

#[tokio::test]
async fn three_instances_two_killed_send_a_hundred_transfers_of_every_route_once() {
    scenario(Scenario {
        instances: 3,
        kills: 2,
        per_route: 100,
        deposits: 5,
        slow_ms: (0, 0),
        lease: "10s",
        alone: true,
    })
    .await;
}
