//! Calls on a device that may hang (a PKCS#11 token: a network HSM that
//! stops answering mid-call), each made on a thread of its own and waited
//! for at most a time limit. A call past the limit fails as an outage
//! instead of holding its caller (an async worker, a lock), and the calls
//! after it fail at once until it returns, so no thread piles up behind
//! a device that does not answer.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use super::KeyError;

pub struct Bounded<T> {
    target: Arc<T>,
    limit: Duration,
    /// Since when a call has been waiting past the limit, if one is.
    hung: Arc<Mutex<Option<Instant>>>,
}

impl<T: Send + Sync + 'static> Bounded<T> {
    pub fn new(target: T, limit: Duration) -> Self {
        Bounded { target: Arc::new(target), limit, hung: Arc::default() }
    }

    /// The device itself, for what needs no call on it.
    pub fn target(&self) -> &T {
        &self.target
    }

    /// `call` made on a thread of its own: its answer, or an outage
    /// (`KeyError::Token`) when it has not answered within the limit.
    pub async fn call<R: Send + 'static>(
        &self,
        call: impl FnOnce(&T) -> Result<R, KeyError> + Send + 'static,
    ) -> Result<R, KeyError> {
        if let Some(since) = *self.hung.lock().expect("hung lock") {
            return Err(KeyError::Token(format!(
                "a call has waited {} s for the token without an answer",
                since.elapsed().as_secs()
            )));
        }
        let (answer, answered) = tokio::sync::oneshot::channel();
        let (target, hung) = (self.target.clone(), self.hung.clone());
        std::thread::Builder::new()
            .name("signer-device".into())
            .spawn(move || {
                let answered = call(&target);
                // The device is let go before the answer: the caller's copy
                // is then the last one, so a device dropped when its
                // owner is (a token finalised, its library unloaded) is
                // dropped on the caller's thread, never on this one while
                // the process exits (SoftHSM2 crashed so, one exit in 30).
                drop(target);
                // Answered, however late: the device takes calls again.
                hung.lock().expect("hung lock").take();
                let _ = answer.send(answered);
            })
            .map_err(|e| KeyError::Token(format!("no thread for the token: {e}")))?;
        match tokio::time::timeout(self.limit, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(KeyError::Token("the token's call ended without an answer".into())),
            Err(_) => {
                self.hung.lock().expect("hung lock").get_or_insert_with(Instant::now);
                let secs = self.limit.as_secs_f64();
                tracing::error!(limit_secs = secs, "signer: the token did not answer in time");
                Err(KeyError::Token(format!("the token did not answer within {secs} s")))
            }
        }
    }

    /// [`Self::call`] for a caller that is not async (an address lookup).
    pub fn call_now<R: Send + 'static>(
        &self,
        call: impl FnOnce(&T) -> Result<R, KeyError> + Send + 'static,
    ) -> Result<R, KeyError> {
        super::apart::run(|| self.call(call), KeyError::Token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device whose calls take as long as they are told, and which
    /// says when it is dropped.
    struct Slow(Option<Arc<std::sync::atomic::AtomicBool>>);

    impl Drop for Slow {
        fn drop(&mut self) {
            if let Some(dropped) = &self.0 {
                dropped.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }

    impl Slow {
        fn answer(&self, after: Duration) -> Result<u32, KeyError> {
            std::thread::sleep(after);
            Ok(7)
        }
    }

    #[tokio::test]
    async fn a_call_that_hangs_fails_as_an_outage_and_the_next_fail_fast_until_it_returns() {
        let device = Bounded::new(Slow(None), Duration::from_millis(200));
        assert_eq!(device.call(|d| d.answer(Duration::ZERO)).await.unwrap(), 7, "in time");

        let started = Instant::now();
        let hung = device.call(|d| d.answer(Duration::from_millis(1500))).await.unwrap_err();
        assert!(hung.is_unreachable() && hung.to_string().contains("did not answer"), "{hung}");
        assert!(started.elapsed() < Duration::from_millis(1000), "the caller was let go at the limit");

        // While it hangs, calls fail at once, without a thread of their own.
        let started = Instant::now();
        let fast = device.call(|d| d.answer(Duration::ZERO)).await.unwrap_err();
        assert!(fast.is_unreachable() && started.elapsed() < Duration::from_millis(100), "{fast}");
        let now = device.call_now(|d| d.answer(Duration::ZERO));
        assert!(now.is_err(), "a lookup too: {now:?}");

        // Once it returns, the device takes calls again.
        tokio::time::sleep(Duration::from_millis(1600)).await;
        assert_eq!(device.call(|d| d.answer(Duration::ZERO)).await.unwrap(), 7);
        assert_eq!(
            device.call_now(|d| d.answer(Duration::ZERO)).unwrap(),
            7,
            "from a caller that is not async"
        );
    }

    /// The device is dropped with its owner, on the owner's thread, once
    /// a call has answered: never later, on the call's thread.
    #[tokio::test]
    async fn the_device_is_dropped_with_its_owner_after_a_call() {
        for _ in 0..200 {
            let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let device = Bounded::new(Slow(Some(dropped.clone())), Duration::from_secs(5));
            assert_eq!(device.call(|d| d.answer(Duration::ZERO)).await.unwrap(), 7);
            assert_eq!(device.call_now(|d| d.answer(Duration::ZERO)).unwrap(), 7);
            drop(device);
            assert!(dropped.load(std::sync::atomic::Ordering::SeqCst), "dropped when its owner was");
        }
    }
}
