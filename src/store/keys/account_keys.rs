//! The key numbers of segregated accounts whose keys the service holds:
//! reserved against the account's id before its keys are made, recorded
//! beside the account once its row is written.

use sqlx::Row;

use crate::keys::FIRST_ACCOUNT_INDEX;
use crate::store::{
    Store, StoreError, Tx,
    accounts::{NewAccount, check_organizations, identity_statuses},
    quotas::Quota,
};

/// How long a creation holds its account's reservation while the signer
/// makes the keys.
const CLAIM_MICROS: i64 = 60_000_000;
/// How many of an organization's creations may be left unfinished
/// (reserved within the last hour, no account yet, no longer claimed):
/// each may have made keys in the signer, which a tenant must not be able
/// to fill. Creations in flight do not count.
pub const MAX_UNFINISHED: i64 = 16;
const UNFINISHED_WINDOW_MICROS: i64 = 3_600_000_000;

impl Store {
    /// Takes `organization`'s row lock in `tx` and refuses one more account
    /// when it holds its limit of accounts.
    pub(crate) async fn claim_account(&self, tx: &mut Tx, organization: &str) -> Result<(), StoreError> {
        self.claim(tx, organization, Quota::Accounts).await
    }

    /// The key number of the account's keys, if the service holds them.
    pub async fn account_key(&self, account_id: &str) -> Result<Option<u32>, StoreError> {
        let row = sqlx::query("SELECT key_index FROM account_keys WHERE account_id = $1")
            .bind(account_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| key_number(r.try_get("key_index")?)).transpose()
    }

    /// Every account whose keys the service holds, with its key number,
    /// by number.
    pub async fn account_keys(&self) -> Result<Vec<(String, u32)>, StoreError> {
        let rows = sqlx::query("SELECT account_id, key_index FROM account_keys ORDER BY key_index")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok((r.try_get("account_id")?, key_number(r.try_get("key_index")?)?))).collect()
    }
}

/// Takes the accounts' version row, then checks `new` as its account will
/// be: its organization, and its identity (which must open accounts, its
/// row locked). The version row comes before the identity (the order
/// account creation takes them in; PostgreSQL holds it until commit):
/// reservations then read the highest number one at a time, never the
/// same one.
pub(crate) async fn check_new(tx: &mut Tx, new: &NewAccount) -> Result<(), StoreError> {
    sqlx::query("UPDATE store_meta SET value = value WHERE key = 'accounts_version'")
        .execute(&mut **tx)
        .await?;
    check_organizations(tx, std::slice::from_ref(new)).await?;
    identity_statuses(tx, std::slice::from_ref(new)).await?;
    Ok(())
}

/// A reservation as stored.
pub(crate) struct Reservation {
    pub(crate) organization: String,
    pub(crate) index: u32,
    pub(crate) claimed_until: Option<i64>,
}

/// The reservation of account `account_id`, if any.
pub(crate) async fn reservation(tx: &mut Tx, account_id: &str) -> Result<Option<Reservation>, StoreError> {
    let row = sqlx::query(
        "SELECT organization_id, key_index, claimed_until FROM key_reservations WHERE account_id = $1",
    )
    .bind(account_id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(Reservation {
        organization: row.try_get("organization_id")?,
        index: key_number(row.try_get("key_index")?)?,
        claimed_until: row.try_get("claimed_until")?,
    }))
}

/// The key number reserved for account `account_id`, if any.
pub(crate) async fn reserved(tx: &mut Tx, account_id: &str) -> Result<Option<u32>, StoreError> {
    Ok(reservation(tx, account_id).await?.map(|r| r.index))
}

