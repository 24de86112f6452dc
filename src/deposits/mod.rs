//! Deposits: what the chains' watchers find at the platform's addresses,
//! exactly once. Each family's watcher (`crate::evm`, `crate::solana`) reads
//! its chain and decodes what it read purely; [`watcher`] is the loop both
//! share (a step, its backoff, `backfill`'s report), committing each
//! scanned range with its deposits, their `deposit_v2` events and the
//! cursor in one transaction of the store ([`commit`], where each of the
//! wing's writes holds its transaction); [`watch`] is the set of watched
//! addresses, [`coverage`] where a chain's first scan begins and the scans
//! of late registrations' gaps, [`quorum`] the providers' agreement a
//! deposit is confirmed on, [`health`] what `health` and `/readyz`
//! report, and [`resource`] the Deposit as the API and events show it.

pub mod clock;
pub mod commit;
pub mod coverage;
pub mod follow;
pub mod health;
pub mod ids;
pub mod quorum;
pub mod resource;
pub mod watch;
pub mod watcher;
