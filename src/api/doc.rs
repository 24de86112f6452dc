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
    extensions::ExtensionsBuilder,
    header::HeaderBuilder,
    path::Operation,
    schema::{ObjectBuilder, Schema, Type},
    security::SecurityRequirement,
};

/// Adds the shared error answers and the security requirement to every
/// `/v2` operation, and states "no authentication" as an empty list.
pub(super) fn finish(doc: &mut OpenApi) {
    unspecified_chain(doc);
    let security = doc.security.clone().unwrap_or_default();
    for (path, item) in doc.paths.paths.iter_mut() {
        let operations = [
            ("GET", &mut item.get),
            ("PUT", &mut item.put),
            ("POST", &mut item.post),
            ("DELETE", &mut item.delete),
            ("PATCH", &mut item.patch),
            ("HEAD", &mut item.head),
            ("OPTIONS", &mut item.options),
            ("TRACE", &mut item.trace),
        ];
        for (method, operation) in operations {
            let Some(operation) = operation else { continue };
            if is_extension(method, path) {
                let mark = ExtensionsBuilder::new().add("x-extension", true).build();
                operation.extensions.get_or_insert_with(Default::default).merge(mark);
            }
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

/// Lists `symbols`, the stablecoins this service's chain files issue, as
/// the values of `StablecoinCurrency` (a virtual account's currency); the
/// document without chain files lists `USDC`.
pub(super) fn issued_currencies(doc: &mut OpenApi, symbols: &[String]) {
    let schema = doc.components.as_mut().and_then(|c| c.schemas.get_mut("StablecoinCurrency"));
    if let Some(RefOr::T(Schema::Object(currency))) = schema
        && !symbols.is_empty()
    {
        currency.enum_values = Some(symbols.iter().map(|s| json!(s)).collect());
    }
}

/// The reference's `Chain` enum starts with its zero value,
/// `CHAIN_UNSPECIFIED`: a filter given it filters nothing, and a body that
/// needs a chain refuses it naming the field.
fn unspecified_chain(doc: &mut OpenApi) {
    let schema = doc.components.as_mut().and_then(|c| c.schemas.get_mut("Chain"));
    if let Some(RefOr::T(Schema::Object(chain))) = schema
        && let Some(values) = chain.enum_values.as_mut()
    {
        values.insert(0, json!(crate::chain::UNSPECIFIED));
        chain.description = Some(
            "A chain. `CHAIN_UNSPECIFIED` is the zero value: as a filter it means every chain; a body \
             that needs a chain refuses it (`400` naming the field)."
                .into(),
        );
    }
}

/// The operations the interface reference names, as method and path with
/// each parameter written `{}`. Every other operation is this service's
/// extension and carries `x-extension: true`, so a client of the
/// reference knows what another platform may not offer.
const REFERENCE: &[(&str, &str)] = &[
    ("GET", "/v2/accounts"),
    ("GET", "/v2/accounts/{}"),
    ("GET", "/v2/accounts/{}/balances"),
    ("GET", "/v2/assets"),
    ("GET", "/v2/conversions/quotes"),
    ("POST", "/v2/conversions"),
    ("GET", "/v2/conversions/{}"),
    ("GET", "/v2/crypto/deposits"),
    ("GET", "/v2/crypto/deposits/{}"),
    ("POST", "/v2/crypto/transfers"),
    ("GET", "/v2/crypto/transfers"),
    ("GET", "/v2/crypto/transfers/{}"),
    ("GET", "/v2/identities/{}"),
    ("POST", "/v2/identities/{}/compliance"),
    ("GET", "/v2/identities/{}/id_verification/{}"),
    ("GET", "/v2/identities/{}/virtual-accounts"),
    ("GET", "/v2/issuance/bank-account/{}"),
    ("GET", "/v2/issuance/mint-instructions"),
    ("POST", "/v2/simulation/fiat-deposit"),
    ("GET", "/v2/transaction-limits/policies/{}"),
    ("GET", "/v2/webhooks"),
    ("DELETE", "/v2/webhooks/{}"),
];

/// Whether `method` on `path` (parameters named, `{account_id}`) is not
/// one of the reference's operations.
fn is_extension(method: &str, path: &str) -> bool {
    let mut shape = String::with_capacity(path.len());
    let mut in_parameter = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_parameter = true;
                shape.push_str("{}");
            }
            '}' => in_parameter = false,
            _ if !in_parameter => shape.push(c),
            _ => {}
        }
    }
    !REFERENCE.contains(&(method, shape.as_str()))
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

#[cfg(test)]
mod tests {
    use super::is_extension;

    #[test]
    fn an_operation_the_reference_does_not_name_is_an_extension() {
        for (method, path, extension) in [
            ("GET", "/v2/accounts/{account_id}", false),
            ("GET", "/v2/accounts", false),
            ("POST", "/v2/accounts", true),
            ("GET", "/v2/identities/{identity_id}/id_verification/{check_id}", false),
            ("GET", "/v2/identities/{identity_id}/id_verification", true),
            ("POST", "/v2/identities/{identity_id}/virtual-accounts", true),
            ("DELETE", "/v2/webhooks/{webhook_id}", false),
            ("POST", "/v2/webhooks/{webhook_id}/rotate-signing-key", true),
            ("GET", "/v2/events", true),
            ("POST", "/operator/v1/organizations/{organization_id}/users", true),
            ("PUT", "/operator/v1/organizations/{organization_id}/contact", true),
        ] {
            assert_eq!(is_extension(method, path), extension, "{method} {path}");
        }
    }
}
