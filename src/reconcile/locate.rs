//! Where a difference arose: a bisection over heights of
//! `f(b) = onchain(b) − ledger(b)`, which is zero where the chain and the
//! ledger last agreed and not zero where they are compared now. Every
//! interval whose ends differ holds a block where `f` changes; it is halved
//! until that block is found, on each side, so differences that arose in
//! several blocks (a missed credit swept later, movements that cancel
//! only in part) are all found. An interval whose ends agree is taken to
//! hold no change: movements that cancel exactly within it are invisible
//! to balances, and stay so.
//!
//! Each changing block costs at most ⌈log2(range)⌉ reads.

use std::future::Future;

use alloy::primitives::I256;

/// A block where `f` changed, and by how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub block: u64,
    pub by: I256,
}

/// The blocks in `(lo, hi]` where `f` changes, given `f` at both ends, in
/// block order, and the number of reads `read` made.
pub async fn locate<F, Fut, E>(lo: (u64, I256), hi: (u64, I256), mut read: F) -> Result<(Vec<Change>, u32), E>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<I256, E>>,
{
    let (mut changes, mut reads) = (Vec::new(), 0);
    let mut open = vec![(lo, hi)];
    while let Some(((a, fa), (b, fb))) = open.pop() {
        if fa == fb || b <= a {
            continue;
        }
        if b == a + 1 {
            changes.push(Change { block: b, by: fb - fa });
            continue;
        }
        let mid = a + (b - a) / 2;
        let fm = read(mid).await?;
        reads += 1;
        open.push(((mid, fm), (b, fb)));
        open.push(((a, fa), (mid, fm)));
    }
    changes.sort_by_key(|c| c.block);
    Ok((changes, reads))
}

/// The most reads [`locate`] may make over `range` blocks for `changes`
/// changing blocks: ⌈log2(range)⌉ + 1 each.
pub fn read_bound(range: u64, changes: usize) -> u32 {
    let log2 = if range <= 1 { 0 } else { 64 - (range - 1).leading_zeros() };
    (log2 + 1) * changes.max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f` as a sum of steps: each `(block, by)` adds `by` from `block` on.
    fn f(steps: &[(u64, i64)], at: u64) -> I256 {
        I256::try_from(steps.iter().filter(|(b, _)| *b <= at).map(|(_, by)| by).sum::<i64>()).unwrap()
    }

    async fn run(lo: u64, hi: u64, steps: &[(u64, i64)]) -> (Vec<(u64, i64)>, u32) {
        let read = |b: u64| async move { Ok::<_, ()>(f(steps, b)) };
        let (changes, reads) = locate((lo, f(steps, lo)), (hi, f(steps, hi)), read).await.unwrap();
        (changes.iter().map(|c| (c.block, i64::try_from(c.by).unwrap())).collect(), reads)
    }

    #[tokio::test]
    async fn every_block_where_the_difference_changes_is_found_within_the_bound() {
        type Steps = Vec<(u64, i64)>;
        let cases: Vec<(u64, u64, Steps, Steps)> = vec![
            // One missed credit.
            (0, 1_000, vec![(437, 5)], vec![(437, 5)]),
            // At the first and the last block of the range.
            (10, 20, vec![(11, 1)], vec![(11, 1)]),
            (10, 20, vec![(20, -3)], vec![(20, -3)]),
            // A missed credit, and an unexplained debit of part of it later.
            (0, 1 << 20, vec![(1_000, 10), (900_000, -4)], vec![(1_000, 10), (900_000, -4)]),
            // Three changes in neighbouring blocks.
            (100, 200, vec![(150, 1), (151, 1), (152, 1)], vec![(150, 1), (151, 1), (152, 1)]),
            // Two that cancel between the reads that bracket them leave no
            // trace in balances: the change that remains is found.
            (100, 200, vec![(150, 1), (151, 1), (152, -1)], vec![(150, 1)]),
            // Adjacent ends.
            (7, 8, vec![(8, 2)], vec![(8, 2)]),
        ];
        for (lo, hi, steps, found) in cases {
            let (changes, reads) = run(lo, hi, &steps).await;
            assert_eq!(changes, found, "{lo}..{hi} {steps:?}");
            let bound = read_bound(hi - lo, found.len());
            assert!(reads <= bound, "{lo}..{hi} {steps:?}: {reads} reads, bound {bound}");
        }
    }

    #[tokio::test]
    async fn a_difference_that_returns_to_agreement_is_found_where_a_read_shows_it() {
        // Agreement at both ends: nothing to bisect, nothing read.
        assert_eq!(run(0, 100, &[(10, 5), (60, -5)]).await, (vec![], 0));
        // A credit missed, then swept out and another missed: the middle
        // read shows the first, so both sides are searched.
        let (changes, _) = run(0, 64, &[(10, 5), (40, -5), (50, 2)]).await;
        assert_eq!(changes, vec![(10, 5), (40, -5), (50, 2)]);
    }

    #[tokio::test]
    async fn a_failed_read_ends_the_search_with_its_error() {
        let read =
            |b: u64| async move { if b == 50 { Err(format!("block {b} pruned")) } else { Ok(I256::ZERO) } };
        let answer = locate((0, I256::ZERO), (100, I256::ONE), read).await;
        assert_eq!(answer.unwrap_err(), "block 50 pruned");
    }

    #[test]
    fn the_bound_is_the_ceiling_of_log2_plus_one_per_change() {
        for (range, changes, bound) in
            [(1, 1, 1), (2, 1, 2), (3, 1, 3), (1_024, 1, 11), (1_025, 2, 24), (5, 0, 4)]
        {
            assert_eq!(read_bound(range, changes), bound, "{range} {changes}");
        }
    }
}
