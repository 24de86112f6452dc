//! The console's rows: users and enrol links (sessions and failed sign-ins
//! are [`crate::store::console_sessions`]'s). Enrol links are kept as the SHA-256
//! of their token only.

use sqlx::{Row, any::AnyRow};

use crate::store::{Store, StoreError, Tx, sealed::CONSOLE_USERS, time};
use crate::{
    people::{
        resource::{Credentials, Member, User},
        rules::TenantRole,
    },
    pii::{Cipher, Place},
};

pub(in crate::store) const USER_COLUMNS: &str = "u.id, u.email, u.organization_id, u.operator_id, u.role, \
     u.password_hash IS NOT NULL AS enrolled, u.totp_secret IS NOT NULL AS totp, u.created_at, u.removed_at";

/// A tenant's user, or an operator's sign-in whose operator is enabled.
pub(in crate::store) const LIVE_OPERATOR: &str = "(u.operator_id IS NULL OR EXISTS (SELECT 1 FROM operators o \
     WHERE o.id = u.operator_id AND o.disabled_at IS NULL))";

pub(in crate::store) fn user(row: &AnyRow) -> Result<User, StoreError> {
    let organization: Option<String> = row.try_get("organization_id")?;
    let operator: Option<String> = row.try_get("operator_id")?;
    let role: Option<String> = row.try_get("role")?;
    let id: String = row.try_get("id")?;
    let member = match (organization, operator, role.as_deref().and_then(TenantRole::parse)) {
        (Some(organization_id), None, Some(role)) => Member::Tenant { organization_id, role },
        (None, Some(operator_id), None) => Member::Operator { operator_id },
        _ => return Err(StoreError::Corrupt(format!("console user {id}"))),
    };
    Ok(User {
        id,
        email: row.try_get("email")?,
        member,
        enrolled: flag(row, "enrolled")?,
        totp: flag(row, "totp")?,
        created_at: time(row.try_get("created_at")?)?,
        removed_at: row.try_get::<Option<i64>, _>("removed_at")?.map(time).transpose()?,
    })
}

/// A boolean expression's value: SQLite answers an integer, PostgreSQL a bool.
fn flag(row: &AnyRow, column: &str) -> Result<bool, StoreError> {
    Ok(match row.try_get::<bool, _>(column) {
        Ok(value) => value,
        Err(_) => row.try_get::<i64, _>(column)? != 0,
    })
}

/// Writes a new user; an email a present user has (in any organization, or
/// an operator's) is a conflict.
pub async fn insert_user(tx: &mut Tx, user: &User, email_key: &str) -> Result<(), StoreError> {
    let taken = sqlx::query("SELECT 1 FROM console_users WHERE email_key = $1 AND removed_at IS NULL")
        .bind(email_key)
        .fetch_optional(&mut **tx)
        .await?;
    if taken.is_some() {
        return Err(StoreError::taken(
            format!("user_email:{}", user.email),
            format!("{} is in use: it cannot be invited", user.email),
        ));
    }
    let (organization, operator, role) = match &user.member {
        Member::Tenant { organization_id, role } => {
            (Some(organization_id.as_str()), None, Some(role.as_str()))
        }
        Member::Operator { operator_id } => (None, Some(operator_id.as_str()), None),
    };
    sqlx::query(
        "INSERT INTO console_users (id, email, email_key, organization_id, operator_id, role, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&user.id)
    .bind(&user.email)
    .bind(email_key)
    .bind(organization)
    .bind(operator)
    .bind(role)
    .bind(user.created_at.timestamp_micros())
    .execute(&mut **tx)
    .await?;
    CONSOLE_USERS.seal(tx, &user.id).await
}

/// Writes an enrol link of `user_id`.
pub async fn insert_enrolment(
    tx: &mut Tx,
    hash: &str,
    user_id: &str,
    expires_at: i64,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO console_enrolments (token_hash, user_id, expires_at) VALUES ($1, $2, $3)")
        .bind(hash)
        .bind(user_id)
        .bind(expires_at)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Uses the enrol link `hash` at `now`: its user when the link was unused,
/// unexpired and its user not removed; `None` otherwise. Once only, on any
/// number of instances.
pub async fn use_enrolment(tx: &mut Tx, hash: &str, now: i64) -> Result<Option<String>, StoreError> {
    let row = sqlx::query(
        "UPDATE console_enrolments SET used_at = $1
         WHERE token_hash = $2 AND used_at IS NULL AND expires_at > $1
           AND user_id IN (SELECT id FROM console_users WHERE removed_at IS NULL AND password_hash IS NULL)
         RETURNING user_id",
    )
    .bind(now)
    .bind(hash)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| r.try_get("user_id")).transpose()?)
}

