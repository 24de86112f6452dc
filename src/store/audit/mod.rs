//! The audit log's rows (see [`crate::audit`]): the head read under its row
//! lock, an entry inserted after it and the head moved onto it (the only
//! change the guards of [`super::audit_guard`] let through), entries read in
//! `seq` order, and the claim of the next signed checkpoint.

pub(in crate::store) mod audit_guard;

use sqlx::{Row, any::AnyRow};

use super::{
    Store, StoreError, Tx,
    clock::database_now,
    keyring::{self, AUTHENTICATED, Authority},
    lock_suffix, now_micros,
};
use crate::audit::chain::Entry;

/// The next entry's place: its `seq`, the previous hash and its time by the
/// store's clock.
#[derive(Debug, Clone)]
pub struct Next {
    pub seq: i64,
    pub prev_hash: String,
    pub at: i64,
    /// Whether the log has been authenticated under some pepper (an
    /// `audit_log.authenticated` entry, authentic or not, is there).
    pub authenticated: bool,
}

const COLUMNS: &str = "seq, at, actor, actor_name, action, target_kind, target_id, organization_id, reason, \
     request_id, detail, prev_hash, hash, mac";

/// Takes the head's row lock (held until `tx` ends: appends on every
/// instance form one chain) and answers where the next entry goes, its
/// time read once the lock is held.
pub async fn next(tx: &mut Tx) -> Result<Next, StoreError> {
    // One statement: an append costs no more for knowing whether the log
    // is authenticated.
    let sql = format!(
        "SELECT seq, hash, (SELECT COUNT(*) FROM audit_log WHERE action = $1) AS authenticated \
         FROM audit_head WHERE id = 1{}",
        lock_suffix(tx)
    );
    let row = sqlx::query(&sql).bind(AUTHENTICATED).fetch_one(&mut **tx).await?;
    let (seq, prev_hash): (i64, String) = (row.try_get("seq")?, row.try_get("hash")?);
    let authenticated = row.try_get::<i64, _>("authenticated")? > 0;
    let now = database_now(tx);
    let at: i64 = match now {
        Some(now) => sqlx::query_scalar(&format!("SELECT {now}")).fetch_one(&mut **tx).await?,
        None => now_micros(),
    };
    Ok(Next { seq: seq + 1, prev_hash, at, authenticated })
}

/// Whether the store seals personal data (it has a key recorded): then no
/// free text is written to the log in the clear.
pub async fn seals(tx: &mut Tx) -> Result<bool, StoreError> {
    Ok(sqlx::query("SELECT id FROM pii_keys WHERE id = 1").fetch_optional(&mut **tx).await?.is_some())
}

/// Locks the head row until `tx` ends (`FOR UPDATE` on PostgreSQL; on
/// SQLite the write transaction holds the file's lock already); answers
/// the head's `seq` and hash.
pub async fn lock_head(tx: &mut Tx) -> Result<(i64, String), StoreError> {
    let sql = format!("SELECT seq, hash FROM audit_head WHERE id = 1{}", lock_suffix(tx));
    let row = sqlx::query(&sql).fetch_one(&mut **tx).await?;
    Ok((row.try_get("seq")?, row.try_get("hash")?))
}

/// Writes `entry` after the head, then moves the head onto it.
pub async fn insert(tx: &mut Tx, entry: &Entry) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "INSERT INTO audit_log ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
    ))
    .bind(entry.seq)
    .bind(entry.at)
    .bind(&entry.actor)
    .bind(entry.actor_name.as_deref())
    .bind(&entry.action)
    .bind(&entry.target_kind)
    .bind(&entry.target_id)
    .bind(entry.organization_id.as_deref())
    .bind(entry.reason.as_deref())
    .bind(entry.request_id.as_deref())
    .bind(entry.detail.as_deref())
    .bind(&entry.prev_hash)
    .bind(&entry.hash)
    .bind(entry.mac.as_deref())
    .execute(&mut **tx)
    .await?;
    sqlx::query("UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1")
        .bind(entry.seq)
        .bind(&entry.hash)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The entry at `seq`, if any.
pub async fn at(tx: &mut Tx, seq: i64) -> Result<Option<Entry>, StoreError> {
    let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM audit_log WHERE seq = $1"))
        .bind(seq)
        .fetch_all(&mut **tx)
        .await?;
    rows.iter().map(entry).next().transpose()
}

/// Every entry of `action`, oldest first.
pub async fn all_of(tx: &mut Tx, action: &str) -> Result<Vec<Entry>, StoreError> {
    let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM audit_log WHERE action = $1 ORDER BY seq"))
        .bind(action)
        .fetch_all(&mut **tx)
        .await?;
    rows.iter().map(entry).collect()
}

/// Makes the index an authentication reads the entries about its
/// principal through (made by code, as the guards are, on both stores).
pub(in crate::store) async fn install_index(pool: &sqlx::AnyPool) -> Result<(), StoreError> {
    sqlx::query("CREATE INDEX IF NOT EXISTS audit_log_target ON audit_log (target_id, seq)")
        .execute(pool)
        .await?;
    sqlx::query("CREATE INDEX IF NOT EXISTS audit_log_action ON audit_log (action, seq)")
        .execute(pool)
        .await?;
    Ok(())
}

