//! Organizations and their API keys. Every API read and write is scoped to the
//! organization of the key that made it.

use chrono::{DateTime, Utc};
use sqlx::{Row, any::AnyRow};

use super::{Store, StoreError, Tx, now_micros, parse_column, quotas::Quota, sealed::API_KEYS, time};
use crate::request_signature::{Algorithm, PublicKey};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Organization {
    pub id: String,
    pub name: String,
    /// Where a production invitation of its first console admin is mailed.
    pub contact_email: Option<String>,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339")]
    pub created_at: DateTime<Utc>,
}

/// An API key as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApiKey {
    pub id: String,
    pub organization_id: String,
    pub name: String,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(
        serialize_with = "crate::deposits::resource::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub revoked_at: Option<DateTime<Utc>>,
    /// Set when the key is paired with a public key: every request it makes
    /// must then be signed with this algorithm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature_algorithm: Option<Algorithm>,
    #[serde(
        serialize_with = "crate::deposits::resource::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub paired_at: Option<DateTime<Utc>>,
    /// When the key last authenticated a request, to the minute.
    #[serde(
        serialize_with = "crate::deposits::resource::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_used_at: Option<DateTime<Utc>>,
}

/// What authenticating a request with a key needs.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub key: ApiKey,
    pub secret_hash: String,
    /// The paired public key: requests must be signed with it.
    pub public_key: Option<PublicKey>,
}

const ORGANIZATION_COLUMNS: &str = "id, name, contact_email, created_at";

fn organization(row: &AnyRow) -> Result<Organization, StoreError> {
    Ok(Organization {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        contact_email: row.try_get("contact_email")?,
        created_at: time(row.try_get("created_at")?)?,
    })
}

/// Inserts organization `id` in `tx`: ids are short machine names
/// (letters, digits, `-` and `_`); the name defaults to the id.
pub async fn insert_organization(
    tx: &mut Tx,
    id: &str,
    name: Option<&str>,
    contact_email: Option<&str>,
) -> Result<Organization, StoreError> {
    let valid = !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid {
        return Err(StoreError::Invalid(format!(
            "organization id {id:?} must be 1 to 64 letters, digits, '-' or '_'"
        )));
    }
    let name = name.unwrap_or(id);
    let created_at = now_micros();
    // Without a contact, the columns every release's table has (a store
    // being migrated may be older than the contact's column).
    let inserted = match contact_email {
        None => sqlx::query(
            "INSERT INTO organizations (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(name)
        .bind(created_at),
        Some(contact) => sqlx::query(
            "INSERT INTO organizations (id, name, contact_email, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(name)
        .bind(contact)
        .bind(created_at),
    }
    .execute(&mut **tx)
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(StoreError::taken(
            format!("organization:{id}"),
            format!("organization {id} already exists"),
        ));
    }
    let contact_email = contact_email.map(str::to_string);
    Ok(Organization { id: id.into(), name: name.into(), contact_email, created_at: time(created_at)? })
}

/// Organization `id`, its row locked until `tx` ends (PostgreSQL).
pub async fn lock_organization(tx: &mut Tx, id: &str) -> Result<Option<Organization>, StoreError> {
    let lock = super::lock_suffix(tx);
    let row = sqlx::query(&format!("SELECT {ORGANIZATION_COLUMNS} FROM organizations WHERE id = $1{lock}"))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.as_ref().map(organization).transpose()
}

/// Sets organization `id`'s contact address.
pub async fn set_contact(tx: &mut Tx, id: &str, contact_email: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE organizations SET contact_email = $1 WHERE id = $2")
        .bind(contact_email)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub(super) const API_KEY_COLUMNS: &str =
    "id, organization_id, name, created_at, revoked_at, signature_algorithm, paired_at, last_used_at";

impl Store {
    pub async fn organizations(&self) -> Result<Vec<Organization>, StoreError> {
        let rows = sqlx::query(&format!("SELECT {ORGANIZATION_COLUMNS} FROM organizations ORDER BY id"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(organization).collect()
    }

    /// Stores a key's hash under its organization in `tx`; refused beyond
    /// [`super::MAX_API_KEYS`] active keys.
    pub async fn create_api_key_in(
        &self,
        tx: &mut Tx,
        organization: &str,
        name: &str,
        id: &str,
        secret_hash: &str,
    ) -> Result<ApiKey, StoreError> {
        if name.trim().is_empty() {
            return Err(StoreError::Invalid("an API key needs a name".into()));
        }
        self.claim(tx, organization, Quota::ApiKeys).await?;
        let created_at = now_micros();
        sqlx::query(
            "INSERT INTO api_keys (id, organization_id, name, secret_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id)
        .bind(organization)
        .bind(name)
        .bind(secret_hash)
        .bind(created_at)
        .execute(&mut **tx)
        .await?;
        API_KEYS.seal(tx, id).await?;
        Ok(ApiKey {
            id: id.into(),
            organization_id: organization.into(),
            name: name.into(),
            created_at: time(created_at)?,
            revoked_at: None,
            signature_algorithm: None,
            paired_at: None,
            last_used_at: None,
        })
    }

    /// Keys, oldest first, optionally of one organization; revoked ones included.
    pub async fn api_keys(&self, organization: Option<&str>) -> Result<Vec<ApiKey>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {API_KEY_COLUMNS} FROM api_keys
             WHERE ($1 IS NULL OR organization_id = $1) ORDER BY created_at, id"
        ))
        .bind(organization)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(api_key).collect()
    }

    /// One key, revoked or not.
    pub async fn api_key(&self, id: &str) -> Result<ApiKey, StoreError> {
        let row = sqlx::query(&format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("API key {id}")))?;
        api_key(&row)
    }

    /// An active key, its stored hash and its paired public key, for
    /// authentication.
    pub async fn active_api_key(&self, id: &str) -> Result<Option<Credentials>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {API_KEY_COLUMNS}, secret_hash, public_key_pem, {} FROM api_keys k
             WHERE id = $1 AND revoked_at IS NULL",
            API_KEYS.columns("k")
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        // A key written outside the service authenticates nothing.
        if !API_KEYS.authentic_in(&row, "k", id)? {
            tracing::warn!(key = %id, "an API key's row was written outside the service");
            return Ok(None);
        }
        let key = api_key(&row)?;
        let pem: Option<String> = row.try_get("public_key_pem")?;
        let public_key = pem
            .map(|pem| {
                PublicKey::from_pem(&pem)
                    .ok()
                    .filter(|parsed| Some(parsed.algorithm()) == key.signature_algorithm)
                    .ok_or_else(|| StoreError::Corrupt(format!("public key of API key {id}")))
            })
            .transpose()?;
        Ok(Some(Credentials { key, secret_hash: row.try_get("secret_hash")?, public_key }))
    }
}

