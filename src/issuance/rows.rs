//! What the store reads of mints for issuance's checks: the rows
//! `issuance reconcile` balances ([`MintRow`], see [`super::reconcile`])
//! and the steps it holds against the audit log ([`MintSteps`], see
//! [`super::logged`]). Model types only: the store builds them.

use alloy::primitives::U256;

use super::state::Status;
use crate::chain::Chain;

/// One mint as the books see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MintRow {
    pub id: String,
    pub chain: Chain,
    pub symbol: String,
    pub cents: i64,
    /// Of `cents`, those kept as a fee once minted (an on-ramp's).
    pub fee_cents: i64,
    pub status: Status,
    /// Its dollars are owed back (or were returned).
    pub fiat_owed: bool,
    /// What its transaction minted, once confirmed on chain (smallest unit).
    pub minted: Option<U256>,
    /// What its transaction carries while being sent.
    pub sending: Option<U256>,
}

/// A mint's steps as its row records them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MintSteps {
    pub id: String,
    pub chain: Chain,
    pub symbol: String,
    pub status: Status,
    pub recorded_by: Option<String>,
    pub approved_by: Option<String>,
    /// The on-ramp conversion whose wire the mint delivers, if any: its
    /// wire's recording is that conversion's `conversion.wire_recorded`.
    pub conversion: Option<String>,
}
