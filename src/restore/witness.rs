//! Whether the store was restored, judged from its audit log against the
//! newest signed checkpoint kept outside it, pure. A log whose head lies
//! before that checkpoint, or whose entry at the checkpoint's `seq` is not
//! the one signed, lost entries the checkpoint saw: the store was restored
//! from a backup (or truncated). That stays so until an admin's
//! `audit_log.restore_acknowledged` entry names exactly that checkpoint;
//! from then on the restore is *recovering* until a `transfers.recovered`
//! entry after the acknowledgement names each chain it lists. Only entries
//! the log admits as authority (their MAC verifies, with a pepper) count.

use serde::Serialize;

use crate::audit::{Detail, chain::Entry, checkpoint::Checkpoint};

/// The action of an admin's acknowledgement of a restore.
pub const RESTORE_ACKNOWLEDGED: &str = "audit_log.restore_acknowledged";
/// The action of `transfers recover` on one chain (its target).
pub const RECOVERED: &str = "transfers.recovered";

/// What the log and the newest checkpoint say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Witness {
    /// Nothing says the store was restored.
    Intact,
    /// The log lost entries the newest checkpoint saw, and no admin has
    /// acknowledged it.
    Restored { head: i64, checkpoint: i64, rewritten: bool },
    /// Acknowledged by entry `acknowledged_by`; `chains` still wait for
    /// `transfers recover`.
    Recovering { acknowledged_by: i64, chains: Vec<String> },
}

impl Witness {
    /// The line `health` prints, none when intact.
    pub fn line(&self) -> Option<String> {
        match self {
            Witness::Intact => None,
            Witness::Restored { head, checkpoint, rewritten: false } => Some(format!(
                "restored: the audit log ends at {head}, the last checkpoint is at {checkpoint}: \
                 see `audit acknowledge-restore` and `transfers recover` (docs/operations.md)"
            )),
            Witness::Restored { head, checkpoint, rewritten: true } => Some(format!(
                "restored: the audit log's entry {checkpoint} is not the one the last checkpoint signed (the log \
                 ends at {head}): see `audit acknowledge-restore` and `transfers recover` (docs/operations.md)"
            )),
            Witness::Recovering { acknowledged_by, chains } => Some(format!(
                "restored: acknowledged by audit entry {acknowledged_by}; `transfers recover --chain` has not run \
                 for {}",
                chains.join(", ")
            )),
        }
    }

    /// Whether the chain `chain` waits for recovery: every chain while the
    /// restore is unacknowledged.
    pub fn holds(&self, chain: &str) -> bool {
        match self {
            Witness::Intact => false,
            Witness::Restored { .. } => true,
            Witness::Recovering { chains, .. } => chains.iter().any(|c| c == chain),
        }
    }
}

/// What the log holds, as the witness reads it.
#[derive(Debug, Clone, Default)]
pub struct Log<'a> {
    /// The head's `seq`.
    pub head: i64,
    /// The hash of the entry at the newest checkpoint's `seq`, if the log
    /// holds one.
    pub at_checkpoint: Option<&'a str>,
    /// The admitted entries of [`RESTORE_ACKNOWLEDGED`] and [`RECOVERED`],
    /// in `seq` order.
    pub entries: &'a [Entry],
}

/// Judges `log` against `newest`, the newest checkpoint whose signature
/// verifies (none: only acknowledged restores are followed).
pub fn judge(log: &Log<'_>, newest: Option<&Checkpoint>) -> Witness {
    if let Some(checkpoint) = newest
        && !holds(log, checkpoint)
        && !log.entries.iter().any(|e| acknowledges(e, checkpoint))
    {
        let rewritten = checkpoint.seq <= log.head;
        return Witness::Restored { head: log.head, checkpoint: checkpoint.seq, rewritten };
    }
    let Some(acknowledgement) = log.entries.iter().rev().find(|e| e.action == RESTORE_ACKNOWLEDGED) else {
        return Witness::Intact;
    };
    let listed = Detail::parse(acknowledgement.detail.as_deref().unwrap_or("")).and_then(|d| d.chains);
    let chains: Vec<String> = listed
        .unwrap_or_default()
        .into_iter()
        .filter(|chain| {
            !log.entries
                .iter()
                .any(|e| e.action == RECOVERED && e.seq > acknowledgement.seq && e.target_id == *chain)
        })
        .collect();
    if chains.is_empty() {
        Witness::Intact
    } else {
        Witness::Recovering { acknowledged_by: acknowledgement.seq, chains }
    }
}

