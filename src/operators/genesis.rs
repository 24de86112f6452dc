//! Genesis: how a production store gets its first admins. The bootstrap
//! makes one admin, once ever; until two admins have enrolled an admin adds
//! admins alone; the first time two have enrolled, genesis ends for good,
//! in the store (a latch row) and in the audit log (an entry), either of
//! which holds it: from then on every grant waits for another admin,
//! whatever the count of admins later becomes. An admin added during
//! genesis that has not enrolled when it ends is disabled then: a dormant
//! admin's link, reissued later to another mailbox, would be a second
//! admin for one person. Each function runs in the
//! caller's transaction, after the chain's head is locked (one change of
//! operators at a time).

use super::rules::GENESIS_ADMINS;
use crate::{
    audit::{self, Actor, Record},
    pii::Cipher,
    store::{StoreError, Tx, audit as log, now_micros, operator_changes as latches, operators as rows},
};

/// The latch's name in the store.
pub const ENDED: &str = "genesis_ended";

/// The target of the entry that ends genesis.
pub const TARGET: &str = "genesis";

/// The audit action that ends genesis.
pub const ENDED_ACTION: &str = "operator.genesis_ended";

/// Whether genesis is still open; ends it, for good, when two admins have
/// enrolled.
pub async fn open(tx: &mut Tx, cipher: Option<&Cipher>) -> Result<bool, StoreError> {
    if ended(tx).await? {
        return Ok(false);
    }
    let admins = rows::enrolled_admins(tx, now_micros()).await?;
    if admins.len() < GENESIS_ADMINS {
        return Ok(true);
    }
    let detail = admins.join(",");
    let reason = format!("two admins have enrolled: {detail}");
    let entry = Record {
        actor: &Actor::System,
        action: ENDED_ACTION,
        target_kind: "platform",
        target_id: TARGET,
        organization_id: None,
        reason: Some(&reason),
        request_id: None,
        detail: None,
    };
    audit::append(tx, cipher, entry).await?;
    latches::latch(tx, ENDED, &detail, now_micros()).await?;
    disable_dormant(tx, cipher, &admins).await?;
    Ok(false)
}

/// Why an admin added during genesis that had not enrolled is disabled.
pub const DORMANT: &str = "genesis ended before it enrolled";

/// Disables, with an entry each, every admin that is not one of the
/// `enrolled` when genesis ends: every one the log says genesis added (its
/// row's state aside: a row disabled with SQL for the moment and enabled
/// again later is held to the entry) and every enabled one the rows show.
/// It comes back only through an approved enabling, and its link is void.
async fn disable_dormant(
    tx: &mut Tx,
    cipher: Option<&Cipher>,
    enrolled: &[String],
) -> Result<(), StoreError> {
    let mut dormant: Vec<String> =
        log::all_of(tx, "operator.genesis_created").await?.into_iter().map(|entry| entry.target_id).collect();
    dormant.extend(rows::admins_enabled(tx).await?);
    dormant.sort();
    dormant.dedup();
    for id in dormant {
        if enrolled.contains(&id) {
            continue;
        }
        let entry = Record {
            actor: &Actor::System,
            action: "operator.disabled",
            target_kind: "operator",
            target_id: &id,
            organization_id: None,
            reason: Some(DORMANT),
            request_id: None,
            detail: None,
        };
        audit::append(tx, cipher, entry).await?;
        let now = now_micros();
        rows::disable(tx, &id, DORMANT, now).await?;
        crate::store::console::end_operator(tx, &id, now).await?;
    }
    Ok(())
}

/// Whether genesis has ended: the store's latch or the log's entry.
pub async fn ended(tx: &mut Tx) -> Result<bool, StoreError> {
    Ok(latches::latched(tx, ENDED).await? || !log::all_of(tx, ENDED_ACTION).await?.is_empty())
}

/// Whether an admin has ever existed: an operator holding the role, a
/// bootstrap in the log, or genesis ended.
pub async fn admin_existed(tx: &mut Tx) -> Result<bool, StoreError> {
    Ok(rows::any_admin(tx).await?
        || !log::all_of(tx, "operator.bootstrapped").await?.is_empty()
        || ended(tx).await?)
}
