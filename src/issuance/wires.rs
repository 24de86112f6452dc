//! What happens when a wire arrives: it is recorded with the `RECEIVED`
//! mint it starts; once the bank settles it (at once, or when the bank's
//! outcome is due), the identity's entitlement and the approval rule decide
//! whether it mints, waits for a second operator or fails; a second
//! operator's decision moves a waiting mint on. Each step is one
//! transaction that changes the mint only from the status it read and
//! writes its `mint_update` event (see [`super::state`]).

use super::{
    Approval, FIAT_CURRENCY, Gate, Mint, gate_of, normalize_memo, normalize_reference,
    state::{Event, Status, Transition, apply},
};
use crate::{
    amount::Cents,
    audit::{self, Actor, Record},
    bank::{Bank, Credit, Settlement, WireOutcome as Outcome},
    operators::rules::second_pair,
    store::{
        Made, NewWire, Store, StoreError, Tx, WireSource, entitlement,
        mints::{self, NewMint, Settling},
        now_micros,
    },
};

/// A wire an operator records (`memo_id` empty for a virtual account's):
/// of any organization, settled as the operators' bank settles it.
pub fn by_operator<'a>(
    memo_id: &'a str,
    cents: i64,
    reference: &'a str,
    recorder: &'a Actor,
    reason: &'a str,
) -> NewWire<'a> {
    NewWire {
        organization: None,
        memo_id,
        cents,
        reference,
        source: WireSource::Operator,
        recorded_by: Some(recorder),
        reason: Some(reason),
        settlement: crate::bank::Operators::default().receive(cents),
    }
}

/// The one door of a wire into issuance, whoever learnt of it (the
/// sandbox's simulation, an operator): recorded, then settled at once when
/// the bank's outcome is already due (otherwise, and when another instance
/// settled it first, by the issuance worker). Answers the mint as it is
/// now: new, or the one the same wire started before.
pub async fn arrive(
    store: &Store,
    wire: &NewWire<'_>,
    approval: &Approval,
) -> Result<Made<Mint>, StoreError> {
    let made = record(store, wire).await?;
    let id = made.get().id.clone();
    match settle(store, &id, approval).await {
        Ok(_) | Err(StoreError::Raced(_) | StoreError::Refused(_)) => {}
        // Recorded all the same: the issuance worker settles it later, and
        // the wire is not reported as unrecorded.
        Err(error) if error.is_refusal() => {
            tracing::warn!(mint = %id, %error, "a recorded wire could not be settled now");
        }
        Err(error) => return Err(error),
    }
    let now = store.mint(None, &id).await?;
    Ok(made.map(|_| now))
}

/// Who reports a bank's credits, and why.
#[derive(Debug, Clone, Copy)]
pub struct Reporter<'a> {
    pub by: &'a Actor,
    pub reason: &'a str,
}

/// The wire a bank reported credited, quoting `memo` (a virtual
/// account's deposit message, for an on-ramp), as `by` imported it; why
/// not, when it is not in dollars.
pub fn credited<'a>(credit: &'a Credit, memo: &'a str, by: Reporter<'a>) -> Result<NewWire<'a>, String> {
    if credit.currency != FIAT_CURRENCY {
        return Err(format!("in {}, not {FIAT_CURRENCY}", credit.currency));
    }
    Ok(NewWire {
        organization: None,
        memo_id: memo,
        cents: credit.cents,
        reference: &credit.reference,
        source: WireSource::Import,
        recorded_by: Some(by.by),
        reason: Some(by.reason),
        settlement: Settlement::SETTLED,
    })
}

