//! An EVM signature from a token's ECDSA answer: `r‖s` with no recovery id
//! and possibly a high `s`.

use alloy::primitives::{Address, B256, Signature, U256};

use crate::keys::KeyError;

/// secp256k1's group order.
const ORDER: U256 = U256::from_be_bytes([
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xba,
    0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
]);

/// The EVM signature of `hash` by `address` from a token's `r‖s`: `s` in
/// the lower half of the order (as Ethereum requires), and the recovery
/// id that recovers `address`.
pub fn evm_signature(raw: &[u8], hash: B256, address: Address) -> Result<Signature, KeyError> {
    let bad = || KeyError::BadSignature("the token's ECDSA signature is not 64 bytes of r and s".into());
    let (r, s) = (raw.get(..32).ok_or_else(bad)?, raw.get(32..64).ok_or_else(bad)?);
    if raw.len() != 64 {
        return Err(bad());
    }
    let (r, mut s) = (U256::from_be_slice(r), U256::from_be_slice(s));
    if s > ORDER >> 1 {
        s = ORDER - s;
    }
    [false, true]
        .into_iter()
        .map(|parity| Signature::new(r, s, parity))
        .find(|signature| signature.recover_address_from_prehash(&hash).is_ok_and(|found| found == address))
        .ok_or_else(|| KeyError::BadSignature("the token's signature recovers another key".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::signers::{SignerSync, local::PrivateKeySigner};

    #[test]
    fn a_high_s_signature_is_brought_low_and_its_recovery_id_found() {
        let key = PrivateKeySigner::random();
        for n in 0u8..8 {
            let hash = B256::repeat_byte(n + 1);
            let signature = key.sign_hash_sync(&hash).unwrap();
            let (r, s) = (signature.r(), signature.s());
            // A token may answer either s; both give the low-s signature.
            for s in [s, ORDER - s] {
                let raw = [r.to_be_bytes::<32>(), s.to_be_bytes::<32>()].concat();
                let found = evm_signature(&raw, hash, key.address()).unwrap();
                assert_eq!(found, signature, "{n}");
                assert!(found.s() <= ORDER >> 1);
            }
            let other = PrivateKeySigner::random().address();
            let raw = [r.to_be_bytes::<32>(), s.to_be_bytes::<32>()].concat();
            assert!(evm_signature(&raw, hash, other).is_err(), "another key's address");
        }
        assert!(evm_signature(&[0u8; 63], B256::ZERO, Address::ZERO).is_err());
    }
}
