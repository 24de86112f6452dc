//! Provider quorum: a deposit is confirmed only when `confirm_quorum`
//! RPC URLs answer the same block and the same deposit in it. Each URL's
//! answer is gathered by the family's watcher; the verdict, and what a
//! disagreement records, are decided here; [`step`] asks, judges and
//! settles for either family.

use serde::Serialize;
use utoipa::ToSchema;

use crate::{chain::Chain, deposits::resource::Detected};

mod step;

pub use step::{Evidence, Providers, QUORUM_WAITING, Quorum, confirm_on_quorum};

/// The reason a deposit no quorum of providers holds is `FAILED` with, in
/// its dispute and the logs (the Deposit resource has no reason).
pub const NOT_ON_QUORUM: &str = "NOT_ON_QUORUM";

/// A pending deposit as recorded, to be asked of each provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub id: String,
    pub chain: Chain,
    pub tx_hash: String,
    /// [`crate::deposits::resource::Position::key`].
    pub position: String,
    pub account_id: String,
    pub address: String,
    pub symbol: String,
    pub amount_raw: String,
    pub block_number: u64,
    pub block_hash: String,
}

impl Claimed {
    /// Whether a provider's `found` deposit is this one: the same
    /// transaction, position, address, asset and amount.
    pub fn is(&self, found: &Detected) -> bool {
        found.tx_hash == self.tx_hash
            && found.position.key() == self.position
            && found.account_address.eq_ignore_ascii_case(&self.address)
            && found.currency_symbol == self.symbol
            && found.amount.raw().to_string() == self.amount_raw
    }
}

/// What one RPC URL answered about a deposit's block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// No answer (an error, a timeout): never counted as absent.
    Silent,
    /// Its confirmed height (its own head less the depth, or its own
    /// `finalized` block) is below the block: it does not vouch for it yet.
    Behind,
    /// It serves the block at the deposit's height under `hash`, holding
    /// the deposit as recorded or not.
    Serves { hash: String, holds: bool },
    /// Solana: it has no block at the deposit's slot (skipped) and no
    /// status for its transaction: the deposit is absent there.
    Skipped,
}

impl Answer {
    /// As a dispute lists it.
    pub fn describe(&self, recorded_hash: &str) -> String {
        match self {
            Answer::Silent => "no answer".into(),
            Answer::Behind => "the block is not final there yet".into(),
            Answer::Skipped => "no block at that slot, and no status for the transaction".into(),
            Answer::Serves { hash, holds: true } if hash == recorded_hash => {
                "the block with the deposit".into()
            }
            Answer::Serves { hash, .. } if hash == recorded_hash => "the block without the deposit".into(),
            Answer::Serves { hash, .. } => format!("another block at that height ({hash})"),
        }
    }
}

/// What becomes of a pending deposit (see [`deposit_verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Confirm,
    /// More URLs serve the block without it than a quorum can spare.
    Fail,
    /// Not enough answers yet: it stays `PENDING`.
    Wait,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    /// Some URL that vouches for the height serves it without the
    /// deposit, or serves another block there: recorded, counted and
    /// alarmed, whatever the decision.
    pub disputed: bool,
}

/// The verdict on a deposit recorded in block `recorded_hash` from each
/// URL's answer, `quorum` of which must hold it. A silent or lagging URL
/// is never absent: the deposit waits, and never goes ahead on fewer. Only
/// a URL serving the very block recorded without the deposit counts
/// against it: another block at that height is a reorg (or a lie) that
/// the watcher's reorg handling judges, so the deposit waits.
pub fn verdict(recorded_hash: &str, answers: &[Answer], quorum: usize) -> Verdict {
    let same = |hash: &String| hash == recorded_hash;
    let agree =
        answers.iter().filter(|a| matches!(a, Answer::Serves { hash, holds: true } if same(hash))).count();
    let absent = answers
        .iter()
        .filter(|a| {
            matches!(a, Answer::Skipped) || matches!(a, Answer::Serves { hash, holds: false } if same(hash))
        })
        .count();
    let elsewhere =
        answers.iter().filter(|a| matches!(a, Answer::Serves { hash, .. } if !same(hash))).count();
    let spare = answers.len().saturating_sub(quorum);
    let decision = if agree >= quorum {
        Decision::Confirm
    } else if absent > spare {
        Decision::Fail
    } else {
        Decision::Wait
    };
    Verdict { decision, disputed: absent + elsewhere > 0 }
}

