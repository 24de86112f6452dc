//! `keys import-local`: keys derived from the mnemonic moved into a
//! `pkcs11` token, where they are sensitive and never extractable from
//! then on; their addresses do not change. Every copy of the phrase ever
//! made still signs for them, which is why fresh keys made in the token
//! and a sweep of the funds are the stronger path (docs/configuration.md).

use serde::Serialize;

use super::{
    KeyError, KeyRef, MnemonicSigner, Signer, describe, guard::ed25519_verifies, pkcs11::Pkcs11Signer,
};
use crate::{
    chain::{Curve, Family},
    family::{keys::key_address, rules::curve},
};

/// One key after `keys import-local`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Imported {
    pub family: &'static str,
    /// Its label in the token.
    pub label: String,
    pub address: String,
    /// `imported`, or `in the token` when an earlier run imported it.
    pub state: &'static str,
}

/// Moves `key` for `family` from `local` into `token`. `recorded`: the
/// address the store records for the key (an account's), which the
/// mnemonic's key must have. A key already in the token must be the
/// same key; a key put there signs a probe that is checked before the
/// answer, so an import that went wrong is known at once.
pub async fn import(
    local: &MnemonicSigner,
    token: &Pkcs11Signer,
    (key, family): (KeyRef, Family),
    recorded: Option<&str>,
) -> Result<Imported, KeyError> {
    let label = describe(key, family);
    let address = key_address(local, family, key)?;
    if let Some(recorded) = recorded.filter(|r| *r != address) {
        return Err(KeyError::NotTheKey(format!(
            "{label}: the mnemonic's key is {address}, the store records {recorded}: this is not the phrase \
             that made it"
        )));
    }
    let answer = |state| Imported {
        family: crate::family::rules::name(family),
        label: label.clone(),
        address: address.clone(),
        state,
    };
    if token.holds(key, family)? {
        let held = key_address(token, family, key)?;
        if held != address {
            return Err(KeyError::NotTheKey(format!(
                "{label} in the token is {held}, not the mnemonic's {address}: remove it with the token's tools \
                 only once it holds no funds"
            )));
        }
        // Its private half must sign for the address too (an earlier
        // import that went wrong is not taken for a done one).
        probe(token, key, family, &address).await.map_err(|_| {
            KeyError::NotTheKey(format!(
                "{label} in the token does not sign for {address}: remove it with the token's tools and import again"
            ))
        })?;
        return Ok(answer("in the token"));
    }
    let (secret, public) = local.key_pair(key, family)?;
    token.import(key, family, secret, public)?;
    let signs = match key_address(token, family, key) {
        Ok(held) if held == address => probe(token, key, family, &address).await,
        Ok(held) => Err(KeyError::NotTheKey(format!("{label}: the token answers {held}, not {address}"))),
        Err(error) => Err(error),
    };
    if let Err(error) = signs {
        // Never leave a pair that does not sign for its address.
        token.remove(key, family)?;
        return Err(error);
    }
    Ok(answer("imported"))
}

/// A signature by the token's key, checked against `address`.
async fn probe(token: &Pkcs11Signer, key: KeyRef, family: Family, address: &str) -> Result<(), KeyError> {
    let bad = || KeyError::BadSignature(describe(key, family));
    match curve(family) {
        Curve::Secp256k1 => {
            let hash = alloy::primitives::keccak256(b"custody-indexer keys import-local");
            // The token's answer is only accepted when it recovers the
            // key's address (see `pkcs11::evm_signature`).
            let signature = token.sign_evm_hash(key, hash).await?;
            let found = signature.recover_address_from_prehash(&hash).map_err(|_| bad())?;
            if found.to_checksum(None) != address {
                return Err(bad());
            }
        }
        Curve::Ed25519 => {
            let message = b"custody-indexer keys import-local".to_vec();
            let signature = token.sign_solana(key, message.clone()).await?;
            if !ed25519_verifies(address, &message, &signature) {
                return Err(bad());
            }
        }
    }
    Ok(())
}
