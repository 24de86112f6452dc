//! The identity trail adopted into the audit log: each trail entry of a
//! decider (an operator, a provider, the service) names the log's entry of
//! the same decision. Entries written before the log existed are linked to
//! the log's entry of their decision when it has one, or appended to the
//! log with their actor as the trail recorded it (`trail:operator:ann`, see
//! [`Actor::Trail`]) and the time of their adoption (the trail keeps the
//! original time).

use super::change::snake;
use crate::{
    audit::{self, Actor, Record},
    store::{
        Store, StoreError, Tx,
        identities::{self, Unlinked},
    },
};

/// Trail entries adopted per transaction.
const BATCH: i64 = 200;

/// Adopts every trail entry not yet linked; answers how many. Each batch
/// holds the log's head lock, so instances starting together adopt each
/// entry once; a store with nothing to adopt takes no lock.
pub async fn adopt(store: &Store) -> Result<usize, StoreError> {
    let mut adopted = 0;
    loop {
        let mut tx = store.begin().await?;
        if identities::unlinked(&mut tx, 1).await?.is_empty() {
            return Ok(adopted);
        }
        audit::lock(&mut tx).await?;
        let batch = identities::unlinked(&mut tx, BATCH).await?;
        for row in &batch {
            let action = format!("identity.{}", snake(&row.event));
            let seq = match identities::unclaimed_entry(&mut tx, row, &action).await? {
                Some(seq) => seq,
                None => append(&mut tx, store, row, &action).await?,
            };
            identities::link(&mut tx, &row.id, seq).await?;
        }
        tx.commit().await?;
        adopted += batch.len();
    }
}

/// Appends `row`'s decision to the log: its actor as the trail recorded it,
/// a reason written beside the actor (`operator:ann (migrated)`, as
/// imports once did) moved to the sealed reason.
async fn append(tx: &mut Tx, store: &Store, row: &Unlinked, action: &str) -> Result<i64, StoreError> {
    let (actor, aside) = split_actor(&row.actor);
    let actor = Actor::Trail(actor.to_string());
    let reason = row.reason.as_deref().or(aside);
    let record = Record {
        actor: &actor,
        action,
        target_kind: "identity",
        target_id: &row.identity_id,
        organization_id: Some(&row.organization),
        reason,
        request_id: None,
        detail: None,
    };
    audit::append(tx, store.cipher().ok(), record).await
}

/// A trail actor and the text an older release wrote beside it in
/// parentheses, if any.
fn split_actor(text: &str) -> (&str, Option<&str>) {
    match text.split_once(" (") {
        Some((actor, rest)) if rest.ends_with(')') => (actor, Some(&rest[..rest.len() - 1])),
        _ => (text, None),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_reason_written_beside_an_actor_is_taken_out_of_it() {
        for (text, actor, aside) in [
            (
                "operator:ann (migrated from the old platform)",
                "operator:ann",
                Some("migrated from the old platform"),
            ),
            ("provider:sandbox", "provider:sandbox", None),
            ("operator:ann (", "operator:ann (", None),
        ] {
            assert_eq!(super::split_actor(text), (actor, aside), "{text}");
        }
    }
}
