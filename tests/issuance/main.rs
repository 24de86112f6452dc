//! Issuance: bank accounts and mint instructions over HTTP, the stablecoin
//! deployed, wires minted on anvil and on the local Solana network.
//!
//! One test binary; each module below is one subject.

#[path = "../common/mod.rs"]
mod common;

mod issuance;
mod issuance_deploy;
mod issuance_import;
mod issuance_mint;
mod issuance_mint_solana;
mod issuance_pkcs11;
mod issuance_wires;
