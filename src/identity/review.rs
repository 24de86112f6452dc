//! A compliance provider's decisions written: a decision on a review with
//! its check step, and the expiry of identity verification checks. Each is
//! one transaction through [`super::change::apply_in`], under the
//! identity's row lock.

use super::{
    CheckStatus, Event,
    change::{Change, apply_in},
};
use crate::{
    audit::Actor,
    store::{
        CheckStep, Review, Store, StoreError,
        identities::lock_identity,
        now_micros,
        verification::{self, current_check, insert_check, newest_submission, set_check},
    },
};

/// A provider's decision, with who decided and why.
pub struct Decided<'a> {
    pub event: Event,
    pub step: &'a CheckStep,
    pub actor: &'a str,
    pub reason: Option<&'a str>,
}

/// Applies `decided` on `review` with its check step, in one transaction,
/// if the identity is still in the reviewed state and the reviewed
/// submission is still its newest (both read under the identity's lock): a
/// decision on a state or data that moved meanwhile is dropped and taken
/// again on the next review; whether it applied.
pub async fn decide(store: &Store, review: &Review, decided: &Decided<'_>) -> Result<bool, StoreError> {
    let (organization, identity_id) = (review.organization.as_str(), review.identity_id.as_str());
    let mut tx = store.begin().await?;
    let (_, state) = lock_identity(&mut tx, organization, identity_id).await?;
    let newest = newest_submission(&mut tx, organization, identity_id).await?;
    if state != review.state || newest.as_deref() != Some(review.submission_id.as_str()) {
        return Ok(false);
    }
    match decided.step {
        CheckStep::None => {}
        CheckStep::Issue(check) => insert_check(&mut tx, organization, check).await?,
        CheckStep::Set(status) => {
            let id = review.check.as_ref().map(|c| c.id.as_str()).unwrap_or_default();
            set_check(&mut tx, id, *status, now_micros()).await?;
        }
    }
    let provider =
        Actor::Provider(decided.actor.strip_prefix("provider:").unwrap_or(decided.actor).to_string());
    let change = Change {
        organization,
        identity_id,
        event: decided.event,
        actor: decided.actor,
        reason: decided.reason,
        decider: Some(&provider),
    };
    apply_in(&mut tx, store.cipher().ok(), &change, None).await?;
    tx.commit().await?;
    Ok(true)
}

/// Expires every check not completed by its `expires_at`; the identities
/// whose check expired. The identity moves to `IDV_EXPIRED` only if the
/// check is its current one (the newest check of its newest submission)
/// and it still waits on it: a check left open by earlier data is only
/// marked expired.
pub async fn expire_checks(store: &Store, now: i64) -> Result<Vec<String>, StoreError> {
    let mut expired = Vec::new();
    for (id, organization, identity_id) in store.checks_past_expiry(now).await? {
        let mut tx = store.begin().await?;
        let (kind, state) = lock_identity(&mut tx, &organization, &identity_id).await?;
        if !set_check(&mut tx, &id, CheckStatus::Expired, now).await? {
            continue;
        }
        let current = current_check(&mut tx, &organization, &identity_id).await?;
        if current.as_deref() == Some(id.as_str()) && super::apply(kind, state, Event::IdvExpired).is_ok() {
            let change = Change {
                organization: &organization,
                identity_id: &identity_id,
                event: Event::IdvExpired,
                actor: "provider",
                reason: Some("the identity verification check expired"),
                decider: Some(&Actor::System),
            };
            apply_in(&mut tx, store.cipher().ok(), &change, None).await?;
        }
        tx.commit().await?;
        expired.push(identity_id);
    }
    Ok(expired)
}

/// Records that the provider waits on each of `reviews` (it answered no
/// decision), in one transaction: none is read again until it changes or
/// `review_after` passes; an identity changed since its review is left due.
pub async fn wait_on(store: &Store, reviews: &[&Review], review_after: i64) -> Result<(), StoreError> {
    if reviews.is_empty() {
        return Ok(());
    }
    let mut tx = store.begin().await?;
    verification::wait_on(&mut tx, reviews, review_after).await?;
    tx.commit().await?;
    Ok(())
}
