//! A signed-in operator, as the store holds it now, for the operators'
//! pages; a decision's reason, required.

use axum::{
    extract::FromRequestParts,
    http::{StatusCode, request::Parts},
};

use super::web::{Page, Signed};
use crate::{
    api::ApiState,
    audit::Actor,
    operators::{Action, Operator, manage, rules},
    people::resource::Session,
};

/// A signed-in operator, as the store holds it now: enabled, with its roles.
pub struct OperatorUser {
    pub session: Session,
    pub operator: Operator,
}

impl OperatorUser {
    pub fn may(&self, action: Action) -> Result<(), Page> {
        rules::permits(&self.operator, action)
            .map_err(|refusal| Page::Error(StatusCode::FORBIDDEN, refusal.to_string()))
    }

    pub fn actor(&self) -> Actor {
        manage::actor(&self.operator)
    }
}

impl FromRequestParts<ApiState> for OperatorUser {
    type Rejection = Page;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Page> {
        let Signed(session) = Signed::from_request_parts(parts, state).await?;
        let Some(id) = session.user.operator() else { return Err(Page::not_found()) };
        let operator = state.store().sealed_operator(id).await?.filter(Operator::is_enabled);
        // A row rolled back to a state the log took away acts no more.
        let operator = match operator {
            Some(operator) if crate::audit::withdrawn::operator(state.store(), &operator).await? => None,
            other => other,
        };
        // A disabled or suspended operator's sessions act no more.
        let refused = || Page::Error(StatusCode::FORBIDDEN, "this operator is disabled or suspended".into());
        let operator = operator.ok_or_else(refused)?;
        if crate::operators::suspension::of(state.store(), &operator.id).await?.is_some() {
            return Err(refused());
        }
        Ok(OperatorUser { session, operator })
    }
}

/// `reason` trimmed; a page refusing the decision when it is empty.
pub fn required(reason: &str) -> Result<&str, Page> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(Page::Error(StatusCode::UNPROCESSABLE_ENTITY, "a reason is required".into()));
    }
    Ok(reason)
}
