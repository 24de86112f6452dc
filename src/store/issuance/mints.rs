//! The rows of wires and the mints they start, read and written inside
//! the transaction of a flow of `crate::issuance` (`wires`, `onchain`).
//! A mint's status changes only from the status it was read in, with its
//! `mint_update` event in the same transaction: two instances settling or
//! approving the same mint change it once.

use sqlx::{Any, Row, Transaction, any::AnyRow};

use crate::amount::Cents;
use crate::store::{
    Store, StoreError,
    events::{self, NewEvent},
    now_micros, parse_column, time,
};
use crate::{
    bank::{Settlement, WireOutcome as Outcome},
    chain::Chain,
    issuance::{
        FIAT_CURRENCY, MINT_UPDATE, Mint,
        state::{Status, Transition},
    },
};

/// Where a wire was learnt of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireSource {
    /// `POST /v2/simulation/fiat-deposit` (`sandbox`).
    Simulation,
    /// `issuance wires record`, `conversions wires record`.
    Operator,
    /// A bank's notification an operator imported (`wires import`).
    Import,
}

impl WireSource {
    pub fn as_str(self) -> &'static str {
        match self {
            WireSource::Simulation => "SIMULATION",
            WireSource::Operator => "OPERATOR",
            WireSource::Import => "IMPORT",
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
    /// Who recorded it and why (an operator's wire, an import).
    pub recorded_by: Option<&'a crate::audit::Actor>,
    pub reason: Option<&'a str>,
    /// What the bank does with it.
    pub settlement: Settlement,
}

/// The fiat a failed mint owes back, and whether it was sent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
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

    /// The mint the wire `reference` started, and its organization.
    pub async fn mint_by_reference(&self, reference: &str) -> Result<Option<(Mint, String)>, StoreError> {
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
pub struct NewMint<'a> {
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
pub async fn insert_mint(tx: &mut Transaction<'static, Any>, new: &NewMint<'_>) -> Result<bool, StoreError> {
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
    .bind(wire.recorded_by.map(crate::audit::Actor::recorded))
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

/// What a wire quoting a memo is minted to: the instruction's
/// organization, identity, account, stablecoin, chain and address.
#[derive(Debug, Clone)]
pub struct WireTarget {
    pub organization: String,
    pub instruction: String,
    pub identity: String,
    pub account: String,
    pub symbol: String,
    pub chain: String,
    pub destination_address: String,
}

/// The mint instruction of `memo` (of `organization` only, when given).
pub async fn wire_target(
    tx: &mut Transaction<'static, Any>,
    memo: &str,
    organization: Option<&str>,
) -> Result<Option<WireTarget>, StoreError> {
    let row = sqlx::query(
        "SELECT organization_id, id, identity_id, stablecoin_symbol, chain, destination_address, account_id
         FROM mint_instructions WHERE memo_id = $1 AND ($2 IS NULL OR organization_id = $2)",
    )
    .bind(memo)
    .bind(organization)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(WireTarget {
        organization: row.try_get("organization_id")?,
        instruction: row.try_get("id")?,
        identity: row.try_get("identity_id")?,
        account: row.try_get("account_id")?,
        symbol: row.try_get("stablecoin_symbol")?,
        chain: row.try_get("chain")?,
        destination_address: row.try_get("destination_address")?,
    }))
}

/// A mint as its settlement reads it.
#[derive(Debug, Clone)]
pub struct Settling {
    pub status: Status,
    /// What the bank does with the wire, and from when.
    pub outcome: Outcome,
    pub settles_at: i64,
    pub chain: Chain,
    pub symbol: String,
    pub cents: i64,
    pub organization: String,
    pub identity: String,
}

/// The mint `id` as its settlement reads it.
pub async fn settling(tx: &mut Transaction<'static, Any>, id: &str) -> Result<Option<Settling>, StoreError> {
    let row = sqlx::query(
        "SELECT status, bank_outcome, settles_at, chain, stablecoin_symbol, amount_cents, organization_id,
             identity_id
         FROM mints WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(Settling {
        status: parse_column(&row.try_get::<String, _>("status")?, "mints.status")?,
        outcome: parse_column(&row.try_get::<String, _>("bank_outcome")?, "mints.bank_outcome")?,
        settles_at: row.try_get("settles_at")?,
        chain: parse_column(&row.try_get::<String, _>("chain")?, "mints.chain")?,
        symbol: row.try_get("stablecoin_symbol")?,
        cents: row.try_get("amount_cents")?,
        organization: row.try_get("organization_id")?,
        identity: row.try_get("identity_id")?,
    }))
}

/// The cents of `chain`'s `symbol` mints settled since `since` and not
/// refused, counted under a lock per (chain, stablecoin) held until
/// commit: two settlements cannot both count the same room.
pub async fn lock_settled_since(
    tx: &mut Transaction<'static, Any>,
    chain: Chain,
    symbol: &str,
    since: i64,
) -> Result<i64, StoreError> {
    sqlx::query(
        "INSERT INTO issuance_locks (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = excluded.name",
    )
    .bind(format!("mint-cap:{chain}:{symbol}"))
    .execute(&mut **tx)
    .await?;
    Ok(sqlx::query(
        "SELECT CAST(COALESCE(SUM(amount_cents), 0) AS BIGINT) AS total FROM mints
         WHERE chain = $1 AND stablecoin_symbol = $2 AND settled_at >= $3 AND status IN ($4, $5, $6, $7)",
    )
    .bind(chain.to_string())
    .bind(symbol)
    .bind(since)
    .bind(Status::AwaitingApproval.as_str())
    .bind(Status::Minting.as_str())
    .bind(Status::Minted.as_str())
    .bind(Status::Completed.as_str())
    .fetch_one(&mut **tx)
    .await?
    .try_get("total")?)
}

impl Store {
    /// Who recorded the wire of mint `id` (a decider as
    /// [`crate::audit::Actor::recorded`] wrote it), if anyone did.
    pub async fn mint_recorder(&self, id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT recorded_by FROM mints WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get::<Option<String>, _>("recorded_by")).transpose()?.flatten())
    }
}

