//! The rows an identity's change writes (the change itself, one
//! transaction, is [`crate::identity::change`]): its state, its accounts'
//! derived status, its compliance submissions, and the transfers of its
//! accounts not yet handed to a chain.

use sqlx::Row;

use serde_json::Value;

use crate::store::{
    StoreError, Tx,
    events::{self, NewEvent},
    parse_column,
    pii::SUBMISSION,
};
use crate::{
    account::AccountStatus,
    chain::Chain,
    identity::{State, SubStatus, resource::IDENTITY_STATUS_UPDATE},
    pii::{Cipher, Place},
};

/// Writes the identity's new state.
pub async fn set_state(
    tx: &mut Tx,
    (organization, identity_id): (&str, &str),
    next: State,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE identities SET status = $3, sub_status = $4, rfi_step = $5, updated_at = $6
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(organization)
    .bind(identity_id)
    .bind(next.status().as_str())
    .bind(next.sub_status().map(SubStatus::as_str))
    .bind(next.rfi_step().map(SubStatus::as_str))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Appends the identity's `identity_status_update` carrying `data`.
pub async fn announce(
    tx: &mut Tx,
    (organization, identity_id): (&str, &str),
    data: &Value,
    now: i64,
) -> Result<(), StoreError> {
    let id = uuid::Uuid::new_v4().to_string();
    let event = NewEvent::new(organization, IDENTITY_STATUS_UPDATE, identity_id, id, data)?;
    events::append(tx, std::slice::from_ref(&event), now).await
}

/// Writes `status` on every account of the identity.
pub async fn set_accounts_status(
    tx: &mut Tx,
    (organization, identity_id): (&str, &str),
    status: AccountStatus,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE accounts SET status = $3 WHERE organization_id = $1 AND identity_id = $2")
        .bind(organization)
        .bind(identity_id)
        .bind(status.as_str())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The identity's accounts, by id.
pub async fn account_ids(
    tx: &mut Tx,
    (organization, identity_id): (&str, &str),
) -> Result<Vec<String>, StoreError> {
    let rows =
        sqlx::query("SELECT id FROM accounts WHERE organization_id = $1 AND identity_id = $2 ORDER BY id")
            .bind(organization)
            .bind(identity_id)
            .fetch_all(&mut **tx)
            .await?;
    Ok(rows.iter().map(|r| r.try_get("id")).collect::<Result<_, _>>()?)
}

/// The transfers of the identity's accounts still `ACCEPTED`, with their
/// chain, oldest first; the platform's own routes left out.
pub async fn accepted_transfers(
    tx: &mut Tx,
    (organization, identity_id): (&str, &str),
) -> Result<Vec<(String, Chain)>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT t.id, t.chain FROM transfers t JOIN accounts a ON a.id = t.account_id
         WHERE a.organization_id = $1 AND a.identity_id = $2 AND t.status = 'ACCEPTED'
           AND t.route NOT IN {}
         ORDER BY t.created_at, t.id",
        crate::store::PLATFORM_ROUTES
    ))
    .bind(organization)
    .bind(identity_id)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter()
        .map(|row| {
            let chain = parse_column(&row.try_get::<String, _>("chain")?, "transfers.chain")?;
            Ok((row.try_get("id")?, chain))
        })
        .collect()
}

/// How many compliance submissions of the identity were recorded since `since`.
pub async fn submissions_since(
    tx: &mut Tx,
    (organization, identity_id): (&str, &str),
    since: i64,
) -> Result<i64, StoreError> {
    Ok(sqlx::query(
        "SELECT COUNT(*) AS n FROM compliance_submissions
         WHERE organization_id = $1 AND identity_id = $2 AND created_at >= $3",
    )
    .bind(organization)
    .bind(identity_id)
    .bind(since)
    .fetch_one(&mut **tx)
    .await?
    .try_get("n")?)
}

/// A compliance submission: `{ "kyc": … }` or `{ "kyb": … }`, sealed.
pub struct Submission<'a> {
    pub organization: &'a str,
    pub identity_id: &'a str,
    pub kind: &'a str,
    /// The submission's JSON text (personal data).
    pub data: &'a str,
}

/// Records `submission`, sealed with `cipher` to its row; its id.
pub async fn insert_submission(
    tx: &mut Tx,
    cipher: &Cipher,
    submission: &Submission<'_>,
    now: i64,
) -> Result<String, StoreError> {
    let Submission { organization, identity_id, kind, data } = submission;
    let id = uuid::Uuid::new_v4().to_string();
    let sealed =
        cipher.seal(data.as_bytes(), Place { column: SUBMISSION, row: &[organization, identity_id, &id] });
    sqlx::query(
        "INSERT INTO compliance_submissions (id, organization_id, identity_id, kind, data, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&id)
    .bind(organization)
    .bind(identity_id)
    .bind(kind)
    .bind(sealed)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}
