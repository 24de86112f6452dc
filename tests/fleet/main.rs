//! Several `run` instances on one PostgreSQL racing to send transfers of
//! every route. A hundred transfers of every route run alone, the smaller
//! scenarios two at a time (see `common::machine`): a worker starved of CPU
//! past its lease loses it, as it should, and no other cluster competes
//! with a large one for the machine.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod hundred_solana_transfers;
mod hundred_transfers_three_instances;
mod hundred_transfers_two_instances;
mod instances;
mod restores;
mod solana_instances;