/// Makes the next checkpoint due now.
pub async fn checkpoint_due_now(tx: &mut Tx) -> Result<(), StoreError> {
    sqlx::query("UPDATE audit_checkpoint_due SET due_at = 0 WHERE id = 1").execute(&mut **tx).await?;
    Ok(())
}

/// Whether a principal's entry (an operator's, an operator key's, an API
/// key's) with a `detail` exists: the log was written by a release that
/// records the principals' details.
pub async fn has_details(tx: &mut Tx) -> Result<bool, StoreError> {
    let row = sqlx::query(
        "SELECT seq FROM audit_log WHERE detail IS NOT NULL AND action IN ('operator.bootstrapped', \
         'operator.created', 'operator.genesis_created', 'operator.roles_set', 'operator.adopted', \
         'operator_key.created', \
         'operator_key.revoked', 'operator_key.adopted', 'api_key.created', 'api_key.adopted') LIMIT 1",
    )
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.is_some())
}

fn entry(row: &AnyRow) -> Result<Entry, StoreError> {
    Ok(Entry {
        seq: row.try_get("seq")?,
        at: row.try_get("at")?,
        actor: row.try_get("actor")?,
        actor_name: row.try_get("actor_name")?,
        action: row.try_get("action")?,
        target_kind: row.try_get("target_kind")?,
        target_id: row.try_get("target_id")?,
        organization_id: row.try_get("organization_id")?,
        reason: row.try_get("reason")?,
        request_id: row.try_get("request_id")?,
        detail: row.try_get("detail")?,
        prev_hash: row.try_get("prev_hash")?,
        hash: row.try_get("hash")?,
        mac: row.try_get("mac")?,
    })
}

impl Store {
    /// Up to `limit` entries after `after`, oldest first; of one
    /// organization's when `organization` is given.
    pub async fn audit_entries(
        &self,
        after: i64,
        organization: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Entry>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM audit_log WHERE seq > $1 AND ($2 IS NULL OR organization_id = $2)
             ORDER BY seq LIMIT $3"
        ))
        .bind(after)
        .bind(organization)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(entry).collect()
    }

    /// The newest `limit` entries of `organization`, newest first.
    pub async fn audit_latest(&self, organization: &str, limit: i64) -> Result<Vec<Entry>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM audit_log WHERE organization_id = $1 ORDER BY seq DESC LIMIT $2"
        ))
        .bind(organization)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(entry).collect()
    }

    /// Every entry about one of `targets`, oldest first (through the index
    /// [`install_index`] makes).
    pub async fn audit_about(&self, targets: &[&str]) -> Result<Vec<Entry>, StoreError> {
        let marks: Vec<String> = (1..=targets.len()).map(|i| format!("${i}")).collect();
        let sql =
            format!("SELECT {COLUMNS} FROM audit_log WHERE target_id IN ({}) ORDER BY seq", marks.join(", "));
        let mut query = sqlx::query(&sql);
        for target in targets {
            query = query.bind(*target);
        }
        query.fetch_all(&self.pool).await?.iter().map(entry).collect()
    }

    /// Every entry of `action`, oldest first, read on the pool.
    pub async fn audit_of_action(&self, action: &str) -> Result<Vec<Entry>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM audit_log WHERE action = $1 ORDER BY seq"))
            .bind(action)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(entry).collect()
    }

    /// The entry at `seq`, read on the pool.
    pub async fn audit_entry(&self, seq: i64) -> Result<Option<Entry>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM audit_log WHERE seq = $1"))
            .bind(seq)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(entry).next().transpose()
    }

    /// The authority the log grants, read on the pool (see [`authority`]).
    pub async fn audit_authority(&self) -> Result<Authority, StoreError> {
        let Some(pepper) = keyring::process().ok().flatten() else { return Ok(Authority::Unkeyed) };
        let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM audit_log WHERE action = $1 ORDER BY seq"))
            .bind(AUTHENTICATED)
            .fetch_all(&self.pool)
            .await?;
        let entries: Vec<Entry> = rows.iter().map(entry).collect::<Result<_, _>>()?;
        Ok(Authority::Keyed { since: entries.iter().find(|e| keyring::authentic(pepper, e)).map(|e| e.seq) })
    }

    /// The `audit_checkpoint_due` row as it reads: when the next checkpoint
    /// is due (microseconds) and who claimed the last; `None` without it.
    pub async fn audit_checkpoint_due(&self) -> Result<Option<(i64, Option<String>)>, StoreError> {
        let row = sqlx::query("SELECT due_at, owner FROM audit_checkpoint_due WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| Ok((row.try_get("due_at")?, row.try_get("owner")?))).transpose()
    }

    /// The chain's head: the last `seq` appended and its hash.
    pub async fn audit_head(&self) -> Result<(i64, String), StoreError> {
        let row = sqlx::query("SELECT seq, hash FROM audit_head WHERE id = 1").fetch_one(&self.pool).await?;
        Ok((row.try_get("seq")?, row.try_get("hash")?))
    }
}

