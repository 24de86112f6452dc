//! Virtual accounts: created once per `request_id` (a replay with the same
//! request answers what the first created, one with another request is a
//! conflict), opened or refused by the bank, and shown `INACTIVE` while
//! their identity is suspended or terminated.

use serde_json::Value;
use sqlx::{Row, any::AnyRow};

use crate::store::{Made, Store, StoreError, Tx, now_micros, parse_column, time};
use crate::{
    bank::{AccountOutcome as Outcome, Opening},
    chain::Chain,
    conversions::{
        VirtualAccount, VirtualAccountStatus,
        resource::{DepositInstructions, VirtualAccountDestination, VirtualAccountSource},
    },
};

/// A virtual account to create: `account` as the client asked for it,
/// `PENDING`.
#[derive(Debug, Clone)]
pub struct NewVirtualAccount {
    pub account: VirtualAccount,
    /// The address of `destination.account_id` on `destination.chain`.
    pub destination_address: String,
    /// What the bank answers, and when.
    pub opening: Opening,
    /// The platform's receiving bank its deposit instructions show.
    pub bank: Value,
    pub account_number: String,
    pub deposit_message: String,
    /// The on-ramp fee its wires pay, in basis points.
    pub fee_bps: u32,
}

/// The status a virtual account shows: its own, `INACTIVE` when `ACTIVE`
/// and its identity is suspended or terminated.
const SHOWN_STATUS: &str = "CASE WHEN v.status = 'ACTIVE' AND i.status IN ('SUSPENDED', 'TERMINATED')
    THEN 'INACTIVE' ELSE v.status END";

fn columns() -> String {
    format!(
        "v.id, v.organization_id, v.identity_id, v.request_id, v.account_id, v.currency, v.chain,
         v.banking_country, v.failure_reason, v.deposit_message, v.bank_account_number, v.bank_details,
         v.created_at, v.updated_at, {SHOWN_STATUS} AS shown_status"
    )
}

const FROM: &str = "FROM virtual_accounts v JOIN identities i ON i.organization_id = v.organization_id AND i.id = v.identity_id";

/// Inserts `new` `PENDING` under its `request_id` at `now`: `false` when a
/// virtual account holds that request (or its id) already.
pub(crate) async fn insert(tx: &mut Tx, new: &NewVirtualAccount, now: i64) -> Result<bool, StoreError> {
    let account = &new.account;
    let (outcome, failure, opens_at) = match &new.opening {
        Some((Outcome::Open, after)) => (Some("OPEN"), None, Some(after)),
        Some((Outcome::Refuse(reason), after)) => (Some("REFUSE"), Some(reason.as_str()), Some(after)),
        None => (None, None, None),
    };
    let opens_at = opens_at.map(|after| now + i64::try_from(after.as_micros()).unwrap_or(i64::MAX));
    let inserted = sqlx::query(
        "INSERT INTO virtual_accounts (id, organization_id, identity_id, request_id, account_id, currency,
             chain, destination_address, banking_country, status, bank_outcome, failure_reason, opens_at,
             deposit_message, bank_account_number, bank_details, fee_bps, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'PENDING', $10, $11, $12, $13, $14, $15, $17, $16, $16)
         ON CONFLICT DO NOTHING",
    )
    .bind(&account.id)
    .bind(&account.organization)
    .bind(&account.identity_id)
    .bind(&account.request_id)
    .bind(&account.destination.account_id)
    .bind(&account.destination.currency)
    .bind(account.destination.chain.as_str())
    .bind(&new.destination_address)
    .bind(&account.source.banking_country)
    .bind(outcome)
    .bind(failure)
    .bind(opens_at)
    .bind(&new.deposit_message)
    .bind(&new.account_number)
    .bind(new.bank.to_string())
    .bind(now)
    .bind(i64::from(new.fee_bps))
    .execute(&mut **tx)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Opens (or fails) every `PENDING` virtual account whose bank answer is
/// due by `now`, in one statement: the count it changed.
pub(crate) async fn open_due(tx: &mut Tx, now: i64) -> Result<usize, StoreError> {
    let done = sqlx::query(
        "UPDATE virtual_accounts
         SET status = CASE WHEN bank_outcome = 'OPEN' THEN 'ACTIVE' ELSE 'FAILED' END, updated_at = $1
         WHERE status = 'PENDING' AND bank_outcome IS NOT NULL AND opens_at <= $1",
    )
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() as usize)
}

