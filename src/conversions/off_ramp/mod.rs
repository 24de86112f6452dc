//! What happens to an `OFF_RAMP` conversion, from its acceptance to the
//! end of its legs ([`rules`] says where they put it):
//!
//! 1. [`accept`]: in one transaction holding the account's row, the
//!    transfer collecting the stablecoin to the settlement wallet is held
//!    like any transfer, the quote is taken, and the `INITIATED`
//!    conversion is written with its event;
//! 2. [`follow`], from the conversions worker: the conversion walked
//!    behind its legs under its row lock, its identity judged again once
//!    the stablecoin is committed; the payout itself is handed to the bank
//!    by [`super::payout`], outside the transaction;
//! 3. the bank's answer (see [`super::payout`]) and, after a
//!    return or a refusal, the refund ([`refunds`]) sent back by the
//!    chain's sender.

pub mod pricing;
pub mod refunds;
pub mod rules;

pub use rules::*;

use crate::{
    conversions::Conversion,
    issuance::gate_of,
    store::{
        Made, NewOffRamp, Refusal, Store, StoreError,
        conversions::{announce, conversion_in, walk},
        entitlement, now_micros,
        off_ramps::{self as rows, by_request},
    },
    transfers::hold::{hold, lock_source},
};

/// Why an off-ramp was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum OffRampRefusal {
    /// The collect transfer was refused: the account, its identity, the
    /// balance or a limit.
    #[error(transparent)]
    Transfer(#[from] Refusal),
    #[error("quote {0} was already used by another conversion")]
    QuoteUsed(String),
    #[error("quote {0} has expired")]
    QuoteExpired(String),
    #[error("request_id was already used by conversion {0} with a different request")]
    RequestReused(String),
}

impl From<StoreError> for OffRampRefusal {
    fn from(error: StoreError) -> Self {
        OffRampRefusal::Transfer(Refusal::Store(error))
    }
}

/// What a step of an off-ramp did: the status changes it made, and
/// whether its payout is due to be handed to the bank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Followed {
    pub moved: usize,
    pub payout_due: bool,
}

/// Accepts `new` exactly once per `(organization, request_id)`: in one
/// transaction holding the account's row, the collect transfer is held
/// (the account `ACTIVE`, its identity transacting, the balance and the
/// limits checked as for any transfer), the quote is taken, and the
/// `INITIATED` conversion is written with its event. A request whose
/// `request_id` is taken is answered from its conversion before anything
/// is checked, and again once the account's row is held.
pub async fn accept(store: &Store, new: &NewOffRamp) -> Result<Made<Conversion>, OffRampRefusal> {
    if let Some(found) = store.off_ramp_by_request(&new.organization, &new.request_id).await? {
        return same_request(found, new);
    }
    let mut tx = store.begin().await?;
    let now = now_micros();
    let identity = lock_source(&mut tx, &new.collect).await?;
    if let Some(found) = by_request(&mut tx, &new.organization, &new.request_id).await? {
        return same_request(found, new);
    }
    let id = uuid::Uuid::new_v4().to_string();
    if let Some(quote) = &new.quote_id {
        let (holder, expires_at) = rows::quote_in(&mut tx, &new.organization, quote)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("quote {quote}")))?;
        let refused = |problem| match problem {
            QuoteProblem::Used => OffRampRefusal::QuoteUsed(quote.clone()),
            QuoteProblem::Expired => OffRampRefusal::QuoteExpired(quote.clone()),
        };
        quote_usable(holder, expires_at, now).map_err(refused)?;
        if !rows::take_quote(&mut tx, quote, &id).await? {
            return Err(OffRampRefusal::QuoteUsed(quote.clone()));
        }
    }
    let transfer = hold(&mut tx, &new.collect, &identity, new.balance, now)
        .await?
        .ok_or_else(|| StoreError::Corrupt("a fresh collect transfer's request_id is taken".into()))?;
    if !rows::insert(&mut tx, new, &id, &identity, &transfer, now).await? {
        drop(tx);
        let found = store.off_ramp_by_request(&new.organization, &new.request_id).await?;
        let found = found.ok_or_else(|| StoreError::Corrupt("request_id conflict without a row".into()))?;
        return same_request(found, new);
    }
    let conversion = conversion_in(&mut tx, &id).await?;
    announce(&mut tx, &conversion, now).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(Made::New(conversion))
}

/// The off-ramp a `request_id` already holds, when `new` asks the same.
fn same_request(
    (found, fingerprint): (Conversion, String),
    new: &NewOffRamp,
) -> Result<Made<Conversion>, OffRampRefusal> {
    if fingerprint != new.fingerprint {
        return Err(OffRampRefusal::RequestReused(found.id));
    }
    Ok(Made::Existing(found))
}

/// The ids of the off-ramps behind their legs (or whose payout is due),
/// oldest first.
pub async fn behind(store: &Store) -> Result<Vec<String>, StoreError> {
    let open = store.open_off_ramps(now_micros()).await?;
    Ok(open
        .into_iter()
        .filter(|(_, status, legs)| {
            let (to, need) = target(*legs);
            to != *status || need == Need::Handoff
        })
        .map(|(id, _, _)| id)
        .collect())
}

/// Walks the off-ramp `id` to where its legs put it, one status and event
/// at a time, in one transaction holding its row. Once its stablecoin is
/// committed, its identity is judged: one no longer `ACTIVE` or
/// fiat-enabled has its payout refused at once (nothing is paid out; the
/// stablecoin goes back), unless the bank was asked for it already;
/// otherwise the payout is due to be handed to the bank, which the caller
/// does outside the transaction.
pub async fn follow(store: &Store, id: &str) -> Result<Followed, StoreError> {
    let mut tx = store.begin().await?;
    let Some((status, organization, identity)) = rows::lock_off_ramp(&mut tx, id).await? else {
        return Ok(Followed::default());
    };
    let now = now_micros();
    let (mut legs, mut settled) = rows::legs_in(&mut tx, id, now).await?;
    let mut payout_due = false;
    if target(legs).1 == Need::Handoff {
        let (identity_status, fiat) = entitlement::lock(&mut tx, &organization, &identity).await?;
        match gate_of(identity_status, fiat) {
            Ok(()) => payout_due = true,
            Err(gate) => {
                let reason = payout_refusal(&identity, gate);
                if rows::refuse_payout(&mut tx, id, &reason, now).await? {
                    tracing::warn!(conversion = id, %reason, "an off-ramp's payout is refused");
                    (legs, settled) = rows::legs_in(&mut tx, id, now).await?;
                } else {
                    // The bank was asked already: its answer decides.
                    tracing::warn!(conversion = id, %reason, "an off-ramp's payout the bank may hold is followed to its answer");
                    payout_due = true;
                }
            }
        }
    }
    let (to, _) = target(legs);
    let moved = walk(&mut tx, id, (status, to), &settled).await?;
    tx.commit().await?;
    Ok(Followed { moved, payout_due })
}
