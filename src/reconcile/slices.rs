//! How `run` spreads a pass over its period: a chain's addresses are cut
//! into slices of about [`ADDRESSES`] each, by a hash of the address (so
//! an address registered during a pass lands in exactly one slice), and
//! the slices are read one after another, evenly spaced over
//! `reconcile_every_secs`. Each slice is reconciled at its own height,
//! one a full node still holds the state of; the requests of a pass are
//! spread over the hour instead of sent in one burst.

use std::time::Duration;

/// The addresses of a slice, about: one Multicall3 batch per asset.
pub const ADDRESSES: usize = 200;

/// The least time between two slices' starts.
const LEAST_GAP: Duration = Duration::from_secs(1);

/// Slice `index` of `of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub index: u64,
    pub of: u64,
}

impl Slice {
    /// The whole chain in one slice.
    pub const WHOLE: Slice = Slice { index: 0, of: 1 };

    /// Whether `address` (any case) belongs to this slice.
    pub fn holds(&self, address: &str) -> bool {
        self.of <= 1 || fnv1a(address) % self.of == self.index
    }

    /// When this slice starts, from its pass's start: slices evenly spaced
    /// over `period`, the first at once.
    pub fn offset(&self, period: Duration) -> Duration {
        period.mul_f64(self.index as f64 / self.of.max(1) as f64)
    }
}

/// How many slices a pass over `addresses` addresses has, spread over
/// `period`: about [`ADDRESSES`] addresses each, and never two slices less
/// than a second apart.
pub fn count(addresses: usize, period: Duration) -> u64 {
    let wanted = addresses.div_ceil(ADDRESSES).max(1) as u64;
    let most = (period.as_secs_f64() / LEAST_GAP.as_secs_f64()).floor().max(1.0) as u64;
    wanted.min(most)
}

/// FNV-1a over the lowercased address: stable across releases and
/// machines, unlike the standard library's hasher.
fn fnv1a(address: &str) -> u64 {
    address.bytes().fold(0xcbf2_9ce4_8422_2325, |hash: u64, byte| {
        (hash ^ u64::from(byte.to_ascii_lowercase())).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_has_one_slice_per_two_hundred_addresses_at_most_one_a_second() {
        let hour = Duration::from_secs(3600);
        for (addresses, period, slices) in [
            (0, hour, 1),
            (1, hour, 1),
            (200, hour, 1),
            (201, hour, 2),
            (10_000, hour, 50),
            (10_000, Duration::from_secs(10), 10),
            (10_000, Duration::from_millis(500), 1),
        ] {
            assert_eq!(count(addresses, period), slices, "{addresses} addresses over {period:?}");
        }
    }

    #[test]
    fn every_address_is_in_exactly_one_slice_and_the_slices_are_about_even() {
        let of = 50;
        let mut sizes = vec![0u32; of as usize];
        for n in 0..10_000u32 {
            let address = format!("0x{:040x}", u128::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let holding: Vec<u64> = (0..of).filter(|&index| Slice { index, of }.holds(&address)).collect();
            assert_eq!(holding.len(), 1, "{address} is in {holding:?}");
            sizes[holding[0] as usize] += 1;
        }
        let (least, most) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        assert!(*least >= 140 && *most <= 260, "200 each, about: {least}..{most}");
    }

    #[test]
    fn an_address_is_in_the_same_slice_whatever_its_case() {
        let slice = |address: &str| (0..7).find(|&index| Slice { index, of: 7 }.holds(address));
        let address = "0xAbCdEf0123456789aBcDeF0123456789AbCdEf01";
        assert_eq!(slice(address), slice(&address.to_lowercase()));
        assert!(Slice::WHOLE.holds(address));
    }

    #[test]
    fn slices_start_evenly_over_the_period() {
        let period = Duration::from_secs(3600);
        let starts: Vec<u64> = (0..4).map(|index| Slice { index, of: 4 }.offset(period).as_secs()).collect();
        assert_eq!(starts, [0, 900, 1800, 2700]);
        assert_eq!(Slice::WHOLE.offset(period), Duration::ZERO);
    }
}
