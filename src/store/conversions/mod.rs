//! The rows of conversions, read and written inside the transactions of
//! the flows of `crate::conversions` (`on_ramp`, `off_ramp`). Every change
//! of a conversion's status goes through [`crate::conversions::state`]'s
//! table with its `conversion_notification_update` event, guarded by the
//! status it read: two instances moving the same conversion change it once.

pub mod off_ramp_refunds;
pub mod off_ramps;
pub(crate) mod payout_answers;
pub mod payouts;
pub(crate) mod quotes;
pub(crate) mod virtual_accounts;

use sqlx::{Any, Row, Transaction, any::AnyRow};

use super::{
    Store, StoreError,
    events::{self, NewEvent},
    mints::NewWire,
    now_micros, parse_column, time,
};
use crate::amount::Cents;
use crate::{
    chain::Chain,
    conversions::{
        CONVERSION_NOTIFICATION_UPDATE, Conversion,
        resource::{Destination, RefundDetails, Source, Type},
        state::{Status, Transition, apply, path},
    },
    issuance::{FIAT_CURRENCY, state::Status as MintStatus},
};

/// A wire that arrived at a virtual account.
#[derive(Debug, Clone)]
pub struct NewVirtualWire<'a> {
    /// The caller's organization (another's virtual account is not found);
    /// `None` for an operator.
    pub organization: Option<&'a str>,
    pub virtual_account_id: &'a str,
    /// The wire as the bank reported it; its `memo_id` is ignored (the
    /// virtual account's `deposit_message` is recorded). The fee is the
    /// virtual account's, fixed when it was opened.
    pub wire: NewWire<'a>,
}

pub(super) const COLUMNS: &str = "id, organization_id, type, status, account_id, identity_id, payment_instructions_id, \
    request_id, quote_id, source_currency, source_cents, source_chain, destination_currency, destination_cents, \
    exchange_rate, failure_reason, refund_details, completed_at, created_at, updated_at, mint_id";

impl Store {
    /// One conversion; of `organization` only, when given.
    pub async fn conversion(&self, organization: Option<&str>, id: &str) -> Result<Conversion, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM conversions WHERE id = $1 AND ($2 IS NULL OR organization_id = $2)"
        ))
        .bind(id)
        .bind(organization)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("conversion {id}")))?;
        conversion_from_row(&row)
    }

    /// The newest `limit` conversions of `organization`.
    pub async fn conversions_of(
        &self,
        organization: &str,
        limit: i64,
    ) -> Result<Vec<Conversion>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM conversions WHERE organization_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
        ))
        .bind(organization)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(conversion_from_row).collect()
    }

    /// The events of `organization` about `resource`, oldest first: their
    /// type, time (micros) and payload.
    pub async fn events_of_resource(
        &self,
        organization: &str,
        resource: &str,
    ) -> Result<Vec<(String, i64, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT type, created_at, payload FROM events WHERE organization_id = $1 AND resource_id = $2 ORDER BY seq",
        )
        .bind(organization)
        .bind(resource)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("type")?, r.try_get("created_at")?, r.try_get("payload")?)))
            .collect()
    }

    /// The `ON_RAMP` conversions not yet final, oldest first, each with its
    /// mint's status and whether the mint's transaction was handed to the
    /// sender: one read, so a pass over conversions that wait writes
    /// nothing.
    pub async fn open_on_ramps(&self) -> Result<Vec<OpenOnRamp>, StoreError> {
        let rows = sqlx::query(
            "SELECT c.id, c.status, m.status AS mint_status, m.transfer_id FROM conversions c
             JOIN mints m ON m.id = c.mint_id
             WHERE c.type = $1 AND c.status NOT IN ($2, $3, $4) ORDER BY c.created_at, c.id",
        )
        .bind(Type::OnRamp.as_str())
        .bind(Status::Completed.as_str())
        .bind(Status::Failed.as_str())
        .bind(Status::Returned.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(OpenOnRamp {
                    id: row.try_get("id")?,
                    status: parse_column(&row.try_get::<String, _>("status")?, "conversions.status")?,
                    mint: parse_column(&row.try_get::<String, _>("mint_status")?, "mints.status")?,
                    handed_off: row.try_get::<Option<String>, _>("transfer_id")?.is_some(),
                })
            })
            .collect()
    }

    /// The conversion whose mint's wire has `reference`, and the wire's
    /// cents.
    pub async fn conversion_by_wire(&self, reference: &str) -> Result<Option<(Conversion, i64)>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {}, m.amount_cents AS wire_cents FROM conversions c JOIN mints m ON m.id = c.mint_id
             WHERE m.wire_reference = $1",
            prefixed("c.")
        ))
        .bind(reference)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| Ok((conversion_from_row(&row)?, row.try_get("wire_cents")?))).transpose()
    }
}

/// What a conversion's settlement fills: the cents delivered and the rate
/// (`1` when none is given) once `COMPLETED`, why it failed or came back
/// once `FAILED` or `RETURNED`, and the refund once `RETURNED`.
#[derive(Debug, Clone, Default)]
pub struct Settled {
    pub destination_cents: Option<i64>,
    pub exchange_rate: Option<String>,
    pub failure_reason: Option<String>,
    pub refund_details: Option<RefundDetails>,
}

