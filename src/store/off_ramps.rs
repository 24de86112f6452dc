//! Off-ramps: a client's stablecoin paid out to one of its bank accounts.
//! Accepted in one transaction with the transfer that collects the
//! stablecoin (held like any transfer), the quote it uses and its event;
//! walked behind its legs (see [`off_ramp::target`]) under its row lock.

use sqlx::{Any, Row, Transaction};

use super::{
    Made, Refusal, Store, StoreError,
    conversions::{COLUMNS, Settled, announce, conversion_from_row, conversion_in, walk},
    entitlement, now_micros, parse_column,
    transfers::{hold, lock_source},
};
use crate::{
    amount::Amount,
    bank::Answer,
    conversions::{
        Conversion,
        off_ramp::{Legs, Need, target},
        resource::{RefundDetails, Type},
        state::Status,
    },
    issuance::gate_of,
    transfers::model::NewTransfer,
    transfers::resource::TransferStatus,
};

/// An off-ramp to accept: the conversion and the transfer collecting its
/// stablecoin to the settlement wallet.
#[derive(Debug, Clone)]
pub struct NewOffRamp {
    pub organization: String,
    /// Canonical.
    pub request_id: String,
    /// See [`crate::conversions::off_ramp::fingerprint`].
    pub fingerprint: String,
    pub payment_instructions_id: String,
    pub source_cents: i64,
    pub destination_currency: String,
    /// Known at creation for a US wire only.
    pub destination_cents: Option<i64>,
    pub fee_cents: i64,
    pub quote_id: Option<String>,
    /// From the account to the settlement wallet.
    pub collect: NewTransfer,
    /// What the chain holds of the stablecoin at the account's address.
    pub balance: alloy::primitives::U256,
}

/// What a step of an off-ramp did: the status changes it made, and
/// whether its payout is due to be handed to the bank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Followed {
    pub moved: usize,
    pub payout_due: bool,
}

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

impl From<sqlx::Error> for OffRampRefusal {
    fn from(error: sqlx::Error) -> Self {
        StoreError::from(error).into()
    }
}

impl Store {
    /// Whether transfer `transfer_id` collects an off-ramp's stablecoin.
    pub async fn collects_off_ramp(&self, transfer_id: &str) -> Result<bool, StoreError> {
        let found = sqlx::query("SELECT 1 AS n FROM conversions WHERE transfer_id = $1")
            .bind(transfer_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(found.is_some())
    }

    /// The off-ramp holding `request_id` in `organization`, and what it
    /// was asked.
    pub async fn off_ramp_by_request(
        &self,
        organization: &str,
        request_id: &str,
    ) -> Result<Option<(Conversion, String)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        by_request(&mut conn, organization, request_id).await
    }

    /// Accepts `new` exactly once per `(organization, request_id)`: in one
    /// transaction holding the account's row, the collect transfer is held
    /// (the account `ACTIVE`, its identity transacting, the balance and the
    /// limits checked as for any transfer), the quote is taken, and the
    /// `INITIATED` conversion is written with its event. A request whose
    /// `request_id` is taken is answered from its conversion before
    /// anything is checked, and again once the account's row is held.
    pub async fn create_off_ramp(&self, new: &NewOffRamp) -> Result<Made<Conversion>, OffRampRefusal> {
        if let Some(found) = self.off_ramp_by_request(&new.organization, &new.request_id).await? {
            return same_request(found, new);
        }
        let mut tx = self.begin().await?;
        let now = now_micros();
        let identity = lock_source(&mut tx, &new.collect).await?;
        if let Some(found) = by_request(&mut tx, &new.organization, &new.request_id).await? {
            return same_request(found, new);
        }
        let id = uuid::Uuid::new_v4().to_string();
        if let Some(quote) = &new.quote_id {
            take_quote(&mut tx, &new.organization, quote, &id, now).await?;
        }
        let transfer = hold(&mut tx, &new.collect, &identity, new.balance, now)
            .await?
            .ok_or_else(|| StoreError::Corrupt("a fresh collect transfer's request_id is taken".into()))?;
        if !insert(&mut tx, new, &id, &identity, &transfer, now).await? {
            drop(tx);
            let found = self.off_ramp_by_request(&new.organization, &new.request_id).await?;
            let found =
                found.ok_or_else(|| StoreError::Corrupt("request_id conflict without a row".into()))?;
            return same_request(found, new);
        }
        let conversion = conversion_in(&mut tx, &id).await?;
        announce(&mut tx, &conversion, now).await?;
        tx.commit().await?;
        Ok(Made::New(conversion))
    }

