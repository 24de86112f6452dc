//! Pure rules of where a service's keys may live.

use super::{Backend, KeyError, MNEMONIC_ENV, MNEMONIC_FILE_ENV};
use crate::environment::Environment;

/// The environment variable that lets a production service sign with keys
/// its host can read (a mnemonic, a software token such as SoftHSM).
pub const ALLOW_LOCAL_KEYS_ENV: &str = "CUSTODY_INDEXER_ALLOW_LOCAL_KEYS";

/// The kind of the condition a production service signing with such keys
/// raises: `health` warns of it and `/metrics` has
/// `custody_indexer_local_keys 1`.
pub const LOCAL_KEYS: &str = "local_keys";

/// The kind of the condition a service whose keys are in a PKCS#11 token
/// attested as hardware records: `health` shows its line
/// (`keys: pkcs11 (attested hardware)`), never as a warning.
pub const KEYS_ATTESTED: &str = "keys_attested";

/// What `health` shows of keys in a token the operator attested.
pub const ATTESTED_LINE: &str = "keys: pkcs11 (attested hardware)";

/// Whether a PKCS#11 module counts as hardware: only on the operator's
/// attestation (`CUSTODY_INDEXER_PKCS11_HARDWARE=true`, or the issuer's
/// `CUSTODY_INDEXER_ISSUER_PKCS11_HARDWARE=true`), and never SoftHSM, a
/// library file on the host whatever the attestation says. A module's own
/// description is not believed: any library can call itself an HSM.
pub fn counts_as_hardware(attested: bool, softhsm: bool) -> bool {
    attested && !softhsm
}

/// The line `health` shows when `backend`'s keys are in tokens attested
/// as hardware and none is one the host can read.
pub fn attested(backend: &Backend) -> Option<&'static str> {
    if host_readable(backend).is_some() {
        return None;
    }
    let hardware = |b: &&Backend| matches!(b, Backend::Pkcs11 { hardware: true, .. });
    backend.parts().iter().any(hardware).then_some(ATTESTED_LINE)
}

/// Whether `CUSTODY_INDEXER_ALLOW_LOCAL_KEYS` is `true`.
pub fn local_keys_allowed_by_env() -> bool {
    std::env::var(ALLOW_LOCAL_KEYS_ENV).is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The keys of `backend` as the warning names them, when the host can
/// read them: `local mnemonic`, `software token`.
pub fn host_readable(backend: &Backend) -> Option<&'static str> {
    match backend {
        Backend::Local => Some("local mnemonic"),
        Backend::Pkcs11 { hardware: false, .. } => Some("software token"),
        Backend::Pkcs11 { hardware: true, .. } | Backend::VaultTransit { .. } | Backend::AwsKms => None,
        Backend::Split { .. } => backend.parts().into_iter().find_map(host_readable),
    }
}

/// Whether a service in `environment` may sign with `backend`'s keys:
/// a production one only with keys no host can read, or with `allowed`
/// (the override), when it answers the warning `keys: …` to show. Other
/// environments (sandbox, dev) keep the mnemonic without a word.
pub fn may_sign_with(
    environment: Environment,
    backend: &Backend,
    allowed: bool,
) -> Result<Option<String>, KeyError> {
    let Some(readable) = host_readable(backend) else { return Ok(None) };
    match (environment, allowed) {
        (Environment::Production, false) => Err(KeyError::LocalKeys(readable)),
        (Environment::Production, true) => Ok(Some(format!("keys: {readable}"))),
        _ => Ok(None),
    }
}

/// The refusal's text: what is wrong, and both ways out.
pub fn refusal(readable: &str) -> String {
    format!(
        "production signs with keys in an HSM or a KMS, and these are a {readable} this host can read \
         ({MNEMONIC_ENV}, {MNEMONIC_FILE_ENV}, SoftHSM, or a PKCS#11 module without {HARDWARE_ENV}=true): \
         configure CUSTODY_INDEXER_SIGNER=pkcs11 with a hardware token and attest it with {HARDWARE_ENV}=true \
         (CUSTODY_INDEXER_ISSUER_PKCS11_HARDWARE=true for the issuer's own), or set {ALLOW_LOCAL_KEYS_ENV}=true \
         to run with them anyway"
    )
}

