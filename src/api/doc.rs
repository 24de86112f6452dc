//! What the OpenAPI document says beyond each handler's annotation.
//!
//! Every `/v2` request passes the authentication middleware, the key's rate
//! limiter and the store before its handler runs, so every `/v2` operation
//! can answer `401`, `429` and `500` (and, with a body, `413`): those
//! answers are added here once instead of in each annotation, where one
//! would be forgotten. Each `/v2` operation also carries the security
//! requirement itself, because client generators (openapi-python-client
//! among them) decide from the operation alone whether a call needs the
//! key.

use serde_json::{Value, json};
use utoipa::openapi::{
    ContentBuilder, OpenApi, Ref, RefOr, Response, ResponseBuilder,
    example::ExampleBuilder,
    header::HeaderBuilder,
    path::Operation,
    schema::{ObjectBuilder, Type},
    security::SecurityRequirement,
};

/// Adds the shared error answers and the security requirement to every
/// `/v2` operation, and states "no authentication" as an empty list.
pub(super) fn finish(doc: &mut OpenApi) {
    let security = doc.security.clone().unwrap_or_default();
    for (path, item) in doc.paths.paths.iter_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.head,
            &mut item.options,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            mark_extension(operation);
            if path.starts_with("/v2/") {
                add_shared_errors(operation);
                if operation.security.is_none() {
                    operation.security = Some(security.clone());
                }
            }
            // `[{}]` alone and `[]` both mean "no authentication", but
            // generators read a non-empty list as "needs credentials".
            if operation
                .security
                .as_ref()
                .is_some_and(|s| s.len() == 1 && s[0] == SecurityRequirement::default())
            {
                operation.security = Some(Vec::new());
            }
        }
    }
}

/// The operations this service adds to the reference's interface: each
/// carries `x-extension: true`, so a client of the reference knows what
/// another platform may not offer.
pub(super) const EXTENSIONS: &[&str] = &[
    "createBankAccount",
    "listBankAccounts",
    "createMintInstruction",
    "getMint",
    "createVirtualAccount",
    "revokePreviousWebhookKeys",
];

fn mark_extension(operation: &mut Operation) {
    if operation.operation_id.as_deref().is_some_and(|id| EXTENSIONS.contains(&id)) {
        let mark = utoipa::openapi::extensions::ExtensionsBuilder::new().add("x-extension", true).build();
        operation.extensions.get_or_insert_with(Default::default).merge(mark);
    }
}

fn add_shared_errors(operation: &mut Operation) {
    let mut shared = vec![
        ("401", unauthorized()),
        ("429", rate_limited()),
        (
            "500",
            error(
                "Internal failure; it has been logged",
                &[("INTERNAL", "internal error; it has been logged")],
            ),
        ),
    ];
    if operation.request_body.is_some() {
        let limit = super::signature::BODY_LIMIT;
        let message = format!("a signed request's body is read whole and may be at most {limit} bytes");
        shared.push((
            "413",
            error(
                &format!("A signed request's body is larger than {limit} bytes"),
                &[("INVALID_REQUEST", &message)],
            ),
        ));
    }
    for (status, response) in shared {
        operation.responses.responses.entry(status.to_string()).or_insert(RefOr::T(response));
    }
}

fn unauthorized() -> Response {
    error(
        "Missing, malformed, unknown or revoked API key (`UNAUTHORIZED`); or, for a key paired with a \
         public key, a missing or refused `X-Request-Signature` (`INVALID_SIGNATURE`, the message names \
         the failed check)",
        &[
            ("UNAUTHORIZED", "invalid or revoked API key"),
            (
                "INVALID_SIGNATURE",
                "missing X-Request-Signature header: this API key is paired with a public key, so every \
                 request must be signed",
            ),
        ],
    )
}

fn rate_limited() -> Response {
    let mut response = error(
        "Too many requests for this API key; retry after `Retry-After` seconds",
        &[("RATE_LIMITED", "too many requests for this API key; retry in 1 s")],
    );
    let seconds = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).build();
    response.headers.insert(
        "Retry-After".to_string(),
        RefOr::T(
            HeaderBuilder::new()
                .schema(Some(seconds))
                .description(Some("Seconds to wait before retrying"))
                .build(),
        ),
    );
    response
}

/// An answer with the error body, one named example per `(code, message)`.
fn error(description: &str, examples: &[(&str, &str)]) -> Response {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ErrorBody")))
        .examples_from_iter(examples.iter().map(|(code, message)| {
            let value: Value = json!({ "code": code, "message": message });
            (code.to_string(), ExampleBuilder::new().value(Some(value)).build())
        }))
        .build();
    ResponseBuilder::new().description(description).content("application/json", content).build()
}
