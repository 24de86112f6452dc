//! The conversions' bank: it opens virtual accounts and pays off-ramps
//! out. In `sandbox`, [`Sandbox`] decides from the senders' banking country
//! and the payee's account number (see [`off_ramp::sandbox_answer`]), so a
//! client's test suite can provoke each outcome:
//!
//! | `source.banking_country` | outcome |
//! |---|---|
//! | `US` | opened [`SANDBOX_DELAY`] after it was asked for: `VIRTUAL_ACCOUNT_STATUS_ACTIVE` |
//! | any other | refused [`SANDBOX_DELAY`] later: `VIRTUAL_ACCOUNT_STATUS_FAILED` |
//!
//! In `production` a virtual account stays `PENDING`, and a payout
//! `PAYOUT_INITIATED`, until an operator records what the bank answered.

use std::time::Duration;

use serde_json::Value;

use super::{
    off_ramp::{self, Answer},
    resource::DepositInstructions,
};

/// How long the sandbox bank takes to open (or refuse) a virtual account.
pub const SANDBOX_DELAY: Duration = Duration::from_secs(1);

/// What the bank does with a virtual account asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Open,
    /// Refused, and why.
    Refuse(String),
}

/// A virtual account's fate: what the bank answers and how long after it
/// was asked for; `None` when a person decides (`production`).
pub type Opening = Option<(Outcome, Duration)>;

/// The bank opening virtual accounts and paying off-ramps out.
pub trait Bank: Send + Sync {
    /// What happens to a virtual account for senders banking in `country`.
    fn open(&self, country: &str) -> Opening;
    /// What the bank will answer a payout to `account_number`, and why;
    /// `None` when a person records it (`production`).
    fn payout(&self, account_number: &str) -> Option<(Answer, String)>;
}

/// `sandbox`: by the banking country (see the module's table).
pub struct Sandbox;

impl Bank for Sandbox {
    fn open(&self, country: &str) -> Opening {
        let outcome = match country {
            "US" => Outcome::Open,
            other => Outcome::Refuse(format!(
                "BANKING_COUNTRY_NOT_SUPPORTED: the bank opens virtual accounts for senders banking in US, not {other}"
            )),
        };
        Some((outcome, SANDBOX_DELAY))
    }

    fn payout(&self, account_number: &str) -> Option<(Answer, String)> {
        let (answer, reason) = off_ramp::sandbox_answer(account_number);
        Some((answer, reason.to_string()))
    }
}

/// `production`: an operator records the bank's answer.
pub struct Operators;

impl Bank for Operators {
    fn open(&self, _country: &str) -> Opening {
        None
    }

    fn payout(&self, _account_number: &str) -> Option<(Answer, String)> {
        None
    }
}

/// Whether `text` is an ISO 3166-1 alpha-2 code's shape: two capitals.
pub fn is_country(text: &str) -> bool {
    text.len() == 2 && text.bytes().all(|b| b.is_ascii_uppercase())
}

/// A virtual account's bank account number: 12 digits, the first `8`.
pub fn new_account_number() -> String {
    let mut bytes = [0u8; 11];
    getrandom::fill(&mut bytes).expect("a random source");
    let digits: String = bytes.iter().map(|b| char::from(b'0' + b % 10)).collect();
    format!("8{digits}")
}

/// A virtual account's `deposit_message`: `VA` and 10 characters of
/// Crockford's base 32, as a mint instruction's memo.
pub fn new_deposit_message() -> String {
    format!("VA{}", &crate::issuance::new_memo_id()[crate::issuance::MEMO_PREFIX.len()..])
}

/// The deposit instructions of a virtual account at `bank` (a Bank account
/// details object: the platform's receiving bank), under its own account
/// number and message.
pub fn deposit_instructions(bank: &Value, account_number: &str, message: &str) -> DepositInstructions {
    let text = |key: &str| bank[key].as_str().unwrap_or_default().to_string();
    let address = &bank["address"];
    let line = ["street_line_1", "street_line_2", "city", "region_code", "postal_code", "country"]
        .iter()
        .filter_map(|k| address[*k].as_str().filter(|s| !s.is_empty()))
        .collect::<Vec<_>>()
        .join(", ");
    DepositInstructions {
        amount: "0".into(),
        currency: crate::issuance::FIAT_CURRENCY.into(),
        bank_name: text("bank_name"),
        bank_address: line.clone(),
        payment_method: crate::issuance::PAYMENT_RAIL.into(),
        deposit_message: message.into(),
        bank_account_number: account_number.into(),
        bank_routing_number: text("routing_number"),
        bank_beneficiary_name: text("account_holder_name"),
        bank_beneficiary_address: line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_opens_for_us_senders_and_refuses_the_others() {
        assert_eq!(Sandbox.open("US"), Some((Outcome::Open, SANDBOX_DELAY)));
        let Some((Outcome::Refuse(reason), after)) = Sandbox.open("MX") else { panic!("refused") };
        assert!(reason.starts_with("BANKING_COUNTRY_NOT_SUPPORTED") && reason.contains("MX"), "{reason}");
        assert_eq!(after, SANDBOX_DELAY);
        assert_eq!(Operators.open("US"), None);
    }

    #[test]
    fn numbers_and_messages_are_distinct_and_well_formed() {
        let numbers: std::collections::BTreeSet<String> = (0..1000).map(|_| new_account_number()).collect();
        assert_eq!(numbers.len(), 1000);
        assert!(
            numbers
                .iter()
                .all(|n| n.len() == 12 && n.starts_with('8') && n.bytes().all(|b| b.is_ascii_digit()))
        );
        let message = new_deposit_message();
        assert!(message.starts_with("VA") && message.len() == 12, "{message}");
        for (text, ok) in
            [("US", true), ("MX", true), ("us", false), ("USA", false), ("", false), ("U1", false)]
        {
            assert_eq!(is_country(text), ok, "{text}");
        }
    }

    #[test]
    fn deposit_instructions_show_the_receiving_bank_under_the_accounts_own_number() {
        let bank = crate::issuance::receiving::sandbox();
        let instructions = deposit_instructions(&bank, "812345678901", "VA0123456789");
        assert_eq!(instructions.bank_routing_number, "123456780");
        assert_eq!(instructions.bank_account_number, "812345678901");
        assert_eq!(instructions.deposit_message, "VA0123456789");
        assert_eq!(instructions.bank_address, "1 Sandbox Way, New York, NY, 10001, US");
        assert_eq!((instructions.currency.as_str(), instructions.payment_method.as_str()), ("USD", "WIRE"));
    }
}
