//! The newest checkpoint whose signature verifies, wherever checkpoints are
//! kept away from the database: a directory (`--audit-checkpoint-dir`) and
//! the NATS subject `custody.events.platform.audit_checkpoint` (its last
//! message). Every instance chains to it and times the next one by it,
//! whichever instance signed it, and `health` reports its age: the age of
//! a signature, never of a store row.

use std::{path::Path, time::Duration};

use async_nats::jetstream;
use ed25519_dalek::VerifyingKey;
use serde::Serialize;

use super::{checkpoint::Checkpoint, overdue};
use crate::events::{nats::NatsUrl, subject::STREAM};

/// The subject checkpoints are published on.
pub fn checkpoint_subject() -> String {
    crate::events::subject::subject("platform", "audit_checkpoint")
}

/// The newest checkpoint in `dir` that `public` verifies, if any.
pub fn in_dir(dir: &Path, public: &VerifyingKey) -> Option<Checkpoint> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|file| std::fs::read_to_string(file.ok()?.path()).ok())
        .filter_map(|text| Checkpoint::parse(&text, "").ok())
        .filter(|checkpoint| checkpoint.signed_by(public))
        .max_by_key(order)
}

/// The last checkpoint published on the NATS subject, when `public`
/// verifies it; `Ok(None)` when the stream or the subject holds none.
pub async fn on_nats(url: &NatsUrl, public: &VerifyingKey) -> Result<Option<Checkpoint>, String> {
    let shown = |e: &dyn std::fmt::Display| crate::redact::redact_urls(&e.to_string());
    let client = async_nats::ConnectOptions::new()
        .name("custody-indexer audit checkpoints")
        .connection_timeout(Duration::from_secs(5))
        .connect(url.servers())
        .await
        .map_err(|e| shown(&e))?;
    let js = jetstream::ContextBuilder::new().timeout(Duration::from_secs(5)).build(client);
    let stream = match js.get_stream(STREAM).await {
        Ok(stream) => stream,
        Err(e) => {
            let missing = matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j)
                if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND);
            return if missing { Ok(None) } else { Err(shown(&e)) };
        }
    };
    match stream.get_last_raw_message_by_subject(&checkpoint_subject()).await {
        Ok(message) => {
            let text = String::from_utf8_lossy(&message.payload);
            let found = Checkpoint::parse(&text, "nats").ok();
            Ok(found.filter(|checkpoint| checkpoint.signed_by(public)))
        }
        Err(e) if e.kind() == jetstream::stream::LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(shown(&e)),
    }
}

/// The order checkpoints are compared in: the later time, then the later
/// head. By time first, so that the checkpoints signed after an
/// acknowledged restore (of a head below the lost one) are the newest.
fn order(checkpoint: &Checkpoint) -> (i64, i64) {
    (checkpoint.at, checkpoint.seq)
}

/// The newer of `a` and `b`.
pub fn newer(a: Option<Checkpoint>, b: Option<Checkpoint>) -> Option<Checkpoint> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if order(&b) > order(&a) { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// How old `checkpoint` is at `now` (microseconds): 0 for one from the
/// future (a clock ahead).
pub fn age(checkpoint: &Checkpoint, now: i64) -> Duration {
    Duration::from_micros(u64::try_from(now.saturating_sub(checkpoint.at)).unwrap_or(0))
}

/// Where `health` looks for checkpoints.
pub struct Kept<'a> {
    pub dir: Option<&'a Path>,
    pub nats: Option<&'a NatsUrl>,
}

/// The newest checkpoint `public` verifies in the directory and on NATS;
/// each place that could not be read, as a warning.
pub async fn find(kept: &Kept<'_>, public: &VerifyingKey) -> (Option<Checkpoint>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut newest = kept.dir.and_then(|dir| in_dir(dir, public));
    if let Some(dir) = kept.dir
        && std::fs::read_dir(dir).is_err()
    {
        warnings.push(format!("audit: --audit-checkpoint-dir {} cannot be read", dir.display()));
    }
    if let Some(url) = kept.nats {
        match on_nats(url, public).await {
            Ok(found) => newest = newer(newest, found),
            Err(error) => warnings.push(format!("audit: the checkpoints on NATS cannot be read: {error}")),
        }
    }
    (newest, warnings)
}

