//! The console's files, built into the binary: htmx (2.0.8, from the npm
//! registry's `htmx.org`, under its Zero-Clause BSD licence), the
//! console's script and its styles.

use axum::{
    extract::Path,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};

const FILES: [(&str, &str, &[u8]); 3] = [
    ("htmx.min.js", "text/javascript; charset=utf-8", include_bytes!("../../assets/console/htmx.min.js")),
    ("console.js", "text/javascript; charset=utf-8", include_bytes!("../../assets/console/console.js")),
    ("console.css", "text/css; charset=utf-8", include_bytes!("../../assets/console/console.css")),
];

/// `GET /console/assets/{file}`: cached for an hour.
pub async fn serve(Path(file): Path<String>) -> Response {
    match FILES.iter().find(|(name, _, _)| *name == file) {
        Some((_, kind, body)) => {
            ([(header::CONTENT_TYPE, *kind), (header::CACHE_CONTROL, "public, max-age=3600")], *body)
                .into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
