//! The rows of a transfer's lineage and of its end unsent: its row locked,
//! its live transactions, where its source stands, whether it is still
//! unsent, its authorization's terms. The rules and the flows that read
//! them are the transfers wing's ([`crate::transfers::lineage`],
//! [`crate::transfers::record`], [`crate::transfers::expiry`]).
//!
//! Each flow locks the transfer's row first (an `UPDATE` of it: PostgreSQL
//! holds the row until commit, SQLite's write lock is already held) and
//! only then reads its transactions: under PostgreSQL's read committed, a
//! statement after the lock sees what the previous holder committed,
//! whereas a `NOT EXISTS` inside one conditional statement would be judged
//! on the snapshot taken before waiting. Recording a transaction and ending
//! the transfer unsent therefore serialise on the row, whichever instance
//! or operator runs them.

use sqlx::{Any, Row, Transaction};

use crate::store::{Store, StoreError, parse_column};
use crate::{
    chain::Chain,
    transfers::lineage::Live,
    transfers::resource::{Route, TransferStatus},
    transfers::rules::Source,
};

/// The transfers a `TOP_UP` transfer `t` waits behind at its address (see
/// [`crate::transfers::holds_address`]): earlier ones of the address still in
/// flight, or ended at or after `$2`, so that its time to be submitted
/// counts from when the address was free.
const QUEUED_BEHIND: &str = "SELECT 1 FROM transfers p
    WHERE t.route = 'TOP_UP' AND p.route = 'TOP_UP' AND p.chain = t.chain
      AND p.source_address = t.source_address AND p.created_at < t.created_at
      AND (p.status IN ('ACCEPTED', 'SUBMITTED') OR p.updated_at >= $2)";

/// Locks the transfer's row; its status, if it exists.
pub(crate) async fn lock(
    tx: &mut Transaction<'static, Any>,
    id: &str,
) -> Result<Option<TransferStatus>, StoreError> {
    let row = sqlx::query("UPDATE transfers SET updated_at = updated_at WHERE id = $1 RETURNING status")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.map(|r| parse_column(&r.try_get::<String, _>("status")?, "transfers.status")).transpose()
}

/// The transfer's transactions that were not refused, in signing order.
pub(crate) async fn live(
    tx: &mut Transaction<'static, Any>,
    transfer_id: &str,
) -> Result<Vec<Live>, StoreError> {
    let rows = sqlx::query(
        "SELECT hash, role, sender, nonce, state FROM transfer_transactions
         WHERE transfer_id = $1 AND state <> 'REJECTED' ORDER BY created_at, hash",
    )
    .bind(transfer_id)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(Live {
                hash: r.try_get("hash")?,
                top_up: r.try_get::<String, _>("role")? == "TOP_UP",
                sender: r.try_get("sender")?,
                nonce: r.try_get::<i64, _>("nonce")?,
                pending: r.try_get::<String, _>("state")? == "SENT",
            })
        })
        .collect()
}

/// Where a client transfer's source stands now; `None` for the platform's
/// own transfers.
pub(crate) async fn source(
    tx: &mut Transaction<'static, Any>,
    transfer_id: &str,
) -> Result<Option<Source>, StoreError> {
    let row = sqlx::query(
        "SELECT t.route, a.status AS account_status, i.status AS identity_status, i.fiat_operations_enabled,
                (SELECT COUNT(*) FROM conversions c WHERE c.transfer_id = t.id) AS collects
         FROM transfers t
         LEFT JOIN accounts a ON a.id = t.account_id
         LEFT JOIN identities i ON i.organization_id = t.organization_id AND i.id = t.identity_id
         WHERE t.id = $1",
    )
    .bind(transfer_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::NotFound(format!("transfer {transfer_id}")))?;
    let route: Route = parse_column(&row.try_get::<String, _>("route")?, "transfers.route")?;
    if route.is_platform_own() {
        return Ok(None);
    }
    // A client transfer's account and identity always exist: never waved through.
    let (Some(account), Some(identity)) = (
        row.try_get::<Option<String>, _>("account_status")?,
        row.try_get::<Option<String>, _>("identity_status")?,
    ) else {
        return Err(StoreError::Corrupt(format!("transfer {transfer_id} has no account or identity")));
    };
    let collect = row.try_get::<i64, _>("collects")? > 0;
    Ok(Some(Source {
        account: parse_column(&account, "accounts.status")?,
        identity: parse_column(&identity, "identities.status")?,
        collect_fiat_enabled: collect
            .then(|| row.try_get::<i64, _>("fiat_operations_enabled").map(|f| f != 0))
            .transpose()?,
    }))
}

