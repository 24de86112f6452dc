//! Second-factor codes for the tests' enrolments and sign-ins.

use std::time::Duration;

use custody_indexer::{people::totp, store::now_micros};

/// A step of the codes, in microseconds.
const STEP: i64 = 30_000_000;

/// What is left of a step before a code is worked out: enough for the
/// request (or a browser's form) to reach the service in the same step.
const MARGIN: i64 = 10_000_000;

/// The code of `secret` a step back: accepted within the one step of skew
/// allowed, and it leaves this step's and the next step's codes unused for
/// a later sign-in. A code a step back is refused once the service's clock
/// is a step further on, so while less than [`MARGIN`] is left of this step
/// it waits for the next one first.
pub async fn a_step_back(secret: &str) -> String {
    let left = STEP - now_micros().rem_euclid(STEP);
    if left < MARGIN {
        tokio::time::sleep(Duration::from_micros((left + 500_000) as u64)).await;
    }
    totp::code(secret, now_micros() - STEP).unwrap()
}