/// The verdict on a pending deposit: [`verdict`], except that with as many
/// URLs as the quorum (`k = n`, allowed) a URL serving the block without
/// it never fails it: no quorum is left to spare a URL, so one provider's
/// word (a lagging index, a lie) would veto every deposit it lacks. Such a
/// deposit waits as on a non-answer, its dispute open, and only the
/// watcher's reorg judgement fails it. With a spare URL (`k < n`) more
/// URLs than the quorum can spare, two at least, fail it as before. The
/// senders keep [`verdict`]: there a failed verdict only makes a receipt
/// decide nothing.
pub fn deposit_verdict(recorded_hash: &str, answers: &[Answer], quorum: usize) -> Verdict {
    let judged = verdict(recorded_hash, answers, quorum);
    let spare = answers.len().saturating_sub(quorum);
    match judged.decision {
        Decision::Fail if spare == 0 => Verdict { decision: Decision::Wait, ..judged },
        _ => judged,
    }
}

/// The block hash a deposit is judged by: the one recorded, or, for a
/// deposit recorded without one (Solana's `signatures` strategy reads
/// transactions, not blocks), the hash most URLs holding it serve, else
/// the one most URLs serve (the first such on a tie). Liars agreeing on
/// another hash than the honest URLs then make a dispute, never a quorum.
pub fn reference_hash(recorded_hash: &str, answers: &[Answer]) -> String {
    if !recorded_hash.is_empty() {
        return recorded_hash.to_string();
    }
    let most = |holding: bool| {
        let served: Vec<&String> = answers
            .iter()
            .filter_map(|a| match a {
                Answer::Serves { hash, holds } if *holds || !holding => Some(hash),
                _ => None,
            })
            .collect();
        let count = |h: &String| served.iter().filter(|s| **s == h).count();
        served.iter().copied().fold(None::<&String>, |best, h| match best {
            Some(b) if count(b) >= count(h) => Some(b),
            _ => Some(h),
        })
    };
    most(true).or_else(|| most(false)).cloned().unwrap_or_default()
}

/// How a dispute ended, or that it is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// The deposit waits for the providers to agree.
    Open,
    /// A quorum held it after all: confirmed.
    Confirmed,
    /// More providers than a quorum can spare serve its block without it.
    NotOnQuorum,
    /// Its transaction left the chain in a reorg: the deposit `FAILED` as
    /// any reorged one does.
    Reorged,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Open => "OPEN",
            Outcome::Confirmed => "CONFIRMED",
            Outcome::NotOnQuorum => NOT_ON_QUORUM,
            Outcome::Reorged => "REORGED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Outcome::Open, Outcome::Confirmed, Outcome::NotOnQuorum, Outcome::Reorged]
            .into_iter()
            .find(|o| o.as_str() == text)
    }

    fn of(decision: Decision) -> Self {
        match decision {
            Decision::Confirm => Outcome::Confirmed,
            Decision::Fail => Outcome::NotOnQuorum,
            Decision::Wait => Outcome::Open,
        }
    }
}

/// One URL's answer in a dispute; the URL without its secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
pub struct UrlAnswer {
    pub url: String,
    pub answered: String,
}