pub(super) fn prefixed(prefix: &str) -> String {
    COLUMNS.split(", ").map(|c| format!("{prefix}{c}")).collect::<Vec<_>>().join(", ")
}

/// An `ON_RAMP` conversion not yet final (see [`Store::open_on_ramps`]).
#[derive(Debug, Clone)]
pub struct OpenOnRamp {
    pub id: String,
    pub status: Status,
    pub mint: MintStatus,
    pub handed_off: bool,
}

/// The virtual account a wire arrived at, as its on-ramp needs it.
#[derive(Debug, Clone)]
pub struct Wired {
    pub organization: String,
    pub identity: String,
    pub account: String,
    /// `ACTIVE`, `PENDING`, … (without the `VIRTUAL_ACCOUNT_STATUS_` prefix).
    pub status: String,
    pub currency: String,
    pub chain: String,
    pub address: String,
    pub message: String,
    pub fee_bps: u32,
}

/// The virtual account `id` (of `organization`, when given).
pub async fn wired_account(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    organization: Option<&str>,
) -> Result<Option<Wired>, StoreError> {
    let row = sqlx::query(
        "SELECT organization_id, identity_id, account_id, currency, chain, destination_address, status,
             deposit_message, fee_bps
         FROM virtual_accounts WHERE id = $1 AND ($2 IS NULL OR organization_id = $2)",
    )
    .bind(id)
    .bind(organization)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let text = |column: &str| row.try_get::<String, _>(column);
    Ok(Some(Wired {
        organization: text("organization_id")?,
        identity: text("identity_id")?,
        account: text("account_id")?,
        status: text("status")?,
        currency: text("currency")?,
        chain: text("chain")?,
        address: text("destination_address")?,
        message: text("deposit_message")?,
        fee_bps: u32::try_from(row.try_get::<i64, _>("fee_bps")?)
            .map_err(|_| StoreError::Corrupt("virtual_accounts.fee_bps".into()))?,
    }))
}

/// The on-ramp's mint as its conversion follows it: its status, whether
/// its transaction was handed to the sender, the cents it mints and why it
/// failed.
pub async fn on_ramp_mint(
    tx: &mut Transaction<'static, Any>,
    mint: &str,
) -> Result<(MintStatus, bool, i64, Option<String>), StoreError> {
    let row = sqlx::query(
        "SELECT status, transfer_id, amount_cents - fee_cents AS minted_cents, failure_reason FROM mints WHERE id = $1",
    )
    .bind(mint)
    .fetch_one(&mut **tx)
    .await?;
    Ok((
        parse_column(&row.try_get::<String, _>("status")?, "mints.status")?,
        row.try_get::<Option<String>, _>("transfer_id")?.is_some(),
        row.try_get("minted_cents")?,
        row.try_get("failure_reason")?,
    ))
}

/// Inserts the `INITIATED` on-ramp of the wire of `new`, following
/// `mint_id`: its id.
pub async fn insert_on_ramp(
    tx: &mut Transaction<'static, Any>,
    new: &NewVirtualWire<'_>,
    target: &Wired,
    (mint_id, fee_cents): (&str, i64),
    now: i64,
) -> Result<String, StoreError> {
    let id = uuid::Uuid::new_v4().to_string();
    sqlx::query(&format!(
        "INSERT INTO conversions (id, organization_id, type, status, account_id, identity_id,
             payment_instructions_id, source_currency, source_cents, destination_currency, fee_cents, mint_id,
             created_at, updated_at)
         VALUES ($1, $2, '{}', '{}', $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)",
        Type::OnRamp.as_str(),
        Status::Initiated.as_str()
    ))
    .bind(&id)
    .bind(&target.organization)
    .bind(&target.account)
    .bind(&target.identity)
    .bind(new.virtual_account_id)
    .bind(FIAT_CURRENCY)
    .bind(new.wire.cents)
    .bind(&target.currency)
    .bind(fee_cents)
    .bind(mint_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}

/// Takes the row lock of conversion `id`: its status and mint.
pub async fn lock_conversion(
    tx: &mut Transaction<'static, Any>,
    id: &str,
) -> Result<Option<(Status, String)>, StoreError> {
    let row =
        sqlx::query("UPDATE conversions SET updated_at = updated_at WHERE id = $1 RETURNING status, mint_id")
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
    let Some(row) = row else { return Ok(None) };
    let status = parse_column(&row.try_get::<String, _>("status")?, "conversions.status")?;
    let mint: Option<String> = row.try_get("mint_id")?;
    Ok(mint.map(|mint| (status, mint)))
}