/// Whether the log still holds `checkpoint`'s entry as it was signed.
fn holds(log: &Log<'_>, checkpoint: &Checkpoint) -> bool {
    checkpoint.seq == 0 || (checkpoint.seq <= log.head && log.at_checkpoint == Some(checkpoint.hash.as_str()))
}

/// Whether `entry` acknowledges the loss of exactly `checkpoint`.
pub fn acknowledges(entry: &Entry, checkpoint: &Checkpoint) -> bool {
    if entry.action != RESTORE_ACKNOWLEDGED || entry.target_id != checkpoint.seq.to_string() {
        return false;
    }
    Detail::parse(entry.detail.as_deref().unwrap_or("")).is_some_and(|d| {
        d.checkpoint_seq == Some(checkpoint.seq)
            && d.checkpoint_hash.as_deref() == Some(checkpoint.hash.as_str())
            && d.checkpoint_at == Some(checkpoint.at)
    })
}

/// Whether `entry` acknowledges a restore that lost `checkpoint`: the
/// checkpoint it names, or one signed no later within the entries it
/// says were lost (the older checkpoints of the lost range).
pub fn covers(entry: &Entry, checkpoint: &Checkpoint) -> bool {
    if acknowledges(entry, checkpoint) {
        return true;
    }
    if entry.action != RESTORE_ACKNOWLEDGED {
        return false;
    }
    Detail::parse(entry.detail.as_deref().unwrap_or("")).is_some_and(|d| {
        let lost = d.lost_from.zip(d.lost_to).is_some_and(|(from, to)| (from..=to).contains(&checkpoint.seq));
        lost && d.checkpoint_at.is_some_and(|at| checkpoint.at <= at)
    })
}

