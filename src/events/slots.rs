//! A delivery worker's slots: how many deliveries it has in flight, of
//! which organizations, and how many more it claims. Each organization may
//! hold a share of the slots, so one whose receiver is slow (or hangs until
//! the timeout) leaves the rest to the others.

use std::collections::HashMap;

use crate::store::Rooms;

#[derive(Debug)]
pub struct Slots {
    capacity: u32,
    per_organization: u32,
    in_flight: HashMap<String, u32>,
    used: u32,
}

impl Slots {
    /// `capacity` deliveries in flight at once, at most `per_organization`
    /// of one organization (at least one, at most `capacity`).
    pub fn new(capacity: u32, per_organization: u32) -> Self {
        let per_organization = per_organization.clamp(1, capacity.max(1));
        Self { capacity, per_organization, in_flight: HashMap::new(), used: 0 }
    }

    /// How many deliveries to claim now, if it is worth a claim: when a
    /// quarter of the slots (at least one) is free, or when none is used.
    pub fn wanted(&self) -> Option<u32> {
        let free = self.capacity - self.used;
        let worth = (self.capacity / 4).max(1);
        (free > 0 && (free >= worth || self.used == 0)).then_some(free)
    }

    /// Whether `organization` may claim a batch again: a quarter of its
    /// share (at least one).
    pub fn has_room_for_a_batch(&self, organization: &str) -> bool {
        let held = self.in_flight.get(organization).copied().unwrap_or(0);
        self.per_organization.saturating_sub(held) >= (self.per_organization / 4).max(1)
    }

    /// What each organization may still claim.
    pub fn rooms(&self) -> Rooms {
        let mut left: Vec<(String, u32)> = self
            .in_flight
            .iter()
            .map(|(organization, n)| (organization.clone(), self.per_organization.saturating_sub(*n)))
            .collect();
        left.sort();
        Rooms { each: self.per_organization, left }
    }

    /// A delivery of `organization` goes out.
    pub fn take(&mut self, organization: &str) {
        *self.in_flight.entry(organization.to_string()).or_default() += 1;
        self.used += 1;
    }

    /// A delivery of `organization` came back.
    pub fn give_back(&mut self, organization: &str) {
        if let Some(n) = self.in_flight.get_mut(organization) {
            *n -= 1;
            if *n == 0 {
                self.in_flight.remove(organization);
            }
            self.used -= 1;
        }
    }

    pub fn used(&self) -> u32 {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rooms(each: u32, left: &[(&str, u32)]) -> Rooms {
        Rooms { each, left: left.iter().map(|(o, n)| (o.to_string(), *n)).collect() }
    }

    #[test]
    fn a_claim_waits_for_a_quarter_of_the_slots() {
        // (capacity, taken, wanted)
        let table = [
            (32, 0, Some(32)),
            (32, 24, Some(8)),
            (32, 25, None),
            (32, 32, None),
            (1, 0, Some(1)),
            (1, 1, None),
            (3, 2, Some(1)),
        ];
        for (capacity, taken, wanted) in table {
            let mut slots = Slots::new(capacity, capacity);
            (0..taken).for_each(|_| slots.take("a"));
            assert_eq!(slots.wanted(), wanted, "{capacity} slots, {taken} taken");
        }
    }

    #[test]
    fn an_organization_holds_its_share_and_no_more() {
        let mut slots = Slots::new(64, 16);
        assert_eq!(slots.rooms(), rooms(16, &[]));
        (0..16).for_each(|_| slots.take("slow"));
        slots.take("fast");
        assert_eq!(slots.rooms(), rooms(16, &[("fast", 15), ("slow", 0)]));
        slots.give_back("slow");
        slots.give_back("fast");
        assert_eq!(slots.rooms(), rooms(16, &[("slow", 1)]));
        assert_eq!(slots.used(), 15);
        assert!(!slots.has_room_for_a_batch("slow"), "one of 16 free");
        (0..3).for_each(|_| slots.give_back("slow"));
        assert!(slots.has_room_for_a_batch("slow"), "four of 16 free");
        assert!(slots.has_room_for_a_batch("idle"));
        (0..3).for_each(|_| slots.take("slow"));
        slots.give_back("unknown");
        assert_eq!(slots.used(), 15, "only what was taken comes back");
    }

    #[test]
    fn the_share_is_between_one_and_every_slot() {
        assert_eq!(Slots::new(8, 0).rooms().each, 1);
        assert_eq!(Slots::new(8, 100).rooms().each, 8);
    }
}