/// The transfers of `chain` still `ACCEPTED`, created before
/// `created_before`, with no transaction recorded nor an authorization
/// handed out, that wait in no topped-up address's queue: at most `limit`,
/// oldest first.
pub(crate) async fn unsent(
    store: &Store,
    chain: Chain,
    created_before: i64,
    limit: i64,
) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT id FROM transfers t WHERE chain = $1 AND status = 'ACCEPTED' AND created_at < $2
           AND authorization_nonce IS NULL AND NOT EXISTS (SELECT 1 FROM transfer_transactions x WHERE x.transfer_id = t.id)
           AND NOT EXISTS ({QUEUED_BEHIND})
         ORDER BY created_at, id LIMIT $3"
    ))
    .bind(chain.as_str())
    .bind(created_before)
    .bind(limit)
    .fetch_all(&store.pool)
    .await?;
    rows.iter().map(|row| Ok(row.try_get("id")?)).collect()
}

/// Whether transfer `id` waits in its topped-up address's queue: an earlier
/// `TOP_UP` transfer of the address in flight, or ended at or after
/// `created_before`.
pub(crate) async fn queued(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    created_before: i64,
) -> Result<bool, StoreError> {
    let queued = sqlx::query(&format!(
        "SELECT 1 AS queued FROM transfers t WHERE t.id = $1 AND EXISTS ({QUEUED_BEHIND})"
    ))
    .bind(id)
    .bind(created_before)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(queued.is_some())
}

/// Whether transfer `id` has no authorization's terms yet.
pub(crate) async fn unauthorized(tx: &mut Transaction<'static, Any>, id: &str) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT 1 AS n FROM transfers WHERE id = $1 AND authorization_nonce IS NULL")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.is_some())
}

/// Keeps `nonce` and `valid_before` as the authorization's terms of an
/// `ACCEPTED` transfer that has none; answers the terms it has, if any.
pub(crate) async fn authorize(
    tx: &mut Transaction<'static, Any>,
    id: &str,
    nonce: &str,
    valid_before: i64,
) -> Result<Option<(String, i64)>, StoreError> {
    sqlx::query(
        "UPDATE transfers SET authorization_nonce = $2, window_ends_at = $3
         WHERE id = $1 AND status = 'ACCEPTED' AND authorization_nonce IS NULL",
    )
    .bind(id)
    .bind(nonce)
    .bind(valid_before)
    .execute(&mut **tx)
    .await?;
    let row = sqlx::query("SELECT authorization_nonce, window_ends_at FROM transfers WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("transfer {id}")))?;
    match (row.try_get("authorization_nonce")?, row.try_get("window_ends_at")?) {
        (Some(nonce), Some(ends)) => Ok(Some((nonce, ends))),
        _ => Ok(None),
    }
}

/// Locks the transfer's row, then reads its transactions: whether it is
/// still `ACCEPTED` with none recorded and no authorization handed out. The
/// row lock comes first, as recording a transaction takes it, so a
/// transaction recorded by a sender that held the row is seen here (a `NOT EXISTS` in the locking
/// statement itself would be judged on the snapshot taken before the wait).
pub async fn lock_unsent(tx: &mut Transaction<'static, Any>, id: &str) -> Result<bool, StoreError> {
    let row = sqlx::query(
        "UPDATE transfers SET updated_at = updated_at WHERE id = $1 RETURNING status, authorization_nonce",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(false) };
    let status: TransferStatus = parse_column(&row.try_get::<String, _>("status")?, "transfers.status")?;
    if status != TransferStatus::Accepted
        || row.try_get::<Option<String>, _>("authorization_nonce")?.is_some()
    {
        return Ok(false);
    }
    let recorded: i64 = sqlx::query("SELECT COUNT(*) AS n FROM transfer_transactions WHERE transfer_id = $1")
        .bind(id)
        .fetch_one(&mut **tx)
        .await?
        .try_get("n")?;
    Ok(recorded == 0)
}
