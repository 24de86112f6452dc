//! The console's HTTP glue: the session cookie, the signed-in extractors
//! (a tenant's user, an operator), the guard every state-changing request
//! passes (same origin, a live session, its CSRF token), the security
//! headers of every page, and rendering.

use askama::Template;
use axum::{
    body::{Body, to_bytes},
    extract::{FromRequestParts, Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts},
    middleware::Next,
    response::{Html, IntoResponse, Redirect, Response},
};

use crate::people::{
    resource::Session,
    rules::{self, TenantAction, TenantRole},
    sign_in,
};
use crate::{api::ApiState, environment::Environment, store::StoreError};

/// The session cookie's name on loopback `http://` (dev).
pub const COOKIE: &str = "console_session";
/// The session cookie's name everywhere else: `__Host-` makes a browser
/// take it only `Secure`, for `Path=/` and from this very host, so that a
/// sibling site cannot plant a session of its choosing.
pub const HOST_COOKIE: &str = "__Host-console_session";
/// How long a browser keeps to https once told (a year).
const HSTS: &str = "max-age=31536000";

/// The most a console form may carry.
const MAX_FORM: usize = 256 * 1024;

/// Whether the console is served as a browser must keep it: anywhere but
/// at a loopback address over plain `http://`.
fn secure(headers: &HeaderMap) -> bool {
    rules::secure_cookie(forwarded_https(headers), host(headers))
}

/// The session cookie's name for a request with `headers`.
fn cookie_name(headers: &HeaderMap) -> &'static str {
    if secure(headers) { HOST_COOKIE } else { COOKIE }
}

/// The cookie that carries session `token`: `HttpOnly`, `SameSite=Strict`;
/// off loopback `__Host-console_session`, `Secure`, `Path=/`; on loopback
/// `http://` `console_session`, `Path=/console`.
pub fn session_cookie(token: &str, headers: &HeaderMap) -> HeaderValue {
    let secure = secure(headers);
    let cookie = cookie::Cookie::build((cookie_name(headers), token))
        .path(if secure { "/" } else { "/console" })
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .secure(secure)
        .build();
    HeaderValue::from_str(&cookie.to_string()).expect("a token is URL-safe")
}

/// The cookie that removes the session cookie of a request with `headers`.
pub fn cleared_cookie(headers: &HeaderMap) -> HeaderValue {
    let cleared = session_cookie("", headers);
    let text = format!("{}; Max-Age=0", cleared.to_str().expect("the cookie is text"));
    HeaderValue::from_str(&text).expect("the cookie is text")
}

fn host(headers: &HeaderMap) -> &str {
    headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// Whether a proxy in front said the browser came over https.
fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

/// The session token the request's cookie carries: off loopback only the
/// `__Host-` one.
pub fn token(headers: &HeaderMap) -> Option<String> {
    let name = cookie_name(headers);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_string())
}

/// The live session of a request, if it has one.
async fn session_of(state: &ApiState, parts: &Parts) -> Result<Option<Session>, Page> {
    if let Some(session) = parts.extensions.get::<Session>() {
        return Ok(Some(session.clone()));
    }
    let Some(token) = token(&parts.headers) else { return Ok(None) };
    Ok(sign_in::session(state.store(), &token).await?)
}

/// A signed-in person, any kind, who has the second factor their role
/// needs (otherwise: to `/console/second-factor`).
pub struct Signed(pub Session);

impl FromRequestParts<ApiState> for Signed {
    type Rejection = Page;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Page> {
        let Unfactored(session) = Unfactored::from_request_parts(parts, state).await?;
        if lacks_factor(state, &session) {
            return Err(Page::AddFactor);
        }
        Ok(Signed(session))
    }
}

/// A signed-in person, with or without the second factor their role needs:
/// for adding it, and for signing out.
pub struct Unfactored(pub Session);

impl FromRequestParts<ApiState> for Unfactored {
    type Rejection = Page;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Page> {
        session_of(state, parts).await?.map(Unfactored).ok_or(Page::SignIn)
    }
}

/// Whether `session`'s person must add a second factor before any page.
pub fn lacks_factor(state: &ApiState, session: &Session) -> bool {
    let production = state.environment() == Environment::Production;
    rules::factor_required(production, session.user.role()) && !session.factor
}

/// A signed-in tenant user: its organization and role. Operators get `404`.
pub struct Tenant {
    pub session: Session,
    pub organization: String,
    pub role: TenantRole,
}

impl Tenant {
    /// `Ok` when the user's role allows `action`; `403` otherwise.
    pub fn may(&self, action: TenantAction) -> Result<(), Page> {
        if self.role.may(action) {
            return Ok(());
        }
        Err(Page::Error(StatusCode::FORBIDDEN, format!("the {} role may not do this", self.role.as_str())))
    }
}

impl FromRequestParts<ApiState> for Tenant {
    type Rejection = Page;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Page> {
        let Signed(session) = Signed::from_request_parts(parts, state).await?;
        let (Some(organization), Some(role)) = (session.user.organization(), session.user.role()) else {
            return Err(Page::not_found());
        };
        let organization = organization.to_string();
        Ok(Tenant { session, organization, role })
    }
}

/// An answer other than the page asked for.
#[derive(Debug)]
pub enum Page {
    /// Not signed in (or the session ended): to the sign-in page.
    SignIn,
    /// Signed in without the second factor the role needs: to the page
    /// that adds it.
    AddFactor,
    /// An error page with its status and what to tell the person.
    Error(StatusCode, String),
}

