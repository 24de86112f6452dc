//! `run`'s signed checkpoints of the audit log: every period one instance
//! (the one whose conditional update claims the period in the store)
//! verifies the chain, signs its head with the key named by
//! `CUSTODY_INDEXER_AUDIT_KEY_FILE`, and writes the checkpoint to the
//! directory given and publishes it on the NATS sink's stream
//! (`custody.events.platform.audit_checkpoint`), so that copies live where
//! the database's writers cannot reach. The store's row only spares
//! duplicates: an instance holding the key also signs when the newest
//! checkpoint whose signature verifies, wherever it is kept
//! ([`super::newest`]), is older than one period and its slack
//! ([`super::overdue`]), whatever the row says, and
//! `custody_indexer_audit_checkpoint_age_seconds` is that age. Each
//! checkpoint chains to the newest one, whichever instance signed it. A
//! broken log is never signed: the period's checkpoint is replaced by an
//! error in the log and the metric `custody_indexer_audit_broken_total`. A
//! break-glass decision makes the next checkpoint due at once, in its own
//! transaction: written within [`LOOK_EVERY`].

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use async_nats::{HeaderMap, jetstream};
use ed25519_dalek::SigningKey;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use super::newest::checkpoint_subject;
use super::{
    chain::Broken,
    checkpoint::{self, Checkpoint, KEY_FILE_ENV},
    newest,
    overdue::{self, Sign},
    verify,
};
use crate::{
    events::nats::{NatsUrl, ensure_stream},
    store::{Store, StoreError, audit as rows, now_micros},
};

/// How often an instance looks whether a checkpoint is due (more often
/// when the period's slack is shorter: [`overdue::look_every`]).
pub const LOOK_EVERY: Duration = Duration::from_secs(5);

/// How long after a failed checkpoint the next try waits.
const RETRY_AFTER: Duration = Duration::from_secs(60);

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

/// Writes a checkpoint whenever this instance claims a period, or the
/// newest one signed is overdue, until `shutdown`.
pub async fn run(
    store: Store,
    schedule: std::sync::Arc<Schedule>,
    owner: String,
    shutdown: CancellationToken,
) {
    // A break-glass step makes the next checkpoint due at once, and an
    // overdue one is signed within the slack: looked for every few seconds.
    let tick = overdue::look_every(schedule.every, LOOK_EVERY);
    let mut not_before: Option<Instant> = None;
    loop {
        if not_before.is_none_or(|at| Instant::now() >= at) {
            let written = step(&store, &schedule, &owner).await;
            not_before = (!written).then(|| Instant::now() + RETRY_AFTER);
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(tick) => {}
        }
    }
}

/// One look: the period claimed in the store, the newest checkpoint read,
/// one signed when the row or its age says so. False when one was due and
/// could not be written (tried again in a minute).
async fn step(store: &Store, schedule: &Schedule, owner: &str) -> bool {
    let every = i64::try_from(schedule.every.as_micros()).unwrap_or(i64::MAX);
    let claimed = claim_checkpoint(store, owner, now_micros(), every).await.unwrap_or_else(|error| {
        warn!(%error, "cannot claim the audit checkpoint");
        false
    });
    let age = |known: &Option<Checkpoint>| known.as_ref().map(|c| newest::age(c, now_micros()));
    let mut known = schedule.last.lock().expect("never poisoned").clone();
    // Past one period another instance may have signed: read where they are kept.
    if age(&known).is_none_or(|age| age > schedule.every) {
        known = schedule.known().await;
    }
    let age = age(&known);
    if let Some(age) = age {
        metrics::gauge!("custody_indexer_audit_checkpoint_age_seconds").set(age.as_secs_f64());
    }
    match overdue::sign(age, schedule.every, claimed) {
        Sign::Wait => return true,
        Sign::Due => {}
        Sign::Overdue => overruled(store, age).await,
    }
    match write(store, schedule).await {
        Ok(written) => {
            metrics::gauge!("custody_indexer_audit_checkpoint_age_seconds").set(0.0);
            info!(seq = written.seq, hash = %written.hash, "audit log checkpointed");
            true
        }
        Err(error) => {
            if matches!(error, ScheduleError::Broken(_)) {
                metrics::counter!("custody_indexer_audit_broken_total").increment(1);
            }
            error!(%error, "no audit checkpoint this time: tried again in a minute");
            let again = now_micros().saturating_add(RETRY_AFTER.as_micros() as i64);
            if claimed && let Err(error) = retry_checkpoint(store, owner, again).await {
                warn!(%error, "cannot make the audit checkpoint due again");
            }
            false
        }
    }
}

/// Logs that the row said no checkpoint is due while the newest one signed
/// is overdue (`age`; `None` when none verifies), naming the row.
async fn overruled(store: &Store, age: Option<Duration>) {
    let (due_at, owner) = match store.audit_checkpoint_due().await {
        Ok(Some((due_at, owner))) => (Some(due_at), owner),
        Ok(None) => (None, None),
        Err(error) => {
            warn!(%error, "cannot read the audit_checkpoint_due row");
            (None, None)
        }
    };
    let age_secs = age.map(|age| age.as_secs());
    warn!(
        row = "audit_checkpoint_due",
        due_at,
        owner = owner.as_deref().unwrap_or("none"),
        age_secs,
        "the store's audit_checkpoint_due row says no checkpoint is due, yet the newest one signed is older \
         than the period and its slack (or none verifies): signing one all the same"
    );
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
    newest::in_dir(dir, &key.verifying_key())
}

impl Schedule {
    /// The newest checkpoint signed with the key that this process signed,
    /// the directory holds or the NATS subject holds last (one NATS cannot
    /// give is logged and passed over), kept as [`Schedule::last`].
    pub async fn known(&self) -> Option<Checkpoint> {
        let public = self.key.verifying_key();
        let mut found = self.last.lock().expect("never poisoned").clone();
        if let Some(dir) = &self.dir {
            found = newest::newer(found, newest::in_dir(dir, &public));
        }
        if let Some(url) = &self.nats {
            match newest::on_nats(url, &public).await {
                Ok(published) => found = newest::newer(found, published),
                Err(error) => warn!(%error, "cannot read the last audit checkpoint on NATS"),
            }
        }
        *self.last.lock().expect("never poisoned") = found.clone();
        found
    }
}

/// One checkpoint now: signed once the log still holds the newest one
/// signed with the key (whichever instance signed it), written to the
/// directory, published.
pub async fn write(store: &Store, schedule: &Schedule) -> Result<Checkpoint, ScheduleError> {
    let previous = schedule.known().await;
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