/// The variable of the service's token's attestation.
const HARDWARE_ENV: &str = "CUSTODY_INDEXER_PKCS11_HARDWARE";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_signs_with_keys_no_host_can_read_unless_told_otherwise() {
        let hsm = Backend::Pkcs11 { token: "custody".into(), hardware: true };
        let soft = Backend::Pkcs11 { token: "custody".into(), hardware: false };
        let (production, sandbox) = (Environment::Production, Environment::Sandbox);
        let split = |main: &Backend, issuer: &Backend| Backend::Split {
            main: Box::new(main.clone()),
            issuer: Box::new(issuer.clone()),
        };
        let (hsm_soft_issuer, hsm_both) = (split(&hsm, &soft), split(&hsm, &hsm));
        for (environment, backend, allowed, answer) in [
            (production, &Backend::Local, false, Err("local mnemonic")),
            (production, &soft, false, Err("software token")),
            (production, &Backend::Local, true, Ok(Some("keys: local mnemonic"))),
            (production, &soft, true, Ok(Some("keys: software token"))),
            (production, &hsm, false, Ok(None)),
            (production, &hsm, true, Ok(None)),
            (sandbox, &Backend::Local, false, Ok(None)),
            (sandbox, &soft, false, Ok(None)),
            (production, &hsm_soft_issuer, false, Err("software token")),
            (production, &hsm_both, false, Ok(None)),
        ] {
            let found = may_sign_with(environment, backend, allowed);
            match (found, answer) {
                (Ok(warning), Ok(expected)) => {
                    assert_eq!(warning.as_deref(), expected, "{environment} {backend} {allowed}")
                }
                (Err(KeyError::LocalKeys(readable)), Err(expected)) => assert_eq!(readable, expected),
                (found, expected) => panic!("{environment} {backend} {allowed}: {found:?}, not {expected:?}"),
            }
        }
        let text = KeyError::LocalKeys("local mnemonic").to_string();
        for name in [MNEMONIC_ENV, MNEMONIC_FILE_ENV, ALLOW_LOCAL_KEYS_ENV, HARDWARE_ENV] {
            assert!(text.contains(name), "{text}");
        }
    }

    #[test]
    fn a_token_is_hardware_only_on_the_operators_attestation_and_never_softhsm() {
        for (attested, softhsm, hardware) in
            [(false, false, false), (false, true, false), (true, true, false), (true, false, true)]
        {
            assert_eq!(
                counts_as_hardware(attested, softhsm),
                hardware,
                "attested {attested}, SoftHSM {softhsm}"
            );
        }
        let token = |hardware| Backend::Pkcs11 { token: "custody".into(), hardware };
        let split = |main: Backend, issuer: Backend| Backend::Split {
            main: Box::new(main),
            issuer: Box::new(issuer),
        };
        let transit = Backend::VaultTransit { mount: "transit".into() };
        let cases: [(&str, Backend, Option<&str>); 7] = [
            ("attested", token(true), Some(ATTESTED_LINE)),
            ("not attested: a software token", token(false), None),
            ("the mnemonic", Backend::Local, None),
            ("a KMS", Backend::AwsKms, None),
            ("both tokens attested", split(token(true), token(true)), Some(ATTESTED_LINE)),
            ("the issuer's not attested: its warning instead", split(token(true), token(false)), None),
            ("an attested issuer beside Transit", split(transit, token(true)), Some(ATTESTED_LINE)),
        ];
        for (what, backend, line) in cases {
            assert_eq!(attested(&backend), line, "{what}");
        }
        // Production refuses a token not attested, as it refuses SoftHSM.
        let refused = may_sign_with(Environment::Production, &token(false), false);
        assert!(matches!(refused, Err(KeyError::LocalKeys("software token"))), "{refused:?}");
        let shown = may_sign_with(Environment::Production, &token(false), true).unwrap();
        assert_eq!(shown.as_deref(), Some("keys: software token"));
        assert_eq!(may_sign_with(Environment::Production, &token(true), false).unwrap(), None);
    }
}
