//! Operator and API keys' stored hashes, read and written for their
//! re-keying under the pepper (see [`crate::api_key::pepper`]).

use sqlx::Row;

use crate::store::{StoreError, Tx};

/// The tables that hold keys' hashes.
const TABLES: [&str; 2] = ["operator_keys", "api_keys"];

/// A key's row and its stored hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHash {
    pub table: &'static str,
    pub id: String,
    pub hash: String,
}

/// Every key whose hash is not keyed yet (not `hmac1:…`).
pub async fn plain(tx: &mut Tx) -> Result<Vec<KeyHash>, StoreError> {
    let mut found = Vec::new();
    for table in TABLES {
        let sql =
            format!("SELECT id, secret_hash FROM {table} WHERE secret_hash NOT LIKE 'hmac1:%' ORDER BY id");
        for row in sqlx::query(&sql).fetch_all(&mut **tx).await? {
            found.push(KeyHash { table, id: row.try_get("id")?, hash: row.try_get("secret_hash")? });
        }
    }
    Ok(found)
}

/// Replaces `key`'s stored hash with `hash`.
pub async fn set(tx: &mut Tx, key: &KeyHash, hash: &str) -> Result<(), StoreError> {
    let sql = format!("UPDATE {} SET secret_hash = $1 WHERE id = $2", key.table);
    sqlx::query(&sql).bind(hash).bind(&key.id).execute(&mut **tx).await?;
    Ok(())
}
