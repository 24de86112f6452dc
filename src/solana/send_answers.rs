//! Whether a node's error answer to `sendTransaction` is about the node
//! (its health, how far it has seen the chain, its load) or about the
//! transaction. Only the latter is a refusal: a transfer whose every send
//! was refused for a reason of its own fails once its blockhash expired,
//! whereas the node's trouble refuses nothing and the send is tried again,
//! on the next URL and at the next step, within the transfer's window.

/// Agave's codes for a node that cannot judge the transaction now
/// (`rpc-client-api/src/custom_error.rs`): `-32004` block not available,
/// `-32005` node unhealthy ("Node is behind by N slots"), `-32007` and
/// `-32009` slot skipped or missing, `-32014` block status not yet
/// available, `-32016` minimum context slot not reached, `-32019` long-term
/// storage unreachable; `-32603` an internal error; `429` a provider's rate
/// limit.
const NODE_CODES: &[i64] = &[-32004, -32005, -32007, -32009, -32014, -32016, -32019, -32603, 429];

/// Preflight failures (`-32002`) that are the node's or the cluster's,
/// named by the simulation's `TransactionError` (its variant or its
/// display text): a blockhash the node has not seen yet, accounts locked by
/// other transactions, a full block, cluster maintenance.
const NODE_PREFLIGHT: &[&str] = &[
    "BlockhashNotFound",
    "Blockhash not found",
    "AccountInUse",
    "Account in use",
    "WouldExceedMaxBlockCostLimit",
    "WouldExceedMaxAccountCostLimit",
    "WouldExceedAccountDataBlockLimit",
    "WouldExceedMaxVoteCostLimit",
    "would exceed max",
    "ClusterMaintenance",
    "cluster maintenance",
];

/// Whether an error answer (`code`, and its message with its data as text)
/// is about the node rather than the transaction.
pub(super) fn about_node(code: i64, text: &str) -> bool {
    NODE_CODES.contains(&code) || (code == -32002 && NODE_PREFLIGHT.iter().any(|n| text.contains(n)))
}

#[cfg(test)]
mod tests {
    use super::about_node;

    /// Agave's answers (`rpc/src/rpc.rs` `send_transaction`,
    /// `rpc-client-api/src/custom_error.rs`, and the `TransactionError` and
    /// `InstructionError` display strings of solana-sdk) and a public
    /// endpoint's rate limit.
    #[test]
    fn only_the_transactions_own_faults_refuse_it() {
        let node = [
            (-32005, "Node is behind by 42 slots"),
            (-32005, "Node is unhealthy"),
            (-32016, "Minimum context slot has not been reached"),
            (-32004, "Block not available for slot 339540943"),
            (-32014, "Block status not yet available for slot 339540943"),
            (-32603, "Internal error"),
            (
                429,
                "Too many requests for a specific RPC call, contact your app developer or support@rpcpool.com.",
            ),
            (-32002, "Transaction simulation failed: Blockhash not found Some(BlockhashNotFound)"),
            (-32002, "Transaction simulation failed: Account in use"),
            (-32002, "Transaction simulation failed: Transaction would exceed max Block Cost Limit"),
            (
                -32002,
                "Transaction simulation failed: Transactions are currently disabled due to cluster maintenance",
            ),
        ];
        for (code, text) in node {
            assert!(about_node(code, text), "{code} {text}");
        }
        let transaction = [
            (-32003, "Transaction signature verification failure"),
            (-32013, "Transaction signature length mismatch"),
            (-32006, "Transaction precompile verification failure InvalidAccountIndex"),
            (-32602, "invalid transaction: Transaction failed to sanitize accounts offsets correctly"),
            (
                -32002,
                "Transaction simulation failed: Attempt to debit an account but found no record of a prior credit.",
            ),
            (-32002, "Transaction simulation failed: Insufficient funds for fee"),
            (
                -32002,
                "Transaction simulation failed: Error processing Instruction 0: custom program error: 0x1",
            ),
            (
                -32002,
                "Transaction simulation failed: Error processing Instruction 0: insufficient funds for instruction",
            ),
            (
                -32002,
                "Transaction simulation failed: Transaction results in an account (1) with insufficient funds for rent",
            ),
            (
                -32002,
                "Transaction simulation failed: Error processing Instruction 0: missing required signature for instruction",
            ),
        ];
        for (code, text) in transaction {
            assert!(!about_node(code, text), "{code} {text}");
        }
    }
}
