//! Balance reads batched through Multicall3 (the contract every EVM chain
//! the platform watches has at one address): many native and ERC-20
//! balances at one block in one `eth_call`, for the reconciliation. Each
//! balance it cannot give (the contract absent at that block, a token call
//! that failed, an answer that does not decode) is `None`: its caller
//! reads that one on its own, whose failure is then named.

use alloy::{
    primitives::{Address, Bytes, U256, address},
    rpc::types::BlockNumberOrTag,
    sol,
    sol_types::SolCall,
};

use super::{EvmRpc, sending::balanceOfCall};

/// Multicall3's address, the same on every chain it is deployed on.
pub const MULTICALL3: Address = address!("cA11bde05977b3631167028862bE2a173976CA11");

/// Balances asked in one `eth_call` at most: a call's gas stays well under
/// a node's `eth_call` cap (a `balanceOf` costs a few thousand gas).
pub const PER_CALL: usize = 200;

sol! {
    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result3 {
        bool success;
        bytes returnData;
    }

    function aggregate3(Call3[] calls) external payable returns (Result3[] returnData);
    function getEthBalance(address addr) external view returns (uint256 balance);
}

impl EvmRpc {
    /// Each `(owner, token)`'s balance at the end of block `number` (the
    /// native coin's where `token` is `None`), [`PER_CALL`] to a request;
    /// `None` where the batch could not give it.
    pub async fn balances_at(&self, pairs: &[(Address, Option<Address>)], number: u64) -> Vec<Option<U256>> {
        let mut all = Vec::with_capacity(pairs.len());
        for chunk in pairs.chunks(PER_CALL) {
            let calls: Vec<Call3> = chunk
                .iter()
                .map(|(owner, token)| match token {
                    None => Call3 {
                        target: MULTICALL3,
                        allowFailure: true,
                        callData: getEthBalanceCall { addr: *owner }.abi_encode().into(),
                    },
                    Some(token) => Call3 {
                        target: *token,
                        allowFailure: true,
                        callData: balanceOfCall { owner: *owner }.abi_encode().into(),
                    },
                })
                .collect();
            let call = serde_json::json!({
                "to": MULTICALL3,
                "data": Bytes::from(aggregate3Call { calls }.abi_encode()),
            });
            let block = BlockNumberOrTag::Number(number);
            let answer: Result<Bytes, _> = self.client.request("eth_call", (call, block)).await;
            let results = match &answer {
                Ok(out) => aggregate3Call::abi_decode_returns(out).ok().filter(|r| r.len() == chunk.len()),
                Err(error) => {
                    tracing::warn!(chain = %self.chain, block = number, balances = chunk.len(), %error,
                        "a Multicall3 batch failed; each of its balances is read on its own");
                    None
                }
            };
            match results {
                Some(results) => all.extend(results.iter().map(decoded)),
                None => {
                    if answer.is_ok() {
                        tracing::debug!(chain = %self.chain, block = number, balances = chunk.len(),
                            "no Multicall3 answer at this block; each balance is read on its own");
                    }
                    all.extend(std::iter::repeat_n(None, chunk.len()))
                }
            }
        }
        all
    }
}

/// A balance from one call's result: a successful call answering exactly
/// one word (a token without code at that block answers nothing).
fn decoded(result: &Result3) -> Option<U256> {
    (result.success && result.returnData.len() == 32).then(|| U256::from_be_slice(&result.returnData))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_successful_one_word_answer_is_a_balance() {
        let word = |n: u64| Bytes::from(U256::from(n).to_be_bytes::<32>().to_vec());
        let cases = [
            ("a balance", Result3 { success: true, returnData: word(7) }, Some(U256::from(7))),
            ("a failed call", Result3 { success: false, returnData: word(7) }, None),
            ("no code answers nothing", Result3 { success: true, returnData: Bytes::new() }, None),
            ("two words", Result3 { success: true, returnData: [word(1), word(2)].concat().into() }, None),
        ];
        for (what, result, expected) in cases {
            assert_eq!(decoded(&result), expected, "{what}");
        }
    }
}
