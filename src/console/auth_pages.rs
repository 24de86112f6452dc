//! Sign-in, enrolment and sign-out pages.

use askama::Template;
use axum::{
    Form,
    extract::{ConnectInfo, Path, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::{
    frame::Frame,
    web::{Page, Signed, Unfactored, cleared_cookie, render, session_cookie},
};
use crate::people::{
    self, Enrolment, PeopleError,
    resource::User,
    rules::{MIN_PASSWORD, factor_required},
    sign_in::{self, SignInError},
    totp,
};
use crate::{
    api::ApiState,
    store::{StoreError, now_micros},
};

#[derive(Template)]
#[template(path = "console/sign_in.html")]
struct SignInPage {
    frame: Frame,
    email: String,
    message: Option<String>,
}

/// `GET /console/sign-in`.
pub async fn sign_in_page(State(state): State<ApiState>) -> Response {
    render(
        StatusCode::OK,
        &SignInPage { frame: Frame::anonymous(&state), email: String::new(), message: None },
    )
}

#[derive(Deserialize)]
pub struct SignInForm {
    email: String,
    password: String,
    #[serde(default)]
    code: String,
}

/// `POST /console/sign-in`: a new session and its cookie, then the console.
pub async fn sign_in(
    State(state): State<ApiState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> Response {
    let forwarded = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok());
    let client = people::rules::client_address(peer.ip(), forwarded, state.trusted_proxies());
    match sign_in::sign_in(state.store(), &form.email, &form.password, &form.code, client).await {
        Ok(started) => {
            // The session this browser had before, if any, ends.
            if let Some(previous) = super::web::token(&headers)
                && let Err(error) =
                    sign_in::end_session(state.store(), &people::session_hash(&previous), now_micros()).await
            {
                tracing::warn!(%error, "console: the previous session was not ended");
            }
            tracing::info!(user = %started.user.id, "console: signed in");
            let cookie = session_cookie(&started.token, &headers);
            ([(header::SET_COOKIE, cookie)], Redirect::to("/console/")).into_response()
        }
        Err(error) => {
            let status = match &error {
                SignInError::Wrong => StatusCode::UNAUTHORIZED,
                SignInError::Wait(_) | SignInError::WaitAddress(_) => StatusCode::TOO_MANY_REQUESTS,
                SignInError::Store(store) => {
                    tracing::error!(error = %store, "console: sign-in failed");
                    StatusCode::INTERNAL_SERVER_ERROR
                }
            };
            let message = match error {
                SignInError::Store(_) => "the service could not sign you in now; try again".to_string(),
                other => other.to_string(),
            };
            let page =
                SignInPage { frame: Frame::anonymous(&state), email: form.email, message: Some(message) };
            render(status, &page)
        }
    }
}

/// `GET /console/`: a tenant's keys, an operator's queues.
pub async fn home(Signed(session): Signed) -> Redirect {
    if session.user.organization().is_some() {
        Redirect::to("/console/keys")
    } else {
        Redirect::to("/console/queues")
    }
}

#[derive(Deserialize)]
pub struct SignOutForm {
    #[serde(default)]
    everywhere: Option<String>,
}

/// `POST /console/sign-out`: the session ends on every instance; with
/// `everywhere`, every session of the user.
pub async fn sign_out(
    State(state): State<ApiState>,
    Unfactored(session): Unfactored,
    headers: HeaderMap,
    Form(form): Form<SignOutForm>,
) -> Result<Response, Page> {
    sign_in::sign_out(state.store(), &session, form.everywhere.is_some()).await?;
    Ok(([(header::SET_COOKIE, cleared_cookie(&headers))], Redirect::to("/console/sign-in")).into_response())
}

#[derive(Template)]
#[template(path = "console/enrol.html")]
struct EnrolPage {
    frame: Frame,
    email: String,
    action: String,
    min_password: usize,
    totp_secret: String,
    totp_uri: String,
    /// The same address as a QR code (`data:` SVG).
    totp_qr: String,
    /// Whether the second factor is required of this person.
    factor_required: bool,
    message: Option<String>,
}

#[derive(Template)]
#[template(path = "console/enrolled.html")]
struct EnrolledPage {
    frame: Frame,
    totp: bool,
    /// An operator's first key (`production`), shown once.
    key: Option<String>,
}

fn gone() -> Page {
    Page::Error(StatusCode::NOT_FOUND, "this enrol link was used, has expired or does not exist".into())
}

/// `GET /console/enrol/{token}`.
pub async fn enrol_page(
    State(state): State<ApiState>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Page> {
    if super::enrol_api::wants_json(&headers) {
        return Ok(super::enrol_api::offer(&state, &token).await);
    }
    // The secret is kept, sealed, with the link: the enrolment's code is
    // checked against it, never against one the form sends.
    let (user, secret) = match people::offer_second_factor(state.store(), &token).await {
        Ok(offered) => offered.ok_or_else(gone)?,
        Err(PeopleError::Store(StoreError::Pii(_))) => {
            let user = state
                .store()
                .enrolment_user(&people::link_hash(&token), now_micros())
                .await?
                .ok_or_else(gone)?;
            (user, totp::new_secret())
        }
        Err(error) => return Err(page_of(error)),
    };
    let page = EnrolPage::new(&state, &token, &user, secret, None);
    Ok(render(StatusCode::OK, &page))
}

impl EnrolPage {
    fn new(state: &ApiState, token: &str, user: &User, totp_secret: String, message: Option<String>) -> Self {
        let production = state.environment() == crate::environment::Environment::Production;
        EnrolPage {
            frame: Frame::anonymous(state),
            action: format!("{}{token}", people::ENROL_PATH),
            min_password: MIN_PASSWORD,
            totp_uri: totp::uri(&totp_secret, &user.email),
            totp_qr: totp::qr(&totp::uri(&totp_secret, &user.email)),
            factor_required: factor_required(production, user.role()),
            totp_secret,
            email: user.email.clone(),
            message,
        }
    }
}

fn page_of(error: PeopleError) -> Page {
    match error {
        PeopleError::Invalid(message) => Page::Error(StatusCode::UNPROCESSABLE_ENTITY, message),
        PeopleError::Refused(_) => gone(),
        PeopleError::Store(error) => error.into(),
    }
}

pub struct EnrolForm {
    password: String,
    again: String,
    totp_secret: String,
    code: String,
}

impl EnrolForm {
    /// The form of an urlencoded body; `None` without a password, its
    /// repetition or the offered secret.
    fn from_body(body: &[u8]) -> Option<Self> {
        let fields: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(body).into_owned().collect();
        let field = |name: &str| fields.get(name).cloned();
        Some(EnrolForm {
            password: field("password")?,
            again: field("again")?,
            totp_secret: field("totp_secret")?,
            code: field("code").unwrap_or_default(),
        })
    }
}

/// `POST /console/enrol/{token}`: the form, or with `Accept:
/// application/json` the scripted door (see [`super::enrol_api`]).
pub async fn enrol(
    State(state): State<ApiState>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, Page> {
    if super::enrol_api::wants_json(&headers) {
        return Ok(super::enrol_api::enrol(&state, &token, &body).await);
    }
    let form = EnrolForm::from_body(&body).ok_or_else(|| {
        Page::Error(StatusCode::UNPROCESSABLE_ENTITY, "the enrol form is incomplete".into())
    })?;
    let code = form.code.trim();
    // The secret offered with the link; the form's only on a store that
    // cannot seal one.
    let secret = match people::offered_second_factor(state.store(), &token).await {
        Ok(Some(offered)) => offered,
        Ok(None) if state.store().pii_key_id().is_some() && !code.is_empty() => {
            return Err(Page::Error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "this enrol form is out of date: open the link again".into(),
            ));
        }
        Ok(None) => form.totp_secret.clone(),
        Err(PeopleError::Store(StoreError::Pii(_))) if state.store().pii_key_id().is_none() => {
            form.totp_secret.clone()
        }
        Err(error) => return Err(page_of(error)),
    };
    let totp = (!code.is_empty()).then_some((secret.as_str(), code));
    let production = state.environment() == crate::environment::Environment::Production;
    let enrolment =
        Enrolment { token: &token, password: &form.password, again: &form.again, totp, production };
    match crate::operators::enrolment::enrol(state.store(), state.environment(), enrolment).await {
        Ok((user, key)) => {
            let key = key.map(|first| first.secret.token.to_string());
            let page = EnrolledPage { frame: Frame::anonymous(&state), totp: user.totp, key };
            Ok(render(StatusCode::OK, &page))
        }
        Err(PeopleError::Invalid(message)) => {
            let user = state
                .store()
                .enrolment_user(&people::link_hash(&token), now_micros())
                .await?
                .ok_or_else(gone)?;
            let page = EnrolPage::new(&state, &token, &user, secret, Some(message));
            Ok(render(StatusCode::UNPROCESSABLE_ENTITY, &page))
        }
        Err(error) => Err(page_of(error)),
    }
}