    /// The ids of the off-ramps behind their legs, oldest first.
    pub async fn off_ramps_behind(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT c.id, c.status, {LEGS} FROM conversions c {JOIN_LEGS}
             WHERE c.type = $1 AND c.status NOT IN ($2, $3, $4) ORDER BY c.created_at, c.id"
        ))
        .bind(Type::OffRamp.as_str())
        .bind(Status::Completed.as_str())
        .bind(Status::Failed.as_str())
        .bind(Status::Returned.as_str())
        .fetch_all(&self.pool)
        .await?;
        let now = now_micros();
        let mut behind = Vec::new();
        for row in &rows {
            let status: Status = parse_column(&row.try_get::<String, _>("status")?, "conversions.status")?;
            let (to, need) = target(legs(row, now)?);
            if to != status || need == Need::Handoff {
                behind.push(row.try_get("id")?);
            }
        }
        Ok(behind)
    }

    /// Walks the off-ramp `id` to where its legs put it, one status and
    /// event at a time, in one transaction holding its row. Once its
    /// stablecoin is committed, its identity is judged: one no longer
    /// `ACTIVE` or fiat-enabled has its payout refused at once (nothing is
    /// paid out; the stablecoin goes back); otherwise the payout is due to
    /// be handed to the bank, which the caller does outside the transaction.
    pub async fn follow_off_ramp(&self, id: &str) -> Result<Followed, StoreError> {
        let mut tx = self.begin().await?;
        let locked = sqlx::query(
            "UPDATE conversions SET updated_at = updated_at WHERE id = $1 AND type = $2 RETURNING status",
        )
        .bind(id)
        .bind(Type::OffRamp.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(locked) = locked else { return Ok(Followed::default()) };
        let status: Status = parse_column(&locked.try_get::<String, _>("status")?, "conversions.status")?;
        let now = now_micros();
        let mut row = read_legs(&mut tx, id).await?;
        let mut payout_due = false;
        if target(legs(&row, now)?).1 == Need::Handoff {
            payout_due = !refused(&mut tx, id, now).await?;
            row = read_legs(&mut tx, id).await?;
        }
        let (to, _) = target(legs(&row, now)?);
        let moved = walk(&mut tx, id, (status, to), &settled(&row)?).await?;
        tx.commit().await?;
        Ok(Followed { moved, payout_due })
    }
}

async fn by_request(
    conn: &mut sqlx::AnyConnection,
    organization: &str,
    request_id: &str,
) -> Result<Option<(Conversion, String)>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {COLUMNS}, request_fingerprint FROM conversions
         WHERE organization_id = $1 AND request_id = $2 AND type = $3"
    ))
    .bind(organization)
    .bind(request_id)
    .bind(Type::OffRamp.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let fingerprint = row.try_get::<Option<String>, _>("request_fingerprint")?.unwrap_or_default();
    Ok(Some((conversion_from_row(&row)?, fingerprint)))
}

/// The legs' columns, from [`JOIN_LEGS`].
const LEGS: &str = "t.status AS collect_status, t.failure_code, t.failure_message, c.payout_handed_at, \
    c.payout_outcome, c.payout_reason, c.payout_due_at, r.status AS refund_status, r.transaction_hash AS refund_hash, \
    r.amount_raw AS refund_raw, r.decimals AS refund_decimals, r.currency_symbol AS refund_currency, \
    q.destination_cents AS quoted_cents, q.rate AS quoted_rate";
const JOIN_LEGS: &str = "JOIN transfers t ON t.id = c.transfer_id \
    LEFT JOIN transfers r ON r.id = c.refund_transfer_id LEFT JOIN quotes q ON q.id = c.quote_id";

async fn read_legs(tx: &mut Transaction<'static, Any>, id: &str) -> Result<sqlx::any::AnyRow, StoreError> {
    Ok(sqlx::query(&format!("SELECT {LEGS} FROM conversions c {JOIN_LEGS} WHERE c.id = $1"))
        .bind(id)
        .fetch_one(&mut **tx)
        .await?)
}

fn legs(row: &sqlx::any::AnyRow, now: i64) -> Result<Legs, StoreError> {
    let status = |column: &str| -> Result<Option<TransferStatus>, StoreError> {
        row.try_get::<Option<String>, _>(column)?.map(|s| parse_column(&s, "transfers.status")).transpose()
    };
    let collect = status("collect_status")?
        .ok_or_else(|| StoreError::Corrupt("an off-ramp without its transfer".into()))?;
    let answer: Option<Answer> = row
        .try_get::<Option<String>, _>("payout_outcome")?
        .map(|a| parse_column(&a, "conversions.payout_outcome"))
        .transpose()?;
    let due = row.try_get::<Option<i64>, _>("payout_due_at")?.is_some_and(|at| at <= now);
    Ok(Legs {
        collect,
        handed_off: row.try_get::<Option<i64>, _>("payout_handed_at")?.is_some(),
        answer: answer.map(|a| (a, due)),
        refund: status("refund_status")?,
    })
}