impl Page {
    pub fn not_found() -> Self {
        Page::Error(StatusCode::NOT_FOUND, "there is nothing here".into())
    }
}

impl From<StoreError> for Page {
    fn from(error: StoreError) -> Self {
        if let Some(message) = error.conflict() {
            return Page::Error(StatusCode::CONFLICT, message.to_string());
        }
        match error {
            StoreError::NotFound(_) => Page::not_found(),
            StoreError::Invalid(message) => Page::Error(StatusCode::UNPROCESSABLE_ENTITY, message),
            StoreError::LimitReached(message) => Page::Error(StatusCode::CONFLICT, message),
            StoreError::TooMany { message, .. } => Page::Error(StatusCode::TOO_MANY_REQUESTS, message),
            other => {
                tracing::error!(error = %other, "console: store failed");
                Page::Error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the service could not do this now; try again".into(),
                )
            }
        }
    }
}

impl From<crate::api::ApiError> for Page {
    fn from(error: crate::api::ApiError) -> Self {
        Page::Error(error.status(), error.message().to_string())
    }
}

#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage<'a> {
    environment: &'static str,
    status: u16,
    message: &'a str,
}

/// An error answer waiting for [`headers`] to render it with the
/// environment served.
#[derive(Debug, Clone)]
struct Unrendered(u16, String);

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        match self {
            Page::SignIn => Redirect::to("/console/sign-in").into_response(),
            Page::AddFactor => Redirect::to("/console/second-factor").into_response(),
            Page::Error(status, message) => {
                let mut response = status.into_response();
                response.extensions_mut().insert(Unrendered(status.as_u16(), message));
                response
            }
        }
    }
}

/// `SANDBOX` or `PRODUCTION`, as every page's header shows it.
pub fn environment_label(environment: Environment) -> &'static str {
    match environment {
        Environment::Sandbox => "SANDBOX",
        Environment::Production => "PRODUCTION",
    }
}

/// Renders `page` with `status`.
pub fn render<T: Template>(status: StatusCode, page: &T) -> Response {
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(error) => {
            tracing::error!(%error, "console: a page did not render");
            (StatusCode::INTERNAL_SERVER_ERROR, "the page could not be shown").into_response()
        }
    }
}

/// Every console answer: not cached, not framed, scripts and styles from
/// the service only, no referrer to another site (an enrol link's token is
/// in its path), and off loopback kept to https (`Strict-Transport-Security`).
pub async fn headers(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    let hsts = secure(request.headers());
    let mut response = next.run(request).await;
    if let Some(Unrendered(status, message)) = response.extensions_mut().remove::<Unrendered>() {
        let environment = environment_label(state.environment());
        let page = ErrorPage { environment, status, message: &message };
        response = render(response.status(), &page);
    }
    let headers = response.headers_mut();
    let set = [
        (header::CACHE_CONTROL, "no-store"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        // `no-referrer` would make browsers send `Origin: null` with forms.
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    for (name, value) in set {
        headers.entry(name).or_insert(HeaderValue::from_static(value));
    }
    if hsts {
        headers.insert(header::STRICT_TRANSPORT_SECURITY, HeaderValue::from_static(HSTS));
    }
    response
}

/// Every state-changing request: from the console's own origin, and, past
/// sign-in and enrolment, of a live session carrying its CSRF token (the
/// form's `csrf` field or the `X-CSRF-Token` header): `403` otherwise.
pub async fn guard(State(state): State<ApiState>, request: Request, next: Next) -> Result<Response, Page> {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return Ok(next.run(request).await);
    }
    let refused = |why: &str| Page::Error(StatusCode::FORBIDDEN, why.to_string());
    if !same_origin(request.headers()) {
        return Err(refused("this request came from another site"));
    }
    let path = request.uri().path();
    if path == "/console/sign-in" || path.starts_with(crate::people::ENROL_PATH) {
        return Ok(next.run(request).await);
    }
    let (mut parts, body) = request.into_parts();
    let session = session_of(&state, &parts).await?.ok_or(Page::SignIn)?;
    let bytes = to_bytes(body, MAX_FORM)
        .await
        .map_err(|_| Page::Error(StatusCode::PAYLOAD_TOO_LARGE, "this form is too large".into()))?;
    let header = parts.headers.get("x-csrf-token").and_then(|v| v.to_str().ok()).map(str::to_string);
    let field = url::form_urlencoded::parse(&bytes).find(|(k, _)| k == "csrf").map(|(_, v)| v.into_owned());
    if !rules::csrf_matches(&session.csrf, header.or(field).as_deref()) {
        return Err(refused("this form is out of date or was not sent by the console: reload the page"));
    }
    parts.extensions.insert(session);
    Ok(next.run(Request::from_parts(parts, Body::from(bytes))).await)
}

/// Whether a browser's `Origin` (or `Sec-Fetch-Site`) says the request
/// came from the page's own site; a request without either (not a
/// browser's form) passes to the CSRF check.
fn same_origin(headers: &HeaderMap) -> bool {
    if headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()).is_some_and(|s| s == "cross-site") {
        return false;
    }
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(origin) => url::Url::parse(origin).ok().is_some_and(|url| {
            let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
            url.host_str().is_some_and(|h| format!("{h}{port}").eq_ignore_ascii_case(host(headers)))
        }),
    }
}
