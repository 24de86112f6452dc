//! Low-latency head tracking: a `newHeads` subscription over WebSocket wakes
//! the watcher as soon as a block arrives. Polling goes on regardless, so a
//! dropped subscription only costs latency; it is re-established with backoff.

use std::{sync::Arc, time::Duration};

use alloy::providers::{Provider, ProviderBuilder, WsConnect};
use futures::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::{
    chain::Chain,
    redact::{RpcUrl, redact_urls},
};

pub async fn follow_heads(chain: Chain, url: RpcUrl, heads: Arc<Notify>, shutdown: CancellationToken) {
    let mut delay = Duration::from_secs(1);
    while !shutdown.is_cancelled() {
        let session = async {
            let provider = ProviderBuilder::new().connect_ws(WsConnect::new(url.expose().as_str())).await?;
            let subscription = provider.subscribe_blocks().await?;
            debug!(%chain, %url, "following newHeads");
            let mut stream = subscription.into_stream();
            while let Some(header) = stream.next().await {
                debug!(%chain, number = header.number, "new head");
                heads.notify_one();
            }
            Ok::<_, alloy::transports::TransportError>(())
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            result = session => {
                let error = result.err().map(|e| redact_urls(&e.to_string())).unwrap_or_else(|| "stream ended".into());
                warn!(%chain, %url, %error, retry_in_s = delay.as_secs(), "newHeads subscription dropped; polling meanwhile");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(60));
    }
}
