//! What an EVM node's error means: retried by the transport (rate limits,
//! 5xx, timeouts, refused connections), a log range to narrow, a method the
//! node refuses, history it no longer keeps, and the kind a failure is
//! counted under.

use std::time::Duration;

use crate::rpc::refuses_method;

use alloy::transports::{
    RpcError, TransportError, TransportErrorKind,
    layers::{RateLimitRetryPolicy, RetryPolicy},
};

/// Retries what a later attempt can fix: rate limits, 5xx, timeouts and
/// refused connections (the fallback layer has then tried every URL).
#[derive(Debug, Clone, Copy)]
pub(super) struct TransientPolicy;

impl RetryPolicy for TransientPolicy {
    fn should_retry(&self, error: &TransportError) -> bool {
        // A refused range fails the same way every time: it is narrowed instead.
        !is_range_too_large(error)
            && (RateLimitRetryPolicy::default().should_retry(error) || is_transient(error))
    }

    fn backoff_hint(&self, error: &TransportError) -> Option<Duration> {
        RateLimitRetryPolicy::default().backoff_hint(error)
    }
}

pub(super) fn is_transient(err: &TransportError) -> bool {
    match err {
        RpcError::Transport(kind) => match kind {
            TransportErrorKind::HttpError(e) => e.status == 429 || e.status == 408 || e.status >= 500,
            TransportErrorKind::HttpErrorWithRetryAfter { .. } => true,
            TransportErrorKind::Custom(_)
            | TransportErrorKind::BackendGone
            | TransportErrorKind::MissingBatchResponse(_) => true,
            _ => false,
        },
        RpcError::ErrorResp(payload) => {
            is_rate_limit(payload.code, &payload.message)
                || (matches!(payload.code, -32005 | -32603) && !mentions_range(&payload.message))
        }
        _ => false,
    }
}

/// A short label of what failed, for the `kind` of error metrics.
pub(super) fn error_kind(err: &TransportError) -> &'static str {
    match err {
        RpcError::ErrorResp(payload) if is_rate_limit(payload.code, &payload.message) => "rate_limited",
        RpcError::ErrorResp(payload) if refuses_method(payload.code, &payload.message) => {
            "method_unsupported"
        }
        RpcError::ErrorResp(payload) if lost_history(payload.code, &payload.message) => "pruned",
        RpcError::ErrorResp(_) => "rpc_error",
        RpcError::DeserError { .. } | RpcError::SerError(_) | RpcError::NullResp => "bad_response",
        RpcError::Transport(TransportErrorKind::HttpError(e)) if e.status == 429 => "rate_limited",
        RpcError::Transport(TransportErrorKind::HttpErrorWithRetryAfter { .. }) => "rate_limited",
        RpcError::Transport(TransportErrorKind::HttpError(_)) => "http_status",
        RpcError::Transport(TransportErrorKind::Custom(e)) if e.to_string().contains("timed out") => {
            "timeout"
        }
        RpcError::Transport(_) => "unreachable",
        _ => "other",
    }
}

/// Whether a JSON-RPC error says the node no longer holds the block asked
/// for (geth's history expiry answers `4444` "pruned history unavailable"):
/// only an archive node serves it.
pub(super) fn lost_history(code: i64, message: &str) -> bool {
    code == 4444 || message.to_ascii_lowercase().contains("pruned history")
}

/// Whether a JSON-RPC error is a provider's rate limit: code 429 (or a
/// WebSocket's 1008), or a message in the providers' wordings (alloy's
/// list, and Alchemy's, Infura's and QuickNode's). Checked before the range
/// wording: "exceeded", "limit" and "too many" are in both, and a rate
/// limit taken for a refused `eth_getLogs` range would halve the range for
/// good instead of being retried.
pub(super) fn is_rate_limit(code: i64, message: &str) -> bool {
    matches!(code, 429 | 1008) || mentions_rate_limit(message)
}

pub(super) fn mentions_rate_limit(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "rate limit",
        "rate-limit",
        "ratelimit",
        "rate exceeded",
        "request rate",
        "too many requests",
        "credits limited",
        "request limit",
        "concurrent requests",
        "capacity",
        "per second",
        "/second",
        "/sec",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

pub(super) fn mentions_range(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    ["block range", "range is too", "range too", "more than", "too many", "exceed", "response size", "limit"]
        .iter()
        .any(|needle| m.contains(needle))
}

/// Providers word "your `eth_getLogs` range is too large" in many ways.
pub(super) fn is_range_too_large(err: &TransportError) -> bool {
    match err {
        RpcError::ErrorResp(payload) => {
            !is_rate_limit(payload.code, &payload.message) && mentions_range(&payload.message)
        }
        RpcError::Transport(TransportErrorKind::HttpError(e)) => {
            e.status != 429 && !mentions_rate_limit(&e.body) && mentions_range(&e.body)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(code: i64, message: &str) -> TransportError {
        let payload = serde_json::json!({ "code": code, "message": message });
        RpcError::ErrorResp(serde_json::from_value(payload).expect("an error payload"))
    }

    #[test]
    fn a_refused_method_and_lost_history_are_kinds_of_their_own() {
        let refused = answered(-32601, "the method debug_traceBlockByHash does not exist/is not available");
        assert_eq!(error_kind(&refused), "method_unsupported");
        assert_eq!(error_kind(&answered(-32000, "Method not found")), "method_unsupported");
        assert_eq!(error_kind(&answered(4444, "pruned history unavailable")), "pruned");
        assert_eq!(error_kind(&answered(-32000, "header not found")), "rpc_error");
        assert!(!is_transient(&refused), "no retry helps");
    }

    #[test]
    fn a_rate_limit_is_retried_and_never_taken_for_a_refused_log_range() {
        let alchemy_range = "Log response size exceeded. You can make eth_getLogs requests with up to a 2K \
            block range and no limit on the response size, or you can request any block range with a cap \
            of 10K logs in the response. Based on your parameters and the response size limit, this block \
            range should work: [0x1, 0x7d0]";
        // (providers' answer, a rate limit, a refused range)
        let table = [
            (
                answered(
                    429,
                    "Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message.",
                ),
                true,
                false,
            ),
            (answered(-32005, "project ID request rate exceeded"), true, false),
            (answered(-32005, "daily request count exceeded, request rate limited"), true, false),
            (
                answered(
                    -32007,
                    "100/second request limit reached - reduce calls per second or upgrade your account at quicknode.com",
                ),
                true,
                false,
            ),
            (answered(-32012, "credits limited to 6000/sec"), true, false),
            (TransportErrorKind::http_error(429, "Too Many Requests".into()), true, false),
            (answered(-32005, "query returned more than 10000 results"), false, true),
            (answered(-32602, alchemy_range), false, true),
            (answered(-32614, "eth_getLogs is limited to a 10,000 range"), false, true),
            (
                answered(
                    -32000,
                    "query returned more than 10000 results. Try with this block range [0x10, 0x20].",
                ),
                false,
                true,
            ),
            (TransportErrorKind::http_error(413, "response size exceeded".into()), false, true),
        ];
        for (i, (error, rate_limit, range)) in table.iter().enumerate() {
            assert_eq!(error_kind(error) == "rate_limited", *rate_limit, "row {i}: {error}");
            assert_eq!(is_range_too_large(error), *range, "row {i}: {error}");
            assert_eq!(TransientPolicy.should_retry(error), *rate_limit, "row {i}: {error}");
        }
    }
}
