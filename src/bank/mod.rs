//! The bank seam: everything the platform asks of a bank, and everything a
//! bank tells it, behind one [`Bank`] trait, shaped as payment connectors
//! are (Hyperswitch's, for one): a call per action the platform takes, and
//! one translation of a partner's notifications into [`BankEvent`]s.
//!
//! | implementation | environment | answers come from |
//! |---|---|---|
//! | [`Sandbox`] | `sandbox` | its tables (see [`sandbox`]): no money moves |
//! | [`Operators`] | `production` | operators' commands, and the bank's `camt.054` files they import |
//!
//! A partner with an API is a file beside these (`bank/<partner>.rs`, its
//! pure message mapping in a `transformers.rs`), as [`camt054`] is for the
//! ISO 20022 credit notification. The wings never name an implementation:
//! the API state holds one `Arc<dyn Bank>`. A bank's file enters through
//! one door, [`crate::bank_import`], which hands each credit to its wing's
//! own door (`issuance::wires::arrive`, `conversions::on_ramp::record_wire`),
//! the doors the sandbox's simulated wires and operators' recorded wires
//! take too.

pub mod answers;
pub mod camt054;
pub mod operators;
pub mod sandbox;

use std::sync::Arc;

pub use answers::{AccountOutcome, Answer, Opening, Settlement, WireOutcome};
pub use operators::Operators;
pub use sandbox::Sandbox;
use serde_json::Value;

use crate::environment::Environment;

/// A payout the platform asks the bank to make: dollars to a client's bank
/// account, at most once per [`Payout::key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payout {
    /// The idempotency key: the same key asked again is the same payout
    /// (the off-ramp's id).
    pub key: String,
    /// The beneficiary's account number, as registered.
    pub account_number: String,
    /// What is paid, in the smallest unit of `currency`.
    pub cents: i64,
    pub currency: String,
}

/// The bank took a payout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutSent {
    /// The partner's reference of the payout: the same for the same key.
    pub reference: String,
    /// The answer the bank has already given, and how long after the
    /// hand-off it arrives (the sandbox's); `None` when it comes later
    /// as an event (a partner's notification, an operator's command).
    pub answer: Option<(Answer, String, std::time::Duration)>,
}

/// A credit to one of the platform's accounts, as the bank reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credit {
    /// The bank's reference of the entry: unique per credit.
    pub reference: String,
    /// In the smallest unit of `currency`.
    pub cents: i64,
    pub currency: String,
    /// The remittance information the sender gave (a memo, a deposit
    /// message), as free text.
    pub remittance: String,
    /// The platform's account credited, when the bank names it.
    pub account: Option<String>,
}

impl Credit {
    /// The words of the remittance information a reference may be: split
    /// at whitespace and punctuation other than `-`, then the whole text
    /// without its spaces (a memo typed in groups).
    pub fn words(&self) -> impl Iterator<Item = String> + '_ {
        let split = self.remittance.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'));
        let whole: String = self.remittance.chars().filter(|c| !c.is_whitespace()).collect();
        split.filter(|w| !w.is_empty()).map(str::to_string).chain(std::iter::once(whole))
    }
}

/// What a credit's remittance information names of one kind of reference
/// (a memo, a deposit message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Nothing,
    One(String),
    /// Two of the different ones it names: an operator's to match.
    Several(String, String),
}

impl Credit {
    /// The references that `read` finds among the [`Credit::words`].
    pub fn find(&self, read: impl Fn(&str) -> Option<String>) -> Found {
        let found: std::collections::BTreeSet<String> = self.words().filter_map(|w| read(&w)).collect();
        let mut found = found.into_iter();
        match (found.next(), found.next()) {
            (None, _) => Found::Nothing,
            (Some(one), None) => Found::One(one),
            (Some(one), Some(other)) => Found::Several(one, other),
        }
    }
}

/// A credit an import left out, as the operator API and the command line
/// show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Unmatched {
    pub reference: String,
    /// In the major unit of `currency` (`"250.00"`).
    pub amount: String,
    pub currency: String,
    pub remittance: String,
    /// Why it was left out.
    pub reason: String,
}

