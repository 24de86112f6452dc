//! Public keys paired with API keys, and the `jti` of every accepted request
//! token, kept in the store so that a token is accepted once by the whole
//! fleet of instances sharing it.

use super::{ApiKey, Store, StoreError, now_micros};
use crate::request_signature::PublicKey;

impl Store {
    /// Pairs an active key with `public_key` (replacing an earlier one): from
    /// then on every request with the key must be signed by it.
    pub async fn pair_api_key(&self, id: &str, public_key: &PublicKey) -> Result<ApiKey, StoreError> {
        let paired = sqlx::query(
            "UPDATE api_keys SET public_key_pem = $1, signature_algorithm = $2, paired_at = $3
             WHERE id = $4 AND revoked_at IS NULL",
        )
        .bind(public_key.pem())
        .bind(public_key.algorithm().as_str())
        .bind(now_micros())
        .bind(id)
        .execute(&self.pool)
        .await?;
        let key = self.api_key(id).await?;
        if paired.rows_affected() == 0 {
            return Err(StoreError::Conflict(format!("API key {id} is revoked")));
        }
        Ok(key)
    }

    /// Removes a key's public key: its requests need no signature any more.
    /// Unpairing an unpaired key changes nothing.
    pub async fn unpair_api_key(&self, id: &str) -> Result<ApiKey, StoreError> {
        sqlx::query(
            "UPDATE api_keys SET public_key_pem = NULL, signature_algorithm = NULL, paired_at = NULL
             WHERE id = $1",
        )
        .bind(id)
        .execute(&self.pool)
        .await?;
        self.api_key(id).await
    }

    /// Records a request token's `jti` for `key` until `keep_until`
    /// (seconds); `false` when the key already used it (a replay). The
    /// primary key decides, so two instances racing on one token cannot
    /// both accept it. A `jti` kept past its time but not yet purged is
    /// taken again, as if it had been purged.
    pub async fn record_request_token(
        &self,
        key: &str,
        jti: &str,
        keep_until: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        let recorded = sqlx::query(
            "INSERT INTO request_token_ids (api_key_id, jti, keep_until) VALUES ($1, $2, $3)
             ON CONFLICT (api_key_id, jti) DO UPDATE SET keep_until = excluded.keep_until
             WHERE request_token_ids.keep_until < $4",
        )
        .bind(key)
        .bind(jti)
        .bind(keep_until)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(recorded.rows_affected() == 1)
    }

    /// Deletes the `jti`s no token can be accepted with any more (kept
    /// until before `now`, seconds); returns how many.
    pub async fn purge_request_tokens(&self, now: i64) -> Result<u64, StoreError> {
        let purged = sqlx::query("DELETE FROM request_token_ids WHERE keep_until < $1")
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(purged.rows_affected())
    }
}
