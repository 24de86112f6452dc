//! The token's key objects: found by label, made in the token, or
//! imported into it; never extractable once there.

use cryptoki::{
    mechanism::Mechanism,
    object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle},
    session::Session,
};

use super::{ED25519, SECP256K1, token_error};
use crate::{
    chain::{Curve, Family},
    family::rules::curve,
    keys::KeyError,
};

/// The key pair labelled `label`: found, or made in the token.
pub fn find_or_make(
    session: &Session,
    label: &str,
    family: Family,
) -> Result<(ObjectHandle, Vec<u8>), KeyError> {
    if let Some(found) = find(session, label, family)? {
        return Ok(found);
    }
    let (mechanism, params) = match curve(family) {
        Curve::Secp256k1 => (Mechanism::EccKeyPairGen, SECP256K1.to_vec()),
        Curve::Ed25519 => (Mechanism::EccEdwardsKeyPairGen, ED25519.to_vec()),
    };
    let public = [
        Attribute::Token(true),
        Attribute::Private(false),
        Attribute::Verify(true),
        Attribute::EcParams(params),
        Attribute::Label(label.as_bytes().to_vec()),
        Attribute::Id(label.as_bytes().to_vec()),
    ];
    let (public, private) = session
        .generate_key_pair(&mechanism, &public, &private_template(label))
        .map_err(token_error("the token makes no key"))?;
    tracing::info!(%label, "signer: key made in the token");
    Ok((private, point(session, public, label, family)?))
}

/// The key pair labelled `label`, if the token holds it: its private half
/// and its public point. Two keys under one label (two processes that made
/// it at once) are never chosen between: each might sign for another
/// address.
pub fn find(
    session: &Session,
    label: &str,
    family: Family,
) -> Result<Option<(ObjectHandle, Vec<u8>)>, KeyError> {
    let of = |class| vec![Attribute::Class(class), Attribute::Label(label.as_bytes().to_vec())];
    let private = session.find_objects(&of(ObjectClass::PRIVATE_KEY)).map_err(token_error("find"))?;
    let public = session.find_objects(&of(ObjectClass::PUBLIC_KEY)).map_err(token_error("find"))?;
    if private.len() > 1 || public.len() > 1 {
        return Err(KeyError::Token(format!(
            "{label} names {} private and {} public keys: keep the one whose address holds funds, \
             remove the others with the token's tools",
            private.len(),
            public.len()
        )));
    }
    match (private.first(), public.first()) {
        (Some(private), Some(public)) => Ok(Some((*private, point(session, *public, label, family)?))),
        (None, None) => Ok(None),
        _ => Err(KeyError::Token(format!(
            "{label} has one half of a key pair only: remove it with the token's tools, or restore the other"
        ))),
    }
}

/// A private key's attributes: in the token, never readable or
/// extractable, for signing alone (no decryption, unwrapping or
/// derivation, which a token may otherwise allow an imported key).
fn private_template(label: &str) -> Vec<Attribute> {
    vec![
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Sign(true),
        Attribute::Decrypt(false),
        Attribute::Unwrap(false),
        Attribute::Derive(false),
        Attribute::Label(label.as_bytes().to_vec()),
        Attribute::Id(label.as_bytes().to_vec()),
    ]
}

/// The public point of key object `public`, without its DER wrapping.
fn point(session: &Session, public: ObjectHandle, label: &str, family: Family) -> Result<Vec<u8>, KeyError> {
    let point = session.get_attributes(public, &[AttributeType::EcPoint]).map_err(token_error("read"))?;
    let point = point
        .into_iter()
        .find_map(|attribute| match attribute {
            Attribute::EcPoint(point) => Some(point),
            _ => None,
        })
        .ok_or_else(|| KeyError::Token(format!("{label} has no public point")))?;
    let size = match curve(family) {
        Curve::Secp256k1 => 65,
        Curve::Ed25519 => 32,
    };
    Ok(unwrap_octets(point, size))
}

/// Removes every object under `label` (a pair whose import went wrong).
pub fn destroy(session: &Session, label: &str) -> Result<(), KeyError> {
    let objects =
        session.find_objects(&[Attribute::Label(label.as_bytes().to_vec())]).map_err(token_error("find"))?;
    for object in objects {
        session.destroy_object(object).map_err(token_error("the token keeps an object"))?;
    }
    tracing::warn!(%label, "signer: an imported key that does not sign was removed from the token");
    Ok(())
}

/// Puts a key pair into the token under `label`: `secret` (a secp256k1
/// scalar or an Ed25519 seed) as a private key that is sensitive and never
/// extractable from then on, `public` (the uncompressed secp256k1 point, or
/// Ed25519's 32 bytes) beside it. Refused when the label is taken.
pub fn import(
    session: &Session,
    label: &str,
    family: Family,
    secret: &[u8; 32],
    public: &[u8],
) -> Result<(), KeyError> {
    if find(session, label, family)?.is_some() {
        return Err(KeyError::Token(format!("{label} is already in the token")));
    }
    let (key_type, params) = match curve(family) {
        Curve::Secp256k1 => (KeyType::EC, SECP256K1.to_vec()),
        Curve::Ed25519 => (KeyType::EC_EDWARDS, ED25519.to_vec()),
    };
    let common = |class| {
        vec![Attribute::Class(class), Attribute::KeyType(key_type), Attribute::EcParams(params.clone())]
    };
    let mut private = common(ObjectClass::PRIVATE_KEY);
    private.extend(private_template(label));
    // The value is copied into the token's own buffers; this template's
    // copy is overwritten once it is created.
    private.push(Attribute::Value(secret.to_vec()));
    let made = session.create_object(&private);
    if let Some(Attribute::Value(value)) = private.last_mut() {
        zeroize::Zeroize::zeroize(value);
    }
    let private = made.map_err(token_error("the token takes no private key"))?;
    let mut wrapped = vec![0x04, public.len() as u8];
    wrapped.extend_from_slice(public);
    let mut public = common(ObjectClass::PUBLIC_KEY);
    public.extend([
        Attribute::Token(true),
        Attribute::Private(false),
        Attribute::Verify(true),
        Attribute::EcPoint(wrapped),
        Attribute::Label(label.as_bytes().to_vec()),
        Attribute::Id(label.as_bytes().to_vec()),
    ]);
    if let Err(error) = session.create_object(&public) {
        // Never half a pair under the label.
        let _ = session.destroy_object(private);
        return Err(token_error("the token takes no public key")(error));
    }
    tracing::info!(%label, "signer: key imported into the token");
    Ok(())
}

/// A `CKA_EC_POINT` of `size` bytes, without its DER OCTET STRING wrapping
/// when it has one (PKCS#11 asks for the wrapping; some tokens answer the
/// raw point).
pub fn unwrap_octets(point: Vec<u8>, size: usize) -> Vec<u8> {
    match point.as_slice() {
        [0x04, len, rest @ ..] if point.len() == size + 2 && usize::from(*len) == size => rest.to_vec(),
        _ => point,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_read_with_or_without_its_der_wrapping() {
        for first in [0x00u8, 63, 65] {
            let mut raw = [0x04u8; 65].to_vec();
            raw[1] = first;
            assert_eq!(unwrap_octets([&[0x04, 65][..], &raw].concat(), 65), raw);
            assert_eq!(unwrap_octets(raw.clone(), 65), raw, "a raw point starting 04 {first}");
        }
        let ed = [7u8; 32].to_vec();
        assert_eq!(unwrap_octets([&[0x04, 32][..], &ed].concat(), 32), ed);
        assert_eq!(unwrap_octets(ed.clone(), 32), ed);
    }
}
