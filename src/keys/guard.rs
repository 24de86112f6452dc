//! What every backend's signatures pass through before anything may
//! broadcast them: each is verified against the key's own public key (an
//! EVM signature must recover the key's address, an Ed25519 one verify
//! for its public key), and no key but the gas sponsor signs more than
//! `CUSTODY_INDEXER_SIGNER_MAX_PER_MINUTE` times in a minute in this
//! process. A call the backend failed is uncounted, as it most likely
//! signed nothing, but at most that many a minute: a backend that signs and
//! then fails its answer (a timed-out token call, an answer lost on the
//! way) cannot be made to sign without bound. A bad signature or a refusal
//! is counted
//! (`custody_indexer_bad_signatures_total`,
//! `custody_indexer_signer_refusals_total`) and logged at `ERROR`.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use alloy::primitives::{Address, B256, Signature};
use futures::future::BoxFuture;
use metrics::counter;

use super::{Backend, KeyError, KeyRef, Signer};
use crate::chain::Family;

/// The environment variable bounding each key's signatures per minute.
pub const MAX_PER_MINUTE_ENV: &str = "CUSTODY_INDEXER_SIGNER_MAX_PER_MINUTE";
/// Each key's signatures per minute when the variable is unset.
pub const DEFAULT_MAX_PER_MINUTE: u32 = 120;

const MINUTE_MICROS: i64 = 60_000_000;

/// The most signatures per key and minute the environment allows.
pub fn max_per_minute_from_env() -> Result<u32, KeyError> {
    match std::env::var(MAX_PER_MINUTE_ENV) {
        Err(_) => Ok(DEFAULT_MAX_PER_MINUTE),
        Ok(value) if value.trim().is_empty() => Ok(DEFAULT_MAX_PER_MINUTE),
        Ok(value) => value.trim().parse::<u32>().ok().filter(|n| *n > 0).ok_or(KeyError::BadSetting(
            MAX_PER_MINUTE_ENV.into(),
            "a whole number of signatures, at least 1",
        )),
    }
}

/// Whether a key that signed at `recent` (microseconds, oldest first) may
/// sign again at `now`, at most `limit` times in any minute: drops what is
/// a minute old and, when admitted, records `now`. Refused, answers how
/// many it signed in the minute.
pub fn admit(recent: &mut VecDeque<i64>, now: i64, limit: u32) -> Result<(), u32> {
    while recent.front().is_some_and(|at| *at <= now - MINUTE_MICROS) {
        recent.pop_front();
    }
    let signed = u32::try_from(recent.len()).unwrap_or(u32::MAX);
    if signed >= limit {
        return Err(signed);
    }
    recent.push_back(now);
    Ok(())
}

/// A signer whose signatures are verified and rate-bounded.
pub struct Guarded {
    inner: Arc<dyn Signer>,
    limit: u32,
    recent: Mutex<HashMap<(KeyRef, Family), VecDeque<i64>>>,
    /// When each key's failed calls were uncounted, within the minute.
    released: Mutex<HashMap<(KeyRef, Family), VecDeque<i64>>>,
}

impl Guarded {
    pub fn new(inner: Arc<dyn Signer>, limit: u32) -> Self {
        Guarded { inner, limit, recent: Mutex::default(), released: Mutex::default() }
    }

    /// Admits one signature by `key`: the time it is counted at (`None` for
    /// the sponsor, never counted), to be [`Self::release`]d when the
    /// backend signs nothing.
    fn admit(&self, key: KeyRef, family: Family) -> Result<Option<i64>, KeyError> {
        // The sponsor pays for every other key's transactions (on Solana it
        // signs each as the fee payer): bounding it would bound them all.
        // What it holds is gas money, and its signatures are still checked.
        if key == KeyRef::Sponsor {
            return Ok(None);
        }
        let mut recent = self.recent.lock().expect("signature rate lock");
        let times = recent.entry((key, family)).or_default();
        let now = chrono::Utc::now().timestamp_micros();
        admit(times, now, self.limit).map(|()| Some(now)).map_err(|signed| {
            let name = super::describe(key, family);
            counter!("custody_indexer_signer_refusals_total", "family" => crate::family::rules::name(family)).increment(1);
            tracing::error!(key = %name, signed, limit = self.limit, "signer: a key reached its signatures per minute; refused");
            KeyError::RateLimited(name, signed)
        })
    }

