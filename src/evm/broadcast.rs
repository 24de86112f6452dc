//! Broadcasting a signed transaction, and what the answers say of it.
//!
//! Each configured URL gets the transaction on its own, without the retry
//! and fallback layers of [`super::rpc::EvmRpc`]: those hide which attempt
//! answered what. A first attempt that timed out after the node took the
//! transaction, retried and answered "nonce too low" by another backend,
//! would read as a refusal. Here every answer counts: a refusal is one only
//! when no attempt before it may have reached a node.

use alloy::{
    primitives::{B256, Bytes},
    rpc::client::{ClientBuilder, RpcClient},
    transports::{
        RpcError,
        http::{Http, reqwest},
    },
};

use crate::redact::{RpcUrl, redact_urls};

/// What became of `eth_sendRawTransaction`.
#[derive(Debug)]
pub enum Broadcast {
    /// The node took it, or already had it.
    Accepted,
    /// The node refused it for a reason found in the transaction against the
    /// node's state (see [`refusal`]), and no earlier attempt of the same
    /// broadcast may have reached a node: it is not in that node's pool.
    /// Whether it can still land elsewhere is for the chain to say.
    Refused(String),
    /// No answer, or one that decides nothing (an internal error, a timeout,
    /// a rate limit), or a refusal after such an answer: a node may have
    /// taken it and it may be mined.
    Unknown(String),
}

/// One client per configured URL, in the configured order.
pub struct Broadcaster {
    clients: Vec<RpcClient>,
}

impl Broadcaster {
    pub fn new(http: &reqwest::Client, urls: &[RpcUrl]) -> Self {
        let clients = urls
            .iter()
            .map(|u| {
                ClientBuilder::default().transport(Http::with_client(http.clone(), u.expose().clone()), false)
            })
            .collect();
        Self { clients }
    }

    /// Sends a signed transaction to each URL in turn until one takes it or
    /// refuses it. A node that already has it (or already included it)
    /// counts as taking it: sending again is always safe.
    pub async fn send_raw(&self, raw: &Bytes) -> Broadcast {
        let mut unknown: Option<String> = None;
        for client in &self.clients {
            match send_one(client, raw).await {
                Broadcast::Accepted => return Broadcast::Accepted,
                Broadcast::Refused(reason) => {
                    return match unknown {
                        // The node that did not answer may hold it.
                        Some(earlier) => Broadcast::Unknown(format!("{earlier}; then refused: {reason}")),
                        None => Broadcast::Refused(reason),
                    };
                }
                Broadcast::Unknown(reason) => unknown = Some(reason),
            }
        }
        Broadcast::Unknown(unknown.unwrap_or_else(|| "no RPC URL configured".into()))
    }
}

async fn send_one(client: &RpcClient, raw: &Bytes) -> Broadcast {
    match client.request::<_, B256>("eth_sendRawTransaction", (raw,)).await {
        Ok(_) => Broadcast::Accepted,
        Err(RpcError::ErrorResp(payload)) => {
            let message = payload.message.to_string();
            let lower = message.to_ascii_lowercase();
            if lower.contains("already known")
                || lower.contains("known transaction")
                || lower.contains("already imported")
            {
                Broadcast::Accepted
            } else if refusal(&message) {
                Broadcast::Refused(message)
            } else {
                Broadcast::Unknown(message)
            }
        }
        Err(e) => Broadcast::Unknown(redact_urls(&e.to_string())),
    }
}

/// How nodes word a refusal of a transaction (geth, reth, Erigon, Nethermind
/// and anvil alike), each with whether it is of the transaction's bytes
/// alone (see [`intrinsic`]). "nonce too high" is no refusal: the missing
/// nonce is a gap to fill.
const REFUSALS: [(&str, bool); 13] = [
    ("nonce too low", false),
    ("already used", false),
    ("insufficient funds", false),
    ("intrinsic gas too low", true),
    ("exceeds block gas limit", true),
    ("gas limit reached", false),
    ("underpriced", false),
    ("less than block base fee", false),
    ("fee cap less than", false),
    ("higher than max fee", true),
    ("tip higher than fee cap", true),
    ("invalid sender", true),
    ("invalid chain id", true),
];

/// Whether a node's error answer to `eth_sendRawTransaction` is a refusal of
/// the transaction itself rather than a failure to answer. Anything not
/// listed is unknown: a transaction is never taken as refused on a guess.
pub fn refusal(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    REFUSALS.iter().any(|(r, _)| lower.contains(r))
}

/// Whether a refusal is of the transaction's bytes alone (its gas, fee
/// fields, signature or chain id), whatever state the node is at: no node
/// anywhere can take it. Every other refusal (nonce too low, underpriced,
/// insufficient funds, a fee under the base fee) depends on the answering
/// node's state, and a node at another state, or another backend of the
/// same request, may have taken the transaction.
pub fn intrinsic(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    REFUSALS.iter().any(|(r, of_bytes)| *of_bytes && lower.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_from_failures_and_intrinsic_ones_from_those_of_state() {
        // (answer, a refusal of the transaction, of its bytes alone)
        for (message, refused, of_bytes) in [
            ("intrinsic gas too low: have 20000, want 21000", true, true),
            ("invalid sender", true, true),
            ("invalid chain id", true, true),
            ("nonce too low: next nonce 5, tx nonce 4", true, false),
            ("replacement transaction underpriced", true, false),
            ("Insufficient funds for gas * price + value", true, false),
            ("max fee per gas less than block base fee", true, false),
            ("internal error", false, false),
            ("request timed out", false, false),
            ("context deadline exceeded", false, false),
            ("rate limited", false, false),
            ("", false, false),
        ] {
            assert_eq!((refusal(message), intrinsic(message)), (refused, of_bytes), "{message}");
        }
    }
}
