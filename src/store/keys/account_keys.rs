//! The key numbers of segregated accounts whose keys the service holds:
//! reserved against the account's id before its keys are made, recorded
//! beside the account once its row is written.

use sqlx::Row;

use crate::store::{
    Store, StoreError,
    accounts::{NewAccount, check_organizations, identity_statuses, insert_accounts},
    now_micros,
    quotas::Quota,
};
use crate::{account::Account, keys::FIRST_ACCOUNT_INDEX};

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
    /// The key number reserved for account `new`, claimed for this creation
    /// for a minute: the one an earlier attempt reserved, or the next free
    /// one (from [`FIRST_ACCOUNT_INDEX`] up), in a transaction of its own
    /// that commits before any key is made, so the signer is never asked
    /// inside the store's locks and a retry of the creation finds the keys
    /// it made. Checked first, as the account itself will be: its
    /// organization, its identity (which must open accounts), the
    /// organization's limit of accounts and of unfinished creations. A
    /// reservation another creation holds, or another organization's, is
    /// a conflict.
    pub async fn reserve_account_key(&self, new: &NewAccount) -> Result<u32, StoreError> {
        let mut tx = self.begin().await?;
        self.claim(&mut tx, &new.organization, Quota::Accounts).await?;
        // The accounts' version row next, before the identity (the order
        // account creation takes them in; PostgreSQL holds it until
        // commit): reservations then read the highest number one at a
        // time, never the same one.
        sqlx::query("UPDATE store_meta SET value = value WHERE key = 'accounts_version'")
            .execute(&mut *tx)
            .await?;
        check_organizations(&mut tx, std::slice::from_ref(new)).await?;
        identity_statuses(&mut tx, std::slice::from_ref(new)).await?;
        let now = now_micros();
        let index = match reservation(&mut tx, &new.id).await? {
            Some(found) if found.organization != new.organization => {
                return Err(StoreError::taken(
                    format!("account:{}", new.id),
                    format!("account id {} is another organization's", new.id),
                ));
            }
            Some(found) if found.claimed_until.is_some_and(|until| until > now) => {
                return Err(StoreError::Waiting(format!(
                    "account {} is being created by another request: retry in a minute",
                    new.id
                )));
            }
            Some(found) => found.index,
            None => {
                let unfinished: i64 = sqlx::query(
                    "SELECT COUNT(*) AS n FROM key_reservations r WHERE r.organization_id = $1 \
                     AND r.reserved_at > $2 AND (r.claimed_until IS NULL OR r.claimed_until <= $3) \
                     AND NOT EXISTS (SELECT 1 FROM account_keys k WHERE k.account_id = r.account_id)",
                )
                .bind(&new.organization)
                .bind(now - UNFINISHED_WINDOW_MICROS)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
                if unfinished >= MAX_UNFINISHED {
                    return Err(StoreError::Waiting(format!(
                        "organization {} has {unfinished} account creations unfinished: retry them, or wait an hour",
                        new.organization
                    )));
                }
                let index = next_index(&mut tx).await?;
                sqlx::query(
                    "INSERT INTO key_reservations (account_id, organization_id, key_index, reserved_at) \
                     VALUES ($1, $2, $3, $4)",
                )
                .bind(&new.id)
                .bind(&new.organization)
                .bind(i64::from(index))
                .bind(now)
                .execute(&mut *tx)
                .await?;
                index
            }
        };
        sqlx::query("UPDATE key_reservations SET claimed_until = $1 WHERE account_id = $2")
            .bind(now + CLAIM_MICROS)
            .bind(&new.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(index)
    }

    /// Lets account `account_id`'s reservation go: its creation failed, and
    /// a retry may claim it at once.
    pub async fn release_account_key(&self, account_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE key_reservations SET claimed_until = NULL WHERE account_id = $1")
            .bind(account_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Registers a segregated account whose keys the service holds, with
    /// the addresses of the keys made for the number `index` reserved for
    /// it ([`Store::reserve_account_key`]), and records the number beside
    /// the account, in one transaction. Refused when the number is not the
    /// one reserved for the account, or the organization holds its limit
    /// of accounts.
    pub async fn add_keyed_account(&self, new: NewAccount, index: u32) -> Result<Account, StoreError> {
        let mut tx = self.begin().await?;
        self.claim(&mut tx, &new.organization, Quota::Accounts).await?;
        if reserved(&mut tx, &new.id).await? != Some(index) {
            return Err(StoreError::Raced(format!(
                "key number {index} is not the one reserved for account {}",
                new.id
            )));
        }
        insert_accounts(&mut tx, std::slice::from_ref(&new)).await?;
        sqlx::query("INSERT INTO account_keys (account_id, key_index) VALUES ($1, $2)")
            .bind(&new.id)
            .bind(i64::from(index))
            .execute(&mut *tx)
            .await?;
        // Done: the claim ends with the creation.
        sqlx::query("UPDATE key_reservations SET claimed_until = NULL WHERE account_id = $1")
            .bind(&new.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.account(&new.id).await
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

/// A reservation as stored.
struct Reservation {
    organization: String,
    index: u32,
    claimed_until: Option<i64>,
}

async fn reservation(tx: &mut crate::store::Tx, account_id: &str) -> Result<Option<Reservation>, StoreError> {
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

async fn reserved(tx: &mut crate::store::Tx, account_id: &str) -> Result<Option<u32>, StoreError> {
    Ok(reservation(tx, account_id).await?.map(|r| r.index))
}

/// The next free key number: above every one reserved or recorded.
async fn next_index(tx: &mut crate::store::Tx) -> Result<u32, StoreError> {
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

/// A stored key number, refused when out of range (never truncated).
fn key_number(stored: i64) -> Result<u32, StoreError> {
    u32::try_from(stored).map_err(|_| StoreError::Invalid(format!("key number {stored} is out of range")))
}