    /// Uncounts a signature admitted at `at` that the backend failed (it
    /// did not answer, or refused), unless the key had as many failures
    /// uncounted in the minute as it may sign: a token away for a while
    /// must not use up the key's minute with calls that signed nothing.
    fn release(&self, key: KeyRef, family: Family, at: Option<i64>) {
        let Some(at) = at else { return };
        let mut released = self.released.lock().expect("signature rate lock");
        let given = released.entry((key, family)).or_default();
        if admit(given, chrono::Utc::now().timestamp_micros(), self.limit).is_err() {
            return;
        }
        let mut recent = self.recent.lock().expect("signature rate lock");
        if let Some(times) = recent.get_mut(&(key, family))
            && let Some(i) = times.iter().rposition(|t| *t == at)
        {
            times.remove(i);
        }
    }

    fn bad(&self, key: KeyRef, family: Family) -> KeyError {
        let name = super::describe(key, family);
        counter!("custody_indexer_bad_signatures_total", "family" => crate::family::rules::name(family))
            .increment(1);
        tracing::error!(key = %name, backend = %self.inner.backend(), "signer: a signature does not verify for its key; not sent");
        KeyError::BadSignature(name)
    }
}

/// Whether `signature` is the Ed25519 signature of `message` by the
/// base58 public key `public`.
pub fn ed25519_verifies(public: &str, message: &[u8], signature: &[u8; 64]) -> bool {
    let Ok(bytes) = bs58::decode(public).into_vec() else { return false };
    let Ok(key) = <[u8; 32]>::try_from(bytes) else { return false };
    solana_keypair::Signature::from(*signature).verify(&key, message)
}

