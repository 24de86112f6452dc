//! `/console/operator/keys`: an operator whose keys have all expired (or
//! were revoked) makes a new one here, giving their password and second
//! factor again; the key is shown once, on the answer, to that person. An
//! operator with a live key makes further keys with it (`POST
//! /operator/v1/me/keys`).

use askama::Template;
use axum::{
    Form,
    extract::{ConnectInfo, State},
    http::{HeaderMap, StatusCode},
    response::Response,
};
use serde::Deserialize;

use super::{
    frame::Frame,
    operator::OperatorUser,
    web::{Page, render},
};
use crate::{
    api::ApiState,
    operators::{OperatorError, key_rules, keys},
    people::{
        self,
        sign_in::{self, SignInError},
    },
    store::now_micros,
};

#[derive(Template)]
#[template(path = "console/operator_keys.html")]
struct KeysPage {
    frame: Frame,
    message: Option<String>,
    /// A key of the operator's is live: no form.
    live: bool,
}

#[derive(Template)]
#[template(path = "console/operator_key.html")]
struct KeyMade {
    frame: Frame,
    id: String,
    secret: String,
    expires: String,
}

const PATH: &str = "/console/operator/keys";

/// What the page says while a key of the operator's is live.
const LIVE: &str = "a key of yours is live: make further keys with it (POST /operator/v1/me/keys)";

/// Whether a key of `user`'s is live now.
async fn live(state: &ApiState, user: &OperatorUser) -> Result<bool, Page> {
    let now = now_micros();
    Ok(state.store().operator_keys(&user.operator.id).await?.iter().any(|key| {
        key.revoked_at.is_none()
            && !key_rules::key_expired(key.expires_at.map(|at| at.timestamp_micros()), now)
    }))
}

/// `GET /console/operator/keys`.
pub async fn show(State(state): State<ApiState>, user: OperatorUser) -> Result<Response, Page> {
    let live = live(&state, &user).await?;
    let message = live.then(|| LIVE.to_string());
    let page = KeysPage { frame: Frame::of(&state, &user.session, PATH), message, live };
    Ok(render(StatusCode::OK, &page))
}

#[derive(Deserialize)]
pub struct ConfirmForm {
    #[serde(default)]
    password: String,
    #[serde(default)]
    code: String,
}

/// `POST /console/operator/keys`: the password and a current code again,
/// then a key, shown once.
pub async fn make(
    State(state): State<ApiState>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    headers: HeaderMap,
    user: OperatorUser,
    Form(form): Form<ConfirmForm>,
) -> Result<Response, Page> {
    let forwarded = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok());
    let client = people::rules::client_address(peer.ip(), forwarded, state.trusted_proxies());
    let frame = Frame::of(&state, &user.session, PATH);
    let refused = |status, message: String, live| {
        Ok(render(status, &KeysPage { frame: frame.clone(), message: Some(message), live }))
    };
    // Asked before the code is taken: a refused request spends none.
    if live(&state, &user).await? {
        return refused(StatusCode::CONFLICT, LIVE.to_string(), true);
    }
    match sign_in::confirm(state.store(), &user.session.user, &form.password, &form.code, client).await {
        Ok(()) => {}
        Err(SignInError::Store(error)) => return Err(error.into()),
        Err(error @ SignInError::Wrong) => {
            return refused(StatusCode::UNAUTHORIZED, error.to_string(), false);
        }
        Err(error) => return refused(StatusCode::TOO_MANY_REQUESTS, error.to_string(), false),
    }
    let (secret, expires_at) = match keys::renew(state.store(), state.environment(), &user.operator).await {
        Ok(made) => made,
        Err(OperatorError::Store(error)) => return Err(error.into()),
        Err(refusal) => return refused(StatusCode::CONFLICT, refusal.to_string(), false),
    };
    tracing::info!(operator = %user.operator.id, key = %secret.id, "console: an operator made a key");
    let expires = expires_at
        .and_then(chrono::DateTime::from_timestamp_micros)
        .map_or_else(|| "never".to_string(), |at| super::frame::when(&at));
    let made = KeyMade { frame, id: secret.id.clone(), secret: secret.token.to_string(), expires };
    Ok(render(StatusCode::CREATED, &made))
}
