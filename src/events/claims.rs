//! The delivery worker's transactions: leasing due deliveries, and
//! recording the attempts made.

use std::collections::HashSet;

use crate::store::{Claimed, Finished, Outcome, Rooms, Store, StoreError, deliveries};

/// Leases up to `limit` due deliveries to `owner` for `lease_micros`,
/// taking turns among organizations (each one's oldest due delivery,
/// then each one's second, …) and at most `rooms` of each. Both stores
/// look at each active webhook's earliest due deliveries only (an index
/// per webhook), so a backlog costs a claim nothing; PostgreSQL skips
/// rows other workers are claiming, SQLite serialises claims with its
/// write lock. Lease times are the database's clock on PostgreSQL (see
/// the store's `clock`).
pub async fn claim_deliveries(
    store: &Store,
    owner: &str,
    lease_micros: i64,
    limit: u32,
    rooms: &Rooms,
) -> Result<Vec<Claimed>, StoreError> {
    // A read first: idle workers poll often, and a write transaction would
    // take SQLite's write lock from the watchers each time.
    if rooms.each.min(limit) == 0 || !store.any_delivery_due().await? {
        return Ok(Vec::new());
    }
    let mut tx = store.begin().await?;
    let claimed = store.lease_deliveries(&mut tx, owner, lease_micros, limit, rooms).await?;
    tx.commit().await?;
    Ok(claimed)
}

/// Records attempts and their outcomes in one transaction, each only if
/// `owner` still holds its delivery's lease (or the lease lapsed and no
/// one took it since). Returns the deliveries recorded; an attempt not
/// recorded is made again by whoever claims its delivery next.
pub async fn finish_attempts(
    store: &Store,
    owner: &str,
    finished: &[Finished],
) -> Result<Vec<String>, StoreError> {
    let mut tx = store.begin().await?;
    let recorded = deliveries::record_outcomes(&mut tx, owner, finished).await?;
    let kept: HashSet<&str> = recorded.iter().map(String::as_str).collect();
    let done: Vec<&Finished> =
        finished.iter().filter(|f| kept.contains(f.claimed.delivery_id.as_str())).collect();
    deliveries::record_attempts(&mut tx, &done).await?;
    for one in done.iter().filter(|f| f.outcome == Outcome::Gone) {
        deliveries::disable_gone_webhook(&mut tx, &one.claimed.webhook_id).await?;
    }
    tx.commit().await?;
    Ok(recorded)
}
