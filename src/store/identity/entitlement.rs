//! An identity's entitlement read under its row lock: the lock a
//! suspension or a fiat withdrawal takes, so neither can commit between
//! this read and the change a flow makes on it (READ COMMITTED would
//! otherwise let a mint or a payout start for an identity suspended a
//! moment before).

use sqlx::{Any, Row, Transaction, any::AnyRow};

use crate::identity::Status;
use crate::store::{StoreError, now_micros, parse_column};

/// The identity's status and fiat entitlement, its row locked until
/// commit.
pub async fn lock(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    id: &str,
) -> Result<(Status, bool), StoreError> {
    let row = sqlx::query(
        "UPDATE identities SET updated_at = updated_at WHERE organization_id = $1 AND id = $2
         RETURNING status, fiat_operations_enabled",
    )
    .bind(organization)
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::NotFound(format!("identity {id}")))?;
    let status = parse_column(&row.try_get::<String, _>("status")?, "identities.status")?;
    Ok((status, row.try_get::<i64, _>("fiat_operations_enabled")? != 0))
}

/// The identity trail's events of the fiat entitlement.
pub const FIAT_ENABLED: &str = "FIAT_ENABLED";
pub const FIAT_DISABLED: &str = "FIAT_DISABLED";

/// The status of an identity whose accounts cannot send (anything but
/// `ACTIVE`, open RFI or not); `None` when they can. Read inside the
/// transaction holding the account's row, which an identity's change also
/// takes, so a transfer is judged against the identity's committed state.
pub async fn not_transacting(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    identity_id: &str,
) -> Result<Option<Status>, StoreError> {
    let row =
        sqlx::query(NOT_TRANSACTING).bind(organization).bind(identity_id).fetch_optional(&mut **tx).await?;
    not_transacting_of(row, identity_id)
}

/// The status read by [`not_transacting`].
const NOT_TRANSACTING: &str = "SELECT status FROM identities WHERE organization_id = $1 AND id = $2";

/// The status of [`NOT_TRANSACTING`]'s row, `None` when it is `ACTIVE`.
fn not_transacting_of(row: Option<AnyRow>, identity_id: &str) -> Result<Option<Status>, StoreError> {
    let row = row.ok_or_else(|| StoreError::NotFound(format!("identity {identity_id}")))?;
    let status: Status = parse_column(&row.try_get::<String, _>("status")?, "identities.status")?;
    Ok((status != Status::Active).then_some(status))
}

impl crate::store::Store {
    /// [`not_transacting`], read outside any transaction: for a request
    /// judged before the node is asked, and again under its lock after.
    pub async fn identity_not_transacting(
        &self,
        organization: &str,
        identity_id: &str,
    ) -> Result<Option<Status>, StoreError> {
        let row = sqlx::query(NOT_TRANSACTING)
            .bind(organization)
            .bind(identity_id)
            .fetch_optional(&self.pool)
            .await?;
        not_transacting_of(row, identity_id)
    }
}

/// Grants (`enabled`) or withdraws an identity's fiat entitlement in `tx`,
/// under the identity's row lock, and records it in the identity's trail
/// with `actor` and `reason`: the trail entry's id; `None` when it already
/// was so (nothing is written).
pub async fn set_fiat(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    identity_id: &str,
    enabled: bool,
    actor: &str,
    reason: &str,
) -> Result<Option<String>, StoreError> {
    // Locked as a suspension locks it: one change of the identity at a time.
    let (_, fiat) = lock(tx, organization, identity_id).await?;
    if fiat == enabled {
        return Ok(None);
    }
    let row = sqlx::query("SELECT status, sub_status FROM identities WHERE organization_id = $1 AND id = $2")
        .bind(organization)
        .bind(identity_id)
        .fetch_one(&mut **tx)
        .await?;
    let now = now_micros();
    sqlx::query(
        "UPDATE identities SET fiat_operations_enabled = $3, updated_at = $4
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(organization)
    .bind(identity_id)
    .bind(i64::from(enabled))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let (status, sub_status): (String, Option<String>) = (row.try_get("status")?, row.try_get("sub_status")?);
    let id = uuid::Uuid::new_v4().to_string();
    sqlx::query(
        "INSERT INTO identity_actions (id, organization_id, identity_id, event, actor, reason, previous_status,
             previous_sub_status, status, sub_status, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $7, $8, $9)",
    )
    .bind(&id)
    .bind(organization)
    .bind(identity_id)
    .bind(if enabled { FIAT_ENABLED } else { FIAT_DISABLED })
    .bind(actor)
    .bind(reason)
    .bind(status)
    .bind(sub_status)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(Some(id))
}