impl Signer for Guarded {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }

    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        self.inner.evm_address(key)
    }

    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        self.inner.solana_address(key)
    }

    fn holds(&self, key: KeyRef, family: Family) -> Result<bool, KeyError> {
        self.inner.holds(key, family)
    }

    fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
        Box::pin(async move {
            let address = self.inner.evm_address(key)?;
            let admitted = self.admit(key, Family::Evm)?;
            let signature = self.inner.sign_evm_hash(key, hash).await.inspect_err(|_| {
                self.release(key, Family::Evm, admitted);
            })?;
            match signature.recover_address_from_prehash(&hash) {
                Ok(found) if found == address => Ok(signature),
                _ => Err(self.bad(key, Family::Evm)),
            }
        })
    }

    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
        Box::pin(async move {
            let public = self.inner.solana_address(key)?;
            let admitted = self.admit(key, Family::Solana)?;
            let signature = self.inner.sign_solana(key, message.clone()).await.inspect_err(|_| {
                self.release(key, Family::Solana, admitted);
            })?;
            if ed25519_verifies(&public, &message, &signature) {
                Ok(signature)
            } else {
                Err(self.bad(key, Family::Solana))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::MnemonicSigner;

    const PHRASE: &str = "test test test test test test test test test test test junk";

    #[test]
    fn a_key_signs_at_most_its_limit_in_any_minute() {
        let m = MINUTE_MICROS;
        for (before, now, limit, answer, kept, why) in [
            (vec![], 0, 1, Ok(()), 1, "the first"),
            (vec![0], 1, 1, Err(1), 1, "the second within the minute"),
            (vec![0], m, 1, Ok(()), 1, "a minute on: the first has left the window"),
            (vec![0, 10, 20], 30, 3, Err(3), 3, "three in the minute, three allowed"),
            (vec![0, 10, 20], m + 5, 3, Ok(()), 3, "the oldest dropped"),
            (vec![0, 10, 20], 2 * m, 3, Ok(()), 1, "all dropped"),
        ] {
            let mut recent = VecDeque::from(before);
            assert_eq!(admit(&mut recent, now, limit), answer, "{why}");
            assert_eq!(recent.len(), kept, "{why}");
        }
    }

    /// Signs every EVM digest and Solana message with another key than the
    /// one it names: a backend that answers wrong signatures.
    struct Crossed(MnemonicSigner);

    impl Signer for Crossed {
        fn backend(&self) -> Backend {
            self.0.backend()
        }
        fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
            self.0.evm_address(key)
        }
        fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
            self.0.solana_address(key)
        }
        fn holds(&self, key: KeyRef, family: Family) -> Result<bool, KeyError> {
            self.0.holds(key, family)
        }
        fn sign_evm_hash(&self, _: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
            self.0.sign_evm_hash(KeyRef::Omnibus, hash)
        }
        fn sign_solana(&self, _: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
            self.0.sign_solana(KeyRef::Omnibus, message)
        }
    }

    #[tokio::test]
    async fn a_signature_that_does_not_verify_never_leaves_the_signer() {
        let crossed = Guarded::new(Arc::new(Crossed(MnemonicSigner::from_phrase(PHRASE).unwrap())), 10);
        let hash = B256::repeat_byte(9);
        let evm = crossed.sign_evm_hash(KeyRef::Sponsor, hash).await;
        assert!(matches!(evm, Err(KeyError::BadSignature(_))), "{evm:?}");
        let solana = crossed.sign_solana(KeyRef::Sponsor, b"message".to_vec()).await;
        assert!(matches!(solana, Err(KeyError::BadSignature(_))), "{solana:?}");
        // The key the signature is really by passes.
        assert!(crossed.sign_evm_hash(KeyRef::Omnibus, hash).await.is_ok());
        assert!(crossed.sign_solana(KeyRef::Omnibus, b"message".to_vec()).await.is_ok());
        assert!(KeyError::BadSignature("k".into()).is_retryable(), "what waits on it keeps its state");
    }

    /// A backend that does not answer its first `failing` calls.
    struct Away {
        signer: MnemonicSigner,
        failing: std::sync::atomic::AtomicU32,
    }

    impl Away {
        fn answered(&self) -> Result<(), KeyError> {
            let left = self.failing.load(std::sync::atomic::Ordering::SeqCst);
            if left > 0 {
                self.failing.store(left - 1, std::sync::atomic::Ordering::SeqCst);
                return Err(KeyError::Token("the token is away".into()));
            }
            Ok(())
        }
    }

    impl Signer for Away {
        fn backend(&self) -> Backend {
            self.signer.backend()
        }
        fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
            self.signer.evm_address(key)
        }
        fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
            self.signer.solana_address(key)
        }
        fn holds(&self, key: KeyRef, family: Family) -> Result<bool, KeyError> {
            self.signer.holds(key, family)
        }
        fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
            Box::pin(async move {
                self.answered()?;
                self.signer.sign_evm_hash(key, hash).await
            })
        }
        fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
            Box::pin(async move {
                self.answered()?;
                self.signer.sign_solana(key, message).await
            })
        }
    }

    #[tokio::test]
    async fn calls_a_backend_failed_do_not_use_up_the_keys_rate_up_to_a_bound() {
        let away = |failing: u32| Away {
            signer: MnemonicSigner::from_phrase(PHRASE).unwrap(),
            failing: failing.into(),
        };
        let hash = B256::repeat_byte(3);
        // Three failures, three signatures a minute: back, the key signs
        // its three, then is refused.
        let signer = Guarded::new(Arc::new(away(3)), 3);
        for _ in 0..3 {
            let evm = signer.sign_evm_hash(KeyRef::Account(2), hash).await;
            assert!(matches!(evm, Err(KeyError::Token(_))), "{evm:?}");
        }
        for _ in 0..3 {
            signer.sign_evm_hash(KeyRef::Account(2), hash).await.expect("back, within the rate");
        }
        let fourth = signer.sign_evm_hash(KeyRef::Account(2), hash).await;
        assert!(matches!(fourth, Err(KeyError::RateLimited(_, 3))), "{fourth:?}");
        // No more failures uncounted in a minute than the key may sign:
        // two of four are, the other two count, and the fifth is refused
        // without reaching the backend.
        let signer = Guarded::new(Arc::new(away(5)), 2);
        for _ in 0..4 {
            let solana = signer.sign_solana(KeyRef::Account(2), b"m".to_vec()).await;
            assert!(matches!(solana, Err(KeyError::Token(_))), "{solana:?}");
        }
        let fifth = signer.sign_solana(KeyRef::Account(2), b"m".to_vec()).await;
        assert!(matches!(fifth, Err(KeyError::RateLimited(_, 2))), "{fifth:?}");
    }

    #[tokio::test]
    async fn a_key_past_its_rate_is_refused_and_others_still_sign() {
        let signer = Guarded::new(Arc::new(MnemonicSigner::from_phrase(PHRASE).unwrap()), 2);
        let hash = B256::repeat_byte(1);
        for _ in 0..2 {
            signer.sign_evm_hash(KeyRef::Account(2), hash).await.unwrap();
        }
        let third = signer.sign_evm_hash(KeyRef::Account(2), hash).await;
        assert!(matches!(third, Err(KeyError::RateLimited(_, 2))), "{third:?}");
        signer.sign_evm_hash(KeyRef::Account(3), hash).await.expect("another key");
        signer.sign_solana(KeyRef::Account(2), b"m".to_vec()).await.expect("the key's other family");
        for _ in 0..5 {
            signer
                .sign_solana(KeyRef::Sponsor, b"m".to_vec())
                .await
                .expect("the sponsor pays for every transfer");
        }
    }
}
