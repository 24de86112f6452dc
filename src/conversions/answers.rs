//! An operator's answer to an off-ramp's payout. `paid` moves nothing on
//! chain and applies at once. `returned` and `refused` send the stablecoin
//! back, so outside `sandbox` they wait for a second operator's
//! confirmation ([`confirm`]) before they apply; the answering operator's
//! own confirmation, or a break-glass one, is refused. Each step is one
//! transaction with its audit entry; the answer then reaches the off-ramp as
//! the bank's own would (see [`super::payout`]).

use crate::{
    audit::{self, Actor, Record},
    bank::Answer,
    operators::{Refused, rules::second_pair},
    store::{
        Store, StoreError, Tx,
        payout_answers::{self as rows, Unconfirmed},
    },
};

/// What an operator's answer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// Applied: the off-ramp moves on.
    Applied(Answer),
    /// Waits for a second operator's confirmation.
    AwaitingConfirmation(Answer),
}

/// Why an answer or a confirmation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("conversion {id}: {refusal}")]
    FourEyes { id: String, refusal: Refused },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for AnswerError {
    fn from(error: sqlx::Error) -> Self {
        AnswerError::Store(error.into())
    }
}

/// Records `by`'s answer to off-ramp `id`'s payout; `confirmed_alone`
/// (`sandbox`) applies a `returned` or `refused` answer without a second
/// operator.
pub async fn answer(
    store: &Store,
    id: &str,
    (outcome, reason): (Answer, &str),
    by: &Actor,
    confirmed_alone: bool,
) -> Result<Answered, AnswerError> {
    let mut tx = store.begin().await?;
    let Some(organization) = rows::awaits_answer(&mut tx, id).await? else {
        return Err(no_answer_awaited(store, id).await.into());
    };
    let answered = if outcome == Answer::Paid || confirmed_alone {
        apply(&mut tx, id, outcome, reason).await?;
        Answered::Applied(outcome)
    } else {
        let unconfirmed = Unconfirmed {
            outcome,
            reason: reason.to_string(),
            answered_by: by.recorded(),
            organization: organization.clone(),
        };
        if !rows::insert(&mut tx, id, &unconfirmed).await? {
            return Err(StoreError::Waiting(format!(
                "conversion {id}: an answer to its payout waits for confirmation already (conversions payouts confirm)"
            ))
            .into());
        }
        Answered::AwaitingConfirmation(outcome)
    };
    let action = match answered {
        Answered::Applied(_) => "payout.answered",
        Answered::AwaitingConfirmation(_) => "payout.answered_awaiting_confirmation",
    };
    let text = format!("{}: {reason}", outcome.as_str());
    audit::append(&mut tx, store.cipher().ok(), entry(by, action, (id, &organization), &text)).await?;
    tx.commit().await?;
    Ok(answered)
}

/// A second operator's confirmation of the answer waiting on off-ramp `id`:
/// it applies, once.
pub async fn confirm(
    store: &Store,
    id: &str,
    by: &Actor,
    reason: Option<&str>,
) -> Result<Answer, AnswerError> {
    let mut tx = store.begin().await?;
    let Some(waiting) = rows::lock(&mut tx, id).await? else {
        return Err(
            StoreError::NotFound(format!("an answer awaiting confirmation on conversion {id}")).into()
        );
    };
    second_pair(&Actor::from_recorded(&waiting.answered_by), by)
        .map_err(|refusal| AnswerError::FourEyes { id: id.to_string(), refusal })?;
    rows::confirm(&mut tx, id, &by.recorded()).await?;
    apply(&mut tx, id, waiting.outcome, &waiting.reason).await?;
    let text = match reason {
        Some(reason) => format!("{}: {reason}", waiting.outcome.as_str()),
        None => waiting.outcome.as_str().to_string(),
    };
    let target = (id, waiting.organization.as_str());
    audit::append(&mut tx, store.cipher().ok(), entry(by, "payout.confirmed", target, &text)).await?;
    tx.commit().await?;
    Ok(waiting.outcome)
}

/// The unconfirmed answer to off-ramp `id`'s payout, if any.
pub async fn unconfirmed_answer(store: &Store, id: &str) -> Result<Option<Unconfirmed>, StoreError> {
    let mut tx = store.begin().await?;
    let answer = rows::lock(&mut tx, id).await?;
    tx.commit().await?;
    Ok(answer)
}

async fn apply(tx: &mut Tx, id: &str, outcome: Answer, reason: &str) -> Result<(), StoreError> {
    if rows::set_outcome(tx, id, outcome, reason).await? {
        Ok(())
    } else {
        Err(StoreError::Refused(format!("conversion {id} has no payout waiting for the bank's answer")))
    }
}

/// The refusal of an answer to a payout that awaits none.
async fn no_answer_awaited(store: &Store, id: &str) -> StoreError {
    match store.conversion(None, id).await {
        Ok(conversion) => StoreError::Refused(format!(
            "conversion {id} ({} {}) has no payout waiting for the bank's answer",
            conversion.kind.as_str(),
            conversion.status
        )),
        Err(error) => error,
    }
}

fn entry<'a>(
    actor: &'a Actor,
    action: &'a str,
    (id, organization): (&'a str, &'a str),
    reason: &'a str,
) -> Record<'a> {
    Record {
        actor,
        action,
        target_kind: "conversion",
        target_id: id,
        organization_id: Some(organization),
        reason: Some(reason),
        request_id: None,
        detail: None,
    }
}