/// Sets a user's password hash and second factor (already sealed), with
/// the TOTP step the enrolment's code used (not to be used again).
pub async fn set_password(
    tx: &mut Tx,
    user_id: &str,
    password_hash: &str,
    totp: Option<(&str, i64)>,
) -> Result<(), StoreError> {
    CONSOLE_USERS.check(tx, user_id).await?;
    sqlx::query(
        "UPDATE console_users SET password_hash = $1, totp_secret = $2, totp_last_step = $3 WHERE id = $4",
    )
    .bind(password_hash)
    .bind(totp.map(|(secret, _)| secret))
    .bind(totp.map(|(_, step)| step))
    .bind(user_id)
    .execute(&mut **tx)
    .await?;
    CONSOLE_USERS.seal(tx, user_id).await
}

/// Replaces the password hash of `user_id` (the same password, hashed under
/// the pepper at its owner's sign-in).
pub async fn rehash_password(tx: &mut Tx, user_id: &str, password_hash: &str) -> Result<(), StoreError> {
    CONSOLE_USERS.check(tx, user_id).await?;
    sqlx::query("UPDATE console_users SET password_hash = $1 WHERE id = $2 AND password_hash IS NOT NULL")
        .bind(password_hash)
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    CONSOLE_USERS.seal(tx, user_id).await
}

/// Sets the second factor (already sealed) of a user who has none, with
/// the TOTP step its first code used.
pub async fn set_totp(tx: &mut Tx, user_id: &str, sealed: &str, step: i64) -> Result<(), StoreError> {
    CONSOLE_USERS.check(tx, user_id).await?;
    sqlx::query(
        "UPDATE console_users SET totp_secret = $1, totp_last_step = $2 WHERE id = $3 AND totp_secret IS NULL",
    )
    .bind(sealed)
    .bind(step)
    .bind(user_id)
    .execute(&mut **tx)
    .await?;
    CONSOLE_USERS.seal(tx, user_id).await
}

/// Sets a tenant user's role.
pub async fn set_role(tx: &mut Tx, user_id: &str, role: TenantRole) -> Result<(), StoreError> {
    CONSOLE_USERS.check(tx, user_id).await?;
    sqlx::query("UPDATE console_users SET role = $1 WHERE id = $2 AND removed_at IS NULL")
        .bind(role.as_str())
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    CONSOLE_USERS.seal(tx, user_id).await
}

/// Removes a user: it signs in no more, its sessions and links end.
pub async fn remove(tx: &mut Tx, user_id: &str, now: i64) -> Result<(), StoreError> {
    // Removing takes power away: a row written outside the service is
    // removed all the same, and stays unsealed.
    let sealed = CONSOLE_USERS.check(tx, user_id).await.is_ok();
    sqlx::query("UPDATE console_users SET removed_at = $1 WHERE id = $2 AND removed_at IS NULL")
        .bind(now)
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    if sealed {
        CONSOLE_USERS.seal(tx, user_id).await?;
    }
    end_sessions_of(tx, user_id, now).await?;
    void_enrolments(tx, user_id, now).await
}