impl Unmatched {
    pub fn of((credit, why): &(Credit, String)) -> Self {
        Unmatched {
            reference: credit.reference.clone(),
            amount: crate::amount::Cents(credit.cents).to_string(),
            currency: credit.currency.clone(),
            remittance: credit.remittance.clone(),
            reason: why.clone(),
        }
    }
}

/// The credits a camt.054 document (`body`) notifies, as the operators'
/// bank reads a notification.
pub fn camt054_credits(body: &[u8]) -> Result<Vec<Credit>, BankError> {
    Ok(Operators::default()
        .notification("application/xml", body)?
        .into_iter()
        .map(|event| match event {
            BankEvent::WireArrived(credit) => credit,
        })
        .collect())
}

/// Something a bank tells the platform of its own accord: what the
/// banks the platform reads produce (a `camt.054` notification holds
/// credits only). A bank's answers to what the platform asked (a payout's
/// fate, a virtual account opened) come back from the call itself
/// ([`PayoutSent::answer`], [`Bank::open_virtual_account`]) or, in
/// `production`, from operators' commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BankEvent {
    /// Dollars arrived at one of the platform's accounts.
    WireArrived(Credit),
}

/// Why the bank could not do or read something.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum BankError {
    /// The bank did not answer, or answered that it cannot now: the same
    /// call may succeed later.
    #[error("the bank is unavailable: {0}")]
    Unavailable(String),
    /// What the bank sent cannot be read, or what was asked cannot be
    /// done: asking again changes nothing. After a payout was asked for,
    /// whether the bank took it is then unknown.
    #[error("{0}")]
    Invalid(String),
    /// The bank refused the payout before sending anything: nothing was
    /// paid.
    #[error("{0}")]
    Refused(String),
}

impl BankError {
    /// Whether the same call may succeed later.
    pub fn retryable(&self) -> bool {
        matches!(self, BankError::Unavailable(_))
    }
}

/// The platform's bank.
#[async_trait::async_trait]
pub trait Bank: Send + Sync {
    /// The account clients wire dollars to for mints, as mint instructions
    /// show it (a Bank account details object); `None` when none is set.
    fn receiving_account(&self) -> Option<Value>;

    /// What happens to a wire of `cents` that arrived: settled, rejected
    /// or returned, and how long after its arrival.
    fn receive(&self, cents: i64) -> Settlement;

    /// What the bank will answer a virtual account asked for senders
    /// banking in `country`, and when; `None` when the answer comes later
    /// as an event.
    fn open_virtual_account(&self, country: &str) -> Opening;

    /// Hands `payout` to the bank, once per key: asked again with the same
    /// key, the bank answers the same reference and pays nothing twice.
    async fn pay_out(&self, payout: &Payout) -> Result<PayoutSent, BankError>;

    /// The events a notification from the bank carries (its `Content-Type`
    /// and body).
    fn notification(&self, content_type: &str, body: &[u8]) -> Result<Vec<BankEvent>, BankError>;
}

/// The bank of `environment`: the sandbox's, or production's operators
/// with `receiving`, the receiving bank they configured (a sandbox shows
/// only its own, never real wiring instructions).
pub fn for_environment(environment: Environment, receiving: Option<Value>) -> Arc<dyn Bank> {
    match environment {
        Environment::Sandbox => Arc::new(Sandbox),
        Environment::Production => Arc::new(Operators::new(receiving)),
    }
}

/// The events of a bank statement both banks read: a `camt.054` document.
fn statement(content_type: &str, body: &[u8]) -> Result<Vec<BankEvent>, BankError> {
    if !content_type.is_empty() && !content_type.contains("xml") {
        return Err(BankError::Invalid(format!(
            "a bank notification is a camt.054 XML document, not {content_type}"
        )));
    }
    let credits = camt054::credits(body).map_err(|e| BankError::Invalid(e.to_string()))?;
    Ok(credits.into_iter().map(BankEvent::WireArrived).collect())
}
