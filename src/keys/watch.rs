//! The signer's condition, kept in the store for every instance: a call
//! the backend does not answer opens an outage (and its condition, which
//! `health` reports as `signer: unreachable (…)` and `/metrics` counts);
//! the next signature it answers closes it. While an outage is open the
//! submit windows of accepted transfers stop counting
//! ([`crate::transfers::rules::unsent_cutoff`]). There is never a fallback
//! to another key source.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU8, Ordering},
    },
    time::{Duration, Instant},
};

use alloy::primitives::{Address, B256, Signature};
use futures::future::BoxFuture;

use super::{Backend, KeyError, KeyRef, Signer};
use crate::store::{Store, StoreError, now_micros, signer_outages};

/// What this process last told the store.
const UNKNOWN: u8 = 0;
const ANSWERS: u8 = 1;
const UNREACHABLE: u8 = 2;

/// A signer whose reachability is recorded in `store`.
pub struct Watched {
    inner: Arc<dyn Signer>,
    store: Store,
    told: AtomicU8,
    /// When this process last closed the signer's outages: another
    /// instance's (or a failure racing a success here) is closed by the
    /// next success after [`RECLOSE_AFTER`].
    closed_at: Mutex<Option<Instant>>,
}

/// How often a signer that answers closes outages again.
const RECLOSE_AFTER: Duration = Duration::from_secs(30);

impl Watched {
    pub fn new(inner: Arc<dyn Signer>, store: Store) -> Self {
        Watched { inner, store, told: AtomicU8::new(UNKNOWN), closed_at: Mutex::default() }
    }

    /// The name the outage and its condition go by: the backend.
    fn subject(&self) -> String {
        self.inner.backend().to_string()
    }

    /// Records what a call's `answer` says of the backend: an unreachable
    /// one at every failure (refreshing the condition), one that answers
    /// the first time it does.
    async fn record<T>(&self, answer: &Result<T, KeyError>) {
        let subject = self.subject();
        let recorded = match answer {
            Err(error) if error.is_unreachable() => {
                let message = format!("signer: unreachable ({error})");
                if self.told.swap(UNREACHABLE, Ordering::SeqCst) != UNREACHABLE {
                    tracing::error!(signer = %subject, %error, "signer: unreachable; transfers wait and their submit windows stop counting");
                }
                signer_unreachable(&self.store, &subject, &message).await
            }
            Ok(_) if self.told.load(Ordering::SeqCst) != ANSWERS || self.reclose_due() => {
                let answered = signer_answers(&self.store, &subject).await;
                if answered.is_ok() {
                    *self.closed_at.lock().expect("signer watch lock") = Some(Instant::now());
                }
                if answered.is_ok() && self.told.swap(ANSWERS, Ordering::SeqCst) == UNREACHABLE {
                    tracing::info!(signer = %subject, "signer: answers again");
                }
                answered
            }
            _ => Ok(()),
        };
        if let Err(error) = recorded {
            // Told again at the next call.
            self.told.store(UNKNOWN, Ordering::SeqCst);
            tracing::warn!(signer = %subject, %error, "cannot record the signer's condition in the store");
        }
    }

    fn reclose_due(&self) -> bool {
        self.closed_at.lock().expect("signer watch lock").is_none_or(|at| at.elapsed() >= RECLOSE_AFTER)
    }

    /// An address lookup's failure, recorded without waiting (the lookup
    /// is not async).
    fn record_lookup<T>(&self, answer: Result<T, KeyError>) -> Result<T, KeyError> {
        if let Err(error) = &answer
            && error.is_unreachable()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (store, subject) = (self.store.clone(), self.subject());
            let message = format!("signer: unreachable ({error})");
            self.told.store(UNREACHABLE, Ordering::SeqCst);
            runtime.spawn(async move {
                if let Err(error) = signer_unreachable(&store, &subject, &message).await {
                    tracing::warn!(signer = %subject, %error, "cannot record the signer's condition in the store");
                }
            });
        }
        answer
    }
}

/// The signer `subject` did not answer (`message` says how, free of
/// secrets): opens its span unless one is open, and raises (or refreshes)
/// its condition, at once.
async fn signer_unreachable(store: &Store, subject: &str, message: &str) -> Result<(), StoreError> {
    let now = now_micros();
    let mut tx = store.begin().await?;
    signer_outages::unreachable(&mut tx, subject, message, now).await?;
    tx.commit().await?;
    Ok(())
}

/// The signer `subject` answered: closes its open span, if any, and clears
/// its condition, at once.
async fn signer_answers(store: &Store, subject: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    signer_outages::answers(&mut tx, subject, now_micros()).await?;
    tx.commit().await?;
    Ok(())
}

impl Signer for Watched {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }

    fn evm_address(&self, key: KeyRef) -> Result<Address, KeyError> {
        self.record_lookup(self.inner.evm_address(key))
    }

    fn solana_address(&self, key: KeyRef) -> Result<String, KeyError> {
        self.record_lookup(self.inner.solana_address(key))
    }

    fn holds(&self, key: KeyRef, family: crate::chain::Family) -> Result<bool, KeyError> {
        self.record_lookup(self.inner.holds(key, family))
    }

    fn sign_evm_hash(&self, key: KeyRef, hash: B256) -> BoxFuture<'_, Result<Signature, KeyError>> {
        Box::pin(async move {
            let answer = self.inner.sign_evm_hash(key, hash).await;
            self.record(&answer).await;
            answer
        })
    }

    fn sign_solana(&self, key: KeyRef, message: Vec<u8>) -> BoxFuture<'_, Result<[u8; 64], KeyError>> {
        Box::pin(async move {
            let answer = self.inner.sign_solana(key, message).await;
            self.record(&answer).await;
            answer
        })
    }
}