/// Ends the sessions and voids the enrol links of operator `operator_id`'s
/// sign-in (the operator was disabled).
pub async fn end_operator(tx: &mut Tx, operator_id: &str, now: i64) -> Result<(), StoreError> {
    let users = "SELECT id FROM console_users WHERE operator_id = $2";
    sqlx::query(&format!(
        "UPDATE console_sessions SET ended_at = $1 WHERE ended_at IS NULL AND user_id IN ({users})"
    ))
    .bind(now)
    .bind(operator_id)
    .execute(&mut **tx)
    .await?;
    sqlx::query(&format!(
        "UPDATE console_enrolments SET used_at = $1 WHERE used_at IS NULL AND user_id IN ({users})"
    ))
    .bind(now)
    .bind(operator_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Voids the unused enrol links of `user_id`.
pub async fn void_enrolments(tx: &mut Tx, user_id: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE console_enrolments SET used_at = $1 WHERE user_id = $2 AND used_at IS NULL")
        .bind(now)
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Ends every live session and voids every unused enrol link, of everyone
/// (the log's authentication: none made before it acts after it); how many
/// sessions and links.
pub async fn end_all_sessions_and_links(tx: &mut Tx, now: i64) -> Result<(u64, u64), StoreError> {
    let sessions = sqlx::query("UPDATE console_sessions SET ended_at = $1 WHERE ended_at IS NULL")
        .bind(now)
        .execute(&mut **tx)
        .await?;
    let links = sqlx::query("UPDATE console_enrolments SET used_at = $1 WHERE used_at IS NULL")
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok((sessions.rows_affected(), links.rows_affected()))
}

/// Refuses, in `tx`, what would act on user `user_id`'s row (mail its link,
/// change it) when the row was written outside the service.
pub async fn check_sealed(tx: &mut Tx, user_id: &str) -> Result<(), StoreError> {
    CONSOLE_USERS.check(tx, user_id).await
}

/// Ends every session of `user_id`.
pub async fn end_sessions_of(tx: &mut Tx, user_id: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE console_sessions SET ended_at = $1 WHERE user_id = $2 AND ended_at IS NULL")
        .bind(now)
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Keeps in `tx` the second factor's secret (sealed) an enrol page offered
/// for the live link `hash`; `false` when the link is used or expired.
pub async fn offer_totp(tx: &mut Tx, hash: &str, sealed: &str, now: i64) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE console_enrolments SET totp_secret = $1 WHERE token_hash = $2 AND used_at IS NULL AND expires_at > $3",
    )
    .bind(sealed)
    .bind(hash)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The secret offered for link `hash`, as stored.
pub async fn offered_totp(store: &Store, hash: &str) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("SELECT totp_secret FROM console_enrolments WHERE token_hash = $1")
        .bind(hash)
        .fetch_optional(&store.pool)
        .await?;
    Ok(row.map(|r| r.try_get::<Option<String>, _>("totp_secret")).transpose()?.flatten())
}

/// A user, its row locked until `tx` ends.
pub async fn lock_user(tx: &mut Tx, id: &str) -> Result<Option<User>, StoreError> {
    let lock = crate::store::lock_suffix(tx);
    let row = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM console_users u WHERE u.id = $1{lock}"))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.as_ref().map(user).transpose()
}

/// The present console sign-in of operator `operator_id`, locked.
pub async fn lock_operator_user(tx: &mut Tx, operator_id: &str) -> Result<Option<User>, StoreError> {
    let lock = crate::store::lock_suffix(tx);
    let row = sqlx::query(&format!(
        "SELECT {USER_COLUMNS} FROM console_users u WHERE u.operator_id = $1 AND u.removed_at IS NULL{lock}"
    ))
    .bind(operator_id)
    .fetch_optional(&mut **tx)
    .await?;
    row.as_ref().map(user).transpose()
}

/// The present users of `organization` who never enrolled and whose every
/// enrol link is used or expired as of `now`.
pub async fn lapsed_invitations(
    tx: &mut Tx,
    organization: &str,
    now: i64,
) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(
        "SELECT u.id FROM console_users u
         WHERE u.organization_id = $1 AND u.removed_at IS NULL AND u.password_hash IS NULL
           AND NOT EXISTS (SELECT 1 FROM console_enrolments e
                           WHERE e.user_id = u.id AND e.used_at IS NULL AND e.expires_at > $2)
         ORDER BY u.id",
    )
    .bind(organization)
    .bind(now)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
}

/// How many present console users (enrolled or invited) `organization` has.
pub async fn tenant_users(tx: &mut Tx, organization: &str) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM console_users WHERE organization_id = $1 AND removed_at IS NULL",
    )
    .bind(organization)
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get("n")?)
}

/// The enrolled tenant admins of `organization`, counted in `tx` (an
/// invitation not taken up is no admin yet).
pub async fn tenant_admins(tx: &mut Tx, organization: &str) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM console_users
         WHERE organization_id = $1 AND role = 'admin' AND removed_at IS NULL AND password_hash IS NOT NULL",
    )
    .bind(organization)
    .fetch_one(&mut **tx)
    .await?;
    Ok(row.try_get("n")?)
}

/// Accepts TOTP step `step` for `user_id` once, in `tx`: `false` when it
/// (or a later one) was accepted already.
pub async fn accept_totp_step(tx: &mut Tx, user_id: &str, step: i64) -> Result<bool, StoreError> {
    CONSOLE_USERS.check(tx, user_id).await?;
    let done = sqlx::query(
        "UPDATE console_users SET totp_last_step = $1
         WHERE id = $2 AND (totp_last_step IS NULL OR totp_last_step < $1)",
    )
    .bind(step)
    .bind(user_id)
    .execute(&mut **tx)
    .await?;
    CONSOLE_USERS.seal(tx, user_id).await?;
    Ok(done.rows_affected() == 1)
}