/// Walks conversion `id` from the status it was read in to `to`, one
/// status and event at a time along [`path`]: the changes it made. A `to`
/// the table cannot reach from there is logged and changes nothing.
pub async fn walk(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    (from, to): (Status, Status),
    settled: &Settled,
) -> Result<usize, StoreError> {
    let events = match path(from, to) {
        Ok(events) => events,
        Err(refusal) => {
            tracing::error!(conversion = id, %refusal, %to, "a conversion's legs moved against its status");
            return Ok(0);
        }
    };
    let mut at = from;
    for event in &events {
        let transition = apply(at, *event).map_err(|r| StoreError::Corrupt(r.to_string()))?;
        change(tx, id, transition, settled).await?;
        at = transition.to;
    }
    Ok(events.len())
}

/// Writes `transition` of conversion `id` (if it still has the status it
/// was read with) and its event; a settlement fills what it settled.
pub(super) async fn change(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    transition: Transition,
    settled: &Settled,
) -> Result<(), StoreError> {
    let now = now_micros();
    let to = transition.to;
    let completed = to == Status::Completed;
    let failure =
        matches!(to, Status::Failed | Status::Returned).then(|| settled.failure_reason.clone()).flatten();
    let refund = settled
        .refund_details
        .as_ref()
        .filter(|_| to == Status::Returned)
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("refund details: {e}")))?;
    let done = sqlx::query(
        "UPDATE conversions SET status = $2, updated_at = $3,
             destination_cents = CASE WHEN $4 = 1 THEN COALESCE($5, destination_cents) ELSE destination_cents END,
             exchange_rate = CASE WHEN $4 = 1 THEN COALESCE($8, '1') ELSE exchange_rate END,
             completed_at = CASE WHEN $4 = 1 THEN $3 ELSE completed_at END,
             failure_reason = COALESCE($6, failure_reason),
             refund_details = COALESCE($9, refund_details)
         WHERE id = $1 AND status = $7",
    )
    .bind(id)
    .bind(to.as_str())
    .bind(now)
    .bind(i64::from(completed))
    .bind(settled.destination_cents)
    .bind(failure)
    .bind(transition.from.as_str())
    .bind(settled.exchange_rate.as_deref())
    .bind(refund)
    .execute(&mut **tx)
    .await?;
    if done.rows_affected() != 1 {
        return Err(StoreError::Raced(format!("conversion {id} changed meanwhile")));
    }
    let conversion = conversion_in(tx, id).await?;
    announce(tx, &conversion, now).await
}

/// The conversion's `conversion_notification_update` for its current
/// status: its envelope id is the same for the same (conversion, status),
/// so clients may deduplicate on it.
pub async fn announce(
    tx: &mut Transaction<'static, Any>,
    conversion: &Conversion,
    now: i64,
) -> Result<(), StoreError> {
    let id = format!("{}-{}", conversion.id, conversion.status.as_str().to_lowercase());
    let event = NewEvent::new(
        &conversion.organization,
        CONVERSION_NOTIFICATION_UPDATE,
        &conversion.id,
        id,
        conversion,
    )?;
    events::append(tx, std::slice::from_ref(&event), now).await
}

pub async fn conversion_in(tx: &mut Transaction<'static, Any>, id: &str) -> Result<Conversion, StoreError> {
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM conversions WHERE id = $1"))
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
    conversion_from_row(&row)
}

pub(super) fn conversion_from_row(row: &AnyRow) -> Result<Conversion, StoreError> {
    let status: Status = parse_column(&row.try_get::<String, _>("status")?, "conversions.status")?;
    let chain: Option<Chain> = row
        .try_get::<Option<String>, _>("source_chain")?
        .map(|c| parse_column(&c, "conversions.source_chain"))
        .transpose()?;
    let refund: Option<RefundDetails> = row
        .try_get::<Option<String>, _>("refund_details")?
        .map(|r| {
            serde_json::from_str(&r)
                .map_err(|e| StoreError::Corrupt(format!("conversions.refund_details: {e}")))
        })
        .transpose()?;
    Ok(Conversion {
        id: row.try_get("id")?,
        status,
        kind: parse_column(&row.try_get::<String, _>("type")?, "conversions.type")?,
        account_id: row.try_get("account_id")?,
        identity_id: row.try_get("identity_id")?,
        payment_instructions_id: row.try_get("payment_instructions_id")?,
        request_id: row.try_get("request_id")?,
        quote_id: row.try_get("quote_id")?,
        source: Source {
            currency: row.try_get("source_currency")?,
            amount: Cents(row.try_get("source_cents")?).to_string(),
            chain,
        },
        destination: Destination {
            currency: row.try_get("destination_currency")?,
            amount: row.try_get::<Option<i64>, _>("destination_cents")?.map(|cents| Cents(cents).to_string()),
        },
        exchange_rate: row.try_get("exchange_rate")?,
        created_at: time(row.try_get("created_at")?)?,
        updated_at: time(row.try_get("updated_at")?)?,
        completed_at: row
            .try_get::<Option<i64>, _>("completed_at")?
            .filter(|_| status == Status::Completed)
            .map(time)
            .transpose()?,
        failure_reason: row
            .try_get::<Option<String>, _>("failure_reason")?
            .filter(|_| matches!(status, Status::Failed | Status::Returned)),
        refund_details: refund.filter(|_| status == Status::Returned),
        organization: row.try_get("organization_id")?,
    })
}
