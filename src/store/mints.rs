//! Wires and the mints they start. Every change of a mint's status goes
//! through [`crate::issuance::mint::apply`] in one transaction that also
//! writes its `mint_update` event, guarded by the status it read: two
//! instances settling or approving the same mint change it once.

use sqlx::{Any, Row, Transaction, any::AnyRow};

use super::{
    Made, Store, StoreError,
    events::{self, NewEvent},
    identities::lock_entitlement,
    now_micros, parse_column, time,
};
use crate::amount::Cents;
use crate::{
    chain::Chain,
    issuance::{
        Approval, FIAT_CURRENCY, MINT_UPDATE, Mint, gate_of,
        mint::{Event, Failure, Status, Transition, apply},
        normalize_memo, normalize_reference,
        provider::{Outcome, Settlement},
    },
};

/// Where a wire was learnt of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireSource {
    /// `POST /v2/simulation/fiat-deposit` (`sandbox`).
    Simulation,
    /// `issuance wires record`.
    Operator,
}

impl WireSource {
    pub fn as_str(self) -> &'static str {
        match self {
            WireSource::Simulation => "SIMULATION",
            WireSource::Operator => "OPERATOR",
        }
    }
}

/// A wire that arrived quoting `memo_id`.
#[derive(Debug, Clone)]
pub struct NewWire<'a> {
    /// The caller's organization (a memo of another is not found); `None`
    /// for an operator, who records any organization's wires.
    pub organization: Option<&'a str>,
    pub memo_id: &'a str,
    pub cents: i64,
    /// The bank's reference: unique; recording it again is a no-op.
    pub reference: &'a str,
    pub source: WireSource,
    /// The operator and why (an operator's wire).
    pub recorded_by: Option<&'a str>,
    pub reason: Option<&'a str>,
    /// What the bank does with it.
    pub settlement: Settlement,
}

/// The fiat a failed mint owes back, and whether it was sent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FiatReturn {
    pub mint: Mint,
    /// `PENDING` or `COMPLETED`.
    pub status: String,
    pub reference: Option<String>,
}

const MINT_COLUMNS: &str = "m.id, m.organization_id, m.instruction_id, m.identity_id, m.memo_id, m.amount_cents, \
    m.stablecoin_symbol, m.chain, m.destination_address, m.status, m.failure_reason, m.transaction_hash, \
    m.deposit_id, m.created_at, m.updated_at, m.fiat_return, m.return_reference, m.recorded_by, m.bank_outcome";

