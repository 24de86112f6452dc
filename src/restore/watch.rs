//! The restore's worker: at a start, the witnesses are read before any
//! sender runs (the log against the newest checkpoint, each chain against
//! the store's nonces); then, every few seconds, the log is judged again,
//! so that an acknowledgement or a recovery made through any instance
//! opens the gate here. What is found is kept as the condition
//! `store_restored` (shown by `health`, `/readyz` and `/metrics`), so that
//! every process of the store, and `health`, see it.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::{
    chains::{self, Unknown},
    gate::{Closed, Gate},
    witness::Witness,
};
use crate::{
    audit::{checkpoint::Checkpoint, schedule::Schedule},
    chain::Chain,
    config::ChainConfig,
    store::{Store, StoreError, now_micros},
};

/// The condition a detected restore raises.
pub const CONDITION: &str = "store_restored";
/// The subjects of the log's witness among the conditions: a restore not
/// yet acknowledged, and one acknowledged, not yet recovered.
const LOG: &str = "audit_log";
const RECOVERY: &str = "recovery";
/// How often the log is judged again.
const EVERY: Duration = Duration::from_secs(5);

/// What the chains said: each chain's addresses the store does not know
/// all of, with the log's head when they were found (a recovery after it
/// answers them).
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub unknown: BTreeMap<Chain, (i64, Vec<Unknown>)>,
    /// The chains that could not be asked yet: closed, and asked again at
    /// every look until they answer.
    pub unasked: Vec<ChainConfig>,
}

impl Found {
    /// Asks `config`'s chain what the store does not know, keeping it
    /// unasked when the chain does not answer.
    async fn ask(&mut self, store: &Store, config: &ChainConfig) {
        if let Err(error) = chains::count_platform_wallets(store, config).await {
            warn!(chain = %config.chain, %error, "cannot count the platform wallets' transactions on chain");
        }
        self.unasked.retain(|c| c.chain != config.chain);
        let head = store.audit_head().await.map(|(seq, _)| seq);
        match (chains::unknown(store, config).await, head) {
            (Ok(unknown), _) if unknown.is_empty() => {}
            (Ok(unknown), Ok(head)) => {
                unknown.iter().for_each(|u| error!(chain = %u.chain, address = %u.address, "{}", u.line()));
                let first = &unknown[0];
                let tag = format!("restore-gap:{}:{}:{}", config.chain, first.address, first.stored_next);
                if let Err(error) = skip_key_numbers(store, &tag).await {
                    warn!(%error, "cannot leave key numbers out after a restore: asked again shortly");
                    self.unasked.push(config.clone());
                    return;
                }
                self.unknown.insert(config.chain, (head, unknown));
            }
            (Ok(_), Err(error)) => {
                warn!(chain = %config.chain, %error, "cannot read the audit log's head: asked again shortly");
                self.unasked.push(config.clone());
            }
            // Closed until the chain answers: nothing is sent from keys
            // whose history on chain was not held against the store.
            (Err(error), _) => {
                warn!(chain = %config.chain, %error, "cannot hold the store's nonces against the chain: its sender waits");
                self.unasked.push(config.clone());
            }
        }
    }
}

/// Reads the witnesses at a start: the log against `newest`, and each of
/// `configs`' chains. A restore not yet acknowledged ends every console
/// session and voids every unused link, as the log's authentication does.
pub async fn at_start(
    store: &Store,
    gate: &Gate,
    configs: &[ChainConfig],
    newest: Option<&Checkpoint>,
) -> anyhow::Result<Found> {
    let witness = super::read(store, newest).await?;
    if let (Witness::Restored { .. }, Some(newest)) = (&witness, newest) {
        skip_key_numbers(store, &format!("restore-gap:checkpoint:{}:{}", newest.seq, newest.at)).await?;
        let mut tx = store.begin().await?;
        let (sessions, links) =
            crate::store::console::end_all_sessions_and_links(&mut tx, now_micros()).await?;
        tx.commit().await?;
        error!(sessions, links, "{}", witness.line().unwrap_or_default());
    }
    let mut found = Found::default();
    for config in configs {
        found.ask(store, config).await;
    }
    judge(store, gate, &found, &witness, newest.is_some()).await?;
    Ok(found)
}

