//! Per-organization limits on what an organization holds, so that no tenant
//! can grow the watch sets, the compliance rounds or the webhook deliveries
//! of every other one without bound.
//!
//! A creation takes the organization's row lock, counts, then inserts, all
//! in one transaction: two creations racing for the last slot queue on the
//! lock (PostgreSQL; SQLite's write lock serialises them anyway) and the
//! second counts the first.

use sqlx::{Any, Row, Transaction};

use super::{Store, StoreError};

/// Active (unrevoked) API keys an organization may hold at once, the
/// platform's own limit; applies to every store, operators' included.
pub const MAX_API_KEYS: i64 = 50;

/// What an organization may hold through the API. Only what can still be
/// used counts: accounts that are not `CLOSED`, identities that are not
/// `REJECTED` or `TERMINATED`, webhooks not deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrganizationLimits {
    pub accounts: u32,
    pub identities: u32,
    pub webhooks: u32,
}

impl OrganizationLimits {
    pub const DEFAULT_ACCOUNTS: u32 = 100_000;
    pub const DEFAULT_IDENTITIES: u32 = 100_000;
    pub const DEFAULT_WEBHOOKS: u32 = 10;
}

impl Default for OrganizationLimits {
    fn default() -> Self {
        Self {
            accounts: Self::DEFAULT_ACCOUNTS,
            identities: Self::DEFAULT_IDENTITIES,
            webhooks: Self::DEFAULT_WEBHOOKS,
        }
    }
}

/// A limited kind of thing an organization holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quota {
    Accounts,
    Identities,
    Webhooks,
    ApiKeys,
}

impl Quota {
    /// What it counts, and the setting that raises it.
    fn describe(self) -> (&'static str, &'static str) {
        match self {
            Self::Accounts => ("accounts that are not CLOSED", "--org-max-accounts"),
            Self::Identities => ("identities that are not REJECTED or TERMINATED", "--org-max-identities"),
            Self::Webhooks => ("webhooks", "--org-max-webhooks"),
            Self::ApiKeys => ("active API keys", "the platform's limit; revoke a key first"),
        }
    }

    fn count_sql(self) -> &'static str {
        match self {
            Self::Accounts => {
                "SELECT COUNT(*) AS n FROM accounts WHERE organization_id = $1 AND status <> 'CLOSED'"
            }
            Self::Identities => {
                "SELECT COUNT(*) AS n FROM identities WHERE organization_id = $1
                 AND status NOT IN ('REJECTED', 'TERMINATED')"
            }
            Self::Webhooks => {
                "SELECT COUNT(*) AS n FROM webhooks WHERE organization_id = $1 AND status <> 'DELETED'"
            }
            Self::ApiKeys => {
                "SELECT COUNT(*) AS n FROM api_keys WHERE organization_id = $1 AND revoked_at IS NULL"
            }
        }
    }
}

impl Store {
    /// This store with `limits` enforced on the accounts, identities and
    /// webhooks it creates (the API's store); without, only API keys are
    /// limited (operators' commands).
    pub fn with_limits(mut self, limits: OrganizationLimits) -> Self {
        self.limits = Some(limits);
        self
    }

    fn limit(&self, quota: Quota) -> Option<i64> {
        match quota {
            Quota::ApiKeys => Some(MAX_API_KEYS),
            Quota::Accounts => self.limits.map(|l| i64::from(l.accounts)),
            Quota::Identities => self.limits.map(|l| i64::from(l.identities)),
            Quota::Webhooks => self.limits.map(|l| i64::from(l.webhooks)),
        }
    }

    /// Takes the organization's row lock for a creation limited by `quota`,
    /// first in `tx` so that an idempotent replay read after it sees what a
    /// racing request committed. Nothing when `quota` is not limited here.
    pub(super) async fn lock_organization(
        &self,
        tx: &mut Transaction<'static, Any>,
        organization: &str,
        quota: Quota,
    ) -> Result<(), StoreError> {
        if self.limit(quota).is_none() {
            return Ok(());
        }
        let locked = sqlx::query("UPDATE organizations SET name = name WHERE id = $1")
            .bind(organization)
            .execute(&mut **tx)
            .await?;
        if locked.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("organization {organization}")));
        }
        Ok(())
    }

    /// Refuses one more of `quota` when the organization holds its limit;
    /// call under [`Store::lock_organization`].
    pub(super) async fn check_room(
        &self,
        tx: &mut Transaction<'static, Any>,
        organization: &str,
        quota: Quota,
    ) -> Result<(), StoreError> {
        let Some(limit) = self.limit(quota) else { return Ok(()) };
        let held: i64 =
            sqlx::query(quota.count_sql()).bind(organization).fetch_one(&mut **tx).await?.try_get("n")?;
        if held >= limit {
            let (what, setting) = quota.describe();
            return Err(StoreError::LimitReached(format!(
                "organization {organization} holds {held} {what}, its limit of {limit} ({setting})"
            )));
        }
        Ok(())
    }

    /// [`Store::lock_organization`] then [`Store::check_room`].
    pub(super) async fn claim(
        &self,
        tx: &mut Transaction<'static, Any>,
        organization: &str,
        quota: Quota,
    ) -> Result<(), StoreError> {
        self.lock_organization(tx, organization, quota).await?;
        self.check_room(tx, organization, quota).await
    }
}
