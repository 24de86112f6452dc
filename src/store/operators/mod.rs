//! Operators' rows: operators, their keys, the count of enabled admins.

pub(crate) mod operator_changes;

use sqlx::{Row, any::AnyRow};

use super::{Store, StoreError, Tx, time};
use crate::operators::resource::{Operator, OperatorKey, Role, parse_roles, roles_text};

const COLUMNS: &str = "id, name, email, roles, disabled_at, created_at";

fn operator(row: &AnyRow) -> Result<Operator, StoreError> {
    let roles: String = row.try_get("roles")?;
    Ok(Operator {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        email: row.try_get("email")?,
        roles: parse_roles(&roles).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        disabled_at: row.try_get::<Option<i64>, _>("disabled_at")?.map(time).transpose()?,
        created_at: time(row.try_get("created_at")?)?,
    })
}

fn key(row: &AnyRow) -> Result<OperatorKey, StoreError> {
    Ok(OperatorKey {
        id: row.try_get("id")?,
        operator_id: row.try_get("operator_id")?,
        created_at: time(row.try_get("created_at")?)?,
        revoked_at: row.try_get::<Option<i64>, _>("revoked_at")?.map(time).transpose()?,
        expires_at: row.try_get::<Option<i64>, _>("expires_at")?.map(time).transpose()?,
    })
}

/// A live key: not revoked, not expired at `now` (a bound parameter).
fn live(alias: &str, now: &str) -> String {
    format!("{alias}.revoked_at IS NULL AND ({alias}.expires_at IS NULL OR {alias}.expires_at > {now})")
}

/// Whether an operator has `email` (in any case).
pub async fn email_taken(tx: &mut Tx, email: &str) -> Result<bool, StoreError> {
    let taken = sqlx::query("SELECT 1 FROM operators WHERE lower(email) = lower($1)")
        .bind(email)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(taken.is_some())
}

/// Writes a new operator; an email already taken is a conflict.
pub async fn insert(tx: &mut Tx, new: &Operator, created_at: i64) -> Result<(), StoreError> {
    if email_taken(tx, &new.email).await? {
        return Err(StoreError::taken(
            format!("operator_email:{}", new.email),
            format!("an operator with email {} exists", new.email),
        ));
    }
    sqlx::query(&format!("INSERT INTO operators ({COLUMNS}) VALUES ($1, $2, $3, $4, NULL, $5)"))
        .bind(&new.id)
        .bind(&new.name)
        .bind(&new.email)
        .bind(roles_text(&new.roles))
        .bind(created_at)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// An operator key's row to write (its hash only).
#[derive(Debug, Clone, Copy)]
pub struct NewKey<'a> {
    pub id: &'a str,
    pub operator_id: &'a str,
    pub hash: &'a str,
    pub created_at: i64,
    /// `None`: never (sandbox).
    pub expires_at: Option<i64>,
    /// The key the request that made it authenticated with.
    pub parent: Option<&'a str>,
}

/// Writes an operator's key.
pub async fn insert_key(tx: &mut Tx, key: NewKey<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO operator_keys (id, operator_id, secret_hash, created_at, expires_at, parent_key_id)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(key.id)
    .bind(key.operator_id)
    .bind(key.hash)
    .bind(key.created_at)
    .bind(key.expires_at)
    .bind(key.parent)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Revokes every live key made, directly or not, with key `id`: their
/// ids and operators.
pub async fn revoke_made_with(tx: &mut Tx, id: &str, now: i64) -> Result<Vec<(String, String)>, StoreError> {
    let mut revoked = Vec::new();
    let mut parents = vec![id.to_string()];
    while let Some(parent) = parents.pop() {
        let rows = sqlx::query(
            "UPDATE operator_keys SET revoked_at = $1 WHERE parent_key_id = $2 AND revoked_at IS NULL
             RETURNING id, operator_id",
        )
        .bind(now)
        .bind(&parent)
        .fetch_all(&mut **tx)
        .await?;
        for row in rows {
            let (child, operator): (String, String) = (row.try_get("id")?, row.try_get("operator_id")?);
            parents.push(child.clone());
            revoked.push((child, operator));
        }
    }
    Ok(revoked)
}

/// Gives every live key without an expiry the expiry `expires_at`: their
/// ids and operators.
pub async fn bound_unbounded(tx: &mut Tx, expires_at: i64) -> Result<Vec<(String, String)>, StoreError> {
    let rows = sqlx::query(
        "UPDATE operator_keys SET expires_at = $1 WHERE expires_at IS NULL AND revoked_at IS NULL
         RETURNING id, operator_id",
    )
    .bind(expires_at)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("operator_id")?))).collect()
}

/// Key `id`'s expiry (`Some(None)`: never), when it is live at `now`.
pub async fn live_key_expiry(tx: &mut Tx, id: &str, now: i64) -> Result<Option<Option<i64>>, StoreError> {
    let sql = format!("SELECT expires_at FROM operator_keys k WHERE k.id = $1 AND {}", live("k", "$2"));
    let row = sqlx::query(&sql).bind(id).bind(now).fetch_optional(&mut **tx).await?;
    row.map(|r| Ok(r.try_get::<Option<i64>, _>("expires_at")?)).transpose()
}

/// How many enabled operators hold the `admin` role and a key live at
/// `now` (an admin without one cannot act).
pub async fn enabled_admins(tx: &mut Tx, now: i64) -> Result<i64, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT roles FROM operators o WHERE disabled_at IS NULL
         AND EXISTS (SELECT 1 FROM operator_keys k WHERE k.operator_id = o.id AND {})",
        live("k", "$1")
    ))
    .bind(now)
    .fetch_all(&mut **tx)
    .await?;
    let mut admins = 0;
    for row in rows {
        let roles: String = row.try_get("roles")?;
        admins += i64::from(roles.split(',').any(|r| r == Role::Admin.as_str()));
    }
    Ok(admins)
}

