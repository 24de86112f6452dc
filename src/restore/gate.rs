//! The gate a detected restore closes: each chain's sender (and the
//! wings' mints and refunds beside it) waits while its chain is closed,
//! and the API refuses a transfer on it (`503 TRANSFERS_UNAVAILABLE`).
//! Opened by the witness the worker judges again every few seconds
//! ([`super::watch`]); accounts and everything else keep working.

use std::{collections::BTreeMap, sync::Arc};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::chain::Chain;

/// Why each chain is closed; `all` closes every chain. A chain `unasked`
/// (its node has not answered the witness yet) holds its sender only:
/// its transfers are still accepted, and wait.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Closed {
    pub all: Option<String>,
    pub chains: BTreeMap<Chain, String>,
    pub unasked: BTreeMap<Chain, String>,
}

impl Closed {
    /// Why `chain`'s transfers are refused, if they are.
    pub fn why(&self, chain: Chain) -> Option<&str> {
        self.all.as_deref().or_else(|| self.chains.get(&chain).map(String::as_str))
    }

    /// Why `chain`'s sender waits, if it does.
    pub fn holds(&self, chain: Chain) -> Option<&str> {
        self.why(chain).or_else(|| self.unasked.get(&chain).map(String::as_str))
    }
}

/// A process's gate, shared by its senders, its API and its worker.
#[derive(Debug, Clone)]
pub struct Gate(Arc<watch::Sender<Closed>>);

impl Default for Gate {
    fn default() -> Self {
        Gate(Arc::new(watch::Sender::new(Closed::default())))
    }
}

impl Gate {
    /// Why `chain` is closed now, if it is.
    pub fn closed(&self, chain: Chain) -> Option<String> {
        self.0.borrow().why(chain).map(str::to_string)
    }

    /// Whether anything is closed now.
    pub fn closed_any(&self) -> bool {
        *self.0.borrow() != Closed::default()
    }

    /// Sets what is closed; the senders waiting on a chain now open go on.
    pub fn set(&self, closed: Closed) {
        self.0.send_if_modified(|now| {
            let changed = *now != closed;
            *now = closed;
            changed
        });
    }

    /// Waits until `chain` is closed (at once when it is).
    pub async fn closes(&self, chain: Chain) {
        let mut seen = self.0.subscribe();
        while seen.borrow_and_update().holds(chain).is_none() {
            if seen.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Waits until `chain` is open: true, or false when `stop` came first.
    pub async fn opened(&self, chain: Chain, stop: &CancellationToken) -> bool {
        let mut seen = self.0.subscribe();
        let mut logged = false;
        loop {
            let why = seen.borrow_and_update().holds(chain).map(str::to_string);
            let Some(why) = why else { return true };
            if !std::mem::replace(&mut logged, true) {
                tracing::error!(%chain, %why, "this chain sends nothing until the store is held against it (see `health`)");
            }
            tokio::select! {
                () = stop.cancelled() => return false,
                changed = seen.changed() => if changed.is_err() { return false },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sender_waits_while_its_chain_is_closed() {
        let gate = Gate::default();
        let stop = CancellationToken::new();
        assert!(gate.opened(Chain::EthereumMainnet, &stop).await, "open by default");
        gate.set(Closed { all: Some("restored".into()), ..Closed::default() });
        assert_eq!(gate.closed(Chain::SolanaMainnet).as_deref(), Some("restored"));
        let waiting = tokio::spawn({
            let (gate, stop) = (gate.clone(), stop.clone());
            async move { gate.opened(Chain::EthereumMainnet, &stop).await }
        });
        // Closed for ethereum only: still waiting.
        gate.set(Closed {
            chains: BTreeMap::from([(Chain::EthereumMainnet, "recover".into())]),
            ..Closed::default()
        });
        assert_eq!(gate.closed(Chain::SolanaMainnet), None);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "still closed for ethereum");
        gate.set(Closed::default());
        assert!(waiting.await.unwrap(), "opened");
        let closing = tokio::spawn({
            let gate = gate.clone();
            async move { gate.closes(Chain::SolanaMainnet).await }
        });
        tokio::task::yield_now().await;
        assert!(!closing.is_finished(), "open: not closed");
        gate.set(Closed {
            unasked: BTreeMap::from([(Chain::SolanaMainnet, "unasked".into())]),
            ..Closed::default()
        });
        closing.await.unwrap();
        assert_eq!(
            gate.closed(Chain::SolanaMainnet),
            None,
            "an unasked chain's transfers are accepted, and wait"
        );
        gate.set(Closed { all: Some("restored".into()), ..Closed::default() });
        stop.cancel();
        assert!(!gate.opened(Chain::EthereumMainnet, &stop).await, "stopped while closed");
    }
}