/// Records `wire` and the `RECEIVED` mint it starts, with its event, in
/// one transaction. The same reference again answers the mint it started
/// (another memo or amount under it is a conflict).
pub async fn record(store: &Store, wire: &NewWire<'_>) -> Result<Made<Mint>, StoreError> {
    let (memo, reference) = (normalize_memo(wire.memo_id), normalize_reference(wire.reference));
    let wire = &NewWire { memo_id: &memo, reference: &reference, ..wire.clone() };
    if let Some(found) = store.mint_by_reference(wire.reference).await? {
        return same_wire(found, wire);
    }
    let mut tx = store.begin().await?;
    let target = mints::wire_target(&mut tx, wire.memo_id, wire.organization)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("mint instruction with memo_id {}", wire.memo_id)))?;
    let (id, now) = (uuid::Uuid::new_v4().to_string(), now_micros());
    let new = NewMint {
        id: &id,
        organization: &target.organization,
        instruction: &target.instruction,
        identity: &target.identity,
        account: &target.account,
        symbol: &target.symbol,
        chain: &target.chain,
        destination_address: &target.destination_address,
        cents: wire.cents,
        fee_cents: 0,
        wire,
        now,
    };
    if !mints::insert_mint(&mut tx, &new).await? {
        // The same reference raced this one in.
        drop(tx);
        let found = store.mint_by_reference(wire.reference).await?;
        return same_wire(found.ok_or_else(|| StoreError::Corrupt("a lost wire".into()))?, wire);
    }
    let mint = mints::mint_in(&mut tx, &id).await?;
    mints::announce(&mut tx, &mint, now).await?;
    if let Some(actor) = wire.recorded_by {
        let record = entry(actor, "wire.recorded", &mint, &target.organization, wire.reason);
        audit::append(&mut tx, store.cipher().ok(), record).await?;
    }
    tx.commit().await?;
    Ok(Made::New(mint))
}

/// The mint a reference already started, when `wire` is the same wire.
fn same_wire((found, organization): (Mint, String), wire: &NewWire<'_>) -> Result<Made<Mint>, StoreError> {
    if wire.organization.is_some_and(|o| o != organization) {
        return Err(StoreError::taken(
            format!("wire_reference:{}", wire.reference),
            format!("wire reference {} is taken", wire.reference),
        ));
    }
    if found.memo_id != wire.memo_id || found.amount != Cents(wire.cents).to_string() {
        return Err(StoreError::Duplicate(format!(
            "wire {} was recorded for memo_id {} and {} USD (mint {})",
            wire.reference, found.memo_id, found.amount, found.id
        )));
    }
    Ok(Made::Existing(found))
}

/// Applies the bank's outcome to the `RECEIVED` mint `id` once it is due:
/// settled, the identity's entitlement now decides, and `approval` whether
/// a second operator must approve (always, or above the day's cap: the
/// cents of the wires settled this UTC day for the same chain and
/// stablecoin and not refused). `None` when the mint is not (or no longer)
/// `RECEIVED` and due.
pub async fn settle(store: &Store, id: &str, approval: &Approval) -> Result<Option<Transition>, StoreError> {
    let mut tx = store.begin().await?;
    let mint =
        mints::settling(&mut tx, id).await?.ok_or_else(|| StoreError::NotFound(format!("mint {id}")))?;
    if mint.status != Status::Received || mint.settles_at > now_micros() {
        return Ok(None);
    }
    let event = match mint.outcome {
        Outcome::Reject => Event::Rejected,
        Outcome::Return => Event::Returned,
        Outcome::Settle => {
            let needed = approval_needed(&mut tx, &mint, approval).await?;
            let gate = gate_in(&mut tx, &mint.organization, &mint.identity).await?;
            Event::Settled { gate, approval: needed }
        }
    };
    let transition = apply(mint.status, event).map_err(|r| StoreError::Refused(r.to_string()))?;
    mints::change(&mut tx, id, transition, None).await?;
    tx.commit().await?;
    Ok(Some(transition))
}

