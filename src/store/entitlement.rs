//! An identity's entitlement read under its row lock: the lock a
//! suspension or a fiat withdrawal takes, so neither can commit between
//! this read and the change a flow makes on it (READ COMMITTED would
//! otherwise let a mint or a payout start for an identity suspended a
//! moment before).

use sqlx::{Any, Row, Transaction};

use super::{StoreError, parse_column};
use crate::identity::Status;

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

/// The status of an identity whose accounts cannot send (anything but
/// `ACTIVE`, open RFI or not); `None` when they can. Read inside the
/// transaction holding the account's row, which an identity's change also
/// takes, so a transfer is judged against the identity's committed state.
pub async fn not_transacting(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    identity_id: &str,
) -> Result<Option<Status>, StoreError> {
    let row = sqlx::query("SELECT status FROM identities WHERE organization_id = $1 AND id = $2")
        .bind(organization)
        .bind(identity_id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("identity {identity_id}")))?;
    let status: Status = parse_column(&row.try_get::<String, _>("status")?, "identities.status")?;
    Ok((status != Status::Active).then_some(status))
}
