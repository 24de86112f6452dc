//! Request bodies: JSON only, `snake_case` only. Body types derive
//! `Deserialize` with `#[serde(deny_unknown_fields)]`, so a camelCase or
//! misspelt field is a `400` that names it instead of being ignored.

use axum::{
    extract::{FromRequest, Request},
    http::header::CONTENT_TYPE,
};
use serde::de::DeserializeOwned;

use super::ApiError;

/// A JSON request body, refused with the API's error shape when it is not
/// `application/json` or does not match `T` exactly.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = request.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
            v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
        if !is_json {
            return Err(ApiError::invalid("the request body must be JSON (Content-Type: application/json)"));
        }
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|e| ApiError::invalid(format!("invalid request body: {}", e.body_text())))?;
        let mut json = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut json).map_err(refusal)?;
        json.end().map_err(|e| ApiError::invalid(format!("invalid request body: {e}")))?;
        Ok(Body(value))
    }
}

/// A body that does not match its type, naming the field at fault (type
/// errors included, e.g. `amount: invalid type: integer `5`, expected a
/// string`).
fn refusal<E: std::fmt::Display>(error: serde_path_to_error::Error<E>) -> ApiError {
    let path = error.path().to_string();
    let inner = error.into_inner();
    if path == "." {
        ApiError::invalid(format!("invalid request body: {inner}"))
    } else {
        ApiError::invalid(format!("invalid request body: {path}: {inner}"))
    }
}

/// Fields removed from the interface and what replaced each.
const LEGACY_FIELDS: &[(&str, &str)] = &[
    ("identity_type", "was renamed type"),
    ("account_type", "was renamed type"),
    ("kyc_status", "was removed on 2026-08-05; the identity's status replaces it"),
    ("kyb_status", "was removed on 2026-08-05; the identity's status replaces it"),
    ("frozen", "was removed on 2026-08-05; status FROZEN replaces it"),
    ("account_status", "was removed on 2026-08-05; status replaces it"),
];

/// `body` as `T` (which denies unknown fields), refusing a legacy field
/// with the name of what replaced it.
pub fn exact<T: DeserializeOwned>(body: serde_json::Value) -> Result<T, ApiError> {
    if let Some(object) = body.as_object()
        && let Some((name, why)) = LEGACY_FIELDS.iter().find(|(name, _)| object.contains_key(*name))
    {
        return Err(ApiError::invalid(format!("{name}: {why}")));
    }
    serde_path_to_error::deserialize(body).map_err(refusal)
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        request_id: String,
        #[serde(default)]
        label: Option<String>,
    }

    async fn parse(content_type: Option<&str>, body: &str) -> Result<Sample, (StatusCode, String)> {
        let mut request = Request::builder().method("POST").uri("/");
        if let Some(content_type) = content_type {
            request = request.header(CONTENT_TYPE, content_type);
        }
        let request = request.body(axum::body::Body::from(body.to_string())).unwrap();
        Body::<Sample>::from_request(request, &()).await.map(|Body(s)| s).map_err(|e| {
            let status = e.status();
            (status, format!("{e:?}"))
        })
    }

    #[test]
    fn exact_names_the_field_of_a_type_error() {
        let error = exact::<Sample>(serde_json::json!({ "request_id": 7 })).unwrap_err();
        assert!(format!("{error:?}").contains("request_id: invalid type: integer `7`"), "{error:?}");
        let error = exact::<Sample>(serde_json::json!({ "request_id": "r", "kyc_status": "x" })).unwrap_err();
        assert!(format!("{error:?}").contains("kyc_status: was removed"), "{error:?}");
    }

    #[tokio::test]
    async fn accepts_exact_snake_case_json_only() {
        let json = Some("application/json; charset=utf-8");
        assert_eq!(
            parse(json, r#"{"request_id":"r1"}"#).await.unwrap(),
            Sample { request_id: "r1".into(), label: None }
        );
        for (content_type, body, mentions) in [
            (json, r#"{"requestId":"r1"}"#, "requestId"),
            (json, r#"{"request_id":"r1","extra":1}"#, "extra"),
            (json, r#"{"label":"x"}"#, "request_id"),
            (json, r#"{"request_id":"#, "body"),
            (json, r#"{"request_id":5}"#, "request_id: invalid type: integer `5`"),
            (json, r#"{"request_id":"r1","label":[1]}"#, "label: invalid type: sequence"),
            (json, r#"{"request_id":"r1"} x"#, "trailing characters"),
            (None, r#"{"request_id":"r1"}"#, "JSON"),
            (Some("text/plain"), r#"{"request_id":"r1"}"#, "JSON"),
        ] {
            let (status, error) = parse(content_type, body).await.unwrap_err();
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
            assert!(error.contains(mentions), "{body}: {error}");
        }
    }
}
