//! The enrolment's scripted door, for automation and tests: `GET
//! /console/enrol/{token}` with `Accept: application/json` offers a second
//! factor (`{"email", "totp_secret", "otpauth_uri"}`, the secret kept
//! sealed with the link), and the `POST` with `Accept: application/json`
//! and `{"password", "totp_code"}` enrols against that secret, answering
//! `{"operator_key", "expires_at"}`: an operator's first key in
//! `production`, shown once (`null` otherwise).

use axum::{
    Json,
    body::Bytes,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

use crate::api::{ApiError, ApiState};
use crate::people::{self, Enrolment, PeopleError, totp};

/// Whether the request asks for JSON.
pub fn wants_json(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("application/json"))
}

#[derive(Serialize)]
struct Offered {
    email: String,
    totp_secret: String,
    otpauth_uri: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnrolRequest {
    password: String,
    #[serde(default)]
    totp_code: Option<String>,
}

#[derive(Serialize)]
struct Enrolled {
    operator_key: Option<String>,
    expires_at: Option<String>,
}

fn gone() -> ApiError {
    ApiError::not_found("this enrol link was used, has expired or does not exist")
}

/// `GET`: a second factor offered for the link.
pub async fn offer(state: &ApiState, token: &str) -> Response {
    match people::offer_second_factor(state.store(), token).await {
        Ok(Some((user, secret))) => {
            let otpauth_uri = totp::uri(&secret, &user.email);
            Json(Offered { email: user.email, totp_secret: secret, otpauth_uri }).into_response()
        }
        Ok(None) => gone().into_response(),
        Err(error) => refused(error).into_response(),
    }
}

/// `POST`: the enrolment, against the secret offered.
pub async fn enrol(state: &ApiState, token: &str, body: &Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<EnrolRequest>(body) else {
        return ApiError::invalid("the body is {\"password\": \"…\", \"totp_code\": \"123456\"}")
            .into_response();
    };
    let code = request.totp_code.as_deref().map(str::trim).filter(|c| !c.is_empty());
    let offered = match (code, people::offered_second_factor(state.store(), token).await) {
        (None, _) => None,
        (Some(_), Ok(Some(secret))) => Some(secret),
        (Some(_), Ok(None)) => {
            return ApiError::invalid(
                "totp_code: GET this link with Accept: application/json first, for the secret",
            )
            .into_response();
        }
        (Some(_), Err(error)) => return refused(error).into_response(),
    };
    let totp = offered.as_deref().zip(code);
    let production = state.environment() == crate::environment::Environment::Production;
    let enrolment =
        Enrolment { token, password: &request.password, again: &request.password, totp, production };
    match crate::operators::enrolment::enrol(state.store(), state.environment(), enrolment).await {
        Ok((_, key)) => {
            let expires_at = key
                .as_ref()
                .and_then(|first| first.expires_at)
                .and_then(chrono::DateTime::from_timestamp_micros)
                .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            let operator_key = key.map(|first| first.secret.token.to_string());
            (StatusCode::OK, Json(Enrolled { operator_key, expires_at })).into_response()
        }
        Err(error) => refused(error).into_response(),
    }
}

fn refused(error: PeopleError) -> ApiError {
    match error {
        PeopleError::Invalid(message) => ApiError::invalid(message),
        PeopleError::Refused(_) => gone(),
        PeopleError::Store(error) => error.into(),
    }
}
