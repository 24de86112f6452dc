//! An operator's enrolment: their console sign-in enrolled (the people
//! wing's part) and, in `production`, what only its owner may receive: the
//! operator's first key, made in the enrolment's transaction and shown once
//! on its answer. An admin's enrolment may end [`genesis`].

use super::{
    genesis,
    manage::{locked, record},
};
use crate::{
    api_key::{self, NewSecret, OPERATOR_PREFIX},
    audit::{self, Detail, Record},
    console::{
        people::{self, Enrolment, PeopleError},
        resource::User,
    },
    environment::Environment,
    store::{Store, StoreError, now_micros, operators as rows},
};

/// Enrols the person whose link `enrolment` carries; an operator in
/// `production` without a live key gets their first key.
pub async fn enrol(
    store: &Store,
    environment: Environment,
    enrolment: Enrolment<'_>,
) -> Result<(User, Option<NewSecret>), PeopleError> {
    let cipher = store.cipher().ok();
    let mut tx = store.begin().await?;
    // The head first, as every change of operators takes it.
    audit::lock(&mut tx).await?;
    let user = people::enrol_in(&mut tx, store, enrolment).await?;
    let mut key = None;
    if let (Some(operator_id), Environment::Production) = (user.operator(), environment) {
        let operator = locked(&mut tx, operator_id).await.map_err(|e| PeopleError::Refused(e.to_string()))?;
        if operator.is_enabled() && rows::live_keys(&mut tx, operator_id).await? == 0 {
            let secret = api_key::generate_with(OPERATOR_PREFIX);
            let by = super::manage::actor(&operator);
            let entry = record(&by, "operator_key.created", operator_id, Some(&secret.id));
            audit::append(&mut tx, cipher, Record { detail: Some(Detail::key(&secret.id)), ..entry }).await?;
            rows::insert_key(&mut tx, &secret.id, operator_id, &api_key::stored(&secret.hash), now_micros())
                .await?;
            key = Some(secret);
        }
        genesis::open(&mut tx, cipher).await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok((user, key))
}
