//! `/console/second-factor`: in `production`, a person who can move money
//! or make keys (an operator, a tenant's `admin` or `developer`) and has no
//! second factor (enrolled before it was required, or given such a role
//! since) adds one here before any other page answers. The secret offered
//! travels in the form sealed to the session, so a code is checked only
//! against a secret the service made. Once added, every session of the
//! person ends (the next sign-in asks for the code) and, with mail set up,
//! their address is told.

use askama::Template;
use axum::{
    Form,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::{
    frame::Frame,
    web::{Page, Unfactored, cleared_cookie, lacks_factor, render},
};
use crate::people::{self, PeopleError, resource::Session, totp};
use crate::{api::ApiState, pii::Place, store::StoreError};

#[derive(Template)]
#[template(path = "console/second_factor.html")]
struct FactorPage {
    frame: Frame,
    totp_secret: String,
    totp_uri: String,
    totp_qr: String,
    offer: String,
    message: Option<String>,
}

const COLUMN: &str = "console_sessions.totp_offer";

fn page(
    state: &ApiState,
    session: &Session,
    secret: String,
    message: Option<String>,
) -> Result<FactorPage, Page> {
    let cipher = state.store().cipher()?;
    let offer = cipher.seal(secret.as_bytes(), Place { column: COLUMN, row: &[&session.id_hash] });
    let mut frame = Frame::of(state, session, "");
    frame.nav.clear();
    let totp_uri = totp::uri(&secret, &session.user.email);
    Ok(FactorPage { frame, totp_qr: totp::qr(&totp_uri), totp_uri, totp_secret: secret, offer, message })
}

/// `GET /console/second-factor`: a new secret to add.
pub async fn show(State(state): State<ApiState>, Unfactored(session): Unfactored) -> Result<Response, Page> {
    if !lacks_factor(&state, &session) {
        return Ok(Redirect::to("/console/").into_response());
    }
    Ok(render(StatusCode::OK, &page(&state, &session, totp::new_secret(), None)?))
}

#[derive(Deserialize)]
pub struct FactorForm {
    offer: String,
    #[serde(default)]
    code: String,
}

/// `POST /console/second-factor`: the secret offered and a current code
/// from it; the factor is the user's from now on.
pub async fn add(
    State(state): State<ApiState>,
    Unfactored(session): Unfactored,
    headers: HeaderMap,
    Form(form): Form<FactorForm>,
) -> Result<Response, Page> {
    let place = Place { column: COLUMN, row: &[&session.id_hash] };
    let secret = state.store().cipher()?.open_text(&form.offer, place).map_err(|_| {
        Page::Error(StatusCode::UNPROCESSABLE_ENTITY, "this form is out of date: reload the page".into())
    })?;
    let notify = state.invitations().is_some();
    match people::add_second_factor(state.store(), &session.user.id, (&secret, &form.code), notify).await {
        Ok(user) => {
            // Every session ended: the next sign-in asks for the code.
            tracing::info!(user = %user.id, "console: second factor added");
            let cookie = cleared_cookie(&headers);
            Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/console/sign-in")).into_response())
        }
        Err(PeopleError::Invalid(message)) => {
            Ok(render(StatusCode::UNPROCESSABLE_ENTITY, &page(&state, &session, secret, Some(message))?))
        }
        Err(PeopleError::Refused(_)) => Ok(Redirect::to("/console/").into_response()),
        Err(PeopleError::Store(error)) => Err(Page::from(error)),
    }
}

impl From<crate::pii::PiiError> for Page {
    fn from(error: crate::pii::PiiError) -> Self {
        Page::from(StoreError::Pii(error))
    }
}
