//! The one-lineage rule of a transfer's transactions, checked under the
//! transfer's row lock, and the end of transfers no sender took: expired,
//! or failed when their identity can no longer transact.
//!
//! Each locks the transfer's row first (an `UPDATE` of it: PostgreSQL holds
//! the row until commit, SQLite's write lock is already held) and only then
//! read its transactions: under PostgreSQL's read committed, a statement
//! after the lock sees what the previous holder committed, whereas a
//! `NOT EXISTS` inside one conditional statement would be judged on the
//! snapshot taken before waiting. Recording a transaction and ending the
//! transfer unsent therefore serialise on the row, whichever instance or
//! operator runs them.

use sqlx::{Any, Row, Transaction};

use super::{Store, StoreError, gas_ledger::settle_in, parse_column};
use crate::{
    chain::Chain,
    transfers::model::{Lineage, SentTransaction, Settlement, TxRole},
    transfers::resource::{Route, TransferStatus},
    transfers::rules::{Source, may_sign},
};

/// Transfers expired in one pass at most; the next pass takes the rest.
const EXPIRY_BATCH: i64 = 100;

/// The transfers a `TOP_UP` transfer `t` waits behind at its address (see
/// [`crate::transfers::holds_address`]): earlier ones of the address still in
/// flight, or ended at or after `$2`, so that its time to be submitted
/// counts from when the address was free.
const QUEUED_BEHIND: &str = "SELECT 1 FROM transfers p
    WHERE t.route = 'TOP_UP' AND p.route = 'TOP_UP' AND p.chain = t.chain
      AND p.source_address = t.source_address AND p.created_at < t.created_at
      AND (p.status IN ('ACCEPTED', 'SUBMITTED') OR p.updated_at >= $2)";