/// Whether any operator, enabled or not, holds the `admin` role.
pub async fn any_admin(tx: &mut Tx) -> Result<bool, StoreError> {
    let rows = sqlx::query("SELECT roles FROM operators").fetch_all(&mut **tx).await?;
    for row in rows {
        let roles: String = row.try_get("roles")?;
        if roles.split(',').any(|r| r == Role::Admin.as_str()) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The enabled admins who have enrolled (set their console password) or
/// hold a live key (in production only their own enrolment or the
/// bootstrap makes one), by id.
pub async fn enrolled_admins(tx: &mut Tx, now: i64) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT o.id, o.roles FROM operators o WHERE o.disabled_at IS NULL AND (EXISTS (
             SELECT 1 FROM console_users u WHERE u.operator_id = o.id AND u.password_hash IS NOT NULL
             AND u.removed_at IS NULL)
           OR EXISTS (SELECT 1 FROM operator_keys k WHERE k.operator_id = o.id AND {}))
         ORDER BY o.created_at, o.id",
        live("k", "$1")
    ))
    .bind(now)
    .fetch_all(&mut **tx)
    .await?;
    let mut admins = Vec::new();
    for row in rows {
        let roles: String = row.try_get("roles")?;
        if roles.split(',').any(|r| r == Role::Admin.as_str()) {
            admins.push(row.try_get("id")?);
        }
    }
    Ok(admins)
}

/// How many keys live at `now` operator `id` holds.
pub async fn live_keys(tx: &mut Tx, id: &str, now: i64) -> Result<i64, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT COUNT(*) AS n FROM operator_keys k WHERE k.operator_id = $1 AND {}",
        live("k", "$2")
    ))
    .bind(id)
    .bind(now)
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get("n")?)
}

/// The operator `id`, its row locked until `tx` ends (PostgreSQL).
pub async fn lock(tx: &mut Tx, id: &str) -> Result<Option<Operator>, StoreError> {
    let lock = super::lock_suffix(tx);
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM operators WHERE id = $1{lock}"))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.as_ref().map(operator).transpose()
}

pub async fn set_roles(tx: &mut Tx, id: &str, roles: &[Role]) -> Result<(), StoreError> {
    sqlx::query("UPDATE operators SET roles = $1 WHERE id = $2")
        .bind(roles_text(roles))
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub async fn disable(tx: &mut Tx, id: &str, reason: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE operators SET disabled_at = $1, disabled_reason = $2 WHERE id = $3 AND disabled_at IS NULL",
    )
    .bind(now)
    .bind(reason)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn enable(tx: &mut Tx, id: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE operators SET disabled_at = NULL, disabled_reason = NULL WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Revokes key `id`; answers its operator, `None` when no live key has it.
pub async fn revoke_key(tx: &mut Tx, id: &str, now: i64) -> Result<Option<String>, StoreError> {
    let row = sqlx::query(
        "UPDATE operator_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING operator_id",
    )
    .bind(now)
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| r.try_get("operator_id")).transpose()?)
}

impl Store {
    /// Operator `id`, enabled or not.
    pub async fn operator(&self, id: &str) -> Result<Option<Operator>, StoreError> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM operators WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(operator).transpose()
    }

    /// Every operator, oldest first.
    pub async fn operators(&self) -> Result<Vec<Operator>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM operators ORDER BY created_at, id"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(operator).collect()
    }

    /// The keys of `operator_id`, oldest first.
    pub async fn operator_keys(&self, operator_id: &str) -> Result<Vec<OperatorKey>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, operator_id, created_at, revoked_at, expires_at FROM operator_keys WHERE operator_id = $1
             ORDER BY created_at, id",
        )
        .bind(operator_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(key).collect()
    }

    /// The enabled operator of live key `key_id`, with the key's hash: read
    /// on every request, so that a disabled operator or a revoked key stops
    /// working at once on every instance.
    /// ... and the key's expiry (`None`: never).
    pub async fn operator_by_key(
        &self,
        key_id: &str,
    ) -> Result<Option<(Operator, String, Option<i64>)>, StoreError> {
        let row = sqlx::query(
            "SELECT o.id, o.name, o.email, o.roles, o.disabled_at, o.created_at, k.secret_hash, k.expires_at
             FROM operator_keys k JOIN operators o ON o.id = k.operator_id
             WHERE k.id = $1 AND k.revoked_at IS NULL AND o.disabled_at IS NULL",
        )
        .bind(key_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| Ok((operator(&r)?, r.try_get("secret_hash")?, r.try_get("expires_at")?))).transpose()
    }

    /// When the last key of the enabled admins expires: `None` without a
    /// live admin key, `Some(None)` when one never expires.
    pub async fn last_admin_key_expiry(&self, now: i64) -> Result<Option<Option<i64>>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT o.roles, k.expires_at FROM operator_keys k JOIN operators o ON o.id = k.operator_id
             WHERE o.disabled_at IS NULL AND {}",
            live("k", "$1")
        ))
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        let mut last: Option<Option<i64>> = None;
        for row in rows {
            let roles: String = row.try_get("roles")?;
            if !roles.split(',').any(|r| r == Role::Admin.as_str()) {
                continue;
            }
            let expires: Option<i64> = row.try_get("expires_at")?;
            last = Some(match (last, expires) {
                (Some(None), _) | (_, None) => None,
                (Some(Some(a)), Some(b)) => Some(a.max(b)),
                (None, Some(b)) => Some(b),
            });
        }
        Ok(last)
    }
}
