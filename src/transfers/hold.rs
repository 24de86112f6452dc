//! A transfer accepted: exactly once per `(organization, request_id)`, in
//! one transaction holding the source account's row, once the account is
//! `ACTIVE` and its identity transacts, the chain's balance covers the
//! amount beside the account's other transfers in flight, and every
//! matching limit policy allows it. The rules are pure ([`super::rules`]);
//! the store reads and writes the rows they are fed.

use alloy::primitives::U256;

use super::{
    model::{Created, NewTransfer},
    rules::{covers, limit_broken, scale},
};
use crate::{
    account::AccountStatus,
    amount::Amount,
    store::{
        Refusal, Store, StoreError, Tx, entitlement,
        limits::{lock_policies, rolling_volume},
        now_micros,
        transfers::{find_request, in_flight, insert_accepted, lock_account},
    },
};

/// Accepts `new` (see the module doc), `balance` being what the chain holds
/// for the source in the smallest unit. Concurrent duplicates meet the
/// unique `(organization_id, request_id)` constraint: one inserts, the
/// others find its row.
///
/// A request whose `request_id` is taken is answered from the transfer
/// holding it (see [`Store::repeated_request`]) before anything is
/// checked, and again once the account's row is held: a duplicate that
/// waited for the first request's commit finds its transfer, never a
/// balance or a limit its own hold exhausted.
pub async fn create(store: &Store, new: &NewTransfer, balance: U256) -> Result<Created, Refusal> {
    let fingerprint = new.fingerprint();
    if let Some(answer) = store.repeated_request(&new.organization, &new.request_id, &fingerprint).await? {
        return answer;
    }
    let mut tx = store.begin().await?;
    let now = now_micros();
    let identity_id = lock_source(&mut tx, new).await?;
    if let Some(found) = find_request(&mut tx, &new.organization, &new.request_id).await? {
        drop(tx);
        return store.answer_repeat(found, &fingerprint).await;
    }
    let Some(id) = hold(&mut tx, new, &identity_id, balance, now).await? else {
        // A concurrent request with this request_id committed first.
        drop(tx);
        return match store.repeated_request(&new.organization, &new.request_id, &fingerprint).await? {
            Some(answer) => answer,
            None => Err(StoreError::Corrupt("request_id conflict without a row".into()).into()),
        };
    };
    tx.commit().await?;
    Ok(Created::New(store.transfer(&id).await?))
}

/// Takes the row lock of the account `new` sends from (PostgreSQL; SQLite's
/// write lock is already held), so transfers of one account are judged one
/// at a time: its identity, once the account is `ACTIVE` and its identity
/// transacts.
pub async fn lock_source(tx: &mut Tx, new: &NewTransfer) -> Result<String, Refusal> {
    let (status, identity_id) = lock_account(tx, new).await?;
    if status != AccountStatus::Active {
        return Err(Refusal::NotActive(new.account_id.clone(), status));
    }
    if let Some(status) = entitlement::not_transacting(tx, &new.organization, &identity_id).await? {
        return Err(Refusal::IdentityNotActive(new.account_id.clone(), status));
    }
    Ok(identity_id)
}

/// Inserts `new` as `ACCEPTED` once `balance` covers it beside the
/// account's other transfers in flight and every matching limit policy
/// allows it, under the account's row lock ([`lock_source`]): its id, or
/// `None` when its `request_id` is taken.
pub async fn hold(
    tx: &mut Tx,
    new: &NewTransfer,
    identity_id: &str,
    balance: U256,
    now: i64,
) -> Result<Option<String>, Refusal> {
    let held = in_flight(tx, &new.account_id, new.chain, &new.currency_symbol).await?;
    if let Err(available) = covers(balance, held, new.amount.raw()) {
        return Err(Refusal::Insufficient {
            available: Amount::from_raw(available, new.amount.decimals()).to_string(),
            requested: new.amount.to_string(),
            symbol: new.currency_symbol.clone(),
        });
    }
    check_limits(tx, new, identity_id, now).await?;
    let id = uuid::Uuid::new_v4().to_string();
    Ok(insert_accepted(tx, (&id, new), identity_id, now).await?.then_some(id))
}

/// Refuses the transfer when a policy on its account or identity and asset
/// would be exceeded (see [`limit_broken`]): by the amount alone, or by the
/// scope's transfers of the last 24 hours that did not fail (on every
/// chain) plus this one.
async fn check_limits(tx: &mut Tx, new: &NewTransfer, identity_id: &str, now: i64) -> Result<(), Refusal> {
    let amount = scale(new.amount.raw(), new.amount.decimals());
    for policy in lock_policies(tx, new, identity_id).await? {
        let volume = match &policy.max_rolling_24h {
            Some(_) => Some(rolling_volume(tx, new, &policy, identity_id, now).await?),
            None => None,
        };
        match limit_broken(&policy, amount, volume) {
            Ok(None) => {}
            Ok(Some(message)) => return Err(Refusal::Limit { policy: policy.id, message }),
            Err(text) => {
                return Err(StoreError::Corrupt(format!("transaction_limit_policies limit {text:?}")).into());
            }
        }
    }
    Ok(())
}