fn api_key(row: &AnyRow) -> Result<ApiKey, StoreError> {
    let algorithm: Option<String> = row.try_get("signature_algorithm")?;
    Ok(ApiKey {
        id: row.try_get("id")?,
        organization_id: row.try_get("organization_id")?,
        name: row.try_get("name")?,
        created_at: time(row.try_get("created_at")?)?,
        revoked_at: row.try_get::<Option<i64>, _>("revoked_at")?.map(time).transpose()?,
        signature_algorithm: algorithm
            .map(|a| parse_column::<Algorithm>(&a, "signature_algorithm"))
            .transpose()?,
        paired_at: row.try_get::<Option<i64>, _>("paired_at")?.map(time).transpose()?,
        last_used_at: row.try_get::<Option<i64>, _>("last_used_at")?.map(time).transpose()?,
    })
}

/// Records in `tx` that key `id` authenticated a request at `now`, at most
/// once a minute.
pub async fn used_api_key(tx: &mut Tx, id: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE api_keys SET last_used_at = $1
         WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1 - 60000000)",
    )
    .bind(now)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Revokes key `id` in `tx`: every later request with it is refused. Its
/// organization when this revoked it; `None` when it was revoked already
/// (or never existed).
pub async fn revoke_api_key(tx: &mut Tx, id: &str) -> Result<Option<String>, StoreError> {
    let row = sqlx::query(
        "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING organization_id",
    )
    .bind(now_micros())
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    // Revoked now: sealed so, whoever wrote it (a revoked key grants
    // nothing). A row this did not change is left as it stands.
    if row.is_some() {
        API_KEYS.seal(tx, id).await?;
    }
    Ok(row.map(|r| r.try_get("organization_id")).transpose()?)
}