/// Providers that disagreed about a deposit: which URLs answered what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Dispute {
    pub deposit_id: String,
    #[schema(value_type = String)]
    pub chain: Chain,
    pub account_id: String,
    pub address: String,
    pub asset: String,
    pub transaction_hash: String,
    pub block_number: u64,
    pub block_hash: String,
    pub answers: Vec<UrlAnswer>,
    pub outcome: Outcome,
    /// RFC 3339, by the store's clock; empty before it is stored.
    pub first_seen_at: String,
    pub updated_at: String,
}

impl Dispute {
    /// The dispute a disputed verdict records, `answers` by URL, each
    /// described against `judged_by` (see [`reference_hash`]).
    pub fn new(claimed: &Claimed, judged_by: &str, answers: &[(String, Answer)], decision: Decision) -> Self {
        Dispute {
            deposit_id: claimed.id.clone(),
            chain: claimed.chain,
            account_id: claimed.account_id.clone(),
            address: claimed.address.clone(),
            asset: claimed.symbol.clone(),
            transaction_hash: claimed.tx_hash.clone(),
            block_number: claimed.block_number,
            block_hash: judged_by.to_string(),
            answers: answers
                .iter()
                .map(|(url, a)| UrlAnswer { url: url.clone(), answered: a.describe(judged_by) })
                .collect(),
            outcome: Outcome::of(decision),
            first_seen_at: String::new(),
            updated_at: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "0xaa";

    fn with(holds: bool) -> Answer {
        Answer::Serves { hash: H.into(), holds }
    }

    fn other() -> Answer {
        Answer::Serves { hash: "0xbb".into(), holds: true }
    }

    #[test]
    fn a_deposit_is_confirmed_only_on_a_quorum_and_failed_only_when_a_quorum_cannot_hold_it() {
        use Answer::{Behind, Silent};
        use Decision::{Confirm, Fail, Wait};
        let cases: Vec<(&str, Vec<Answer>, usize, Decision, bool)> = vec![
            ("one URL, quorum 1: today's behaviour", vec![with(true)], 1, Confirm, false),
            ("two agree", vec![with(true), with(true)], 2, Confirm, false),
            ("a liar's deposit the honest URL lacks", vec![with(true), with(false)], 2, Fail, true),
            (
                "the honest URL on another block: a reorg, judged elsewhere",
                vec![with(true), other()],
                2,
                Wait,
                true,
            ),
            ("all on another block", vec![other(), other()], 2, Wait, true),
            ("the honest URL silent: wait", vec![with(true), Silent], 2, Wait, false),
            ("the honest URL behind: wait", vec![with(true), Behind], 2, Wait, false),
            ("two of three agree, one absent", vec![with(true), with(true), with(false)], 2, Confirm, true),
            ("one absent of three, one silent", vec![with(true), with(false), Silent], 2, Wait, true),
            ("two absent of three", vec![with(true), with(false), with(false)], 2, Fail, true),
            ("nobody answers", vec![Silent, Silent], 2, Wait, false),
            ("one holds, quorum 1, other absent", vec![with(true), with(false)], 1, Confirm, true),
            ("all absent, quorum 1", vec![with(false)], 1, Fail, true),
            ("skipped counts as absent", vec![with(true), Answer::Skipped], 2, Fail, true),
            ("skipped on one of three", vec![with(true), with(true), Answer::Skipped], 2, Confirm, true),
        ];
        for (what, answers, quorum, decision, disputed) in cases {
            assert_eq!(verdict(H, &answers, quorum), Verdict { decision, disputed }, "{what}");
        }
    }

    #[test]
    fn with_as_many_urls_as_the_quorum_no_single_url_fails_a_deposit() {
        use Answer::{Behind, Silent, Skipped};
        use Decision::{Confirm, Fail, Wait};
        let cases: Vec<(&str, Vec<Answer>, usize, Decision, bool)> = vec![
            ("k = n = 2: the other URL lacks it, so it waits", vec![with(true), with(false)], 2, Wait, true),
            ("k = n = 2: skipped there, it waits", vec![with(true), Skipped], 2, Wait, true),
            ("k = n = 2: both lack it, still no veto", vec![with(false), with(false)], 2, Wait, true),
            ("k = n = 3: one lacks it", vec![with(true), with(true), with(false)], 3, Wait, true),
            ("k = n = 1: its one URL lacks it", vec![with(false)], 1, Wait, true),
            ("k = n = 2: both hold it", vec![with(true), with(true)], 2, Confirm, false),
            ("k = n = 2: silent, as ever", vec![with(true), Silent], 2, Wait, false),
            ("k = n = 2: behind, as ever", vec![with(true), Behind], 2, Wait, false),
            ("k = n = 2: another block, the reorg's to judge", vec![with(true), other()], 2, Wait, true),
            (
                "a spare URL: two of three lack it, failed",
                vec![with(true), with(false), with(false)],
                2,
                Fail,
                true,
            ),
            (
                "a spare URL: one of three lacks it, confirmed",
                vec![with(true), with(true), with(false)],
                2,
                Confirm,
                true,
            ),
            ("a spare URL: one lacks it, one silent", vec![with(true), with(false), Silent], 2, Wait, true),
            ("quorum 1 of 2: both lack it", vec![with(false), with(false)], 1, Fail, true),
        ];
        for (what, answers, quorum, decision, disputed) in cases {
            assert_eq!(deposit_verdict(H, &answers, quorum), Verdict { decision, disputed }, "{what}");
        }
    }

    #[test]
    fn each_answer_is_described_for_the_dispute() {
        assert_eq!(with(true).describe(H), "the block with the deposit");
        assert_eq!(with(false).describe(H), "the block without the deposit");
        assert_eq!(other().describe(H), "another block at that height (0xbb)");
        assert_eq!(Answer::Silent.describe(H), "no answer");
        assert!(Answer::Skipped.describe(H).starts_with("no block at that slot"));
        assert_eq!(Outcome::parse("NOT_ON_QUORUM"), Some(Outcome::NotOnQuorum));
        assert_eq!(Outcome::parse("REORGED"), Some(Outcome::Reorged));
    }

    #[test]
    fn a_deposit_recorded_without_a_block_hash_is_judged_by_the_hash_its_holders_serve() {
        let serves = |hash: &str, holds| Answer::Serves { hash: hash.into(), holds };
        let cases: Vec<(&str, &str, Vec<Answer>, &str)> = vec![
            ("a recorded hash is kept", "0xaa", vec![serves("0xbb", true)], "0xaa"),
            ("the holders' hash", "", vec![serves("0xaa", true), serves("0xaa", true)], "0xaa"),
            (
                "holders before others",
                "",
                vec![serves("0xbb", false), serves("0xbb", false), serves("0xaa", true)],
                "0xaa",
            ),
            (
                "most holders win",
                "",
                vec![serves("0xbb", true), serves("0xaa", true), serves("0xaa", true)],
                "0xaa",
            ),
            ("a tie: the first", "", vec![serves("0xbb", true), serves("0xaa", true)], "0xbb"),
            (
                "nobody holds: the most served",
                "",
                vec![serves("0xaa", false), serves("0xbb", false), serves("0xbb", false)],
                "0xbb",
            ),
            ("nobody serves", "", vec![Answer::Silent, Answer::Skipped], ""),
        ];
        for (what, recorded, answers, expected) in cases {
            assert_eq!(reference_hash(recorded, &answers), expected, "{what}");
        }
        // A liar holding a deposit under its own hash, beside an honest URL
        // serving the real block without it: a dispute, never a confirmation.
        let answers = vec![serves("0xliar", true), serves("0xreal", false)];
        let judged = verdict(&reference_hash("", &answers), &answers, 2);
        assert_eq!(judged, Verdict { decision: Decision::Wait, disputed: true });
    }
}