impl Store {
    /// Records `wire` and the `RECEIVED` mint it starts, with its event, in
    /// one transaction. The same reference again answers the mint it
    /// started (another memo or amount under it is a conflict).
    pub async fn record_wire(&self, wire: &NewWire<'_>) -> Result<Made<Mint>, StoreError> {
        let (memo, reference) = (normalize_memo(wire.memo_id), normalize_reference(wire.reference));
        let wire = &NewWire { memo_id: &memo, reference: &reference, ..wire.clone() };
        if let Some(found) = self.mint_by_reference(wire.reference).await? {
            return same_wire(found, wire);
        }
        let mut tx = self.begin().await?;
        let instruction = sqlx::query(
            "SELECT organization_id, id, identity_id, stablecoin_symbol, chain, destination_address, account_id
             FROM mint_instructions WHERE memo_id = $1 AND ($2 IS NULL OR organization_id = $2)",
        )
        .bind(wire.memo_id)
        .bind(wire.organization)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("mint instruction with memo_id {}", wire.memo_id)))?;
        let (id, now) = (uuid::Uuid::new_v4().to_string(), now_micros());
        let (organization, instruction_id, identity, symbol, chain, address, account) = (
            instruction.try_get::<String, _>("organization_id")?,
            instruction.try_get::<String, _>("id")?,
            instruction.try_get::<String, _>("identity_id")?,
            instruction.try_get::<String, _>("stablecoin_symbol")?,
            instruction.try_get::<String, _>("chain")?,
            instruction.try_get::<String, _>("destination_address")?,
            instruction.try_get::<String, _>("account_id")?,
        );
        let new = NewMint {
            id: &id,
            organization: &organization,
            instruction: &instruction_id,
            identity: &identity,
            account: &account,
            symbol: &symbol,
            chain: &chain,
            destination_address: &address,
            cents: wire.cents,
            fee_cents: 0,
            wire,
            now,
        };
        let inserted = insert_mint(&mut tx, &new).await?;
        if !inserted {
            // The same reference raced this one in.
            drop(tx);
            let found = self.mint_by_reference(wire.reference).await?;
            return same_wire(found.ok_or_else(|| StoreError::Corrupt("a lost wire".into()))?, wire);
        }
        let mint = mint_in(&mut tx, &id).await?;
        announce(&mut tx, &mint, now).await?;
        tx.commit().await?;
        Ok(Made::New(mint))
    }

    /// The ids of `RECEIVED` mints whose wire the bank has settled by `now`.
    pub async fn due_mints(&self, now: i64, limit: u32) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT id FROM mints WHERE status = $1 AND settles_at <= $2 ORDER BY settles_at, id LIMIT $3",
        )
        .bind(Status::Received.as_str())
        .bind(now)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// Applies the bank's outcome to the `RECEIVED` mint `id` once it is
    /// due: settled, the identity's entitlement now decides, and `approval`
    /// whether a second operator must approve (always, or above the day's
    /// cap: the cents of the wires settled this UTC day for the same chain
    /// and stablecoin and not refused). `None` when the mint is
    /// not (or no longer) `RECEIVED` and due.
    pub async fn settle_mint(&self, id: &str, approval: &Approval) -> Result<Option<Transition>, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(
            "SELECT status, bank_outcome, settles_at, chain, stablecoin_symbol, amount_cents, organization_id,
                 identity_id
             FROM mints WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("mint {id}")))?;
        let status: Status = parse_column(&row.try_get::<String, _>("status")?, "mints.status")?;
        if status != Status::Received || row.try_get::<i64, _>("settles_at")? > now_micros() {
            return Ok(None);
        }
        let event = match parse_column::<Outcome>(
            &row.try_get::<String, _>("bank_outcome")?,
            "mints.bank_outcome",
        )? {
            Outcome::Reject => Event::Rejected,
            Outcome::Return => Event::Returned,
            Outcome::Settle => {
                let needed = approval_needed(&mut tx, &row, approval).await?;
                Event::Settled { gate: gate_in(&mut tx, &row).await?, approval: needed }
            }
        };
        let transition = apply(status, event).map_err(|r| StoreError::Conflict(r.to_string()))?;
        change(&mut tx, id, transition, None).await?;
        tx.commit().await?;
        Ok(Some(transition))
    }

    /// A second operator's decision on the `AWAITING_APPROVAL` mint of the
    /// wire `reference` (or of the mint of that id): approved (the
    /// identity's entitlement now decides whether it mints) or refused. The
    /// operator who recorded the wire cannot decide on it.
    pub async fn decide_mint(&self, reference: &str, by: &str, approve: bool) -> Result<Mint, StoreError> {
        let mut tx = self.begin().await?;
        let rows = sqlx::query(
            "SELECT id, status, recorded_by, organization_id, identity_id FROM mints
             WHERE wire_reference = $2 OR id = $1",
        )
        .bind(reference)
        .bind(normalize_reference(reference))
        .fetch_all(&mut *tx)
        .await?;
        let row = match rows.as_slice() {
            [row] => row,
            [] => return Err(StoreError::NotFound(format!("wire {reference}"))),
            _ => {
                return Err(StoreError::Invalid(format!(
                    "{reference} is both a wire's reference and another wire's mint id: name the mint by its id"
                )));
            }
        };
        let id: String = row.try_get("id")?;
        if row.try_get::<Option<String>, _>("recorded_by")?.as_deref() == Some(by) {
            return Err(StoreError::Invalid(format!(
                "{by} recorded wire {reference}: another operator must approve its mint"
            )));
        }
        let status: Status = parse_column(&row.try_get::<String, _>("status")?, "mints.status")?;
        let event =
            if approve { Event::Approved { gate: gate_in(&mut tx, row).await? } } else { Event::Refused };
        let transition = apply(status, event).map_err(|_| {
            StoreError::Conflict(format!("the mint of wire {reference} is {status}, not AWAITING_APPROVAL"))
        })?;
        change(&mut tx, &id, transition, Some(by)).await?;
        let mint = mint_in(&mut tx, &id).await?;
        tx.commit().await?;
        Ok(mint)
    }

    /// One mint; of `organization` only, when given.
    pub async fn mint(&self, organization: Option<&str>, id: &str) -> Result<Mint, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {MINT_COLUMNS} FROM mints m WHERE m.id = $1 AND ($2 IS NULL OR m.organization_id = $2)"
        ))
        .bind(id)
        .bind(organization)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("mint {id}")))?;
        mint_from_row(&row)
    }

    /// Up to `limit` mints (of `status` only, when given) whose id sorts
    /// after `after`, by id.
    pub async fn mint_page(
        &self,
        status: Option<Status>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Mint>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {MINT_COLUMNS} FROM mints m WHERE ($1 IS NULL OR m.status = $1) AND ($2 IS NULL OR m.id > $2)
             ORDER BY m.id LIMIT $3"
        ))
        .bind(status.map(Status::as_str))
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(mint_from_row).collect()
    }

    /// The fiat failed mints owe back: `PENDING` ones, or all.
    pub async fn fiat_returns(&self, pending_only: bool) -> Result<Vec<FiatReturn>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {MINT_COLUMNS} FROM mints m WHERE m.fiat_return IS NOT NULL AND ($1 = 0 OR m.fiat_return = 'PENDING')
             ORDER BY m.updated_at, m.id"
        ))
        .bind(i64::from(pending_only))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(FiatReturn {
                    mint: mint_from_row(row)?,
                    status: row.try_get("fiat_return")?,
                    reference: row.try_get("return_reference")?,
                })
            })
            .collect()
    }

    /// Records that the fiat of the failed mint `id` was sent back, under
    /// the bank's `reference`, by whom and why. Again with the same
    /// reference: no-op.
    pub async fn complete_return(
        &self,
        id: &str,
        reference: &str,
        by: &str,
        reason: &str,
    ) -> Result<FiatReturn, StoreError> {
        // One return wire returns one mint's dollars (a unique index holds it too).
        let other: Option<String> =
            sqlx::query_scalar("SELECT id FROM mints WHERE return_reference = $1 AND id <> $2")
                .bind(reference)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        if let Some(other) = other {
            return Err(StoreError::Conflict(format!(
                "return wire {reference} returned mint {other} already"
            )));
        }
        let done = sqlx::query(
            "UPDATE mints SET fiat_return = 'COMPLETED', return_reference = $2, return_by = $4, return_reason = $5,
                 updated_at = $3
             WHERE id = $1 AND fiat_return = 'PENDING'",
        )
        .bind(id)
        .bind(reference)
        .bind(now_micros())
        .bind(by)
        .bind(reason)
        .execute(&self.pool)
        .await?;
        let found = self.fiat_returns(false).await?.into_iter().find(|r| r.mint.id == id);
        match found {
            Some(r) if done.rows_affected() == 1 || r.reference.as_deref() == Some(reference) => Ok(r),
            Some(r) => Err(StoreError::Conflict(format!(
                "the fiat of mint {id} was returned already (reference {})",
                r.reference.unwrap_or_default()
            ))),
            None => Err(StoreError::NotFound(format!("a fiat return of mint {id}"))),
        }
    }

    async fn mint_by_reference(&self, reference: &str) -> Result<Option<(Mint, String)>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {MINT_COLUMNS}, m.wire_reference FROM mints m WHERE m.wire_reference = $1"
        ))
        .bind(reference)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| Ok((mint_from_row(&row)?, row.try_get("organization_id")?))).transpose()
    }
}