/// How many of `organization`'s creations are unfinished at `now`:
/// reserved within the last hour, no account yet, no longer claimed.
pub(crate) async fn unfinished(tx: &mut Tx, organization: &str, now: i64) -> Result<i64, StoreError> {
    Ok(sqlx::query(
        "SELECT COUNT(*) AS n FROM key_reservations r WHERE r.organization_id = $1 \
         AND r.reserved_at > $2 AND (r.claimed_until IS NULL OR r.claimed_until <= $3) \
         AND NOT EXISTS (SELECT 1 FROM account_keys k WHERE k.account_id = r.account_id)",
    )
    .bind(organization)
    .bind(now - UNFINISHED_WINDOW_MICROS)
    .bind(now)
    .fetch_one(&mut **tx)
    .await?
    .try_get("n")?)
}

/// Reserves the next free key number for account `new` at `now`: the number.
pub(crate) async fn reserve_next(tx: &mut Tx, new: &NewAccount, now: i64) -> Result<u32, StoreError> {
    let index = next_index(tx).await?;
    sqlx::query(
        "INSERT INTO key_reservations (account_id, organization_id, key_index, reserved_at) \
         VALUES ($1, $2, $3, $4)",
    )
    .bind(&new.id)
    .bind(&new.organization)
    .bind(i64::from(index))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(index)
}

/// Claims account `account_id`'s reservation for its creation, from `now`
/// for a minute.
pub(crate) async fn claim_reservation(tx: &mut Tx, account_id: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE key_reservations SET claimed_until = $1 WHERE account_id = $2")
        .bind(now + CLAIM_MICROS)
        .bind(account_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Lets account `account_id`'s reservation go: no creation claims it.
pub(crate) async fn release(tx: &mut Tx, account_id: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE key_reservations SET claimed_until = NULL WHERE account_id = $1")
        .bind(account_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Records key number `index` beside account `account_id`; the claim on
/// its reservation ends with its creation.
pub(crate) async fn record(tx: &mut Tx, account_id: &str, index: u32) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO account_keys (account_id, key_index) VALUES ($1, $2)")
        .bind(account_id)
        .bind(i64::from(index))
        .execute(&mut **tx)
        .await?;
    release(tx, account_id).await
}

/// The next free key number: above every one reserved or recorded.
async fn next_index(tx: &mut Tx) -> Result<u32, StoreError> {
    let top: Option<i64> = sqlx::query(
        "SELECT MAX(key_index) AS top FROM (SELECT key_index FROM key_reservations \
         UNION ALL SELECT key_index FROM account_keys) AS taken",
    )
    .fetch_one(&mut **tx)
    .await?
    .try_get("top")?;
    match top {
        None => Ok(FIRST_ACCOUNT_INDEX),
        Some(top) => Ok(key_number(top)?
            .checked_add(1)
            .ok_or_else(|| StoreError::Invalid("no key number is left".into()))?
            .max(FIRST_ACCOUNT_INDEX)),
    }
}

/// How many key numbers a suspected restore leaves out past the highest
/// reserved: those accounts made after the backup may hold.
pub const RESTORE_GAP: i64 = 1000;

/// Reserves in `tx`, once per `tag`, the key number [`RESTORE_GAP`] past
/// the highest reserved or recorded, for no account (`account_id` the tag,
/// organization `platform`): every number up to it stays unused, so no
/// account made after a restore gets the keys of one made after its
/// backup. Whether it reserved.
pub async fn skip_numbers(tx: &mut Tx, tag: &str, now: i64) -> Result<bool, StoreError> {
    let skipped = sqlx::query(
        "INSERT INTO key_reservations (account_id, organization_id, key_index, reserved_at)
         SELECT $1, 'platform', COALESCE(MAX(key_index), 0) + $2, $3 FROM (
             SELECT key_index FROM key_reservations UNION ALL SELECT key_index FROM account_keys) taken
         WHERE 1 = 1 ON CONFLICT (account_id) DO NOTHING",
    )
    .bind(tag)
    .bind(RESTORE_GAP)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(skipped.rows_affected() > 0)
}

/// A stored key number, refused when out of range (never truncated).
fn key_number(stored: i64) -> Result<u32, StoreError> {
    u32::try_from(stored).map_err(|_| StoreError::Invalid(format!("key number {stored} is out of range")))
}