/// A mint an operator names by its wire's reference or its id.
#[derive(Debug, Clone)]
pub struct Named {
    pub id: String,
    pub status: Status,
    pub recorded_by: Option<String>,
    pub organization: String,
    pub identity: String,
}

/// The mints whose wire reference is `reference` or whose id is `id`.
pub async fn named(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    reference: &str,
) -> Result<Vec<Named>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, status, recorded_by, organization_id, identity_id FROM mints
         WHERE wire_reference = $2 OR id = $1",
    )
    .bind(id)
    .bind(reference)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(Named {
                id: row.try_get("id")?,
                status: parse_column(&row.try_get::<String, _>("status")?, "mints.status")?,
                recorded_by: row.try_get("recorded_by")?,
                organization: row.try_get("organization_id")?,
                identity: row.try_get("identity_id")?,
            })
        })
        .collect()
}

/// Writes `transition` of mint `id` (if it still has the status it was
/// read with) and its event.
pub async fn change(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    transition: Transition,
    approved_by: Option<&str>,
) -> Result<(), StoreError> {
    let now = now_micros();
    let failure = transition.failure.map(|f| format!("{}: {}", f.as_str(), f.explain()));
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
        return Err(StoreError::Raced(format!("mint {id} changed meanwhile")));
    }
    let mint = mint_in(tx, id).await?;
    announce(tx, &mint, now).await
}

/// The mint's `mint_update` for its current status: its envelope id is
/// the same for the same (mint, status), so clients may deduplicate on it.
pub async fn announce(tx: &mut Transaction<'static, Any>, mint: &Mint, now: i64) -> Result<(), StoreError> {
    let id = format!("{}-{}", mint.id, mint.status.as_str().to_lowercase());
    let event = NewEvent::new(&mint.organization, MINT_UPDATE, &mint.id, id, mint)?;
    events::append(tx, std::slice::from_ref(&event), now).await
}

pub async fn mint_in(tx: &mut Transaction<'static, Any>, id: &str) -> Result<Mint, StoreError> {
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

/// Records the hash of the transaction that minted mint `id`.
pub async fn set_hash(tx: &mut Transaction<'static, Any>, id: &str, hash: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE mints SET transaction_hash = $2 WHERE id = $1")
        .bind(id)
        .bind(hash)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Records in `tx` that the dollars of failed mint `id` were sent back by
/// the return wire `reference`, `by` an operator for `reason`: the
/// mint's organization when this changed it, `None` when it was not
/// owed (or already returned: the caller reads which). A return wire
/// that returned another mint is a conflict.
pub async fn complete_return(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    reference: &str,
    by: &str,
    reason: &str,
) -> Result<Option<String>, StoreError> {
    // One return wire returns one mint's dollars (a unique index holds it too).
    let other: Option<String> =
        sqlx::query_scalar("SELECT id FROM mints WHERE return_reference = $1 AND id <> $2")
            .bind(reference)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
    if let Some(other) = other {
        return Err(StoreError::taken(
            format!("return_wire:{reference}"),
            format!("return wire {reference} returned mint {other} already"),
        ));
    }
    let done = sqlx::query(
        "UPDATE mints SET fiat_return = 'COMPLETED', return_reference = $2, return_by = $4, return_reason = $5,
             updated_at = $3
         WHERE id = $1 AND fiat_return = 'PENDING' RETURNING organization_id",
    )
    .bind(id)
    .bind(reference)
    .bind(now_micros())
    .bind(by)
    .bind(reason)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(done.map(|row| row.try_get("organization_id")).transpose()?)
}