/// A mint to insert for `wire`: `cents` of `symbol` on `chain` to
/// `destination_address` of `account`, under its instruction (or, an
/// on-ramp's, its virtual account).
pub(super) struct NewMint<'a> {
    pub id: &'a str,
    pub organization: &'a str,
    pub instruction: &'a str,
    pub identity: &'a str,
    pub account: &'a str,
    pub symbol: &'a str,
    pub chain: &'a str,
    pub destination_address: &'a str,
    /// The wire's cents, and those of them kept as a fee.
    pub cents: i64,
    pub fee_cents: i64,
    pub wire: &'a NewWire<'a>,
    pub now: i64,
}

/// Inserts the `RECEIVED` mint `new`; `false` when its wire's reference
/// is taken (the same wire raced this one in).
pub(super) async fn insert_mint(
    tx: &mut Transaction<'static, Any>,
    new: &NewMint<'_>,
) -> Result<bool, StoreError> {
    let wire = new.wire;
    let settles_at = new.now + i64::try_from(wire.settlement.after.as_micros()).unwrap_or(i64::MAX);
    let inserted = sqlx::query(
        "INSERT INTO mints (id, organization_id, instruction_id, identity_id, memo_id, amount_cents,
             stablecoin_symbol, chain, destination_address, status, wire_source, wire_reference, recorded_by,
             recorded_reason, bank_outcome, settles_at, created_at, updated_at, account_id, fee_cents)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $17, $18, $19)
         ON CONFLICT DO NOTHING",
    )
    .bind(new.id)
    .bind(new.organization)
    .bind(new.instruction)
    .bind(new.identity)
    .bind(wire.memo_id)
    .bind(new.cents)
    .bind(new.symbol)
    .bind(new.chain)
    .bind(new.destination_address)
    .bind(Status::Received.as_str())
    .bind(wire.source.as_str())
    .bind(wire.reference)
    .bind(wire.recorded_by)
    .bind(wire.reason)
    .bind(wire.settlement.outcome.as_str())
    .bind(settles_at)
    .bind(new.now)
    .bind(new.account)
    .bind(new.fee_cents)
    .execute(&mut **tx)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// The mint a reference already started, when `wire` is the same wire.
