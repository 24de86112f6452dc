//! Events: the outbox the store writes with every state change, signed
//! webhook deliveries with retries, the Standard Webhooks signatures
//! receivers verify, and the NATS JetStream sink.

pub mod claims;
pub mod delivery;
pub mod nats;
pub mod outbox;
pub mod schedule;
pub mod signing;
pub mod slots;
pub mod subject;
pub mod url;

use chrono::{DateTime, Utc};
use serde_json::Value;

/// The event type of a deposit's state change.
pub const DEPOSIT_V2: &str = "deposit_v2";

/// An event as stored: its envelope `{ "id", "type", "data" }`, exactly the
/// body a webhook receives.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Position in commit order.
    pub seq: u64,
    pub envelope: Value,
    pub created_at: DateTime<Utc>,
}

impl Event {
    pub fn id(&self) -> &str {
        self.envelope["id"].as_str().unwrap_or_default()
    }
}
