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
//!
//! [`record_wire`] is the one door of a wire to a virtual account, whoever
//! learnt of it (the sandbox's simulation, an operator, a bank's
//! notification through [`crate::bank_import`]).

use super::{Conversion, state::Status};
use crate::{
    amount::Cents,
    audit::{self, Record},
    issuance::{normalize_reference, state::Status as Mint},
    store::{
        Made, NewVirtualWire, NewWire, Store, StoreError,
        conversions::{self as rows, Settled, Wired},
        mints::{self, NewMint},
        now_micros,
    },
};

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

/// Records the wire of `new` at its virtual account, with the `INITIATED`
/// `ON_RAMP` conversion and the `RECEIVED` mint it starts and their
/// events, in one transaction. The same reference again answers the
/// conversion it started (another virtual account or amount under it is a
/// conflict). Only an `ACTIVE` virtual account takes wires; one of a
/// suspended identity does (the bank has the dollars) and its mint fails,
/// the dollars owed back.
pub async fn record_wire(store: &Store, new: &NewVirtualWire<'_>) -> Result<Made<Conversion>, StoreError> {
    let reference = normalize_reference(new.wire.reference);
    if let Some(found) = store.conversion_by_wire(&reference).await? {
        return same_wire(found, new);
    }
    let mut tx = store.begin().await?;
    let target = rows::wired_account(&mut tx, new.virtual_account_id, new.organization)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("virtual account {}", new.virtual_account_id)))?;
    let fee_cents = takes_wire(&target, new)?;
    let wire = NewWire { memo_id: &target.message, reference: &reference, ..new.wire.clone() };
    let (mint_id, now) = (uuid::Uuid::new_v4().to_string(), now_micros());
    let mint = NewMint {
        id: &mint_id,
        organization: &target.organization,
        instruction: new.virtual_account_id,
        identity: &target.identity,
        account: &target.account,
        symbol: &target.currency,
        chain: &target.chain,
        destination_address: &target.address,
        cents: new.wire.cents,
        fee_cents,
        wire: &wire,
        now,
    };
    if !mints::insert_mint(&mut tx, &mint).await? {
        // The same reference raced this one in, or a mint instruction's
        // wire holds it.
        drop(tx);
        return match store.conversion_by_wire(&reference).await? {
            Some(found) => same_wire(found, new),
            None => Err(StoreError::taken(
                format!("wire_reference:{reference}"),
                format!("wire reference {reference} is taken by a mint"),
            )),
        };
    }
    let id = rows::insert_on_ramp(&mut tx, new, &target, (&mint_id, fee_cents), now).await?;
    let minted = mints::mint_in(&mut tx, &mint_id).await?;
    mints::announce(&mut tx, &minted, now).await?;
    let conversion = rows::conversion_in(&mut tx, &id).await?;
    rows::announce(&mut tx, &conversion, now).await?;
    if let Some(actor) = new.wire.recorded_by {
        let record = Record {
            actor,
            action: "conversion.wire_recorded",
            target_kind: "conversion",
            target_id: &conversion.id,
            organization_id: Some(&target.organization),
            reason: new.wire.reason,
            request_id: None,
            detail: None,
        };
        audit::append(&mut tx, store.cipher().ok(), record).await?;
    }
    tx.commit().await?;
    Ok(Made::New(conversion))
}

/// The fee the wire of `new` pays at `target`; refused when the virtual
/// account takes no wire or the wire does not cover the fee.
fn takes_wire(target: &Wired, new: &NewVirtualWire<'_>) -> Result<i64, StoreError> {
    if target.status != "ACTIVE" {
        return Err(StoreError::Refused(format!(
            "virtual account {} is VIRTUAL_ACCOUNT_STATUS_{}: it takes no wire",
            new.virtual_account_id, target.status
        )));
    }
    let fee_cents = fee(new.wire.cents, target.fee_bps);
    if new.wire.cents - fee_cents <= 0 {
        return Err(StoreError::Invalid(format!(
            "a wire of {} USD does not cover the on-ramp fee of {} USD",
            Cents(new.wire.cents),
            Cents(fee_cents)
        )));
    }
    Ok(fee_cents)
}

/// The conversion a reference already started, when `new` is the same wire.
fn same_wire(
    (found, _): (Conversion, i64),
    new: &NewVirtualWire<'_>,
) -> Result<Made<Conversion>, StoreError> {
    if new.organization.is_some_and(|o| o != found.organization) {
        return Err(StoreError::taken(
            format!("wire_reference:{}", new.wire.reference),
            format!("wire reference {} is taken", new.wire.reference),
        ));
    }
    let same_account = found.payment_instructions_id.as_deref() == Some(new.virtual_account_id);
    if !same_account || found.source.amount != Cents(new.wire.cents).to_string() {
        return Err(StoreError::Duplicate(format!(
            "wire {} was recorded for virtual account {} and {} USD (conversion {})",
            new.wire.reference,
            found.payment_instructions_id.unwrap_or_default(),
            found.source.amount,
            found.id
        )));
    }
    Ok(Made::Existing(found))
}

/// The ids of the `ON_RAMP` conversions behind their mint (see
/// [`target`]), oldest first.
pub async fn behind(store: &Store) -> Result<Vec<String>, StoreError> {
    let open = store.open_on_ramps().await?;
    Ok(open.into_iter().filter(|c| target(c.mint, c.handed_off) != c.status).map(|c| c.id).collect())
}

/// Walks the `ON_RAMP` conversion `id` to where its mint stands (see
/// [`target`]), one status and event at a time, in one transaction holding
/// the conversion's row: the changes it made.
pub async fn follow(store: &Store, id: &str) -> Result<usize, StoreError> {
    let mut tx = store.begin().await?;
    let Some((status, mint)) = rows::lock_conversion(&mut tx, id).await? else { return Ok(0) };
    let (mint, handed_off, minted_cents, failure_reason) = rows::on_ramp_mint(&mut tx, &mint).await?;
    let settled = Settled { destination_cents: Some(minted_cents), failure_reason, ..Settled::default() };
    let moved = rows::walk(&mut tx, id, (status, target(mint, handed_off)), &settled).await?;
    tx.commit().await?;
    Ok(moved)
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
