//! How many blocks a backfill reads and commits at once: as many as the
//! chain file allows (`max_block_range`) where deposits are few, fewer where
//! they are dense, so the deposits held in memory stay about the same
//! whatever the chain holds.

/// The deposits a backfill range aims at. Two ranges are read ahead while
/// one commits, so about three times this many are held at once.
pub const RANGE_DEPOSITS: u64 = 5_000;

/// The first range's size: one RPC batch of blocks, since nothing is known
/// yet of the chain's density.
pub fn first(batch_size: u64, max: u64) -> u64 {
    batch_size.clamp(1, max.max(1))
}

/// The next range's size after a range of `blocks` blocks held `deposits`
/// deposits: smaller in proportion above [`RANGE_DEPOSITS`], twice as large
/// below half of it, never more than `max` nor less than one block.
pub fn next(blocks: u64, deposits: u64, max: u64) -> u64 {
    let size = if deposits > RANGE_DEPOSITS {
        // Below `blocks`, so it fits.
        (u128::from(blocks) * u128::from(RANGE_DEPOSITS) / u128::from(deposits)) as u64
    } else if deposits.saturating_mul(2) < RANGE_DEPOSITS {
        blocks.saturating_mul(2)
    } else {
        blocks
    };
    size.clamp(1, max.max(1))
}

/// The range starting at `start` of `size` blocks, cut at `to`, and where
/// the next one starts (`None`: `to` is reached).
pub fn range_at(start: u64, size: u64, to: u64) -> ((u64, u64), Option<u64>) {
    let end = to.min(start.saturating_add(size.max(1) - 1));
    ((start, end), (end < to).then(|| end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_span_once_whatever_the_sizes() {
        for (from, to, sizes) in [
            (0, 9, vec![3]),
            (5, 5, vec![50]),
            (0, 999, vec![50, 100, 7, 1, 0, 500]),
            (u64::MAX - 10, u64::MAX, vec![4]),
        ] {
            let (mut next, mut covered, mut i) = (Some(from), Vec::new(), 0);
            while let Some(start) = next {
                let ((a, b), after) = range_at(start, sizes[i.min(sizes.len() - 1)], to);
                covered.push((a, b));
                (next, i) = (after, i + 1);
            }
            assert_eq!(covered.first().unwrap().0, from);
            assert_eq!(covered.last().unwrap().1, to);
            assert!(covered.windows(2).all(|w| w[1].0 == w[0].1 + 1), "{covered:?}");
            assert!(covered.iter().all(|(a, b)| a <= b));
        }
    }

    #[test]
    fn ranges_follow_the_density_within_bounds() {
        // (blocks, deposits, max) → next size
        let cases = [
            // Sparse: doubles up to the chain file's limit.
            ((50, 0, 500), 100),
            ((400, 10, 500), 500),
            ((500, 2_499, 500), 500),
            // Around the aim: stays.
            ((100, 2_500, 500), 100),
            ((100, 5_000, 500), 100),
            // Dense: shrinks in proportion.
            ((500, 27_500, 500), 90),
            ((100, 10_000, 500), 50),
            // One block above the aim: one block, never zero.
            ((1, 100_000, 500), 1),
            ((3, 1_000_000, 500), 1),
            // A limit of zero or one still reads one block.
            ((1, 0, 0), 1),
            ((1, 0, 1), 1),
            // No overflow at the extremes.
            ((u64::MAX, u64::MAX, u64::MAX), RANGE_DEPOSITS),
            ((u64::MAX, 0, u64::MAX), u64::MAX),
        ];
        for ((blocks, deposits, max), expected) in cases {
            assert_eq!(next(blocks, deposits, max), expected, "next({blocks}, {deposits}, {max})");
        }
    }

    #[test]
    fn the_first_range_is_one_batch_within_the_limit() {
        assert_eq!(first(50, 500), 50);
        assert_eq!(first(50, 20), 20);
        assert_eq!(first(0, 500), 1);
        assert_eq!(first(50, 0), 1);
    }
}
