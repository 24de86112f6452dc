//! Conversions: value moving between dollars and stablecoins.
//!
//! An identity opens **virtual accounts**: bank account numbers of its own
//! whose incoming wires become `ON_RAMP` conversions, the dollars delivered
//! as the virtual account's stablecoin to one of the identity's accounts
//! ([`on_ramp`]: through the issuance wing's mint, sent by the chain's
//! sender). Every conversion moves through the reference's state table
//! ([`state`]), each change persisted with its
//! `conversion_notification_update` event in one transaction. What happens
//! when a wire arrives at a virtual account: [`on_ramp::record_wire`]
//! records it with its conversion and mint, the issuance worker settles the
//! mint, the chain's sender mints, and [`worker`] walks the conversion
//! behind the mint until our watcher sees the delivery `CONFIRMED`.

pub mod answers;
pub mod off_ramp;
pub mod on_ramp;
pub mod payout;
pub mod quote;
pub mod resource;
pub mod state;
pub mod virtual_account;
mod worker;

pub use resource::{
    CONVERSION_NOTIFICATION_UPDATE, Conversion, DepositInstructions, VirtualAccount, VirtualAccountStatus,
};
pub use worker::{follow, follow_once, start_refunds};

/// How conversions are priced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The on-ramp fee, in basis points of the wire (0 to
    /// [`on_ramp::MAX_FEE_BPS`]): the stablecoin delivered is the wire less
    /// this fee.
    pub on_ramp_fee_bps: u32,
    /// The off-ramp fee, in basis points of the stablecoin, bound to each quote.
    pub off_ramp_fee_bps: u32,
    /// How far below the mid rate quotes price, in basis points.
    pub spread_bps: u32,
    /// The rates quotes use: `None` in `sandbox` is [`quote::SANDBOX_RATES`];
    /// `None` in `production` prices nothing.
    pub rates: Option<quote::Table>,
    /// How long a quote may be used.
    pub quote_ttl: std::time::Duration,
}

/// How long a quote may be used unless configured.
pub const DEFAULT_QUOTE_TTL: std::time::Duration = std::time::Duration::from_secs(60);

impl Default for Settings {
    fn default() -> Self {
        Self {
            on_ramp_fee_bps: 0,
            off_ramp_fee_bps: 0,
            spread_bps: 0,
            rates: None,
            quote_ttl: DEFAULT_QUOTE_TTL,
        }
    }
}
