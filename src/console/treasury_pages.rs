//! The treasury's queues beside the wires: off-ramp payouts to answer and
//! answers waiting for a second operator's confirmation, and virtual
//! accounts to open or refuse. Each decision goes through the same
//! function as the operator API, as the signed-in operator.

use axum::{
    Form,
    extract::{Path, State},
    http::StatusCode,
    response::Redirect,
};
use serde::Deserialize;

use super::{
    frame::when,
    operator::{OperatorUser, required},
    web::Page,
};
use crate::{
    api::{ApiError, ApiState},
    bank::Answer,
    conversions::{answers, virtual_account},
    environment::Environment,
    operators::Action,
    store::{Store, StoreError},
};

/// How many of each queue the page shows.
const SHOWN: i64 = 100;

/// An off-ramp waiting for the bank's answer or for a confirmation.
pub struct PayoutRow {
    pub id: String,
    pub organization: String,
    pub amount: String,
    pub chain: String,
    /// `BANK_ANSWER` or `CONFIRMATION`.
    pub waiting_for: &'static str,
}

/// A virtual account waiting for the bank's answer.
pub struct VirtualAccountRow {
    pub id: String,
    pub organization: String,
    pub identity: String,
    pub since: String,
}

/// The treasury's payouts and virtual accounts to decide.
pub async fn queues(store: &Store) -> Result<(Vec<PayoutRow>, Vec<VirtualAccountRow>), StoreError> {
    let payouts = store
        .pending_payouts()
        .await?
        .into_iter()
        .filter(|p| p.waiting_for != "REFUND")
        .map(|p| PayoutRow {
            amount: format!("{} {}", p.amount, p.currency),
            id: p.conversion_id,
            organization: p.organization_id,
            chain: p.chain,
            waiting_for: p.waiting_for,
        })
        .collect();
    let virtual_accounts = store
        .virtual_accounts_awaiting_bank(SHOWN)
        .await?
        .into_iter()
        .map(|va| VirtualAccountRow {
            since: when(&va.created_at),
            id: va.id,
            organization: va.organization,
            identity: va.identity_id,
        })
        .collect();
    Ok((payouts, virtual_accounts))
}

#[derive(Deserialize)]
pub struct PayoutForm {
    outcome: String,
    reason: String,
}

/// `POST /console/queues/payouts/{id}`: the bank's answer to a payout.
pub async fn answer_payout(
    State(state): State<ApiState>,
    user: OperatorUser,
    Path(id): Path<String>,
    Form(form): Form<PayoutForm>,
) -> Result<Redirect, Page> {
    user.may(Action::Payout)?;
    let outcome: Answer = form
        .outcome
        .to_uppercase()
        .parse()
        .map_err(|e: String| Page::Error(StatusCode::UNPROCESSABLE_ENTITY, e))?;
    let reason = required(&form.reason)?;
    let alone = state.environment() == Environment::Sandbox;
    answers::answer(state.store(), &id, (outcome, reason), &user.actor(), alone)
        .await
        .map_err(ApiError::from)?;
    Ok(Redirect::to("/console/queues"))
}

#[derive(Deserialize)]
pub struct ConfirmForm {
    #[serde(default)]
    reason: String,
}

/// `POST /console/queues/payouts/{id}/confirm`: another operator's answer
/// confirmed (never by the operator who answered).
pub async fn confirm_payout(
    State(state): State<ApiState>,
    user: OperatorUser,
    Path(id): Path<String>,
    Form(form): Form<ConfirmForm>,
) -> Result<Redirect, Page> {
    user.may(Action::Payout)?;
    let reason = Some(form.reason.trim()).filter(|r| !r.is_empty());
    answers::confirm(state.store(), &id, &user.actor(), reason).await.map_err(ApiError::from)?;
    Ok(Redirect::to("/console/queues"))
}

#[derive(Deserialize)]
pub struct VirtualAccountForm {
    #[serde(default)]
    account_number: String,
    #[serde(default)]
    reason: String,
}

/// `POST /console/queues/virtual-accounts/{id}/{open|confirm|refuse}`: the
/// bank's account number recorded (in `sandbox`: opened), a number another
/// operator recorded confirmed (it opens), or refused with the bank's
/// reason.
pub async fn answer_virtual_account(
    State(state): State<ApiState>,
    user: OperatorUser,
    Path((id, verb)): Path<(String, String)>,
    Form(form): Form<VirtualAccountForm>,
) -> Result<Redirect, Page> {
    user.may(Action::VirtualAccount)?;
    let (number, actor) = (form.account_number.trim(), user.actor());
    let reason = Some(form.reason.trim()).filter(|r| !r.is_empty());
    match verb.as_str() {
        "open" => {
            let opened = (id.as_str(), number);
            virtual_account::open(state.store(), state.environment(), opened, &actor, reason).await?;
        }
        "confirm" => {
            let confirmed =
                virtual_account::confirm(state.store(), (&id, Some(number)), &actor, reason).await;
            confirmed.map_err(|error| match error {
                refusal @ virtual_account::OpenError::FourEyes { .. } => {
                    Page::Error(axum::http::StatusCode::FORBIDDEN, refusal.to_string())
                }
                virtual_account::OpenError::Store(error) => error.into(),
            })?;
        }
        "refuse" => {
            let refusal = Err(required(&form.reason)?);
            virtual_account::answer(state.store(), &id, refusal, &actor, None).await?;
        }
        _ => return Err(Page::not_found()),
    }
    Ok(Redirect::to("/console/queues"))
}
