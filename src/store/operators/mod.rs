//! Operators' rows: operators, their keys, the count of enabled admins.

pub(crate) mod operator_changes;

use sqlx::{Row, any::AnyRow};

use super::{
    Store, StoreError, Tx,
    sealed::{CONSOLE_USERS, OPERATOR_KEYS, OPERATORS},
    time,
};
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
    OPERATORS.seal(tx, &new.id).await
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
    OPERATOR_KEYS.seal(tx, key.id).await
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
            // Revoked: sealed so, whoever wrote it (a revoked key grants nothing).
            OPERATOR_KEYS.seal(tx, &child).await?;
            parents.push(child.clone());
            revoked.push((child, operator));
        }
    }
    Ok(revoked)
}

/// Gives every live key without an expiry the expiry `expires_at`: their
/// ids and operators.
/// A key whose row was written outside the service is left as it is (an
/// expiry sealed onto it would make it a key).
pub async fn bound_unbounded(tx: &mut Tx, expires_at: i64) -> Result<Vec<(String, String)>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, operator_id FROM operator_keys WHERE expires_at IS NULL AND revoked_at IS NULL ORDER BY id",
    )
    .fetch_all(&mut **tx)
    .await?;
    let mut bounded = Vec::new();
    for row in rows {
        let (id, operator): (String, String) = (row.try_get("id")?, row.try_get("operator_id")?);
        if OPERATOR_KEYS.check(tx, &id).await.is_err() {
            continue;
        }
        sqlx::query("UPDATE operator_keys SET expires_at = $1 WHERE id = $2")
            .bind(expires_at)
            .bind(&id)
            .execute(&mut **tx)
            .await?;
        OPERATOR_KEYS.seal(tx, &id).await?;
        bounded.push((id, operator));
    }
    Ok(bounded)
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
        "SELECT o.id, o.roles, {} FROM operators o WHERE disabled_at IS NULL
         AND EXISTS (SELECT 1 FROM operator_keys k WHERE k.operator_id = o.id AND {})",
        OPERATORS.columns("o"),
        live("k", "$1")
    ))
    .bind(now)
    .fetch_all(&mut **tx)
    .await?;
    let mut admins = 0;
    for row in rows {
        admins += i64::from(sealed_admin(&row)?.is_some());
    }
    Ok(admins)
}

/// How many enabled operators hold `role`.
pub async fn holders(tx: &mut Tx, role: Role) -> Result<i64, StoreError> {
    let rows =
        sqlx::query("SELECT roles FROM operators WHERE disabled_at IS NULL").fetch_all(&mut **tx).await?;
    let mut holders = 0;
    for row in rows {
        let roles: String = row.try_get("roles")?;
        holders += i64::from(roles.split(',').any(|r| r == role.as_str()));
    }
    Ok(holders)
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

/// Every enabled operator holding the `admin` role, sealed or not, by id.
pub async fn admins_enabled(tx: &mut Tx) -> Result<Vec<String>, StoreError> {
    let rows =
        sqlx::query("SELECT id, roles FROM operators WHERE disabled_at IS NULL ORDER BY created_at, id")
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

/// The enabled admins who have enrolled (set their console password) or
/// hold a live key (in production only their own enrolment or the
/// bootstrap makes one), by id: the operator's row, and the console user's
/// or key's row that shows it, each sealed (a row written outside the
/// service enrols no one).
pub async fn enrolled_admins(tx: &mut Tx, now: i64) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT o.id, o.roles, {} FROM operators o WHERE o.disabled_at IS NULL ORDER BY o.created_at, o.id",
        OPERATORS.columns("o"),
    ))
    .fetch_all(&mut **tx)
    .await?;
    let mut sealed = Vec::new();
    for row in rows {
        sealed.extend(sealed_admin(&row)?);
    }
    let mut admins = Vec::new();
    for id in sealed {
        if enrolled(tx, &id, now).await? {
            admins.push(id);
        }
    }
    Ok(admins)
}

