//! An off-ramp's rows: its acceptance (the quote it takes, the conversion
//! inserted), its row lock, and its legs as the flow reads them (see
//! `conversions::off_ramp`).

use sqlx::{Any, Row, Transaction};

use crate::store::{
    Store, StoreError,
    conversions::{COLUMNS, Settled, conversion_from_row},
    parse_column,
};
use crate::{
    amount::Amount,
    bank::Answer,
    conversions::{
        Conversion,
        off_ramp::rules::Legs,
        resource::{RefundDetails, RefundFailure, Type},
        state::Status,
    },
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
    /// See [`crate::conversions::off_ramp::rules::fingerprint`].
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

    /// The off-ramps not yet ended, oldest first: each one's id, status and
    /// legs as they stand `now`.
    pub async fn open_off_ramps(&self, now: i64) -> Result<Vec<(String, Status, Legs)>, StoreError> {
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
        rows.iter()
            .map(|row| {
                let status = parse_column(&row.try_get::<String, _>("status")?, "conversions.status")?;
                Ok((row.try_get("id")?, status, legs(row, now)?))
            })
            .collect()
    }
}

/// The off-ramp holding `request_id` in `organization`, and the
/// fingerprint of what it was asked.
pub async fn by_request(
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
    c.refund_transfer_id, \
    q.destination_cents AS quoted_cents, q.rate AS quoted_rate";
const JOIN_LEGS: &str = "JOIN transfers t ON t.id = c.transfer_id \
    LEFT JOIN transfers r ON r.id = c.refund_transfer_id LEFT JOIN quotes q ON q.id = c.quote_id";

/// Takes the row lock of the off-ramp `id`: its status, its organization
/// and its identity; `None` when no off-ramp has that id.
pub async fn lock_off_ramp(
    tx: &mut Transaction<'static, Any>,
    id: &str,
) -> Result<Option<(Status, String, String)>, StoreError> {
    let locked = sqlx::query(
        "UPDATE conversions SET updated_at = updated_at WHERE id = $1 AND type = $2
         RETURNING status, organization_id, identity_id",
    )
    .bind(id)
    .bind(Type::OffRamp.as_str())
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = locked else { return Ok(None) };
    let status = parse_column(&row.try_get::<String, _>("status")?, "conversions.status")?;
    Ok(Some((status, row.try_get("organization_id")?, row.try_get("identity_id")?)))
}

/// The legs of the off-ramp `id` as they stand `now`, and what its
/// settlement fills.
pub async fn legs_in(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    now: i64,
) -> Result<(Legs, Settled), StoreError> {
    let row = sqlx::query(&format!("SELECT {LEGS} FROM conversions c {JOIN_LEGS} WHERE c.id = $1"))
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
    Ok((legs(&row, now)?, settled(&row)?))
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
                transfer_id: row.try_get("refund_transfer_id")?,
                transaction_hash: row.try_get("refund_hash")?,
                failure: payout_failure(row)?
                    .map(|message| RefundFailure { code: RefundFailure::RETURNED.into(), message }),
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

/// Records the payout of the off-ramp `id` refused at `now` for `reason`,
/// unless it was handed over or ever claimed for its hand-off (the bank
/// may have it): whether it did.
pub async fn refuse_payout(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    reason: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let refused = sqlx::query(
        "UPDATE conversions SET payout_handed_at = $2, payout_outcome = $3, payout_reason = $4, payout_due_at = $2
         WHERE id = $1 AND payout_handed_at IS NULL AND payout_claimed_at IS NULL",
    )
    .bind(id)
    .bind(now)
    .bind(Answer::Refused.as_str())
    .bind(reason)
    .execute(&mut **tx)
    .await?;
    Ok(refused.rows_affected() == 1)
}

/// Quote `quote` of `organization`: whether a conversion took it, and
/// when it expires.
pub async fn quote_in(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    quote: &str,
) -> Result<Option<(Option<Status>, i64)>, StoreError> {
    let row = sqlx::query(
        "SELECT c.status AS holder, q.expires_at FROM quotes q LEFT JOIN conversions c ON c.id = q.conversion_id
         WHERE q.id = $1 AND q.organization_id = $2",
    )
    .bind(quote)
    .bind(organization)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let holder = row.try_get::<Option<String>, _>("holder")?;
    let holder = holder.map(|s| parse_column(&s, "conversions.status")).transpose()?;
    Ok(Some((holder, row.try_get("expires_at")?)))
}

/// Gives quote `quote` to conversion `id`: whether it was still free (no
/// conversion holds it, or the one that did ended `FAILED`).
pub async fn take_quote(
    tx: &mut Transaction<'static, Any>,
    quote: &str,
    id: &str,
) -> Result<bool, StoreError> {
    let taken = sqlx::query(
        "UPDATE quotes SET conversion_id = $2 WHERE id = $1
         AND (conversion_id IS NULL
              OR EXISTS (SELECT 1 FROM conversions c WHERE c.id = quotes.conversion_id AND c.status = 'FAILED'))",
    )
        .bind(quote)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(taken.rows_affected() == 1)
}

/// Inserts the `INITIATED` off-ramp `id` collected by `transfer`; whether
/// it did (its `request_id` not taken meanwhile).
pub async fn insert(
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
