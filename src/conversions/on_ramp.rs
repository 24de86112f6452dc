//! An `ON_RAMP` conversion follows the mint its wire started: the dollars
//! become the stablecoin through the issuance wing's mint, sent by the
//! chain's sender, exactly once. [`target`] is where the mint's progress
//! puts the conversion:
//!
//! | mint | conversion |
//! |---|---|
//! | `RECEIVED` (the bank has not settled the wire) | `INITIATED` |
//! | `AWAITING_APPROVAL`, or `MINTING` without its transaction | `PROCESSING` |
//! | `MINTING` with its transaction handed to the sender | `PAYOUT_INITIATED` |
//! | `MINTED` (the transaction is final on chain) | `PAYOUT_IN_PROGRESS` |
//! | `COMPLETED` (its deposit `CONFIRMED` by our watcher) | `COMPLETED` |
//! | `FAILED` (nothing minted) | `FAILED` |
//!
//! The follower walks the conversion there through every status between
//! ([`super::state::path`]), one event each, so a client sees all five of
//! a completed on-ramp even when the mint moved faster than it looked.

use super::state::Status;
use crate::issuance::mint::Status as Mint;

/// Where a conversion whose mint is `mint` stands; `handed_off` whether
/// the mint's transaction was handed to the sender.
pub fn target(mint: Mint, handed_off: bool) -> Status {
    match mint {
        Mint::Received => Status::Initiated,
        Mint::AwaitingApproval => Status::Processing,
        Mint::Minting if handed_off => Status::PayoutInitiated,
        Mint::Minting => Status::Processing,
        Mint::Minted => Status::PayoutInProgress,
        Mint::Completed => Status::Completed,
        Mint::Failed => Status::Failed,
    }
}

/// The largest on-ramp fee: 10% (1,000 basis points).
pub const MAX_FEE_BPS: u32 = 1_000;

/// The fee of a wire of `cents`, in cents, at `bps` basis points, rounded
/// down (the client never pays a fraction of a cent more than the rate).
pub fn fee(cents: i64, bps: u32) -> i64 {
    i64::try_from(i128::from(cents) * i128::from(bps) / 10_000).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversion_stands_where_its_mint_is() {
        use {Mint as M, Status as S};
        for (mint, handed_off, status) in [
            (M::Received, false, S::Initiated),
            (M::AwaitingApproval, false, S::Processing),
            (M::Minting, false, S::Processing),
            (M::Minting, true, S::PayoutInitiated),
            (M::Minted, true, S::PayoutInProgress),
            (M::Completed, true, S::Completed),
            (M::Failed, false, S::Failed),
            (M::Failed, true, S::Failed),
        ] {
            assert_eq!(target(mint, handed_off), status, "{mint} {handed_off}");
        }
    }

    #[test]
    fn every_mint_path_is_a_path_of_the_conversion_table() {
        // Whatever the mint went through, the conversion can follow it from
        // INITIATED, and a failure comes before the payout was delivered.
        for mint in Mint::ALL {
            for handed_off in [false, true] {
                let to = target(mint, handed_off);
                assert!(super::super::state::path(Status::Initiated, to).is_ok(), "{mint} {handed_off}");
            }
        }
        assert!(super::super::state::path(Status::PayoutInitiated, target(Mint::Failed, true)).is_ok());
    }

    #[test]
    fn fees_are_whole_cents_rounded_down() {
        for (cents, bps, fee_cents) in [
            (25_000, 0, 0),
            (25_000, 100, 250),
            (99, 100, 0),
            (100, 100, 1),
            (1_000_000_000_000, MAX_FEE_BPS, 100_000_000_000),
        ] {
            assert_eq!(fee(cents, bps), fee_cents, "{cents} {bps}");
        }
    }
}
