//! Whether a chain's gas sponsor can pay: a sponsor without funds leaves
//! every sponsored transfer of the chain waiting (or failing), so the
//! sender says so, once a minute in the log and as a condition `health`
//! shows, naming the chain and the sponsor's address (never a key).
//!
//! An unfunded sponsor leaves the chain healthy: `health` and `/readyz`
//! judge whether deposits are indexed and the API can answer, which an
//! empty sponsor does not change; a `503` would take the API (deposits,
//! balances, transfer status) out of a load balancer for every tenant over
//! one wallet an operator must top up. It is a warning of the report.

use std::time::{Duration, Instant};

use alloy::primitives::U256;
use tracing::debug;

use super::Sender;
use crate::{alarm::Alarms, store::Store};

/// The condition's kind in the store.
pub const KIND: &str = "sponsor_unfunded";

/// The least time between two balance reads while transfers wait (or the
/// sponsor lacks funds), and while none does: a segregated account's every
/// transfer needs the sponsor, so it is checked from the start, not only
/// once a transfer waits on it.
const CHECK_BUSY: Duration = Duration::from_secs(5);
const CHECK_IDLE: Duration = Duration::from_secs(60);

/// The sponsor's balance against what the cheapest transaction it sends
/// costs today, in the chain's smallest unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Funds {
    pub sponsor: String,
    pub balance: U256,
    pub need: U256,
    /// `wei` or `lamports`.
    pub unit: &'static str,
}

/// One sender's watch over its sponsor.
#[derive(Debug, Default)]
pub(super) struct SponsorWatch {
    alarms: Alarms,
    raised: Option<String>,
    checked: Option<Instant>,
    /// Whether a balance was read yet.
    read: bool,
}

impl SponsorWatch {
    /// Reads the sponsor's balance unless it was read a moment ago (see
    /// [`CHECK_BUSY`]), then raises or clears the condition. A balance that
    /// cannot be read decides nothing.
    pub async fn check(&mut self, sender: &impl Sender, store: &Store, transfers_wait: bool) {
        let every = if transfers_wait || self.raised.is_some() { CHECK_BUSY } else { CHECK_IDLE };
        if self.checked.is_some_and(|at| at.elapsed() < every) {
            return;
        }
        self.checked = Some(Instant::now());
        let chain = sender.config().chain;
        let funds = match sender.sponsor_funds().await {
            Ok(funds) => funds,
            Err(error) => return debug!(%chain, %error, "cannot read the gas sponsor's balance"),
        };
        // A condition an earlier holder of the sender left is this one's to
        // clear, on its first balance that could be read.
        let first = !std::mem::replace(&mut self.read, true);
        let key = format!("{chain} gas sponsor {}", funds.sponsor);
        let result = if funds.balance < funds.need {
            let message = format!(
                "{chain}: the gas sponsor {} holds {} {unit}, less than the {} {unit} one sponsored transaction costs now; sponsored transfers wait: fund it",
                funds.sponsor,
                funds.balance,
                funds.need,
                unit = funds.unit
            );
            self.raised = Some(funds.sponsor.clone());
            if !self.alarms.raise(&key, KIND, &message).logged() {
                return;
            }
            crate::conditions::raise(store, Some(chain), KIND, &funds.sponsor, &message).await
        } else {
            if self.raised.take().is_none() && !first {
                return;
            }
            self.alarms.clear(&key, &format!("{chain}: the gas sponsor {} is funded", funds.sponsor));
            crate::conditions::clear(store, Some(chain), KIND, &funds.sponsor).await
        };
        if let Err(error) = result {
            debug!(%chain, %error, "cannot record the gas sponsor's condition");
        }
    }
}
