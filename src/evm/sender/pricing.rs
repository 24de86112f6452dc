//! What a transaction offers to pay: fees from the market, bumped over a
//! replaced transaction, capped by configuration and by the sponsor's money
//! left at a topped-up address.

use alloy::primitives::U256;

use super::EvmSender;
use crate::transfers::{Outgoing, Route, SendError, SentTransaction};

impl EvmSender {
    /// `(maxFeePerGas, maxPriorityFeePerGas)`: twice the base fee plus the
    /// node's tip, at least `fee_bump_percent` above `previous`, at most `cap`.
    pub(super) async fn fees(
        &self,
        previous: Option<&SentTransaction>,
        cap: u128,
    ) -> Result<(u128, u128), SendError> {
        let (base, tip) = self.rpc.fee_market().await?;
        let mut max_fee = base.saturating_mul(2).saturating_add(tip);
        let mut tip = tip;
        if let Some(previous) = previous {
            let bump = |fee: u128| {
                fee.saturating_mul(100 + u128::from(self.config.transfers.fee_bump_percent)).div_ceil(100)
            };
            max_fee = max_fee.max(bump(previous.max_fee_per_gas));
            tip = tip.max(bump(previous.max_priority_fee_per_gas));
        }
        let max_fee = max_fee.min(cap);
        Ok((max_fee, tip.min(max_fee)))
    }

    pub(super) fn cap(&self) -> u128 {
        u128::from(self.config.transfers.max_fee_per_gas)
    }

    /// For a topped-up account, the highest fee the sponsor's money left at
    /// its address pays for `gas`; otherwise the configured cap.
    pub(super) async fn replacement_cap(&self, t: &Outgoing, gas: u64) -> Result<u128, SendError> {
        if t.route != Route::TopUp {
            return Ok(self.cap());
        }
        let left = self.store.sponsored_gas_left(self.config.chain, &t.source_address).await?;
        Ok(self.cap().min((left / U256::from(gas.max(1))).saturating_to()))
    }
}

/// Whether fees this high replace `previous` in a node's pool: nodes want
/// both at least a tenth above the pending transaction's.
pub(super) fn replaces(previous: &SentTransaction, max_fee: u128, tip: u128) -> bool {
    let enough = |new: u128, old: u128| new.saturating_mul(10) >= old.saturating_mul(11) && new > old;
    enough(max_fee, previous.max_fee_per_gas) && enough(tip.min(max_fee), previous.max_priority_fee_per_gas)
}

#[cfg(test)]
mod tests {
    use super::{super::TRANSFER_GAS, *};

    fn sent(max_fee: u128, tip: u128) -> SentTransaction {
        SentTransaction {
            gas_limit: TRANSFER_GAS,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: tip,
            ..SentTransaction::sent_by("", 0)
        }
    }

    #[test]
    fn a_replacement_must_raise_both_fees_by_a_tenth() {
        let previous = sent(100, 10);
        assert!(replaces(&previous, 110, 11));
        assert!(!replaces(&previous, 109, 11), "max fee short of +10%");
        assert!(!replaces(&previous, 200, 10), "tip unchanged");
        assert!(!replaces(&previous, 100, 100), "capped at the previous fee");
        // The tip counts only up to the max fee.
        assert!(replaces(&sent(10, 10), 11, 50));
        assert!(!replaces(&sent(100, 100), 120, 105));
    }
}
