//! Transaction-limit policies created: checked, then written (what a new
//! transfer's check reads of them is [`super::hold`]).

use super::{model::LimitPolicy, rules::COMMON_DECIMALS};
use crate::{
    amount::Amount,
    store::{Store, StoreError, limits},
};

/// Adds a limit policy for an account or an identity of the organization.
pub async fn create_limit_policy(
    store: &Store,
    organization: &str,
    account_id: Option<&str>,
    identity_id: Option<&str>,
    currency_symbol: &str,
    max_per_transfer: Option<&str>,
    max_rolling_24h: Option<&str>,
) -> Result<LimitPolicy, StoreError> {
    if account_id.is_some() == identity_id.is_some() {
        return Err(StoreError::Invalid("a policy applies to exactly one account or one identity".into()));
    }
    if max_per_transfer.is_none() && max_rolling_24h.is_none() {
        return Err(StoreError::Invalid("a policy needs a per-transfer or a rolling 24 h limit".into()));
    }
    for limit in [max_per_transfer, max_rolling_24h].into_iter().flatten() {
        Amount::parse(limit, COMMON_DECIMALS as u8)
            .map_err(|e| StoreError::Invalid(format!("limit: {e}")))?;
    }
    if let Some(account) = account_id {
        store.organization_account(organization, account).await?;
    }
    let mut tx = store.begin().await?;
    let scope = (account_id, identity_id);
    let id = limits::insert_policy(
        &mut tx,
        organization,
        scope,
        currency_symbol,
        (max_per_transfer, max_rolling_24h),
    )
    .await?;
    tx.commit().await?;
    store.limit_policy(organization, &id).await
}
