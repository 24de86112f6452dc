//! Operator endpoints, without authentication: `/healthz` (the process
//! answers), `/readyz` (the store answers and every chain keeps up),
//! `/metrics` (Prometheus text) and `/openapi.json`.

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::State,
    http::{StatusCode, header::CONTENT_TYPE},
    response::{IntoResponse, Response},
    routing::get,
};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiError, ApiState};
use crate::{health, telemetry};

#[derive(Debug, Serialize, ToSchema)]
pub struct Alive {
    /// Always `ok`.
    pub status: &'static str,
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
#[utoipa::path(get, path = "/healthz", tag = "operations", security(()),
    responses((status = 200, description = "Alive", body = Alive)))]
pub async fn healthz() -> Json<Alive> {
    Json(Alive { status: "ok" })
}

/// Ready: the store answers and every chain's watcher is within its lag and
/// staleness limits. The body is the health report either way.
#[utoipa::path(get, path = "/readyz", tag = "operations", security(()),
    responses(
        (status = 200, description = "Ready; the health report", content_type = "application/json"),
        (status = 503, description = "Not ready; the health report says why", content_type = "application/json"),
    ))]
pub async fn readyz(State(state): State<ApiState>) -> Response {
    let report = health::check(state.store(), state.chains(), &state.0.required).await;
    let status = if report.healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(report)).into_response()
}

/// Metrics in the Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "operations", security(()),
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
pub async fn metrics(State(state): State<ApiState>) -> Response {
    let text = telemetry::render(state.store(), state.chains(), &state.0.required).await;
    ([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

pub async fn not_found() -> ApiError {
    ApiError::not_found("no such path")
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}
