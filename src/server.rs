//! The one HTTP server: the API's routes ([`crate::api`]) and the
//! console's pages ([`crate::console`]) on one listener, with one state.

use std::{net::SocketAddr, time::Duration};

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::trace::{DefaultOnFailure, TraceLayer};

use crate::api::{self, ApiState};

/// Every route the server answers, unknown paths with the API's `404`.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .merge(api::routes(&state))
        .merge(crate::console::router(state.clone()))
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        // 5xx answers are logged where they arise; `/readyz` answers 503 by design.
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .with_state(state)
}

/// A request's span: its method and path, an enrol link's token left out
/// (it is a credential until used); queries are not recorded.
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let path = request.uri().path();
    let path = match path.strip_prefix(crate::people::ENROL_PATH) {
        Some(_) => "/console/enrol/…",
        None => path,
    };
    tracing::debug_span!("request", method = %request.method(), path = %path)
}

/// Binds `listen`; fails with the address when it is taken.
pub async fn bind(listen: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(listen)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}")))
}

/// Serves the API on `listener` until `shutdown`, finishing requests in
/// flight: the routes alone. The workers that move what the API accepts on
/// are started beside it by [`crate::service`].
pub async fn serve(
    listener: TcpListener,
    state: ApiState,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let address = listener.local_addr()?;
    tracing::info!(%address, "api listening");
    if state.has_operator_token() {
        tracing::info!("/metrics and the detail of /readyz need the operator token");
    } else {
        tracing::warn!(
            "no operator token: /metrics answers 401 and /readyz only whether it is ready; \
             set CUSTODY_INDEXER_OPERATOR_TOKEN (or --operator-token) to see them"
        );
    }
    let state_for_drain = state.clone();
    // Each request knows its peer's address (the console's sign-in delays).
    let service = router(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    let serving =
        axum::serve(listener, service).with_graceful_shutdown(drained(state_for_drain, shutdown.clone()));
    // Requests in flight end after the drain; the listener closes 30 s
    // after the signal at the latest, whatever they wait for.
    tokio::select! {
        served = serving => served,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(CLOSED_AT_LATEST).await;
        } => {
            tracing::warn!("requests still in flight 30 s after the signal: the listener closes");
            Ok(())
        }
    }
}

/// How long after the signal the listener closes at the latest.
pub const CLOSED_AT_LATEST: Duration = Duration::from_secs(30);

/// The least time a stopping listener still answers, `/readyz` with `503`,
/// so that a load balancer's next probe sees it.
pub const DRAIN_AT_LEAST: Duration = Duration::from_secs(1);

/// How long a stopping listener waits at most for the leases to be given up.
pub const DRAIN_AT_MOST: Duration = Duration::from_secs(25);

/// Resolves when a stopping process's listener may close: `shutdown`
/// marks the state draining (`/readyz` answers `503` at once); then at
/// least [`DRAIN_AT_LEAST`], and until the process's workers have given
/// their leases up (at most [`DRAIN_AT_MOST`]). The requests in flight end
/// after (axum's graceful shutdown), so the process exits within 30 s.
async fn drained(state: ApiState, shutdown: CancellationToken) {
    shutdown.cancelled().await;
    state.drain();
    tracing::info!("stopping: /readyz answers 503 until the leases are given up");
    let started = tokio::time::Instant::now();
    tokio::time::sleep(DRAIN_AT_LEAST).await;
    while state.leases_held().is_some_and(|held| held > 0) && started.elapsed() < DRAIN_AT_MOST {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
