//! The one-lineage rule of a transfer's transactions, pure: whether a
//! transaction may be recorded for a transfer, given the transfer's status
//! and the transactions of it that live (see [`Lineage`]). Recording
//! ([`super::record`]) judges it under the transfer's row lock.

use super::{
    model::{Lineage, SentTransaction, TxRole},
    resource::TransferStatus,
};

/// A transaction of the transfer that was not refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    pub hash: String,
    pub top_up: bool,
    pub sender: String,
    pub nonce: i64,
    /// Still `SENT`: not yet included.
    pub pending: bool,
}

/// Why `sent` breaks the lineage rule, if it does. With `same_nonce` (EVM)
/// a continuation keeps its predecessor's sender and nonce; on Solana a
/// re-signing carries a new last valid block height in the nonce's place.
pub fn refusal(
    status: TransferStatus,
    live: &[Live],
    sent: &SentTransaction,
    lineage: Lineage<'_>,
    same_nonce: bool,
) -> Option<String> {
    let top_up = sent.role == TxRole::TopUp;
    match lineage {
        Lineage::Start => {
            if status != TransferStatus::Accepted {
                return Some(format!("the transfer is {status}, no longer ACCEPTED"));
            }
            if let Some(other) = live.iter().find(|x| !x.top_up) {
                return Some(format!("transaction {} of the transfer is live", other.hash));
            }
            // A top-up replaced by an included one at its nonce stays `SENT`
            // but can never be included: it is not pending.
            let settled = |x: &Live| {
                live.iter().any(|y| y.top_up && !y.pending && y.sender == x.sender && y.nonce == x.nonce)
            };
            live.iter()
                .find(|x| x.top_up && x.pending && !settled(x))
                .map(|other| format!("top-up {} of the transfer is pending", other.hash))
        }
        Lineage::After(previous) => {
            if status.is_terminal() {
                return Some(format!("the transfer is {status}"));
            }
            let newest = live.iter().rev().find(|x| x.top_up == top_up);
            match newest {
                Some(x) if x.hash != previous => Some(format!(
                    "{} is no longer the newest transaction of its kind: {} is",
                    previous, x.hash
                )),
                None => Some(format!("{previous} is not a live transaction of the transfer")),
                Some(x) if sent.sender == x.sender && (!same_nonce || sent.nonce as i64 == x.nonce) => None,
                Some(x) => Some(format!("it does not replace {} at its sender and nonce", x.hash)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(hash: &str, top_up: bool, nonce: i64, pending: bool) -> Live {
        Live { hash: hash.into(), top_up, sender: "0xs".into(), nonce, pending }
    }

    fn sent(role: TxRole, nonce: u64) -> SentTransaction {
        SentTransaction { hash: "0xnew".into(), role, ..SentTransaction::sent_by("0xs", nonce) }
    }

    #[test]
    fn one_lineage_at_a_time() {
        use TransferStatus::{Accepted, Confirmed, Submitted};
        let (transfer, top_up) = (TxRole::Transfer, TxRole::TopUp);
        let start = Lineage::Start;
        let after = Lineage::After("0xa");
        // (status, live, what is recorded, its lineage, same nonce, refused)
        let cases: Vec<(TransferStatus, Vec<Live>, SentTransaction, Lineage, bool, bool)> = vec![
            (Accepted, vec![], sent(transfer, 5), start, true, false),
            (Submitted, vec![], sent(transfer, 5), start, true, true),
            (Accepted, vec![live("0xa", false, 5, true)], sent(transfer, 6), start, true, true),
            (Accepted, vec![live("0xa", true, 3, true)], sent(transfer, 5), start, true, true),
            // A top-up replaced at its nonce by an included one is settled.
            (
                Accepted,
                vec![live("0xa", true, 3, true), live("0xb", true, 3, false)],
                sent(transfer, 5),
                start,
                true,
                false,
            ),
            (Accepted, vec![live("0xt", true, 3, false)], sent(transfer, 5), start, true, false),
            // A replacement keeps its predecessor's sender and nonce (EVM).
            (Submitted, vec![live("0xa", false, 5, true)], sent(transfer, 5), after, true, false),
            (Submitted, vec![live("0xa", false, 5, true)], sent(transfer, 6), after, true, true),
            // Solana's re-signing carries a new height in the nonce's place.
            (Submitted, vec![live("0xa", false, 5, true)], sent(transfer, 9), after, false, false),
            (
                Submitted,
                vec![live("0xa", false, 5, true), live("0xc", false, 5, true)],
                sent(transfer, 5),
                after,
                true,
                true,
            ),
            (Submitted, vec![], sent(transfer, 5), after, true, true),
            (Confirmed, vec![live("0xa", false, 5, false)], sent(transfer, 5), after, true, true),
            // A top-up continues the newest top-up, not the transfer's.
            (
                Accepted,
                vec![live("0xa", true, 3, true), live("0xb", false, 5, true)],
                sent(top_up, 3),
                after,
                true,
                false,
            ),
        ];
        for (i, (status, live, sent, lineage, same_nonce, refused)) in cases.into_iter().enumerate() {
            let answer = refusal(status, &live, &sent, lineage, same_nonce);
            assert_eq!(answer.is_some(), refused, "case {i}: {answer:?}");
        }
    }
}