/// Leaves [`crate::store::account_keys::RESTORE_GAP`] key numbers unused once per `tag`
/// (a restore suspected): the keys of accounts made after the backup are
/// never handed to new ones.
async fn skip_key_numbers(store: &Store, tag: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    let skipped = crate::store::account_keys::skip_numbers(&mut tx, tag, now_micros()).await?;
    tx.commit().await?;
    if skipped {
        warn!(tag, "a restore is suspected: the next 1000 account key numbers are left unused");
    }
    Ok(())
}

/// Judges the log again every few seconds until `stop`, keeping the gate
/// and the conditions as the witnesses say; `schedule` gives the newest
/// checkpoint (none: only what the log and `found` say).
pub async fn run(
    store: Store,
    gate: Gate,
    schedule: Option<Arc<Schedule>>,
    mut found: Found,
    stop: CancellationToken,
) {
    loop {
        for config in found.unasked.clone() {
            found.ask(&store, &config).await;
        }
        // As this process's checkpoint schedule last read or signed it:
        // the places checkpoints are kept are read at a start, and again by
        // the schedule, never every few seconds here.
        let newest =
            schedule.as_ref().and_then(|schedule| schedule.last.lock().expect("never poisoned").clone());
        let checkpoints = schedule.is_some();
        let judged = async {
            judge(&store, &gate, &found, &super::read(&store, newest.as_ref()).await?, checkpoints).await
        };
        if let Err(error) = judged.await {
            warn!(%error, "cannot judge whether the store was restored; judged again shortly");
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(EVERY) => {}
        }
    }
}

/// Sets the gate and the conditions from `witness` and `found`, and from
/// the conditions another process raised: an unacknowledged restore is
/// kept as subject `audit_log` by a process that reads checkpoints
/// (`checkpoints`), an acknowledged one as `recovery`, and each address
/// the chains witness as that address, on its chain, until a recovery of
/// the chain is recorded after it was raised.
async fn judge(
    store: &Store,
    gate: &Gate,
    found: &Found,
    witness: &Witness,
    checkpoints: bool,
) -> Result<(), StoreError> {
    let mut closed = Closed::default();
    let line = witness.line().unwrap_or_default();
    let raised: Vec<_> = store.conditions().await?.into_iter().filter(|c| c.kind == CONDITION).collect();
    // Cleared only when raised: a healthy store is not written every pass.
    let clear = |subject: &'static str| {
        let is_raised = raised.iter().any(|c| c.chain.is_none() && c.subject == subject);
        async move {
            if is_raised { crate::conditions::clear(store, None, CONDITION, subject).await } else { Ok(()) }
        }
    };
    match witness {
        Witness::Restored { .. } => {
            crate::conditions::raise(store, None, CONDITION, LOG, &line).await?;
            closed.all = Some(line.clone());
        }
        _ if checkpoints => clear(LOG).await?,
        _ => {}
    }
    match witness {
        Witness::Recovering { chains, .. } => {
            crate::conditions::raise(store, None, CONDITION, RECOVERY, &line).await?;
            for chain in chains.iter().filter_map(|c| c.parse::<Chain>().ok()) {
                closed.chains.insert(chain, line.clone());
            }
        }
        _ => clear(RECOVERY).await?,
    }
    for (chain, (head, unknown)) in &found.unknown {
        // Closed by what this process found, whatever the conditions' rows say.
        if super::recovered_at(store, *chain).await?.is_none_or(|(seq, _)| seq <= *head) {
            for u in unknown {
                crate::conditions::raise(store, Some(*chain), CONDITION, &u.address, &u.line()).await?;
                closed.chains.entry(*chain).or_insert_with(|| u.line());
            }
        }
    }
    for config in &found.unasked {
        closed.unasked.insert(config.chain, format!("{}: the chain has not answered whether the store knows every transaction of the platform's keys", config.chain));
    }
    for condition in raised {
        match condition.chain {
            Some(chain) => {
                let since = condition.since.timestamp_micros();
                if super::recovered_at(store, chain).await?.is_some_and(|(_, at)| at > since) {
                    crate::conditions::clear(store, Some(chain), CONDITION, &condition.subject).await?;
                } else {
                    closed.chains.entry(chain).or_insert(condition.message);
                }
            }
            // Raised by a process that reads the checkpoints.
            None if condition.subject == LOG && !checkpoints => {
                closed.all.get_or_insert(condition.message);
            }
            None => {}
        }
    }
    let opened = gate.closed_any() && closed == Closed::default();
    gate.set(closed);
    if opened {
        info!("the store's restore is recovered: senders resume");
    }
    Ok(())
}
