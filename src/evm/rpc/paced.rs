//! A cap on requests a second: each request through the client waits for
//! its turn, one every `1 / rate` seconds, however many callers ask at once.
//! A background reader (reconciliation) uses it so that it never takes
//! more of a provider's rate than it is given.

use std::task::{Context, Poll};

use alloy::{
    rpc::json_rpc::ResponsePacket,
    transports::{TransportError, TransportFut},
};
use tower::{Layer, Service};

use crate::rpc::Pace;

/// At most `per_second` requests a second, through [`Pace`].
#[derive(Debug, Clone)]
pub struct PaceLayer {
    pace: Pace,
}

impl PaceLayer {
    /// `per_second` requests a second at most (at least one).
    pub fn new(per_second: u32) -> Self {
        PaceLayer { pace: Pace::new(per_second) }
    }
}

impl<S> Layer<S> for PaceLayer {
    type Service = Paced<S>;

    fn layer(&self, inner: S) -> Paced<S> {
        Paced { inner, pace: self.pace.clone() }
    }
}

#[derive(Debug, Clone)]
pub struct Paced<S> {
    inner: S,
    pace: Pace,
}

impl<S, R> Service<R> for Paced<S>
where
    S: Service<R, Response = ResponsePacket, Error = TransportError, Future = TransportFut<'static>>
        + Clone
        + Send
        + 'static,
    R: Send + 'static,
{
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let mut inner = self.inner.clone();
        let pace = self.pace.clone();
        Box::pin(async move {
            pace.turn().await;
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    /// An endpoint that answers at once.
    #[derive(Clone)]
    struct AtOnce;

    impl Service<u32> for AtOnce {
        type Response = ResponsePacket;
        type Error = TransportError;
        type Future = TransportFut<'static>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: u32) -> Self::Future {
            Box::pin(async {
                Ok(serde_json::from_str(r#"{"jsonrpc":"2.0","id":1,"result":"0x1"}"#).expect("a response"))
            })
        }
    }

    /// On the runtime's paused clock: each request waits its turn, one
    /// every `1 / rate` seconds, however many are asked at once.
    #[tokio::test(start_paused = true)]
    async fn requests_asked_at_once_go_one_per_turn() {
        let cases =
            [(20, 21, Duration::from_secs(1)), (4, 9, Duration::from_secs(2)), (1, 1, Duration::ZERO)];
        for (rate, asked, span) in cases {
            let service = PaceLayer::new(rate).layer(AtOnce);
            let start = Instant::now();
            let calls = (0..asked).map(|i| {
                let mut service = service.clone();
                async move { service.call(i).await.map(|_| Instant::now()) }
            });
            let done = futures::future::try_join_all(calls).await.unwrap();
            let last = done.iter().max().unwrap();
            assert_eq!(*last - start, span, "{asked} requests at {rate} a second");
        }
    }
}
