//! Transaction-limit policies, and what a new transfer's check reads of
//! them under their row locks (the check is [`crate::transfers::hold`]).

use alloy::primitives::U256;
use sqlx::{Any, Row, Transaction, any::AnyRow};

use crate::store::{PLATFORM_ROUTES, Store, StoreError, now_micros, parse_column, time};
use crate::{
    transfers::model::{LimitPolicy, NewTransfer},
    transfers::rules::scale,
};

impl Store {
    pub async fn limit_policy(&self, organization: &str, id: &str) -> Result<LimitPolicy, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {POLICY_COLUMNS} FROM transaction_limit_policies WHERE id = $1 AND organization_id = $2"
        ))
        .bind(id)
        .bind(organization)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("transaction limit policy {id}")))?;
        policy_from_row(&row)
    }

    pub async fn limit_policies(&self, organization: &str) -> Result<Vec<LimitPolicy>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {POLICY_COLUMNS} FROM transaction_limit_policies WHERE organization_id = $1 ORDER BY created_at, id"
        ))
        .bind(organization)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(policy_from_row).collect()
    }
}

/// Inserts a limit policy of the organization on an account or an identity
/// (one of them), with a per-transfer and a rolling 24 h limit (either may
/// be absent): its new id.
pub(crate) async fn insert_policy(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    (account_id, identity_id): (Option<&str>, Option<&str>),
    currency_symbol: &str,
    (max_per_transfer, max_rolling_24h): (Option<&str>, Option<&str>),
) -> Result<String, StoreError> {
    let id = uuid::Uuid::new_v4().to_string();
    sqlx::query(
        "INSERT INTO transaction_limit_policies (id, organization_id, account_id, identity_id, currency_symbol,
             max_per_transfer, max_rolling_24h, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&id)
    .bind(organization)
    .bind(account_id)
    .bind(identity_id)
    .bind(currency_symbol)
    .bind(max_per_transfer)
    .bind(max_rolling_24h)
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(id)
}

const POLICY_COLUMNS: &str =
    "id, account_id, identity_id, currency_symbol, max_per_transfer, max_rolling_24h, created_at";

fn policy_from_row(row: &AnyRow) -> Result<LimitPolicy, StoreError> {
    Ok(LimitPolicy {
        id: row.try_get("id")?,
        account_id: row.try_get("account_id")?,
        identity_id: row.try_get("identity_id")?,
        currency_symbol: row.try_get("currency_symbol")?,
        max_per_transfer: row.try_get("max_per_transfer")?,
        max_rolling_24h: row.try_get("max_rolling_24h")?,
        created_at: time(row.try_get("created_at")?)?,
    })
}

/// The limit policies on `new`'s account or `identity_id` and asset, each
/// row locked until commit: transfers of one identity are judged one at a
/// time across its accounts on PostgreSQL.
pub async fn lock_policies(
    tx: &mut Transaction<'static, Any>,
    new: &NewTransfer,
    identity_id: &str,
) -> Result<Vec<LimitPolicy>, StoreError> {
    let rows = sqlx::query(&format!(
        "UPDATE transaction_limit_policies SET id = id
         WHERE organization_id = $1 AND currency_symbol = $2 AND (account_id = $3 OR identity_id = $4)
         RETURNING {POLICY_COLUMNS}"
    ))
    .bind(&new.organization)
    .bind(&new.currency_symbol)
    .bind(&new.account_id)
    .bind(identity_id)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(policy_from_row).collect()
}

/// What the scope of `policy` (its account, or `identity_id`) sent of the
/// asset in the 24 hours before `now` in transfers that did not fail, on
/// the common scale.
pub async fn rolling_volume(
    tx: &mut Transaction<'static, Any>,
    new: &NewTransfer,
    policy: &LimitPolicy,
    identity_id: &str,
    now: i64,
) -> Result<U256, StoreError> {
    let (column, scope) = match &policy.account_id {
        Some(account) => ("account_id", account.as_str()),
        None => ("identity_id", identity_id),
    };
    let rows = sqlx::query(&format!(
        "SELECT amount_raw, decimals FROM transfers
         WHERE organization_id = $1 AND {column} = $2 AND currency_symbol = $3 AND created_at > $4
           AND status NOT IN ('FAILED', 'DROPPED') AND route NOT IN {PLATFORM_ROUTES}
           AND NOT EXISTS (SELECT 1 FROM conversions c
               WHERE c.transfer_id = transfers.id AND c.status IN ('FAILED', 'RETURNED'))"
    ))
    .bind(&new.organization)
    .bind(scope)
    .bind(&new.currency_symbol)
    .bind(now - 24 * 3600 * 1_000_000)
    .fetch_all(&mut **tx)
    .await?;
    let mut volume = U256::ZERO;
    for row in rows {
        let raw: U256 = parse_column(&row.try_get::<String, _>("amount_raw")?, "transfers.amount_raw")?;
        volume += scale(raw, row.try_get::<i64, _>("decimals")? as u8);
    }
    Ok(volume)
}
