//! The identity trail adopted into the audit log: each trail entry of a
//! decider (an operator, a provider, the service) names the log's entry of
//! the same decision. Entries written before the log existed are linked to
//! the log's entry of their decision when it has one, or appended to the
//! log with their actor as the trail recorded it ([`Actor::Trail`]) and the
//! time of their adoption (the trail keeps the original time).

use super::change::snake;
use crate::{
    audit::{self, Actor, Record},
    store::{Store, StoreError, identities},
};

/// Trail entries adopted per transaction.
const BATCH: i64 = 200;

/// Adopts every trail entry not yet linked; answers how many. Each batch
/// holds the log's head lock, so instances starting together adopt each
/// entry once.
pub async fn adopt(store: &Store) -> Result<usize, StoreError> {
    let mut adopted = 0;
    loop {
        let mut tx = store.begin().await?;
        audit::lock(&mut tx).await?;
        let batch = identities::unlinked(&mut tx, BATCH).await?;
        if batch.is_empty() {
            return Ok(adopted);
        }
        for row in &batch {
            let action = format!("identity.{}", snake(&row.event));
            let (organization, identity) = (row.organization.as_str(), row.identity_id.as_str());
            let seq = match identities::unclaimed_entry(&mut tx, organization, identity, &action).await? {
                Some(seq) => seq,
                None => {
                    let actor = Actor::Trail(row.actor.clone());
                    let record = Record {
                        actor: &actor,
                        action: &action,
                        target_kind: "identity",
                        target_id: identity,
                        organization_id: Some(organization),
                        reason: row.reason.as_deref(),
                        request_id: None,
                    };
                    audit::append(&mut tx, store.cipher().ok(), record).await?
                }
            };
            identities::link(&mut tx, &row.id, seq).await?;
        }
        tx.commit().await?;
        adopted += batch.len();
    }
}