/// The user `row` holds (read with [`CONSOLE_USERS`]'s columns of `u`),
/// when it is sealed as it stands: `None` otherwise, as for an unknown user.
fn sealed_user(row: Option<&AnyRow>) -> Result<Option<User>, StoreError> {
    let Some(row) = row else { return Ok(None) };
    let found = user(row)?;
    if !CONSOLE_USERS.authentic_in(row, "u", &found.id)? {
        tracing::warn!(user = %found.id, "a console user's row was written outside the service: it acts for no one");
        return Ok(None);
    }
    Ok(Some(found))
}

/// Where a user's TOTP secret is sealed.
pub fn totp_place(user_id: &str) -> [&str; 1] {
    [user_id]
}

fn open_totp(cipher: Option<&Cipher>, user_id: &str, value: String) -> Result<String, StoreError> {
    if !Cipher::is_sealed(&value) {
        return Ok(value);
    }
    let cipher = cipher.ok_or(StoreError::Pii(crate::pii::PiiError::Locked))?;
    Ok(cipher.open_text(&value, Place { column: "console_users.totp_secret", row: &totp_place(user_id) })?)
}

impl Store {
    /// The present console sign-in of operator `operator_id`: its id and
    /// its TOTP secret, opened.
    pub async fn console_operator_factor(
        &self,
        operator_id: &str,
    ) -> Result<Option<(String, Option<String>)>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT u.id, u.totp_secret, {} FROM console_users u WHERE u.operator_id = $1 AND u.removed_at IS NULL",
            CONSOLE_USERS.columns("u")
        ))
        .bind(operator_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let id: String = row.try_get("id")?;
        // A second factor written with SQL is no operator's.
        if !CONSOLE_USERS.authentic_in(&row, "u", &id)? {
            return Ok(None);
        }
        let secret: Option<String> = row.try_get("totp_secret")?;
        let secret = secret.map(|value| open_totp(self.cipher().ok(), &id, value)).transpose()?;
        Ok(Some((id, secret)))
    }

    /// A user by id, removed or not.
    pub async fn console_user(&self, id: &str) -> Result<Option<User>, StoreError> {
        let row = sqlx::query(&format!("SELECT {USER_COLUMNS} FROM console_users u WHERE u.id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(user).transpose()
    }

    /// The user of the unused, unexpired enrol link `hash`, when its row is
    /// sealed.
    pub async fn enrolment_user(&self, hash: &str, now: i64) -> Result<Option<User>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {USER_COLUMNS}, {} FROM console_enrolments e JOIN console_users u ON u.id = e.user_id
             WHERE e.token_hash = $1 AND e.used_at IS NULL AND e.expires_at > $2 AND u.removed_at IS NULL",
            CONSOLE_USERS.columns("u")
        ))
        .bind(hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        sealed_user(row.as_ref())
    }

    /// What sign-in checks of the enrolled, present user with `email_key`.
    pub async fn console_credentials(&self, email_key: &str) -> Result<Option<Credentials>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {USER_COLUMNS}, u.password_hash, u.totp_secret, {} FROM console_users u
             WHERE u.email_key = $1 AND u.removed_at IS NULL AND u.password_hash IS NOT NULL AND {LIVE_OPERATOR}",
            CONSOLE_USERS.columns("u")
        ))
        .bind(email_key)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        // A user's row written outside the service signs no one in.
        let Some(user) = sealed_user(Some(&row))? else { return Ok(None) };
        let totp = row.try_get::<Option<String>, _>("totp_secret")?;
        let totp_secret = totp.map(|v| open_totp(self.cipher().ok(), &user.id, v)).transpose()?;
        Ok(Some(Credentials { password_hash: row.try_get("password_hash")?, user, totp_secret }))
    }

    /// Every present user, of every organization and every operator,
    /// oldest first.
    pub async fn console_users_present(&self) -> Result<Vec<User>, StoreError> {
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM console_users u WHERE u.removed_at IS NULL ORDER BY u.created_at, u.id"
        );
        sqlx::query(&sql).fetch_all(&self.pool).await?.iter().map(user).collect()
    }

    /// The present users of `organization`, oldest first.
    pub async fn console_users_of(&self, organization: &str) -> Result<Vec<User>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {USER_COLUMNS} FROM console_users u
             WHERE u.organization_id = $1 AND u.removed_at IS NULL ORDER BY u.created_at, u.id"
        ))
        .bind(organization)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(user).collect()
    }
}
