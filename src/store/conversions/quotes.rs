//! Quotes: written once when priced, read back by the conversion that uses
//! them.

use sqlx::{Row, any::AnyRow};

use crate::amount::Cents;
use crate::conversions::{
    quote::Rate,
    resource::{Money, Quote},
};
use crate::store::{Store, StoreError, Tx, now_micros, time};

/// A quote to persist; amounts in cents.
#[derive(Debug, Clone)]
pub struct NewQuote {
    pub organization: String,
    pub payment_instructions_id: String,
    pub source_currency: String,
    pub source_cents: i64,
    pub destination_currency: String,
    pub destination_cents: i64,
    pub rate: Rate,
    pub fee_cents: i64,
    /// How long it may be used, in microseconds.
    pub lives_micros: i64,
}

const COLUMNS: &str = "id, organization_id, payment_instructions_id, source_currency, source_cents, \
    destination_currency, destination_cents, rate, fee_cents, expires_at, created_at";

/// Inserts `new` under a new id, due to expire `new.lives_micros` from now:
/// its id.
pub(crate) async fn insert(tx: &mut Tx, new: &NewQuote) -> Result<String, StoreError> {
    let (id, now) = (uuid::Uuid::new_v4().to_string(), now_micros());
    sqlx::query(&format!(
        "INSERT INTO quotes ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    ))
    .bind(&id)
    .bind(&new.organization)
    .bind(&new.payment_instructions_id)
    .bind(&new.source_currency)
    .bind(new.source_cents)
    .bind(&new.destination_currency)
    .bind(new.destination_cents)
    .bind(new.rate.to_string())
    .bind(new.fee_cents)
    .bind(now.saturating_add(new.lives_micros))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}

impl Store {
    /// One quote of `organization`.
    pub async fn quote(&self, organization: &str, id: &str) -> Result<Quote, StoreError> {
        let row =
            sqlx::query(&format!("SELECT {COLUMNS} FROM quotes WHERE id = $1 AND organization_id = $2"))
                .bind(id)
                .bind(organization)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("quote {id}")))?;
        quote_from_row(&row)
    }
}

fn quote_from_row(row: &AnyRow) -> Result<Quote, StoreError> {
    let money = |currency: &str, cents: &str| -> Result<Money, StoreError> {
        Ok(Money { currency: row.try_get(currency)?, amount: Cents(row.try_get(cents)?).to_string() })
    };
    Ok(Quote {
        id: row.try_get("id")?,
        source: money("source_currency", "source_cents")?,
        destination: money("destination_currency", "destination_cents")?,
        exchange_rate: row.try_get("rate")?,
        fee: money("source_currency", "fee_cents")?,
        payment_instructions_id: row.try_get("payment_instructions_id")?,
        expires_at: time(row.try_get("expires_at")?)?,
        created_at: time(row.try_get("created_at")?)?,
        organization: row.try_get("organization_id")?,
        fee_cents: row.try_get("fee_cents")?,
    })
}