impl Store {
    /// One virtual account; of `organization` only, when given.
    pub async fn virtual_account(
        &self,
        organization: Option<&str>,
        id: &str,
    ) -> Result<VirtualAccount, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {} {FROM} WHERE v.id = $1 AND ($2 IS NULL OR v.organization_id = $2)",
            columns()
        ))
        .bind(id)
        .bind(organization)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("virtual account {id}")))?;
        virtual_account_from_row(&row)
    }

    /// The id of the virtual account whose deposit message is `message`.
    pub async fn virtual_account_by_message(&self, message: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT id FROM virtual_accounts WHERE deposit_message = $1")
            .bind(message)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("id")).transpose()?)
    }

    /// The id of the `ACTIVE` virtual account whose bank account number
    /// is `number`.
    pub async fn active_virtual_account_by_number(&self, number: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT id FROM virtual_accounts WHERE bank_account_number = $1 AND status = 'ACTIVE'",
        )
        .bind(number)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.try_get("id")).transpose()?)
    }

    /// Up to `limit` virtual accounts of every organization still waiting
    /// for the bank's answer (an operator opens or refuses them outside
    /// `sandbox`), oldest first.
    pub async fn virtual_accounts_awaiting_bank(
        &self,
        limit: i64,
    ) -> Result<Vec<VirtualAccount>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {} {FROM} WHERE v.status = 'PENDING' AND v.bank_outcome IS NULL
             ORDER BY v.created_at, v.id LIMIT $1",
            columns()
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(virtual_account_from_row).collect()
    }

    /// Up to `limit` virtual accounts of the identity (showing `status`
    /// only, when given) whose id sorts after `after`, by id.
    pub async fn virtual_account_page(
        &self,
        organization: &str,
        identity: &str,
        status: Option<VirtualAccountStatus>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<VirtualAccount>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {} {FROM} WHERE v.organization_id = $1 AND v.identity_id = $2
                 AND ($3 IS NULL OR {SHOWN_STATUS} = $3) AND ($4 IS NULL OR v.id > $4)
             ORDER BY v.id LIMIT $5",
            columns()
        ))
        .bind(organization)
        .bind(identity)
        .bind(status.map(|s| s.as_str().trim_start_matches("VIRTUAL_ACCOUNT_STATUS_")))
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(virtual_account_from_row).collect()
    }

    /// The virtual account of `organization` created under `request_id`.
    pub async fn virtual_account_by_request(
        &self,
        organization: &str,
        request_id: &str,
    ) -> Result<Option<VirtualAccount>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {} {FROM} WHERE v.organization_id = $1 AND v.request_id = $2",
            columns()
        ))
        .bind(organization)
        .bind(request_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(virtual_account_from_row).transpose()
    }
}

/// The virtual account a request already made, when `wanted` asks for the same.
pub(crate) fn same_request(
    found: VirtualAccount,
    wanted: &VirtualAccount,
) -> Result<Made<VirtualAccount>, StoreError> {
    if found.same_request(wanted) {
        Ok(Made::Existing(found))
    } else {
        Err(StoreError::Duplicate(format!(
            "request_id {} was used for another virtual account ({})",
            wanted.request_id, found.id
        )))
    }
}

fn virtual_account_from_row(row: &AnyRow) -> Result<VirtualAccount, StoreError> {
    let shown: String = row.try_get("shown_status")?;
    let status = match shown.as_str() {
        "PENDING" => VirtualAccountStatus::Pending,
        "ACTIVE" => VirtualAccountStatus::Active,
        "INACTIVE" => VirtualAccountStatus::Inactive,
        "FAILED" => VirtualAccountStatus::Failed,
        other => return Err(StoreError::Corrupt(format!("virtual_accounts.status {other:?}"))),
    };
    let bank: Value = serde_json::from_str(&row.try_get::<String, _>("bank_details")?)
        .map_err(|e| StoreError::Corrupt(format!("virtual_accounts.bank_details: {e}")))?;
    let (number, message): (String, String) =
        (row.try_get("bank_account_number")?, row.try_get("deposit_message")?);
    let opened = matches!(status, VirtualAccountStatus::Active | VirtualAccountStatus::Inactive);
    let currency: String = row.try_get("currency")?;
    let instructions = opened.then(|| DepositInstructions::at(&bank, &number, &message, &currency));
    Ok(VirtualAccount {
        id: row.try_get("id")?,
        identity_id: row.try_get("identity_id")?,
        status,
        source: VirtualAccountSource { banking_country: row.try_get("banking_country")? },
        destination: VirtualAccountDestination {
            account_id: row.try_get("account_id")?,
            currency,
            chain: parse_column::<Chain>(&row.try_get::<String, _>("chain")?, "virtual_accounts.chain")?,
        },
        deposit_instructions: instructions,
        failure_reason: row
            .try_get::<Option<String>, _>("failure_reason")?
            .filter(|_| status == VirtualAccountStatus::Failed),
        created_at: time(row.try_get("created_at")?)?,
        updated_at: time(row.try_get("updated_at")?)?,
        organization: row.try_get("organization_id")?,
        request_id: row.try_get("request_id")?,
    })
}

