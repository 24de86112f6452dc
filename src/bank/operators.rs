//! Production's bank, by hand: the platform's operators work the bank's
//! portal and tell the service what happened. A wire they record (or
//! import from the bank's `camt.054` file) has settled; a virtual account
//! stays `PENDING` until they record the bank's answer; a payout handed
//! over waits, `PAYOUT_INITIATED`, until they record whether it was paid,
//! returned or refused (`conversions payouts record`).

use serde_json::Value;

use super::{Bank, BankError, BankEvent, Opening, Payout, PayoutSent, Settlement};

/// The operators' bank, showing `receiving` (the receiving bank they
/// configured with `--receiving-bank`) on mint instructions.
#[derive(Debug, Clone, Default)]
pub struct Operators {
    receiving: Option<Value>,
}

impl Operators {
    pub fn new(receiving: Option<Value>) -> Self {
        Operators { receiving }
    }
}

#[async_trait::async_trait]
impl Bank for Operators {
    fn receiving_account(&self) -> Option<Value> {
        self.receiving.clone()
    }

    /// A wire operators report has arrived: it was credited.
    fn receive(&self, _cents: i64) -> Settlement {
        Settlement::SETTLED
    }

    fn open_virtual_account(&self, _country: &str) -> Opening {
        None
    }

    /// Hands the payout to the operators: the off-ramp's id is the
    /// reference they quote at the bank; the answer comes from their
    /// command.
    async fn pay_out(&self, payout: &Payout) -> Result<PayoutSent, BankError> {
        Ok(PayoutSent { reference: payout.key.clone(), answer: None })
    }

    fn notification(&self, content_type: &str, body: &[u8]) -> Result<Vec<BankEvent>, BankError> {
        super::statement(content_type, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn operators_answer_nothing_themselves_and_report_credited_wires() {
        let bank = Operators::new(None);
        assert_eq!(bank.receive(25_066), Settlement::SETTLED);
        assert_eq!(bank.open_virtual_account("US"), None);
        let payout = Payout {
            key: "c-1".into(),
            account_number: "000123459999".into(),
            cents: 1,
            currency: "USD".into(),
        };
        assert_eq!(bank.pay_out(&payout).await, Ok(PayoutSent { reference: "c-1".into(), answer: None }));
        assert_eq!(bank.receiving_account(), None);
    }
}