/// Whether operator `id` has a sealed console user with a password, or a
/// sealed key live at `now`.
async fn enrolled(tx: &mut Tx, id: &str, now: i64) -> Result<bool, StoreError> {
    let users = sqlx::query(&format!(
        "SELECT u.id, {} FROM console_users u
         WHERE u.operator_id = $1 AND u.password_hash IS NOT NULL AND u.removed_at IS NULL",
        CONSOLE_USERS.columns("u")
    ))
    .bind(id)
    .fetch_all(&mut **tx)
    .await?;
    for user in &users {
        if CONSOLE_USERS.authentic_in(user, "u", &user.try_get::<String, _>("id")?)? {
            return Ok(true);
        }
    }
    let keys = sqlx::query(&format!(
        "SELECT k.id, {} FROM operator_keys k WHERE k.operator_id = $1 AND {}",
        OPERATOR_KEYS.columns("k"),
        live("k", "$2")
    ))
    .bind(id)
    .bind(now)
    .fetch_all(&mut **tx)
    .await?;
    for key in &keys {
        if OPERATOR_KEYS.authentic_in(key, "k", &key.try_get::<String, _>("id")?)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The id of the operator `row` holds (`o.id`, `o.roles` and
/// [`OPERATORS`]' columns of `o`) when it is an admin whose row is sealed:
/// a row written outside the service counts as no admin.
fn sealed_admin(row: &AnyRow) -> Result<Option<String>, StoreError> {
    let (id, roles): (String, String) = (row.try_get("id")?, row.try_get("roles")?);
    let admin = roles.split(',').any(|r| r == Role::Admin.as_str());
    Ok((admin && OPERATORS.authentic_in(row, "o", &id)?).then_some(id))
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

/// Sets operator `id`'s roles; refused when its row was written outside
/// the service.
pub async fn set_roles(tx: &mut Tx, id: &str, roles: &[Role]) -> Result<(), StoreError> {
    OPERATORS.check(tx, id).await?;
    sqlx::query("UPDATE operators SET roles = $1 WHERE id = $2")
        .bind(roles_text(roles))
        .bind(id)
        .execute(&mut **tx)
        .await?;
    OPERATORS.seal(tx, id).await
}

/// Whether operator `id`'s row is sealed as it stands (always, without a
/// pepper): a row written outside the service authorizes nothing.
pub async fn sealed(tx: &mut Tx, id: &str) -> Result<bool, StoreError> {
    Ok(OPERATORS.check(tx, id).await.is_ok())
}

/// Disables operator `id`. Taking power away never waits for a seal: a
/// row written outside the service is disabled all the same, and stays
/// unsealed.
pub async fn disable(tx: &mut Tx, id: &str, reason: &str, now: i64) -> Result<(), StoreError> {
    let sealed = sealed(tx, id).await?;
    sqlx::query(
        "UPDATE operators SET disabled_at = $1, disabled_reason = $2 WHERE id = $3 AND disabled_at IS NULL",
    )
    .bind(now)
    .bind(reason)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    if sealed {
        OPERATORS.seal(tx, id).await?;
    }
    Ok(())
}

/// Enables operator `id`; refused when its row was written outside the
/// service.
pub async fn enable(tx: &mut Tx, id: &str) -> Result<(), StoreError> {
    OPERATORS.check(tx, id).await?;
    sqlx::query("UPDATE operators SET disabled_at = NULL, disabled_reason = NULL WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    OPERATORS.seal(tx, id).await
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
    // Revoked now: sealed so, whoever wrote it (a revoked key grants
    // nothing). A row this did not change is left as it stands.
    if row.is_some() {
        OPERATOR_KEYS.seal(tx, id).await?;
    }
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

    /// Operator `id` when its row is sealed as it stands: what a signed-in
    /// operator acts as (a row written outside the service acts for no one).
    pub async fn sealed_operator(&self, id: &str) -> Result<Option<Operator>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS}, {} FROM operators o WHERE o.id = $1",
            OPERATORS.columns("o")
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        if !OPERATORS.authentic_in(&row, "o", id)? {
            tracing::warn!(operator = %id, "an operator's row was written outside the service: it acts for no one");
            return Ok(None);
        }
        Ok(Some(operator(&row)?))
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
        let row = sqlx::query(&format!(
            "SELECT o.id, o.name, o.email, o.roles, o.disabled_at, o.created_at, k.secret_hash, k.expires_at, {}, {}
             FROM operator_keys k JOIN operators o ON o.id = k.operator_id
             WHERE k.id = $1 AND k.revoked_at IS NULL AND o.disabled_at IS NULL",
            OPERATORS.columns("o"),
            OPERATOR_KEYS.columns("k"),
        ))
        .bind(key_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let found = operator(&row)?;
        // A key or an operator written outside the service authenticates nothing.
        if !OPERATOR_KEYS.authentic_in(&row, "k", key_id)? || !OPERATORS.authentic_in(&row, "o", &found.id)? {
            tracing::warn!(key = %key_id, "an operator key or its operator's row was written outside the service");
            return Ok(None);
        }
        Ok(Some((found, row.try_get("secret_hash")?, row.try_get("expires_at")?)))
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
