//! Rows that authenticate or authorize, sealed: each carries `row_mac`,
//! HMAC-SHA-256 under the pepper's row key of its table, its id and the
//! columns that grant (see [`super::keyring::row_mac`]), each read as text
//! (`CAST(… AS TEXT)`, the same on SQLite and PostgreSQL) or `null`. The
//! service writes the MAC with every change of such a row, in the change's
//! transaction, after checking the MAC the row had: a row inserted or
//! changed with plain SQL is never sealed by a later change of the
//! service, and authenticates and authorizes nothing. Without a pepper (a
//! sandbox) no MAC is written or checked.

use sqlx::{Row, any::AnyRow};

use super::{Store, StoreError, Tx, keyring};

/// A table whose rows are sealed, with its id column and the columns that
/// grant, in the order the MAC takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sealed {
    pub table: &'static str,
    pub id: &'static str,
    pub grants: &'static [&'static str],
}

/// A console user: its email (where its links are mailed) and email key,
/// organization, operator, role, password hash, TOTP secret and last step,
/// and removal.
pub const CONSOLE_USERS: Sealed = Sealed {
    table: "console_users",
    id: "id",
    grants: &[
        "email",
        "email_key",
        "organization_id",
        "operator_id",
        "role",
        "password_hash",
        "totp_secret",
        "totp_last_step",
        "removed_at",
    ],
};

/// A console session: its user, the factor step that opened it, and when.
pub const CONSOLE_SESSIONS: Sealed =
    Sealed { table: "console_sessions", id: "id_hash", grants: &["user_id", "factor", "created_at"] };

/// An operator: its email (where its links are mailed), its roles and its
/// disabling.
pub const OPERATORS: Sealed =
    Sealed { table: "operators", id: "id", grants: &["email", "roles", "disabled_at"] };

/// An operator key: its owner, its secret's hash, expiry and revocation,
/// and the key that made it (whose revocation revokes it).
pub const OPERATOR_KEYS: Sealed = Sealed {
    table: "operator_keys",
    id: "id",
    grants: &["operator_id", "secret_hash", "expires_at", "revoked_at", "parent_key_id"],
};

/// An API key: its organization, its secret's hash, its revocation and
/// the public key it is paired with.
pub const API_KEYS: Sealed = Sealed {
    table: "api_keys",
    id: "id",
    grants: &["organization_id", "secret_hash", "revoked_at", "public_key_pem"],
};

/// Every sealed table: what the log's authentication seals as found, and
/// what `audit verify` checks.
pub const ALL: [Sealed; 5] = [CONSOLE_USERS, CONSOLE_SESSIONS, OPERATORS, OPERATOR_KEYS, API_KEYS];

impl Sealed {
    /// The select list of the granting columns of alias `alias`'s row, and
    /// its MAC, for [`Sealed::authentic_in`].
    pub fn columns(&self, alias: &str) -> String {
        let mut list: Vec<String> = self
            .grants
            .iter()
            .map(|column| format!("CAST({alias}.{column} AS TEXT) AS {alias}_g_{column}"))
            .collect();
        list.push(format!("{alias}.row_mac AS {alias}_row_mac"));
        list.join(", ")
    }

    /// Whether the row read with [`Sealed::columns`] of `alias` is sealed
    /// as its columns stand (always, without a pepper).
    pub fn authentic_in(&self, row: &AnyRow, alias: &str, id: &str) -> Result<bool, StoreError> {
        let (grants, mac) = self.read(row, alias)?;
        Ok(keyring::row_authentic(self.table, id, &grants, mac.as_deref()))
    }

    fn read(
        &self,
        row: &AnyRow,
        alias: &str,
    ) -> Result<(Vec<serde_json::Value>, Option<String>), StoreError> {
        let mut grants = Vec::with_capacity(self.grants.len());
        for column in self.grants {
            let value: Option<String> = row.try_get(format!("{alias}_g_{column}").as_str())?;
            grants.push(serde_json::json!(value));
        }
        Ok((grants, row.try_get(format!("{alias}_row_mac").as_str())?))
    }

    async fn row(&self, tx: &mut Tx, id: &str) -> Result<Option<AnyRow>, StoreError> {
        let sql = format!(
            "SELECT {} FROM {} r WHERE r.{} = $1{}",
            self.columns("r"),
            self.table,
            self.id,
            super::lock_suffix(tx)
        );
        Ok(sqlx::query(&sql).bind(id).fetch_optional(&mut **tx).await?)
    }

    /// Refuses a change of row `id` (locked until `tx` ends) whose MAC does
    /// not match its columns: it was written outside the service.
    pub async fn check(&self, tx: &mut Tx, id: &str) -> Result<(), StoreError> {
        let Some(row) = self.row(tx, id).await? else { return Ok(()) };
        if self.authentic_in(&row, "r", id)? {
            return Ok(());
        }
        Err(StoreError::Refused(format!(
            "{} {id} was written outside the service (its row MAC does not match): see `audit verify`",
            self.table
        )))
    }

    /// Writes row `id`'s MAC as its columns now stand in `tx`. Only after
    /// the service's own change, checked first with [`Sealed::check`] (or
    /// the row's insert).
    pub async fn seal(&self, tx: &mut Tx, id: &str) -> Result<(), StoreError> {
        if keyring::process().ok().flatten().is_none() {
            return Ok(());
        }
        let Some(row) = self.row(tx, id).await? else { return Ok(()) };
        let (grants, _) = self.read(&row, "r")?;
        let mac = keyring::row_mac(self.table, id, &grants);
        let sql = format!("UPDATE {} SET row_mac = $1 WHERE {} = $2", self.table, self.id);
        sqlx::query(&sql).bind(mac).bind(id).execute(&mut **tx).await?;
        Ok(())
    }

    /// The ids of every row of the table.
    pub async fn ids(&self, tx: &mut Tx) -> Result<Vec<String>, StoreError> {
        let sql = format!("SELECT {} AS id FROM {} ORDER BY {}", self.id, self.table, self.id);
        let rows = sqlx::query(&sql).fetch_all(&mut **tx).await?;
        rows.iter().map(|row| Ok(row.try_get("id")?)).collect()
    }

    /// Seals every row as found (the log's authentication); how many.
    pub async fn seal_all(&self, tx: &mut Tx) -> Result<usize, StoreError> {
        let ids = self.ids(tx).await?;
        for id in &ids {
            self.seal(tx, id).await?;
        }
        Ok(ids.len())
    }
}

impl Store {
    /// The rows of every sealed table whose MAC does not match their
    /// columns, as `<table> <id>`: none without a pepper.
    pub async fn unsealed_rows(&self) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        if keyring::process().ok().flatten().is_none() {
            return Ok(found);
        }
        for sealed in ALL {
            let sql = format!(
                "SELECT r.{} AS id, {} FROM {} r ORDER BY r.{}",
                sealed.id,
                sealed.columns("r"),
                sealed.table,
                sealed.id
            );
            for row in sqlx::query(&sql).fetch_all(&self.pool).await? {
                let id: String = row.try_get("id")?;
                if !sealed.authentic_in(&row, "r", &id)? {
                    found.push(format!("{} {id}", sealed.table));
                }
            }
        }
        Ok(found)
    }
}
