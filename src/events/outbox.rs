//! The outbox's sinks and retention: a sink's cursor taken, moved on and
//! given up under the lease on its row, a sink removed, and the purge of
//! the oldest events every sink and every webhook delivery has taken.

use crate::store::{Store, StoreError, sinks};

/// Events purged per transaction.
const PURGE_BATCH: i64 = 5_000;

/// Takes (or renews) the lease on sink `name` for `owner`, for
/// `lease_micros` from now (the database's clock on PostgreSQL, as for
/// worker leases), creating the sink at the outbox's start on first
/// use. The sink's cursor when taken; `None` while another instance
/// holds it. One statement while the sink exists.
pub async fn take_sink(
    store: &Store,
    name: &str,
    owner: &str,
    lease_micros: i64,
) -> Result<Option<i64>, StoreError> {
    let mut tx = store.begin().await?;
    let cursor = loop {
        if let Some(cursor) = store.lease_sink(&mut tx, name, owner, lease_micros).await? {
            break Some(cursor);
        }
        // Held by another instance, or not there yet (removed by an operator).
        if !sinks::insert_sink(&mut tx, name).await? {
            break None;
        }
    };
    tx.commit().await?;
    Ok(cursor)
}

/// Creates sink `name` at the outbox's start unless it exists: from
/// then on the purge keeps every event it has not taken. Whether it
/// was created.
pub async fn register_sink(store: &Store, name: &str) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let created = sinks::insert_sink(&mut tx, name).await?;
    tx.commit().await?;
    Ok(created)
}

/// Moves sink `name`'s cursor on to `seq` (never back) and renews the
/// lease for `lease_micros`, while `owner` still holds it: another
/// instance that took it over changed the owner. False when the lease
/// was lost: the caller stops.
pub async fn advance_sink(
    store: &Store,
    name: &str,
    owner: &str,
    seq: i64,
    lease_micros: i64,
) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let moved = store.move_sink(&mut tx, name, owner, seq, lease_micros).await?;
    tx.commit().await?;
    Ok(moved)
}

/// Gives up `owner`'s lease on sink `name` (at shutdown), so another
/// instance takes it at once.
pub async fn release_sink(store: &Store, name: &str, owner: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    sinks::free_sink(&mut tx, name, owner).await?;
    tx.commit().await?;
    Ok(())
}

/// Forgets sink `name` and its cursor: the purge no longer waits for
/// it. False when there was none; refused while an instance holds it
/// (it would start again from the outbox's oldest event).
pub async fn remove_sink(store: &Store, name: &str) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let removed = store.delete_idle_sink(&mut tx, name).await?;
    tx.commit().await?;
    if removed {
        return Ok(true);
    }
    match store.sinks().await?.into_iter().find(|s| s.name == name) {
        Some(held) => Err(StoreError::Refused(format!(
            "sink {name} is running on {}: stop it (run without --nats-url) before removing it",
            held.lease_owner.unwrap_or_default()
        ))),
        None => Ok(false),
    }
}

/// Removes the events committed before `before` (microseconds) that
/// every sink and every webhook has taken, oldest first, with their
/// finished deliveries (delivered or dead-lettered) and attempts: never
/// an event past a sink's cursor, nor one a webhook still owes (a
/// `PENDING` delivery, even one sent again while the purge runs) or any
/// after it. How many events were removed.
pub async fn purge_events(store: &Store, before: i64) -> Result<u64, StoreError> {
    let bound = store.purge_bound(before).await?;
    let mut from = store.first_event_seq().await?.unwrap_or(bound + 1);
    let mut removed = 0;
    while from <= bound {
        let upto = bound.min(from + PURGE_BATCH - 1);
        let mut tx = store.begin().await?;
        removed += sinks::purge_range(&mut tx, from, upto).await?;
        tx.commit().await?;
        from = upto + 1;
    }
    Ok(removed)
}