fn same_wire((found, organization): (Mint, String), wire: &NewWire<'_>) -> Result<Made<Mint>, StoreError> {
    if wire.organization.is_some_and(|o| o != organization) {
        return Err(StoreError::Conflict(format!("wire reference {} is taken", wire.reference)));
    }
    if found.memo_id != wire.memo_id || found.amount != Cents(wire.cents).to_string() {
        return Err(StoreError::Conflict(format!(
            "wire {} was recorded for memo_id {} and {} USD (mint {})",
            wire.reference, found.memo_id, found.amount, found.id
        )));
    }
    Ok(Made::Existing(found))
}

/// Whether the settled mint of `row` waits for approval: always, or when
/// its chain's stablecoin has a daily cap the wires settled this UTC day
/// would pass (by settlement, not arrival: a wire that arrived before
/// midnight and settles after it counts on the day it settles).
/// The day's count is taken under a lock per (chain, stablecoin), so two
/// settlements cannot both fit under the cap on the same room.
async fn approval_needed(
    tx: &mut Transaction<'static, Any>,
    row: &AnyRow,
    approval: &Approval,
) -> Result<bool, StoreError> {
    let (chain, symbol): (String, String) = (row.try_get("chain")?, row.try_get("stablecoin_symbol")?);
    let cents: i64 = row.try_get("amount_cents")?;
    let cap = approval.cap(parse_column::<Chain>(&chain, "mints.chain")?, &symbol);
    if approval.always || cap.is_none() {
        return Ok(approval.needed(cap, 0, cents));
    }
    sqlx::query(
        "INSERT INTO issuance_locks (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = excluded.name",
    )
    .bind(format!("mint-cap:{chain}:{symbol}"))
    .execute(&mut **tx)
    .await?;
    let midnight = chrono::Utc::now().date_naive().and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    let today: i64 = sqlx::query(
        "SELECT CAST(COALESCE(SUM(amount_cents), 0) AS BIGINT) AS total FROM mints
         WHERE chain = $1 AND stablecoin_symbol = $2 AND settled_at >= $3 AND status IN ($4, $5, $6, $7)",
    )
    .bind(&chain)
    .bind(&symbol)
    .bind(midnight.timestamp_micros())
    .bind(Status::AwaitingApproval.as_str())
    .bind(Status::Minting.as_str())
    .bind(Status::Minted.as_str())
    .bind(Status::Completed.as_str())
    .fetch_one(&mut **tx)
    .await?
    .try_get("total")?;
    Ok(approval.needed(cap, today, cents))
}

