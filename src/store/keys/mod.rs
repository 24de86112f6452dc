//! The keys' rows: account keys reserved, the platform's keys recorded, the
//! signer's outages, API keys re-hashed under the pepper.

pub(crate) mod account_keys;
pub mod key_hashes;
pub(in crate::store) mod platform_keys;
pub(crate) mod signer_outages;
