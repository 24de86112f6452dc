//! An operator's enrolment: their console sign-in enrolled (the people
//! wing's part) and, in `production`, what only its owner may receive: the
//! operator's first key, made in the enrolment's transaction and shown once
//! on its answer. An admin's enrolment may end [`genesis`].

use super::{genesis, key_rules, manage::locked};
use crate::{
    api_key::NewSecret,
    audit,
    environment::Environment,
    people::{self, Enrolment, PeopleError, resource::User},
    store::{Store, StoreError, now_micros, operators as rows},
};

/// An operator's first key, shown once, and when it expires.
pub struct FirstKey {
    pub secret: NewSecret,
    pub expires_at: Option<i64>,
}

impl std::fmt::Debug for FirstKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FirstKey")
            .field("secret", &self.secret)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Enrols the person whose link `enrolment` carries; an operator in
/// `production` without a live key gets their first key.
pub async fn enrol(
    store: &Store,
    environment: Environment,
    enrolment: Enrolment<'_>,
) -> Result<(User, Option<FirstKey>), PeopleError> {
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    // The head first, as every change of operators takes it.
    audit::lock(&mut tx).await?;
    let user = people::enrol_in(&mut tx, store, enrolment).await?;
    let mut key = None;
    if let (Some(operator_id), Environment::Production) = (user.operator(), environment) {
        let operator = locked(&mut tx, operator_id).await.map_err(|e| PeopleError::Refused(e.to_string()))?;
        let now = now_micros();
        if operator.is_enabled() && rows::live_keys(&mut tx, operator_id, now).await? == 0 {
            let expires_at = key_rules::key_expiry(environment, now, None, None)
                .map_err(|e| PeopleError::Refused(e.to_string()))?;
            let by = super::manage::actor(&operator);
            let secret = super::keys::insert(&mut tx, cipher, &by, operator_id, (expires_at, None))
                .await
                .map_err(|e| match e {
                    super::OperatorError::Store(error) => PeopleError::Store(error),
                    other => PeopleError::Refused(other.to_string()),
                })?;
            key = Some(FirstKey { secret, expires_at });
        }
        genesis::open(&mut tx, cipher).await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok((user, key))
}
