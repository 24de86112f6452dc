//! The sandbox's bank: no money moves, and its answers follow fixed
//! tables, so a client's test suite can provoke each outcome.
//!
//! A simulated wire (mint instruction or virtual account), by its cents:
//!
//! | cents | outcome |
//! |---|---|
//! | `.66` | rejected at once: nothing credited, the mint `FAILED` `WIRE_REJECTED` |
//! | `.99` | credited, then returned by the sender's bank [`WIRE_DELAY`] later: `FAILED` `WIRE_RETURNED` |
//! | `.13` | settled [`WIRE_DELAY`] later |
//! | any other | settled at once |
//!
//! A virtual account, by the senders' `source.banking_country`:
//!
//! | country | outcome |
//! |---|---|
//! | `US` | opened [`ACCOUNT_DELAY`] after it was asked for: `VIRTUAL_ACCOUNT_STATUS_ACTIVE` |
//! | any other | refused [`ACCOUNT_DELAY`] later: `VIRTUAL_ACCOUNT_STATUS_FAILED` |
//!
//! An off-ramp's payout, by the beneficiary's account number, answered
//! [`PAYOUT_DELAY`] after the hand-off:
//!
//! | account number | answer |
//! |---|---|
//! | ends `9999` | returned by the beneficiary's bank |
//! | ends `8888` | refused: account closed |
//! | any other | paid |
//!
//! Mint instructions show [`receiving_account`], a fixed bank.

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    AccountOutcome, Answer, Bank, BankError, BankEvent, Opening, Payout, PayoutSent, Settlement, WireOutcome,
};

/// How long the sandbox bank takes over delayed and returned wires.
pub const WIRE_DELAY: Duration = Duration::from_secs(5);
/// How long the sandbox bank takes to open (or refuse) a virtual account.
pub const ACCOUNT_DELAY: Duration = Duration::from_secs(1);
/// How long after the hand-off the sandbox bank's payout answer arrives.
pub const PAYOUT_DELAY: Duration = Duration::from_secs(1);

/// The sandbox's bank (see the module's tables).
pub struct Sandbox;

#[async_trait::async_trait]
impl Bank for Sandbox {
    fn receiving_account(&self) -> Option<Value> {
        Some(receiving_account())
    }

    fn receive(&self, cents: i64) -> Settlement {
        let (outcome, after) = match cents % 100 {
            66 => (WireOutcome::Reject, Duration::ZERO),
            99 => (WireOutcome::Return, WIRE_DELAY),
            13 => (WireOutcome::Settle, WIRE_DELAY),
            _ => (WireOutcome::Settle, Duration::ZERO),
        };
        Settlement { outcome, after }
    }

    fn open_virtual_account(&self, country: &str) -> Opening {
        let outcome = match country {
            "US" => AccountOutcome::Open,
            other => AccountOutcome::Refuse(format!(
                "BANKING_COUNTRY_NOT_SUPPORTED: the bank opens virtual accounts for senders banking in US, not {other}"
            )),
        };
        Some((outcome, ACCOUNT_DELAY))
    }

    async fn pay_out(&self, payout: &Payout) -> Result<PayoutSent, BankError> {
        let (answer, reason) = payout_answer(&payout.account_number);
        Ok(PayoutSent {
            reference: format!("SANDBOX-PAYOUT-{}", payout.key),
            answer: Some((answer, reason.to_string(), PAYOUT_DELAY)),
        })
    }

    fn notification(&self, content_type: &str, body: &[u8]) -> Result<Vec<BankEvent>, BankError> {
        super::statement(content_type, body)
    }
}

/// The sandbox bank's answer to a payout to `account_number` (see the
/// module's table), and why.
pub fn payout_answer(account_number: &str) -> (Answer, &'static str) {
    if account_number.ends_with("9999") {
        (Answer::Returned, "the beneficiary bank returned the payment (sandbox: account number ending 9999)")
    } else if account_number.ends_with("8888") {
        (Answer::Refused, "the bank refused the payout: account closed (sandbox: account number ending 8888)")
    } else {
        (Answer::Paid, "paid")
    }
}

/// The sandbox's receiving bank: fictitious (its routing number passes the
/// ABA checksum and is no bank's), the same in every sandbox.
pub fn receiving_account() -> Value {
    json!({
        "bank_name": "custody-indexer Sandbox Bank (no money moves)",
        "account_holder_name": "custody-indexer sandbox issuer",
        "account_number": "000123456789",
        "routing_number": "123456780",
        "type": "CHECKING",
        "account_owner_type": "BUSINESS",
        "swift_or_bic_number": "SBOXUS33",
        "address": {
            "street_line_1": "1 Sandbox Way",
            "city": "New York",
            "postal_code": "10001",
            "country": "US",
            "region_code": "NY"
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wire_is_decided_by_its_cents() {
        let now = Duration::ZERO;
        for (cents, outcome, after) in [
            (25_000, WireOutcome::Settle, now),
            (25_066, WireOutcome::Reject, now),
            (25_099, WireOutcome::Return, WIRE_DELAY),
            (25_013, WireOutcome::Settle, WIRE_DELAY),
            (66, WireOutcome::Reject, now),
            (106_600, WireOutcome::Settle, now),
        ] {
            assert_eq!(Sandbox.receive(cents), Settlement { outcome, after }, "{cents}");
        }
    }

    #[test]
    fn a_virtual_account_opens_for_us_senders_only() {
        assert_eq!(Sandbox.open_virtual_account("US"), Some((AccountOutcome::Open, ACCOUNT_DELAY)));
        let Some((AccountOutcome::Refuse(reason), after)) = Sandbox.open_virtual_account("MX") else {
            panic!("refused")
        };
        assert!(reason.starts_with("BANKING_COUNTRY_NOT_SUPPORTED") && reason.contains("MX"), "{reason}");
        assert_eq!(after, ACCOUNT_DELAY);
    }

    #[tokio::test]
    async fn a_payout_is_answered_by_the_account_number_under_one_reference_per_key() {
        for (number, answer) in [
            ("000123459999", Answer::Returned),
            ("000123458888", Answer::Refused),
            ("000123456789", Answer::Paid),
            ("9999000", Answer::Paid),
        ] {
            let payout = Payout {
                key: "c-1".into(),
                account_number: number.into(),
                cents: 100,
                currency: "USD".into(),
            };
            let sent = Sandbox.pay_out(&payout).await.unwrap();
            assert_eq!(sent.answer.as_ref().map(|(a, _, after)| (*a, *after)), Some((answer, PAYOUT_DELAY)));
            assert_eq!(sent, Sandbox.pay_out(&payout).await.unwrap(), "the same key, the same payout");
            assert_eq!(sent.reference, "SANDBOX-PAYOUT-c-1");
        }
    }

    #[test]
    fn the_receiving_bank_is_a_valid_bank_account() {
        assert_eq!(crate::issuance::bank::validate("", &receiving_account()), Ok(()));
        assert_eq!(Sandbox.receiving_account(), Some(receiving_account()));
    }
}
