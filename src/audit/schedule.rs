//! `run`'s signed checkpoints of the audit log: every period one instance
//! (the one whose conditional update claims the period in the store)
//! verifies the chain, signs its head with the key named by
//! `CUSTODY_INDEXER_AUDIT_KEY_FILE`, and writes the checkpoint to the
//! directory given and publishes it on the NATS sink's stream
//! (`custody.events.platform.audit_checkpoint`), so that copies live where
//! the database's writers cannot reach. A broken log is never signed: the
//! period's checkpoint is replaced by an error in the log and the metric
//! `custody_indexer_audit_broken_total`. A break-glass decision makes the
//! next checkpoint due at once, in its own transaction: written within
//! [`LOOK_EVERY`].

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use async_nats::{HeaderMap, jetstream};
use ed25519_dalek::SigningKey;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::{
    chain::Broken,
    checkpoint::{self, Checkpoint, KEY_FILE_ENV},
    verify,
};
use crate::{
    events::{
        nats::{NatsUrl, ensure_stream},
        subject::subject,
    },
    store::{Store, StoreError, audit as rows, now_micros},
};

/// How often an instance looks whether a checkpoint is due.
pub const LOOK_EVERY: Duration = Duration::from_secs(5);

/// The subject checkpoints are published on.
pub fn checkpoint_subject() -> String {
    subject("platform", "audit_checkpoint")
}

/// What `run` checkpoints with.
pub struct Schedule {
    pub key: SigningKey,
    pub every: Duration,
    pub dir: Option<PathBuf>,
    pub nats: Option<NatsUrl>,
    /// The last checkpoint signed with the key (this process's, or the
    /// newest in the directory): the log must still hold it before the
    /// next is signed.
    pub last: std::sync::Mutex<Option<Checkpoint>>,
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedule").field("every", &self.every).field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// Why a period's checkpoint was not written.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("the audit log is BROKEN, or no longer holds the last checkpoint, so it is not signed: {0}")]
    Broken(Broken),
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("publishing to NATS: {0}")]
    Nats(String),
}

impl Schedule {
    /// The schedule the environment configures: `None` without a key file.
    /// A key file that cannot be read refuses the start.
    pub fn from_env(
        every: Duration,
        dir: Option<PathBuf>,
        nats: Option<NatsUrl>,
    ) -> anyhow::Result<Option<Self>> {
        let Some(path) = std::env::var_os(KEY_FILE_ENV) else {
            info!("no {KEY_FILE_ENV}: the audit log is not checkpointed by this instance");
            return Ok(None);
        };
        let key = checkpoint::read_key(Path::new(&path))?;
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("--audit-checkpoint-dir {}: {e}", dir.display()))?;
        }
        let last = dir.as_deref().and_then(|dir| newest(dir, &key));
        Ok(Some(Schedule { key, every, dir, nats, last: std::sync::Mutex::new(last) }))
    }
}

/// Writes a checkpoint whenever this instance claims a period, until
/// `shutdown`.
pub async fn run(store: Store, schedule: Schedule, owner: String, shutdown: CancellationToken) {
    let every = i64::try_from(schedule.every.as_micros()).unwrap_or(i64::MAX);
    // A break-glass step makes the next checkpoint due at once: looked for
    // every few seconds.
    let tick = schedule.every.min(LOOK_EVERY);
    loop {
        match claim_checkpoint(&store, &owner, now_micros(), every).await {
            Ok(true) => match write(&store, &schedule).await {
                Ok(written) => info!(seq = written.seq, hash = %written.hash, "audit log checkpointed"),
                Err(error) => {
                    if matches!(error, ScheduleError::Broken(_)) {
                        metrics::counter!("custody_indexer_audit_broken_total").increment(1);
                    }
                    error!(%error, "no audit checkpoint this time: tried again in a minute");
                    let again = now_micros().saturating_add(60_000_000);
                    if let Err(error) = retry_checkpoint(&store, &owner, again).await {
                        warn!(%error, "cannot make the audit checkpoint due again");
                    }
                }
            },
            Ok(false) => {}
            Err(error) => warn!(%error, "cannot claim the audit checkpoint"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(tick) => {}
        }
    }
}

/// Claims the next checkpoint for `owner` when it is due at `now`
/// (microseconds), the one after due `every` later: true for exactly
/// one claimant per period, however many instances ask. A due time
/// further away than two periods (written outside the service; one
/// period's worth is left to instances' clocks differing) counts as
/// due, and a missing row is made again.
pub async fn claim_checkpoint(store: &Store, owner: &str, now: i64, every: i64) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let claimed = rows::claim_checkpoint(&mut tx, owner, now, every).await?;
    tx.commit().await?;
    Ok(claimed)
}

