//! Which pending slots the cluster finalized, and which it provably skipped,
//! judged from `getBlocks` answers at `finalized`. Pure: the watcher asks.
//!
//! A slot is final when an answer lists it. It was skipped only when the same
//! answer lists a finalized block below it (the node's ledger reaches the
//! slot: a pruned node lists nothing there) and one above it (the node
//! finalized past it) and not the slot itself. Anything else — a node behind,
//! one that pruned the slot, one whose answer stops short — proves nothing,
//! and the deposit stays `PENDING` to be asked about again. Each decision
//! rests on a single answer, because each request may reach another backend.

/// The widest range `getBlocks` accepts (`end - start`), Agave's
/// `MAX_GET_CONFIRMED_BLOCKS_RANGE`: the windows are cut to it.
pub const MAX_BLOCKS_RANGE: u64 = 500_000;

/// Slots asked for below a pending slot, to find a block that shows the
/// node's ledger reaches it. Runs of skipped slots are far shorter.
const BELOW: u64 = 100;
/// Slots asked for above a pending slot, to find a finalized block past it.
const ABOVE: u64 = 400;
/// Pending slots at most this far apart share one `getBlocks` call; farther
/// apart, two small calls answer with less than one call spanning the gap.
const MERGE_GAP: u64 = 2_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Final,
    Skipped,
    Unknown,
}

/// The `getBlocks` ranges that judge `slots` (sorted, at most `finalized`):
/// each slot lies in a range with up to [`BELOW`] slots below it and
/// [`ABOVE`] above it (capped at `finalized`), and no range spans more than
/// `getBlocks` accepts (`end - start <= MAX_BLOCKS_RANGE`). Neighbouring
/// ranges may overlap; any answer holding a slot may judge it.
pub fn windows(slots: &[u64], finalized: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut current: Option<(u64, u64)> = None;
    for &slot in slots {
        current = match current {
            Some((start, last))
                if slot - last <= MERGE_GAP
                    && (slot + ABOVE).min(finalized).saturating_sub(start) <= MAX_BLOCKS_RANGE =>
            {
                Some((start, slot))
            }
            other => {
                if let Some((start, last)) = other {
                    out.push((start, (last + ABOVE).min(finalized)));
                }
                Some((slot.saturating_sub(BELOW), slot))
            }
        };
    }
    if let Some((start, last)) = current {
        out.push((start, (last + ABOVE).min(finalized)));
    }
    out
}

/// What one answer (`listed`, the finalized blocks of a range holding
/// `slot`) proves about `slot`.
pub fn verdict(slot: u64, listed: &[u64]) -> Verdict {
    if listed.contains(&slot) {
        Verdict::Final
    } else if listed.iter().any(|b| *b < slot) && listed.iter().any(|b| *b > slot) {
        Verdict::Skipped
    } else {
        Verdict::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_slot_is_final_and_an_unlisted_one_skipped_only_between_listed_blocks() {
        assert_eq!(verdict(10, &[8, 10, 12]), Verdict::Final);
        assert_eq!(verdict(10, &[8, 9, 11]), Verdict::Skipped);
        // A node behind: nothing finalized above the slot yet.
        assert_eq!(verdict(10, &[7, 8, 9]), Verdict::Unknown);
        // A node that pruned the slot: nothing listed below it.
        assert_eq!(verdict(10, &[11, 12]), Verdict::Unknown);
        assert_eq!(verdict(10, &[]), Verdict::Unknown);
    }

    #[test]
    fn near_slots_share_a_window_and_far_ones_do_not() {
        assert_eq!(windows(&[1_000, 1_500], 10_000), vec![(900, 1_900)]);
        assert_eq!(windows(&[1_000, 9_000], 10_000), vec![(900, 1_400), (8_900, 9_400)]);
        // Capped at the finalized slot, and never below slot 0.
        assert_eq!(windows(&[50, 60], 70), vec![(0, 70)]);
        assert!(windows(&[], 10).is_empty());
    }

    #[test]
    fn a_window_never_spans_more_than_get_blocks_accepts() {
        // A pending deposit every 1,000 slots over two million slots: one
        // merged run, cut into ranges getBlocks accepts.
        let slots: Vec<u64> = (0..2_000).map(|i| 1_000 + i * 1_000).collect();
        let finalized = 3_000_000;
        let windows = windows(&slots, finalized);
        assert!(windows.len() >= 4, "{windows:?}");
        assert!(windows.iter().all(|(s, e)| s <= e && e - s <= MAX_BLOCKS_RANGE));
        for slot in &slots {
            let margins = |(start, end): &&(u64, u64)| slot - start >= BELOW && end - slot >= ABOVE;
            assert!(windows.iter().filter(|(s, e)| s <= slot && slot <= e).any(|w| margins(&w)), "{slot}");
        }
    }
}