/// Records `number` as the account number `by` read from the bank for
/// the `PENDING` virtual account `id`, to be confirmed by another
/// operator; its organization, `None` when it is not pending.
pub async fn propose_number(
    tx: &mut Tx,
    id: &str,
    number: &str,
    by: &str,
) -> Result<Option<String>, StoreError> {
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(StoreError::Invalid(format!("account number {number:?}: digits only")));
    }
    let row = sqlx::query(
        "UPDATE virtual_accounts SET proposed_number = $2, proposed_by = $3, updated_at = $4
         WHERE id = $1 AND status = 'PENDING' RETURNING organization_id",
    )
    .bind(id)
    .bind(number)
    .bind(by)
    .bind(now_micros())
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| r.try_get("organization_id")).transpose()?)
}

/// The number recorded for the `PENDING` virtual account `id` and who
/// recorded it, the row locked.
pub async fn proposed_number(tx: &mut Tx, id: &str) -> Result<Option<(String, String)>, StoreError> {
    let lock = crate::store::lock_suffix(tx);
    let row = sqlx::query(&format!(
        "SELECT proposed_number, proposed_by FROM virtual_accounts
         WHERE id = $1 AND status = 'PENDING' AND proposed_number IS NOT NULL{lock}"
    ))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|r| Ok((r.try_get("proposed_number")?, r.try_get("proposed_by")?))).transpose()
}

/// Writes, in `tx`, an operator's answer of the bank to the `PENDING`
/// virtual account `id`: opened under `Ok(account_number)`, or refused for
/// `Err(reason)`. Its organization when it changed it; `None` when the same
/// answer was written before; another answer before is a conflict.
pub async fn answer(tx: &mut Tx, id: &str, answer: Result<&str, &str>) -> Result<Option<String>, StoreError> {
    let (status, number, reason) = match answer {
        Ok(number) => ("ACTIVE", Some(number), None),
        Err(reason) => ("FAILED", None, Some(reason)),
    };
    if number.is_some_and(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit())) {
        return Err(StoreError::Invalid(format!(
            "account number {:?}: digits only",
            number.unwrap_or_default()
        )));
    }
    let taken: Option<String> =
        sqlx::query_scalar("SELECT id FROM virtual_accounts WHERE bank_account_number = $1 AND id <> $2")
            .bind(number)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
    if let Some(other) = taken {
        return Err(StoreError::taken(
            format!("account_number:{}", number.unwrap_or_default()),
            format!("virtual account {other} has that account number"),
        ));
    }
    let done = sqlx::query(
        "UPDATE virtual_accounts SET status = $2, bank_account_number = COALESCE($3, bank_account_number),
             failure_reason = $4, updated_at = $5
         WHERE id = $1 AND status = 'PENDING' RETURNING organization_id",
    )
    .bind(id)
    .bind(status)
    .bind(number)
    .bind(reason)
    .bind(now_micros())
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(row) = done {
        return Ok(Some(row.try_get("organization_id")?));
    }
    let row =
        sqlx::query("SELECT status, bank_account_number, failure_reason FROM virtual_accounts WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("virtual account {id}")))?;
    let (was, was_number, was_reason): (String, Option<String>, Option<String>) =
        (row.try_get("status")?, row.try_get("bank_account_number")?, row.try_get("failure_reason")?);
    let same = match answer {
        Ok(number) => was == "ACTIVE" && was_number.as_deref() == Some(number),
        Err(reason) => was == "FAILED" && was_reason.as_deref() == Some(reason),
    };
    if !same {
        return Err(StoreError::Refused(format!("virtual account {id} is {was} already")));
    }
    Ok(None)
}
