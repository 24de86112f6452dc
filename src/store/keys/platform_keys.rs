//! The platform keys' addresses as first seen, by role and chain family.

use sqlx::Row;

use crate::store::{Store, StoreError, now_micros};

impl Store {
    /// The address recorded for the platform key `role` on `family`.
    pub async fn platform_key(&self, role: &str, family: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT address FROM platform_keys WHERE role = $1 AND family = $2")
            .bind(role)
            .bind(family)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("address")).transpose()?)
    }

    /// Inserts `address` for the platform key `role` on `family`, in `tx`,
    /// unless one is recorded already.
    pub async fn insert_platform_key(
        tx: &mut crate::store::Tx,
        role: &str,
        family: &str,
        address: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO platform_keys (role, family, address, recorded_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (role, family) DO NOTHING",
        )
        .bind(role)
        .bind(family)
        .bind(address)
        .bind(now_micros())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Replaces the address recorded for `role` on `family`, in `tx` (with
    /// the decision's audit entry).
    pub async fn replace_platform_key(
        tx: &mut crate::store::Tx,
        role: &str,
        family: &str,
        address: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO platform_keys (role, family, address, recorded_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (role, family) DO UPDATE SET address = EXCLUDED.address, recorded_at = EXCLUDED.recorded_at",
        )
        .bind(role)
        .bind(family)
        .bind(address)
        .bind(now_micros())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}
