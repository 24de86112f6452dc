//! Whether a node's error answer to a transfer's gas estimate is about the
//! transaction itself (it would fail, so the transfer is refused) or about
//! the node (its state, its load, its history: the step is asked again
//! within the transfer's window, as when the node does not answer at all).
//!
//! geth, Erigon and Besu answer `-32000` for both kinds ("header not found"
//! and "insufficient funds…" share it), and every client wraps the core
//! text differently (`failed with N gas: …`, `err: … (supplied gas N)`), so
//! the wording decides, matched as a part of the message. What says nothing
//! either way is the node's: a transfer is refused only on an answer that
//! names what is wrong with it, never on a node's bad moment.

/// Wordings of a node that cannot judge the call now: state it lacks or
/// pruned, a block it does not have, a timeout, a rate limit, a sync.
const NODE_STATE: &[&str] = &[
    "header not found",
    "header for hash not found",
    "not currently canonical",
    "missing trie node",
    "historical state",
    "fully indexed",
    "is not available",
    "state not available",
    "no state available",
    "no state found",
    "state at block",
    "world state unavailable",
    "old data not available",
    "is pruned",
    "pruned history",
    "block not found",
    "could not be found",
    "not found in cache or db",
    "could not find the header",
    "unknown block",
    "beyond head block",
    "in the future",
    "execution aborted (timeout",
    "timed out",
    "timeout",
    "canceled due to enabled timeout",
    "server is busy",
    "initial sync",
    "syncing",
    "internal error",
    "rate limit",
    "rate exceeded",
    "request limit",
    "too many requests",
    "compute units",
    "capacity",
    "credits limited",
];

/// Wordings of an answer about the transaction: it reverts, its source
/// cannot pay, it is malformed or can never fit.
const TRANSACTION: &[&str] = &[
    "execution reverted",
    "revert",
    "insufficient funds",
    "insufficient balance",
    "insufficient sender balance",
    "upfront cost exceeds account balance",
    "gas required exceeds allowance",
    "intrinsic gas",
    "exceeds block gas limit",
    "gas limit below intrinsic gas",
    "out of gas",
    "invalid opcode",
    "invalid jump destination",
    "stack underflow",
    "stack overflow",
    "max call depth exceeded",
    "write protection",
    "invalid signature",
    "invalid sender",
    "vm execution error",
    "gas estimation failed",
    "transaction execution fails",
    "cannot estimate gas",
];

/// Whether a node's error answer (`code`, `message`) to a gas estimate says
/// the transaction itself would fail. Reverts carry code `3` in geth,
/// Erigon, reth and Nethermind and decide first; otherwise a wording of the
/// node's state outranks one of the transaction.
pub(in crate::evm) fn about_transaction(code: Option<i64>, message: &str) -> bool {
    // A revert, whatever its reason says (a contract's own words may read
    // like a node's).
    if code == Some(3) {
        return true;
    }
    let m = message.to_ascii_lowercase();
    if matches!(code, Some(429 | -32005 | -32016)) && !m.contains("gas limit") {
        return false;
    }
    if NODE_STATE.iter().any(|needle| m.contains(needle)) {
        return false;
    }
    TRANSACTION.iter().any(|needle| m.contains(needle))
}

/// The most gas one transaction may use since Fusaka (EIP-7825): a node
/// refuses a transaction whose gas limit is above it.
pub const MAX_TRANSACTION_GAS: u64 = 1 << 24;

/// The gas limit to sign for a call estimated at `estimate`: the estimate
/// itself for a plain transfer (`exact`), otherwise a fifth on top (token
/// contracts' costs vary with state), never above [`MAX_TRANSACTION_GAS`].
/// `None` when the estimate itself is above the cap: no transaction can
/// carry the call.
pub fn gas_limit(estimate: u64, exact: bool) -> Option<u64> {
    if estimate > MAX_TRANSACTION_GAS {
        return None;
    }
    let limit = if exact { estimate } else { estimate.saturating_add(estimate / 5) };
    Some(limit.min(MAX_TRANSACTION_GAS))
}

