//! Operator endpoints: `/healthz` (the process answers) and `/openapi.json`,
//! open; `/readyz` (the store answers and every chain keeps up), open for
//! its bare answer, its detail only with the operator token; `/metrics`
//! (Prometheus text) only with the operator token (see [`super::operator`]).

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
    routing::get,
};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiError, ApiState, ErrorBody};
use crate::{deposits::health, environment::Environment, telemetry};

#[derive(Debug, Serialize, ToSchema)]
pub struct Alive {
    /// Always `ok`.
    pub status: &'static str,
}

/// `/readyz` without the operator token: whether the service is ready, and
/// nothing about its chains, workers or errors.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    /// The store answers and every required chain is healthy (also the status: `200` or `503`).
    pub healthy: bool,
    /// `sandbox` or `production`; `null` before any `run` or `serve` started the store.
    #[schema(value_type = Option<String>)]
    pub environment: Option<Environment>,
}

fn documented() -> (Router<ApiState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .split_for_parts()
}

pub fn openapi() -> utoipa::openapi::OpenApi {
    documented().1
}

pub fn router(document: Arc<utoipa::openapi::OpenApi>) -> Router<ApiState> {
    documented().0.route("/openapi.json", get(move || async move { Json(document.as_ref().clone()) }))
}

/// The process is alive.
#[utoipa::path(get, operation_id = "getHealth", path = "/healthz", tag = "operations", security(()),
    responses((status = 200, description = "Alive", body = Alive)))]
pub async fn healthz() -> Json<Alive> {
    Json(Alive { status: "ok" })
}

/// Ready: the store answers and every chain's watcher is within its lag and
/// staleness limits. With the operator token the body is the health report
/// (chains, workers and their lease holders, errors); without it, only
/// whether the service is ready and its environment. The status is the same.
#[utoipa::path(get, operation_id = "getReadiness", path = "/readyz", tag = "operations", security((), ("operator_token" = [])),
    responses(
        (status = 200, description = "Ready; the health report with the operator token, else `Readiness`", body = Readiness),
        (status = 503, description = "Not ready; with the operator token the health report says why", body = Readiness),
    ))]
pub async fn readyz(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    // A stopping instance: the load balancer sends elsewhere from now,
    // without waiting on a health check.
    if state.draining() {
        let readiness = Readiness { healthy: false, environment: Some(state.environment()) };
        return (StatusCode::SERVICE_UNAVAILABLE, Json(readiness)).into_response();
    }
    let report = health::check(state.store(), state.chains(), &state.0.required).await;
    let status = if report.healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    if state.operator(&headers).await {
        return (status, Json(report)).into_response();
    }
    (status, Json(Readiness { healthy: report.healthy, environment: report.environment })).into_response()
}

/// Metrics in the Prometheus text format; needs the operator token.
#[utoipa::path(get, operation_id = "getMetrics", path = "/metrics", tag = "operations", security(("operator_token" = [])),
    responses(
        (status = 200, description = "Prometheus text exposition", content_type = "text/plain"),
        (status = 401, description = "No operator token, a wrong one, or none configured", body = ErrorBody),
    ))]
pub async fn metrics(State(state): State<ApiState>, headers: HeaderMap) -> Result<Response, ApiError> {
    if !state.operator(&headers).await {
        return Err(ApiError::unauthorized(
            "/metrics needs the operator token; send `Authorization: Bearer <OPERATOR_TOKEN>`",
        ));
    }
    let text = telemetry::render(state.store(), state.chains(), &state.0.required).await;
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}

pub async fn not_found() -> ApiError {
    ApiError::not_found("no such path")
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}