/// Claims in `tx` the next checkpoint for `owner` when it is due at `now`
/// (microseconds), the one after due `every` later: true for exactly one
/// claimant per period. A due time further away than two periods counts
/// as due, and a missing row is made again.
pub async fn claim_checkpoint(tx: &mut Tx, owner: &str, now: i64, every: i64) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE audit_checkpoint_due SET due_at = $1 + $2, owner = $3
         WHERE id = 1 AND (due_at <= $1 OR due_at > $1 + $2 + $2)",
    )
    .bind(now)
    .bind(every)
    .bind(owner)
    .execute(&mut **tx)
    .await?;
    if done.rows_affected() == 1 {
        return Ok(true);
    }
    let made = sqlx::query(
        "INSERT INTO audit_checkpoint_due (id, due_at, owner) VALUES (1, $1 + $2, $3) ON CONFLICT (id) DO NOTHING",
    )
    .bind(now)
    .bind(every)
    .bind(owner)
    .execute(&mut **tx)
    .await?;
    Ok(made.rows_affected() == 1)
}

/// Makes the checkpoint `owner` claimed due again at `at` in `tx`, unless
/// another claimed meanwhile.
pub async fn retry_checkpoint(tx: &mut Tx, owner: &str, at: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE audit_checkpoint_due SET due_at = $1 WHERE id = 1 AND owner = $2")
        .bind(at)
        .bind(owner)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Whether an entry of `action` about `target_id` exists.
pub async fn has_entry(tx: &mut Tx, action: &str, target_id: &str) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT seq FROM audit_log WHERE action = $1 AND target_id = $2 LIMIT 1")
        .bind(action)
        .bind(target_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.is_some())
}

/// The entries the log grants authority to, as this process reads it
/// (see [`Authority`]): the first `audit_log.authenticated` entry whose MAC
/// verifies marks where authentication began.
pub async fn authority(tx: &mut Tx) -> Result<Authority, StoreError> {
    let Some(pepper) = keyring::process().ok().flatten() else { return Ok(Authority::Unkeyed) };
    let since =
        all_of(tx, AUTHENTICATED).await?.iter().find(|e| keyring::authentic(pepper, e)).map(|e| e.seq);
    Ok(Authority::Keyed { since })
}

/// Whether an entry about one of `targets` (a console user, its operator)
/// that counts as authority recorded the enrol link whose stored hash is
/// `hash` (its detail's `link_sha256`).
pub async fn has_link(tx: &mut Tx, hash: &str, targets: &[&str]) -> Result<bool, StoreError> {
    let authority = authority(tx).await?;
    for target in targets {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM audit_log WHERE target_id = $1 AND detail IS NOT NULL ORDER BY seq"
        ))
        .bind(*target)
        .fetch_all(&mut **tx)
        .await?;
        for row in rows {
            let found = entry(&row)?;
            let detail = found.detail.as_deref().and_then(crate::audit::detail::Detail::parse);
            if detail.and_then(|d| d.link_sha256).is_some_and(|h| h == hash) && authority.admits(&found) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The last entry about `target_id` whose action is one of `actions` and
/// that the log explains (see [`Authority::explains`]: one inserted
/// outside the service after the log was authenticated is passed over).
pub async fn last_entry_about(
    tx: &mut Tx,
    (first, second): (&str, &str),
    target_id: &str,
) -> Result<Option<Entry>, StoreError> {
    let authority = authority(tx).await?;
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM audit_log WHERE target_id = $1 AND action IN ($2, $3) ORDER BY seq DESC"
    ))
    .bind(target_id)
    .bind(first)
    .bind(second)
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows.iter().map(entry).collect::<Result<Vec<_>, _>>()?.into_iter().find(|e| authority.explains(e)))
}

/// The first entry of `action` about `target_id` that counts as authority
/// for a new effect (see [`authority`]): one inserted outside the service,
/// or made before the log was authenticated, is not found.
pub async fn entry_about(tx: &mut Tx, action: &str, target_id: &str) -> Result<Option<Entry>, StoreError> {
    let authority = authority(tx).await?;
    Ok(entries_about(tx, action, target_id).await?.into_iter().find(|e| authority.admits(e)))
}

/// The first entry of `action` about `target_id` that explains history
/// (see [`Authority::explains`]): a report's reading, never a new effect's.
pub async fn logged_entry_about(
    tx: &mut Tx,
    action: &str,
    target_id: &str,
) -> Result<Option<Entry>, StoreError> {
    let authority = authority(tx).await?;
    Ok(entries_about(tx, action, target_id).await?.into_iter().find(|e| authority.explains(e)))
}

pub async fn entries_about(tx: &mut Tx, action: &str, target_id: &str) -> Result<Vec<Entry>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM audit_log WHERE action = $1 AND target_id = $2 ORDER BY seq"
    ))
    .bind(action)
    .bind(target_id)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(entry).collect()
}