/// The allowance a node's estimate answer says the call exceeded, when it
/// is the transaction cap or more: the call needs more gas than any
/// transaction may carry. geth since Osaka stops its estimate at the cap and
/// answers `gas required exceeds allowance (16777216)`; before, at the
/// block's gas limit. (No fee is given with the estimate, so the allowance
/// is never the source's balance.) A lower allowance (a provider's own
/// call cap) says nothing of the transaction cap.
pub fn allowance_beyond_cap(message: &str) -> Option<u64> {
    const NEEDLE: &str = "gas required exceeds allowance (";
    let lower = message.to_ascii_lowercase();
    let start = lower.find(NEEDLE)? + NEEDLE.len();
    let digits: String = lower[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<u64>().ok().filter(|allowance| *allowance >= MAX_TRANSACTION_GAS)
}

#[cfg(test)]
mod tests {
    use super::{MAX_TRANSACTION_GAS, about_transaction, allowance_beyond_cap, gas_limit};

    #[test]
    fn an_estimate_stopped_at_the_cap_says_no_transaction_can_carry_the_call() {
        for (message, allowance) in [
            ("gas required exceeds allowance (16777216)", Some(MAX_TRANSACTION_GAS)),
            (
                "server returned an error response: error code -32000: gas required exceeds allowance (16777216)",
                Some(MAX_TRANSACTION_GAS),
            ),
            ("gas required exceeds allowance (30000000)", Some(30_000_000)),
            ("Gas Required Exceeds Allowance (36000000)", Some(36_000_000)),
            ("gas required exceeds allowance (10000000)", None),
            ("gas required exceeds allowance ()", None),
            ("execution reverted: balance", None),
            ("header not found", None),
        ] {
            assert_eq!(allowance_beyond_cap(message), allowance, "{message}");
        }
    }

    #[test]
    fn no_gas_limit_is_above_the_transaction_cap() {
        assert_eq!(MAX_TRANSACTION_GAS, 16_777_216);
        for (estimate, exact, limit) in [
            (21_000, true, Some(21_000)),
            (50_000, false, Some(60_000)),
            (13_981_013, false, Some(16_777_215)),
            (13_981_014, false, Some(MAX_TRANSACTION_GAS)),
            (16_000_000, false, Some(MAX_TRANSACTION_GAS)),
            (MAX_TRANSACTION_GAS, false, Some(MAX_TRANSACTION_GAS)),
            (MAX_TRANSACTION_GAS + 1, false, None),
            (30_000_000, true, None),
            (u64::MAX, false, None),
        ] {
            assert_eq!(gas_limit(estimate, exact), limit, "{estimate} {exact}");
        }
    }

    /// Answers as the nodes send them (the code and the message's text;
    /// alloy's transport prefixes its own words, which change nothing), from
    /// each client's source: go-ethereum (`eth/api_backend.go`,
    /// `trie/errors.go`, `triedb/pathdb/reader.go`, `rpc/errors.go`,
    /// `eth/gasestimator/gasestimator.go`, `internal/ethapi/errors.go`,
    /// `core/vm/errors.go`), reth (`rpc-eth-types/src/error/mod.rs`,
    /// `storage/errors/src/provider.rs`), Erigon (`rpc/rpchelper/helper.go`,
    /// `rpc/jsonrpc/eth_call.go`, `turbo/transactions/call.go`), Nethermind
    /// (`ExecutorBase.cs`, `JsonRpcService.cs`, `GasEstimator.cs`), Besu
    /// (`RpcErrorType.java`) and the hosted providers' published answers.
    #[test]
    fn only_answers_about_the_transaction_refuse_it() {
        let node_state = [
            (-32000, "header not found"),
            (-32000, "header for hash not found"),
            (-32000, "hash is not currently canonical"),
            (-32000, "missing trie node 5a6b… (path ) layer stale"),
            (-32000, "historical state 0xabc… is not available"),
            (-32000, "state histories haven't been fully indexed yet"),
            (-32000, "execution aborted (timeout = 5s)"),
            (-32002, "request timed out"),
            (-32001, "block not found: 0x12d687"),
            (-32001, "block not found: hash 0x88e9…"),
            (-32603, "state at block #1234 is pruned"),
            (
                -32603,
                "state at block #1234 is not available, block has not been executed yet (latest executed: #1200)",
            ),
            (-32603, "no state found for block number 1234"),
            (-32602, "request beyond head block: requested 1235, head 1234"),
            (-32009, "Server is busy, try again later"),
            (-32000, "block 0x88e9… not found"),
            (-32000, "could not find the header 1234 in cache or db"),
            (-32000, "old data not available due to pruning"),
            (-32002, "No state available for block 0x88e9…"),
            (-32000, "0x88e9… could not be found"),
            (-32016, "eth_estimateGas request was canceled due to enabled timeout."),
            (-32000, "World state unavailable"),
            (-32008, "Initial sync is still in progress"),
            (-32603, "Internal error"),
            (4444, "pruned history unavailable"),
            (-32005, "project ID request rate exceeded"),
            (-32005, "daily request count exceeded, request rate limited"),
            (429, "Your app has exceeded its compute units per second capacity."),
            (
                -32007,
                "15/second request limit reached - reduce calls per second or upgrade your account at quicknode.com",
            ),
            (-32012, "credits limited to 500/sec"),
            // Nothing said about the transaction: the node's, asked again.
            (-32000, "something went wrong"),
        ];
        for (code, message) in node_state {
            assert!(!about_transaction(Some(code), message), "{code} {message}");
        }
        let transaction = [
            (3, "execution reverted"),
            (3, "execution reverted: ERC20: transfer amount exceeds balance"),
            (3, "execution reverted: FiatTokenV2: authorization is expired"),
            (-32000, "gas required exceeds allowance (30000000)"),
            (-32000, "insufficient funds for transfer"),
            (
                -32000,
                "failed with 21000 gas: insufficient funds for gas * price + value: address 0x0a have 1 want 2",
            ),
            (-32000, "err: intrinsic gas too low: have 20000, want 21000 (supplied gas 20000)"),
            (-32000, "invalid opcode: INVALID"),
            (-32000, "out of gas"),
            (-32000, "invalid jump destination"),
            (-32015, "VM execution error."),
            (-32000, "insufficient sender balance"),
            (-32000, "Gas estimation failed due to out of gas"),
            (-32004, "Upfront cost exceeds account balance"),
            (-32005, "Transaction gas limit exceeds block gas limit"),
            (-32002, "Invalid signature"),
        ];
        for (code, message) in transaction {
            assert!(about_transaction(Some(code), message), "{code} {message}");
        }
        // alloy's wording around the node's.
        let wrapped = "server returned an error response: error code 3: execution reverted, data: \"0x08c3\"";
        assert!(about_transaction(Some(3), wrapped));
        let wrapped = "server returned an error response: error code -32000: header not found";
        assert!(!about_transaction(Some(-32000), wrapped));
        // A contract's revert reason reading like a node's is still a revert.
        assert!(about_transaction(Some(3), "execution reverted: oracle timeout"));
    }
}
