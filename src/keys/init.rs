//! `keys init`: the platform's keys (sponsor, omnibus wallet, settlement
//! wallet, issuer) made where the signer keeps them, for every family of
//! the configured chains, and every one printed with its address. Asked
//! again, it makes nothing: each key is first asked for without making it.
//!
//! An issuer key is never made for a family whose chains list an issued
//! stablecoin: the stablecoin's minter (its mint authority on Solana) was
//! fixed when it was deployed, by a key this signer does not hold, and a
//! new key could never mint it. Such a key is brought in with
//! `keys import-local` instead.

use serde::Serialize;

use super::{KeyError, KeyRef, Signer, describe};
use crate::{
    chain::{Chain, Family},
    config::ChainConfig,
    family::keys::key_address,
};

/// The platform's keys, in the order they are made and printed.
pub const PLATFORM: [(&str, KeyRef); 4] = [
    ("sponsor", KeyRef::Sponsor),
    ("omnibus", KeyRef::Omnibus),
    ("settlement", KeyRef::Settlement),
    ("issuer", KeyRef::Issuer),
];

/// One platform key after `keys init`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyState {
    pub family: &'static str,
    pub role: &'static str,
    /// Its name in the signer (a token's label).
    pub label: String,
    /// Its address; absent when refused.
    pub address: Option<String>,
    /// `exists`, `made` or `refused`.
    pub state: &'static str,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether a missing key may be made: never an issuer key for a family
/// whose chains (`issued`) already list an issued stablecoin, which
/// another key mints. `Err` names the chains.
pub fn may_make(key: KeyRef, issued: &[Chain]) -> Result<(), String> {
    if key != KeyRef::Issuer || issued.is_empty() {
        return Ok(());
    }
    let chains: Vec<String> = issued.iter().map(ToString::to_string).collect();
    Err(format!(
        "{} already issue a stablecoin whose minter is fixed and is not a key of this signer: a new issuer \
         key could never mint it; bring the key that mints it with keys import-local --platform",
        chains.join(", ")
    ))
}

/// Finds or makes the platform's keys for every family of `chains`.
pub fn init(signer: &dyn Signer, chains: &[&ChainConfig]) -> Result<Vec<KeyState>, KeyError> {
    let mut out = Vec::new();
    for family in [Family::Evm, Family::Solana] {
        let of_family: Vec<&&ChainConfig> = chains.iter().filter(|c| c.chain.family() == family).collect();
        if of_family.is_empty() {
            continue;
        }
        let issued: Vec<Chain> =
            of_family.iter().filter(|c| c.assets.iter().any(|a| a.issued)).map(|c| c.chain).collect();
        for (role, key) in PLATFORM {
            let label = describe(key, family);
            let state = |address: Option<String>, state, reason| KeyState {
                family: crate::family::rules::name(family),
                role,
                label: label.clone(),
                address,
                state,
                reason,
            };
            let held = signer.holds(key, family)?;
            if !held && let Err(reason) = may_make(key, &issued) {
                out.push(state(None, "refused", Some(reason)));
                continue;
            }
            let address = key_address(signer, family, key)?;
            out.push(state(Some(address), if held { "exists" } else { "made" }, None));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issuer_key_is_made_only_where_no_stablecoin_is_issued_yet() {
        let some = [Chain::EthereumTestnet];
        for (key, issued, allowed) in [
            (KeyRef::Issuer, &[][..], true),
            (KeyRef::Issuer, &some[..], false),
            (KeyRef::Sponsor, &some[..], true),
            (KeyRef::Omnibus, &some[..], true),
            (KeyRef::Settlement, &some[..], true),
            (KeyRef::Account(2), &some[..], true),
        ] {
            let answer = may_make(key, issued);
            assert_eq!(answer.is_ok(), allowed, "{key:?} {issued:?}");
            if let Err(reason) = answer {
                assert!(
                    reason.contains("ETHEREUM_TESTNET") && reason.contains("keys import-local"),
                    "{reason}"
                );
            }
        }
    }
}
