//! Conversions: virtual accounts, on-ramps and off-ramps, over HTTP and on a
//! real chain.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod conversions;
mod conversions_off_ramp;
mod conversions_on_ramp;
mod keys_in_a_token;
mod payout_handoff;