/// Refuses `sent` with [`StoreError::Conflict`] unless `lineage` holds for
/// the transfer (see [`Lineage`]), and a new lineage of a client transfer
/// with [`StoreError::Refused`] once its source may no longer send (see
/// [`gate`]); takes the transfer's row lock.
pub(super) async fn check(
    tx: &mut Transaction<'static, Any>,
    transfer_id: &str,
    sent: &SentTransaction,
    lineage: Lineage<'_>,
    same_nonce: bool,
) -> Result<(), StoreError> {
    let status = lock(tx, transfer_id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("transfer {transfer_id}")))?;
    let rows = sqlx::query(
        "SELECT hash, role, sender, nonce, state FROM transfer_transactions
         WHERE transfer_id = $1 AND state <> 'REJECTED' ORDER BY created_at, hash",
    )
    .bind(transfer_id)
    .fetch_all(&mut **tx)
    .await?;
    let live = rows
        .iter()
        .map(|r| {
            Ok(Live {
                hash: r.try_get("hash")?,
                top_up: r.try_get::<String, _>("role")? == "TOP_UP",
                sender: r.try_get("sender")?,
                nonce: r.try_get::<i64, _>("nonce")?,
                pending: r.try_get::<String, _>("state")? == "SENT",
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let refusal = refusal(status, &live, sent, lineage, same_nonce);
    if let Some(reason) = refusal {
        return Err(StoreError::Conflict(format!(
            "transaction {} not recorded for transfer {transfer_id}: {reason}",
            sent.hash
        )));
    }
    // A new lineage (a gas top-up, or the client's own transaction), or on
    // Solana a transaction signed again after the last provably expired.
    // An EVM replacement keeps its predecessor's nonce and moves nothing
    // more: the predecessor may be included anyway.
    if lineage == Lineage::Start || !same_nonce { gate(tx, transfer_id).await } else { Ok(()) }
}

/// Refuses with [`StoreError::Refused`] a client transfer whose source may
/// no longer send (see [`may_sign`]), read after the transfer's row lock:
/// an identity's change that committed first is seen, and one that commits
/// later finds the transaction recorded. The platform's own transfers (a
/// mint, a refund) are not the client's to stop.
pub(super) async fn gate(tx: &mut Transaction<'static, Any>, transfer_id: &str) -> Result<(), StoreError> {
    let Some(source) = source(tx, transfer_id).await? else { return Ok(()) };
    may_sign(source).map_err(StoreError::Refused)
}

/// Where a client transfer's source stands now; `None` for the platform's
/// own transfers.
async fn source(tx: &mut Transaction<'static, Any>, transfer_id: &str) -> Result<Option<Source>, StoreError> {
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

/// A transaction of the transfer that was not refused.
struct Live {
    hash: String,
    top_up: bool,
    sender: String,
    nonce: i64,
    pending: bool,
}

/// Why `sent` breaks the lineage rule, if it does. With `same_nonce` (EVM)
/// a continuation keeps its predecessor's sender and nonce; on Solana a
/// re-signing carries a new last valid block height in the nonce's place.
fn refusal(
    status: TransferStatus,
    live: &[Live],
    sent: &SentTransaction,
    lineage: Lineage<'_>,
    same_nonce: bool,
) -> Option<String> {
    let top_up = sent.role == TxRole::TopUp;
    match lineage {
        Lineage::Start => {
            if status != TransferStatus::Accepted {
                return Some(format!("the transfer is {status}, no longer ACCEPTED"));
            }
            if let Some(other) = live.iter().find(|x| !x.top_up) {
                return Some(format!("transaction {} of the transfer is live", other.hash));
            }
            // A top-up replaced by an included one at its nonce stays `SENT`
            // but can never be included: it is not pending.
            let settled = |x: &Live| {
                live.iter().any(|y| y.top_up && !y.pending && y.sender == x.sender && y.nonce == x.nonce)
            };
            live.iter()
                .find(|x| x.top_up && x.pending && !settled(x))
                .map(|other| format!("top-up {} of the transfer is pending", other.hash))
        }
        Lineage::After(previous) => {
            if status.is_terminal() {
                return Some(format!("the transfer is {status}"));
            }
            let newest = live.iter().rev().find(|x| x.top_up == top_up);
            match newest {
                Some(x) if x.hash != previous => Some(format!(
                    "{} is no longer the newest transaction of its kind: {} is",
                    previous, x.hash
                )),
                None => Some(format!("{previous} is not a live transaction of the transfer")),
                Some(x) if sent.sender == x.sender && (!same_nonce || sent.nonce as i64 == x.nonce) => None,
                Some(x) => Some(format!("it does not replace {} at its sender and nonce", x.hash)),
            }
        }
    }
}

/// Locks the transfer's row; its status, if it exists.
async fn lock(tx: &mut Transaction<'static, Any>, id: &str) -> Result<Option<TransferStatus>, StoreError> {
    let row = sqlx::query("UPDATE transfers SET updated_at = updated_at WHERE id = $1 RETURNING status")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.map(|r| parse_column(&r.try_get::<String, _>("status")?, "transfers.status")).transpose()
}

impl Store {
    /// Ends with `settlement` (a failure, no fees) every transfer of `chain`
    /// still `ACCEPTED` with no transaction recorded (nor an authorization
    /// handed out, see [`Store::reserve_authorization`]) that was created before
    /// `created_before` (microseconds): no sender took it in time, and its
    /// hold is released. Each in its own transaction with its event, after
    /// locking its row and reading its transactions again, so a sender that
    /// recorded one meanwhile keeps it, and instances running this at once
    /// expire each transfer once. Returns the ids it expired.
    pub async fn expire_unsent(
        &self,
        chain: Chain,
        created_before: i64,
        settlement: &Settlement,
    ) -> Result<Vec<String>, StoreError> {
        let candidates = sqlx::query(&format!(
            "SELECT id FROM transfers t WHERE chain = $1 AND status = 'ACCEPTED' AND created_at < $2
               AND authorization_nonce IS NULL AND NOT EXISTS (SELECT 1 FROM transfer_transactions x WHERE x.transfer_id = t.id)
               AND NOT EXISTS ({QUEUED_BEHIND})
             ORDER BY created_at, id LIMIT $3"
        ))
        .bind(chain.as_str())
        .bind(created_before)
        .bind(EXPIRY_BATCH)
        .fetch_all(&self.pool)
        .await?;
        let mut expired = Vec::new();
        for row in candidates {
            let id: String = row.try_get("id")?;
            if self.expire_if_unsent(&id, created_before, settlement).await? {
                expired.push(id);
            }
        }
        Ok(expired)
    }

    /// Ends one transfer with `settlement` if it is still `ACCEPTED` with no
    /// transaction recorded, judged under its row lock, and does not wait in
    /// its topped-up address's queue (an earlier `TOP_UP` transfer of the
    /// address in flight, or ended at or after `created_before`: the queue's
    /// wait does not count against it); whether it did.
    pub async fn expire_if_unsent(
        &self,
        id: &str,
        created_before: i64,
        settlement: &Settlement,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        if !lock_unsent(&mut tx, id).await? {
            return Ok(false);
        }
        let queued = sqlx::query(&format!(
            "SELECT 1 AS queued FROM transfers t WHERE t.id = $1 AND EXISTS ({QUEUED_BEHIND})"
        ))
        .bind(id)
        .bind(created_before)
        .fetch_optional(&mut *tx)
        .await?;
        if queued.is_some() {
            return Ok(false);
        }
        settle_in(&mut tx, id, settlement).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The EIP-3009 authorization terms of an `ACCEPTED` transfer, kept
    /// before any node sees the authorization: `nonce` and `valid_before`
    /// (microseconds) if it has none yet, otherwise those it has, which every
    /// later signing reuses (so there is never a second authorization). From
    /// then on the transfer is no longer unsent: it is neither expired nor
    /// failed by a suspension while the authorization may execute. A transfer
    /// no longer `ACCEPTED` without terms is [`StoreError::Conflict`]. On a
    /// handle [`Store::fenced`] by the chain's sender lease, nothing is kept
    /// unless the lease is still held.
    pub async fn reserve_authorization(
        &self,
        id: &str,
        nonce: &str,
        valid_before: i64,
    ) -> Result<(String, i64), StoreError> {
        let mut tx = self.begin().await?;
        self.check_own_fence(&mut tx).await?;
        // The row lock first, then the source: once reserved, the
        // authorization is signed and leaves with the estimate.
        let reserving = lock(&mut tx, id).await? == Some(TransferStatus::Accepted);
        let unreserved =
            sqlx::query("SELECT 1 AS n FROM transfers WHERE id = $1 AND authorization_nonce IS NULL")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .is_some();
        if reserving && unreserved {
            gate(&mut tx, id).await?;
        }
        sqlx::query(
            "UPDATE transfers SET authorization_nonce = $2, window_ends_at = $3
             WHERE id = $1 AND status = 'ACCEPTED' AND authorization_nonce IS NULL",
        )
        .bind(id)
        .bind(nonce)
        .bind(valid_before)
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query("SELECT authorization_nonce, window_ends_at FROM transfers WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("transfer {id}")))?;
        let terms = match (row.try_get("authorization_nonce")?, row.try_get("window_ends_at")?) {
            (Some(nonce), Some(ends)) => (nonce, ends),
            _ => return Err(StoreError::Conflict(format!("transfer {id} is no longer ACCEPTED"))),
        };
        tx.commit().await?;
        Ok(terms)
    }
}

/// Locks the transfer's row, then reads its transactions: whether it is
/// still `ACCEPTED` with none recorded and no authorization handed out. The row lock comes first, as
/// [`check`] takes it before recording, so a transaction recorded by a
/// sender that held the row is seen here (a `NOT EXISTS` in the locking
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