/// The entitlement of the identity of the mint in `row`, read under the
/// identity's row lock: the lock a suspension or a fiat withdrawal takes, so
/// neither can commit between this read and the mint's change (READ
/// COMMITTED would otherwise let a mint start for an identity suspended a
/// moment before).
async fn gate_in(
    tx: &mut Transaction<'static, Any>,
    row: &AnyRow,
) -> Result<Result<(), crate::issuance::Gate>, StoreError> {
    let (organization, identity): (String, String) =
        (row.try_get("organization_id")?, row.try_get("identity_id")?);
    let (status, fiat) = lock_entitlement(tx, &organization, &identity).await?;
    Ok(gate_of(status, fiat))
}

/// Writes `transition` of mint `id` (if it still has the status it was
/// read with) and its event.
pub(super) async fn change(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    transition: Transition,
    approved_by: Option<&str>,
) -> Result<(), StoreError> {
    let now = now_micros();
    let failure = transition.failure.map(|f| format!("{}: {}", f.as_str(), explain(f)));
    let owed = transition.failure.filter(|f| f.returns_fiat()).map(|_| "PENDING");
    let done = sqlx::query(
        "UPDATE mints SET status = $2, failure_reason = $3, fiat_return = COALESCE($4, fiat_return),
             approved_by = COALESCE($5, approved_by), updated_at = $6,
             settled_at = CASE WHEN $7 = 'RECEIVED' THEN $6 ELSE settled_at END
         WHERE id = $1 AND status = $7",
    )
    .bind(id)
    .bind(transition.to.as_str())
    .bind(failure)
    .bind(owed)
    .bind(approved_by)
    .bind(now)
    .bind(transition.from.as_str())
    .execute(&mut **tx)
    .await?;
    if done.rows_affected() != 1 {
        return Err(StoreError::Conflict(format!("mint {id} changed meanwhile")));
    }
    let mint = mint_in(tx, id).await?;
    announce(tx, &mint, now).await
}

/// What a failure means, for `failure_reason`.
fn explain(failure: Failure) -> &'static str {
    match failure {
        Failure::AccountNotActive => "the identity was not ACTIVE; the dollars are returned",
        Failure::FiatNotEnabled => {
            "the identity was not enabled for fiat operations; the dollars are returned"
        }
        Failure::WireRejected => "the bank did not credit the wire",
        Failure::WireReturned => "the sender's bank took the wire back",
        Failure::ApprovalRefused => "an operator refused the mint; the dollars are returned",
        Failure::MintTransactionFailed => {
            "the mint transaction failed; nothing was minted; the dollars are returned"
        }
    }
}

/// The mint's `mint_update` for its current status: its envelope id is
/// the same for the same (mint, status), so clients may deduplicate on it.
pub(super) async fn announce(
    tx: &mut Transaction<'static, Any>,
    mint: &Mint,
    now: i64,
) -> Result<(), StoreError> {
    let id = format!("{}-{}", mint.id, mint.status.as_str().to_lowercase());
    let event = NewEvent::new(&mint.organization, MINT_UPDATE, &mint.id, id, mint)?;
    events::append(tx, std::slice::from_ref(&event), now).await
}

pub(super) async fn mint_in(tx: &mut Transaction<'static, Any>, id: &str) -> Result<Mint, StoreError> {
    let row = sqlx::query(&format!("SELECT {MINT_COLUMNS} FROM mints m WHERE m.id = $1"))
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
    mint_from_row(&row)
}

fn mint_from_row(row: &AnyRow) -> Result<Mint, StoreError> {
    Ok(Mint {
        id: row.try_get("id")?,
        mint_instruction_id: row.try_get("instruction_id")?,
        identity_id: row.try_get("identity_id")?,
        memo_id: row.try_get("memo_id")?,
        amount: Cents(row.try_get("amount_cents")?).to_string(),
        fiat_currency_symbol: FIAT_CURRENCY,
        stablecoin_symbol: row.try_get("stablecoin_symbol")?,
        chain: parse_column::<Chain>(&row.try_get::<String, _>("chain")?, "mints.chain")?,
        destination_address: row.try_get("destination_address")?,
        status: parse_column(&row.try_get::<String, _>("status")?, "mints.status")?,
        transaction_hash: row.try_get("transaction_hash")?,
        deposit_id: row.try_get("deposit_id")?,
        failure_reason: row.try_get("failure_reason")?,
        created_at: time(row.try_get("created_at")?)?,
        updated_at: time(row.try_get("updated_at")?)?,
        organization: row.try_get("organization_id")?,
    })
}