/// Whether the settled `mint` waits for approval: always, or when its
/// chain's stablecoin has a daily cap the wires settled this UTC day would
/// pass (by settlement, not arrival: a wire that arrived before midnight
/// and settles after it counts on the day it settles).
async fn approval_needed(tx: &mut Tx, mint: &Settling, approval: &Approval) -> Result<bool, StoreError> {
    let cap = approval.cap(mint.chain, &mint.symbol);
    if approval.always || cap.is_none() {
        return Ok(approval.needed(cap, 0, mint.cents));
    }
    let midnight = chrono::Utc::now().date_naive().and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    let today = mints::lock_settled_since(tx, mint.chain, &mint.symbol, midnight.timestamp_micros()).await?;
    Ok(approval.needed(cap, today, mint.cents))
}

/// The entitlement of the mint's identity, read under the identity's row
/// lock (see [`entitlement::lock`]).
async fn gate_in(tx: &mut Tx, organization: &str, identity: &str) -> Result<Result<(), Gate>, StoreError> {
    let (status, fiat) = entitlement::lock(tx, organization, identity).await?;
    Ok(gate_of(status, fiat))
}

/// Why a decision on a mint did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// The decider may not decide this mint: they recorded its wire, or
    /// act with `--break-glass`.
    #[error("wire {reference}: {refusal}")]
    FourEyes { reference: String, refusal: crate::operators::Refused },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for DecideError {
    fn from(error: sqlx::Error) -> Self {
        DecideError::Store(error.into())
    }
}

/// A second operator's decision on the `AWAITING_APPROVAL` mint of the wire
/// `reference` (or of the mint of that id: a mint named by its id is always
/// that mint, whatever another wire's reference says): approved (the identity's
/// entitlement now decides whether it mints) or refused. The operator who
/// recorded the wire cannot decide on it.
pub async fn decide(
    store: &Store,
    reference: &str,
    by: &Actor,
    approve: bool,
    reason: Option<&str>,
) -> Result<Mint, DecideError> {
    let mut tx = store.begin().await?;
    let named = mints::named(&mut tx, reference, &normalize_reference(reference)).await?;
    let mint = match (named.iter().find(|mint| mint.id == reference), named.as_slice()) {
        (Some(by_id), _) => by_id,
        (None, [mint]) => mint,
        (None, []) => return Err(StoreError::NotFound(format!("wire {reference}")).into()),
        (None, _) => {
            return Err(StoreError::Invalid(format!("several wires have the reference {reference}")).into());
        }
    };
    if let Some(recorder) = mint.recorded_by.as_deref() {
        second_pair(&Actor::from_recorded(recorder), by)
            .map_err(|refusal| DecideError::FourEyes { reference: reference.to_string(), refusal })?;
        if approve && !super::logged::recording_held(&mut tx, &mint.id, recorder).await? {
            return Err(StoreError::Refused(format!(
                "the recording of wire {reference} by {recorder} is not in the audit log as the service wrote it: \
                 refuse it and record the wire again"
            ))
            .into());
        }
    }
    let event = if approve {
        Event::Approved { gate: gate_in(&mut tx, &mint.organization, &mint.identity).await? }
    } else {
        Event::Refused
    };
    let transition = apply(mint.status, event).map_err(|_| {
        StoreError::Refused(format!("the mint of wire {reference} is {}, not AWAITING_APPROVAL", mint.status))
    })?;
    mints::change(&mut tx, &mint.id, transition, Some(&by.recorded())).await?;
    let decided = mints::mint_in(&mut tx, &mint.id).await?;
    let action = if approve { "wire.approved" } else { "wire.refused" };
    let organization = mint.organization.clone();
    audit::append(&mut tx, store.cipher().ok(), entry(by, action, &decided, &organization, reason)).await?;
    tx.commit().await?;
    Ok(decided)
}

/// The audit entry of a decision on `mint`.
fn entry<'a>(
    actor: &'a Actor,
    action: &'a str,
    mint: &'a Mint,
    organization: &'a str,
    reason: Option<&'a str>,
) -> Record<'a> {
    Record {
        actor,
        action,
        target_kind: "mint",
        target_id: &mint.id,
        organization_id: Some(organization),
        reason,
        request_id: None,
        detail: None,
    }
}