/// The detail an acknowledgement of `checkpoint` records, the log's head
/// being `head` when it is written, for `chains`.
pub fn acknowledgement(checkpoint: &Checkpoint, head: i64, chains: Vec<String>) -> Detail {
    Detail {
        checkpoint_seq: Some(checkpoint.seq),
        checkpoint_hash: Some(checkpoint.hash.clone()),
        checkpoint_at: Some(checkpoint.at),
        lost_from: Some(head.saturating_add(1).min(checkpoint.seq)),
        lost_to: Some(checkpoint.seq),
        head_seq: Some(head),
        chains: Some(chains),
        ..Detail::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    fn entry(seq: i64, action: &str, target: &str, detail: Option<Detail>) -> Entry {
        let mut entry = Entry {
            seq,
            at: 0,
            actor: "operator:a".into(),
            actor_name: None,
            action: action.into(),
            target_kind: "x".into(),
            target_id: target.into(),
            organization_id: None,
            reason: None,
            request_id: None,
            detail: detail.map(|d| d.text()),
            prev_hash: String::new(),
            hash: String::new(),
            mac: None,
        };
        entry.hash = entry.digest();
        entry
    }

    #[test]
    fn a_log_that_lost_what_the_newest_checkpoint_saw_is_restored_until_acknowledged_and_recovered() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let lost = Checkpoint::sign(&key, 40, "h40", 1_000);
        let chains = || vec!["ethereum".to_string(), "solana".to_string()];
        let ack = entry(31, RESTORE_ACKNOWLEDGED, "40", Some(acknowledgement(&lost, 30, chains())));
        let other = Checkpoint::sign(&key, 40, "other", 1_000);
        let wrong = entry(31, RESTORE_ACKNOWLEDGED, "40", Some(acknowledgement(&other, 30, chains())));
        let eth = entry(32, RECOVERED, "ethereum", None);
        let sol = entry(33, RECOVERED, "solana", None);
        let before = entry(29, RECOVERED, "solana", None);
        let log = |head, at: Option<&'static str>, entries: &'static [Entry]| Log {
            head,
            at_checkpoint: at,
            entries,
        };
        let leak = |entries: Vec<Entry>| -> &'static [Entry] { Box::leak(entries.into_boxed_slice()) };
        let recovering = |chains: &[&str]| Witness::Recovering {
            acknowledged_by: 31,
            chains: chains.iter().map(|c| c.to_string()).collect(),
        };
        let cases = [
            ("no checkpoint", log(30, None, leak(vec![])), None, Witness::Intact),
            ("held", log(45, Some("h40"), leak(vec![])), Some(&lost), Witness::Intact),
            ("the head on it", log(40, Some("h40"), leak(vec![])), Some(&lost), Witness::Intact),
            (
                "truncated",
                log(30, None, leak(vec![])),
                Some(&lost),
                Witness::Restored { head: 30, checkpoint: 40, rewritten: false },
            ),
            (
                "grown past it again",
                log(50, Some("elsewhere"), leak(vec![])),
                Some(&lost),
                Witness::Restored { head: 50, checkpoint: 40, rewritten: true },
            ),
            (
                "another checkpoint acknowledged",
                log(31, None, leak(vec![wrong])),
                Some(&lost),
                Witness::Restored { head: 31, checkpoint: 40, rewritten: false },
            ),
            (
                "acknowledged",
                log(31, None, leak(vec![ack.clone()])),
                Some(&lost),
                recovering(&["ethereum", "solana"]),
            ),
            (
                "a recovery before the acknowledgement counts for nothing",
                log(31, None, leak(vec![before, ack.clone()])),
                Some(&lost),
                recovering(&["ethereum", "solana"]),
            ),
            (
                "one chain recovered",
                log(32, None, leak(vec![ack.clone(), eth.clone()])),
                Some(&lost),
                recovering(&["solana"]),
            ),
            (
                "every chain recovered",
                log(33, None, leak(vec![ack.clone(), eth.clone(), sol.clone()])),
                Some(&lost),
                Witness::Intact,
            ),
            (
                "recovered, and a newer checkpoint held",
                log(60, Some("h55"), leak(vec![ack, eth, sol])),
                Some(&Checkpoint::sign(&key, 55, "h55", 2_000)),
                Witness::Intact,
            ),
        ];
        for (case, log, newest, expected) in cases {
            assert_eq!(judge(&log, newest), expected, "{case}");
        }
        // `audit verify` accepts the older checkpoints of the lost range
        // through the acknowledgement, never a later one or one outside it.
        let ack = entry(31, RESTORE_ACKNOWLEDGED, "40", Some(acknowledgement(&lost, 30, chains())));
        assert!(covers(&ack, &lost));
        assert!(covers(&ack, &Checkpoint::sign(&key, 35, "h35", 900)), "an older one of the range");
        assert!(
            !covers(&ack, &Checkpoint::sign(&key, 35, "h35", 1_001)),
            "signed after the one acknowledged"
        );
        assert!(!covers(&ack, &Checkpoint::sign(&key, 30, "h30", 800)), "the head it kept is not lost");
        assert!(!covers(&ack, &Checkpoint::sign(&key, 41, "h41", 900)), "past the range");
    }

    #[test]
    fn the_lines_name_the_head_and_the_checkpoint() {
        let restored = Witness::Restored { head: 30, checkpoint: 40, rewritten: false };
        assert!(
            restored
                .line()
                .unwrap()
                .starts_with("restored: the audit log ends at 30, the last checkpoint is at 40")
        );
        assert!(restored.holds("ethereum"));
        let recovering = Witness::Recovering { acknowledged_by: 31, chains: vec!["solana".into()] };
        assert!(recovering.holds("solana") && !recovering.holds("ethereum"));
        assert_eq!(Witness::Intact.line(), None);
    }
}