/// What `health` found of the checkpoints.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    /// Whether checkpoints were looked for (a place and the public key).
    pub checked: bool,
    /// The newest one's age, in seconds; `null` when none verifies.
    pub last_checkpoint_seconds: Option<u64>,
    /// The age past which `health` fails: one period and twice the slack.
    pub limit_seconds: Option<u64>,
    pub problem: Option<String>,
    pub warnings: Vec<String>,
}

impl Checked {
    /// Checkpoints not looked for.
    pub fn not_checked(warnings: Vec<String>) -> Self {
        Checked {
            checked: false,
            last_checkpoint_seconds: None,
            limit_seconds: None,
            problem: None,
            warnings,
        }
    }

    /// The line `health` prints.
    pub fn line(&self) -> String {
        match (self.checked, self.last_checkpoint_seconds) {
            (false, _) => "audit: checkpoints not checked".to_string(),
            (true, Some(age)) => format!("audit: last checkpoint {age} s ago"),
            (true, None) => "audit: no checkpoint whose signature verifies".to_string(),
        }
    }
}

/// Judges the newest checkpoint found (`newest`) at `now`, for the period
/// `every`: a problem when it is older than [`overdue::stale_after`], or
/// none verifies.
pub fn judge(newest: Option<&Checkpoint>, every: Duration, now: i64, warnings: Vec<String>) -> Checked {
    let limit = overdue::stale_after(every);
    let age = newest.map(|checkpoint| age(checkpoint, now));
    let problem = match age {
        None => Some("audit: no checkpoint whose signature verifies was found".to_string()),
        Some(age) if age > limit => Some(format!(
            "audit: the last checkpoint was signed {} s ago (limit {} s: one period of {} s and twice {} s): \
             no instance holding the key signs",
            age.as_secs(),
            limit.as_secs(),
            every.as_secs(),
            overdue::slack(every).as_secs()
        )),
        Some(_) => None,
    };
    Checked {
        checked: true,
        last_checkpoint_seconds: age.map(|age| age.as_secs()),
        limit_seconds: Some(limit.as_secs()),
        problem,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    #[test]
    fn health_fails_past_one_period_and_twice_the_slack() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let now = 1_800_000_000_000_000;
        let signed = |secs_ago: i64| Checkpoint::sign(&key, 3, "ab", now - secs_ago * 1_000_000);
        let hour = Duration::from_secs(3600);
        let cases = [
            (Some(signed(10)), hour, Some(10), false),
            (Some(signed(3720)), hour, Some(3720), false),
            (Some(signed(3721)), hour, Some(3721), true),
            (Some(signed(-5)), hour, Some(0), false),
            (None, hour, None, true),
            (Some(signed(13)), Duration::from_secs(4), Some(13), true),
        ];
        for (newest, every, age, failed) in cases {
            let checked = judge(newest.as_ref(), every, now, Vec::new());
            assert_eq!(checked.last_checkpoint_seconds, age, "{newest:?}");
            assert_eq!(checked.problem.is_some(), failed, "{newest:?}: {:?}", checked.problem);
        }
        assert_eq!(judge(Some(&signed(42)), hour, now, Vec::new()).line(), "audit: last checkpoint 42 s ago");
        assert_eq!(Checked::not_checked(Vec::new()).line(), "audit: checkpoints not checked");
    }

    #[test]
    fn the_newer_is_the_later_time_then_the_later_head() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let (a, b, c) = (
            Checkpoint::sign(&key, 3, "a", 10),
            Checkpoint::sign(&key, 4, "b", 5),
            Checkpoint::sign(&key, 4, "b", 10),
        );
        // Signed after a restore, at a lower head: the newer.
        assert_eq!(newer(Some(a.clone()), Some(b.clone())), Some(a.clone()));
        assert_eq!(newer(Some(c.clone()), Some(a.clone())), Some(c.clone()));
        assert_eq!(newer(None, Some(a.clone())), Some(a.clone()));
        assert_eq!(newer(Some(a.clone()), None), Some(a));
        assert_eq!(newer(None, None), None);
    }
}
