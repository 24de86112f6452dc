//! A remote signer's lookup run to its end on a thread and a runtime of its
//! own, so that the `Signer` trait's synchronous address lookups work from
//! any caller, async or not, without blocking the caller's runtime's
//! worker on a runtime it does not own.

use std::future::Future;

use super::KeyError;

/// `call`'s future, run to its end apart; `failed` makes the error of a
/// thread or runtime that could not run it.
pub fn run<'a, T: Send, F>(
    call: impl FnOnce() -> F + Send,
    failed: fn(String) -> KeyError,
) -> Result<T, KeyError>
where
    F: Future<Output = Result<T, KeyError>> + 'a,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| failed(format!("no runtime: {e}")))?;
                runtime.block_on(call())
            })
            .join()
            .unwrap_or_else(|_| Err(failed("the key lookup panicked".into())))
    })
}