/// What the off-ramp's settlement fills, from its legs.
fn settled(row: &sqlx::any::AnyRow) -> Result<Settled, StoreError> {
    let collect_failure = match row.try_get::<Option<String>, _>("failure_code")? {
        Some(code) => Some(format!(
            "{code}: {}",
            row.try_get::<Option<String>, _>("failure_message")?.unwrap_or_default()
        )),
        None => None,
    };
    let refund = match row.try_get::<Option<String>, _>("refund_raw")? {
        Some(raw) => {
            let decimals = u8::try_from(row.try_get::<i64, _>("refund_decimals")?)
                .map_err(|_| StoreError::Corrupt("transfers.decimals".into()))?;
            let raw = parse_column(&raw, "transfers.amount_raw")?;
            Some(RefundDetails {
                amount: Some(Amount::from_raw(raw, decimals).to_string()),
                currency: row.try_get("refund_currency")?,
                transaction_hash: row.try_get("refund_hash")?,
            })
        }
        None => None,
    };
    Ok(Settled {
        destination_cents: row.try_get("quoted_cents")?,
        exchange_rate: row.try_get("quoted_rate")?,
        // A collect that failed had no payout; a paid payout failed nothing.
        failure_reason: collect_failure.or(payout_failure(row)?),
        refund_details: refund,
    })
}

/// Why the bank refused or returned the payout, if it did.
fn payout_failure(row: &sqlx::any::AnyRow) -> Result<Option<String>, StoreError> {
    let paid = row.try_get::<Option<String>, _>("payout_outcome")?.as_deref() == Some(Answer::Paid.as_str());
    Ok(row.try_get::<Option<String>, _>("payout_reason")?.filter(|_| !paid))
}

/// Whether the payout of off-ramp `id` is refused, judged on its identity
/// now: one no longer `ACTIVE` or fiat-enabled is refused at once (nothing
/// is paid out; the stablecoin goes back).
async fn refused(tx: &mut Transaction<'static, Any>, id: &str, now: i64) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT organization_id, identity_id FROM conversions WHERE id = $1")
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
    let (organization, identity): (String, String) =
        (row.try_get("organization_id")?, row.try_get("identity_id")?);
    let (status, fiat) = entitlement::lock(tx, &organization, &identity).await?;
    if let Err(gate) = gate_of(status, fiat) {
        let reason = match gate {
            crate::issuance::Gate::NotActive(status) => {
                format!("ACCOUNT_NOT_ACTIVE: identity {identity} is {status}; nothing was paid out")
            }
            crate::issuance::Gate::FiatNotEnabled => {
                format!(
                    "FIAT_NOT_ENABLED: identity {identity} is not enabled for fiat operations; nothing was paid out"
                )
            }
        };
        tracing::warn!(conversion = id, %reason, "an off-ramp's payout is refused");
        sqlx::query(
            "UPDATE conversions SET payout_handed_at = $2, payout_outcome = $3, payout_reason = $4, payout_due_at = $2
             WHERE id = $1 AND payout_handed_at IS NULL",
        )
        .bind(id)
        .bind(now)
        .bind(Answer::Refused.as_str())
        .bind(reason)
        .execute(&mut **tx)
        .await?;
        return Ok(true);
    }
    Ok(false)
}

/// Takes quote `quote` of `organization` for conversion `id`, unless
/// another conversion took it or it expired.
async fn take_quote(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    quote: &str,
    id: &str,
    now: i64,
) -> Result<(), OffRampRefusal> {
    let row =
        sqlx::query("SELECT conversion_id, expires_at FROM quotes WHERE id = $1 AND organization_id = $2")
            .bind(quote)
            .bind(organization)
            .fetch_optional(&mut **tx)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("quote {quote}")))?;
    if row.try_get::<Option<String>, _>("conversion_id")?.is_some() {
        return Err(OffRampRefusal::QuoteUsed(quote.to_string()));
    }
    if row.try_get::<i64, _>("expires_at")? <= now {
        return Err(OffRampRefusal::QuoteExpired(quote.to_string()));
    }
    let taken = sqlx::query("UPDATE quotes SET conversion_id = $2 WHERE id = $1 AND conversion_id IS NULL")
        .bind(quote)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    if taken.rows_affected() != 1 {
        return Err(OffRampRefusal::QuoteUsed(quote.to_string()));
    }
    Ok(())
}

/// Inserts the `INITIATED` off-ramp `id` collected by `transfer`; whether
/// it did (its `request_id` not taken meanwhile).
async fn insert(
    tx: &mut Transaction<'static, Any>,
    new: &NewOffRamp,
    id: &str,
    identity: &str,
    transfer: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(&format!(
        "INSERT INTO conversions (id, organization_id, type, status, account_id, identity_id,
             payment_instructions_id, request_id, request_fingerprint, quote_id, source_currency, source_cents,
             source_chain, destination_currency, destination_cents, fee_cents, transfer_id, created_at, updated_at)
         VALUES ($1, $2, '{}', '{}', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16)
         ON CONFLICT (organization_id, request_id) DO NOTHING",
        Type::OffRamp.as_str(),
        Status::Initiated.as_str()
    ))
    .bind(id)
    .bind(&new.organization)
    .bind(&new.collect.account_id)
    .bind(identity)
    .bind(&new.payment_instructions_id)
    .bind(&new.request_id)
    .bind(&new.fingerprint)
    .bind(new.quote_id.as_deref())
    .bind(&new.collect.currency_symbol)
    .bind(new.source_cents)
    .bind(new.collect.chain.as_str())
    .bind(&new.destination_currency)
    .bind(new.destination_cents)
    .bind(new.fee_cents)
    .bind(transfer)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
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