/// Makes the checkpoint `owner` claimed due again at `at` (it could not
/// be written), unless another claimed meanwhile.
async fn retry_checkpoint(store: &Store, owner: &str, at: i64) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    rows::retry_checkpoint(&mut tx, owner, at).await?;
    tx.commit().await?;
    Ok(())
}

/// The newest checkpoint in `dir` that `key` signed, if any.
pub fn newest(dir: &Path, key: &SigningKey) -> Option<Checkpoint> {
    let public = key.verifying_key();
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|file| std::fs::read_to_string(file.ok()?.path()).ok())
        .filter_map(|text| Checkpoint::parse(&text, "").ok())
        .filter(|checkpoint| checkpoint.signed_by(&public))
        .max_by_key(|checkpoint| (checkpoint.seq, checkpoint.at))
}

/// One checkpoint now: signed once the log still holds the last one,
/// written to the directory, published.
pub async fn write(store: &Store, schedule: &Schedule) -> Result<Checkpoint, ScheduleError> {
    let previous = schedule.last.lock().expect("never poisoned").clone();
    let written = verify::checkpoint(store, &schedule.key, now_micros(), previous.as_ref())
        .await?
        .map_err(ScheduleError::Broken)?;
    *schedule.last.lock().expect("never poisoned") = Some(written.clone());
    if let Some(dir) = &schedule.dir {
        let path = dir.join(format!("audit-checkpoint-{:012}-{}.json", written.seq, written.at));
        save(&path, &written)
            .map_err(|source| ScheduleError::Write { path: path.display().to_string(), source })?;
    }
    if let Some(url) = &schedule.nats {
        publish(url, &written).await?;
    }
    Ok(written)
}

/// Writes `checkpoint` to `path` whole or not at all.
pub fn save(path: &Path, checkpoint: &Checkpoint) -> std::io::Result<()> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, format!("{}\n", checkpoint.json()))?;
    std::fs::File::open(&partial)?.sync_all()?;
    std::fs::rename(&partial, path)
}

/// Publishes `checkpoint` on the events stream, acknowledged; its message
/// id makes a second publication of it a duplicate.
async fn publish(url: &NatsUrl, checkpoint: &Checkpoint) -> Result<(), ScheduleError> {
    let nats = |e: &dyn std::fmt::Display| ScheduleError::Nats(crate::redact::redact_urls(&e.to_string()));
    let client = async_nats::ConnectOptions::new()
        .name("custody-indexer audit checkpoints")
        .connection_timeout(Duration::from_secs(5))
        .connect(url.servers())
        .await
        .map_err(|e| nats(&e))?;
    let js = jetstream::ContextBuilder::new().timeout(Duration::from_secs(5)).build(client);
    ensure_stream(&js).await.map_err(|e| nats(&e))?;
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", format!("audit-checkpoint-{}-{}", checkpoint.seq, checkpoint.at).as_str());
    let body = checkpoint.json().into_bytes();
    let ack =
        js.publish_with_headers(checkpoint_subject(), headers, body.into()).await.map_err(|e| nats(&e))?;
    ack.await.map_err(|e| nats(&e))?;
    Ok(())
}
