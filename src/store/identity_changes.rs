//! An identity's lifecycle written: every change goes through
//! [`crate::identity::apply`] inside one transaction that also writes the
//! derived status of the identity's accounts, its `identity_status_update`
//! (when the status or sub-status changed), the audit trail entry and, when
//! the identity can no longer transact, the failure of its accounts'
//! transfers not yet handed to a chain.

use serde_json::Value;
use sqlx::{Any, Row, Transaction};

use super::{
    Settlement, Store, StoreError,
    events::{self, NewEvent},
    gas_ledger::settle_in,
    identities::{audit, identity_from_row, kind_of, lock_row, state_of},
    now_micros, parse_column,
    pii::SUBMISSION,
};
use crate::{
    chain::Chain,
    identity::{
        Event, SubStatus, Transition, apply, compliance,
        resource::{IDENTITY_STATUS_UPDATE, status_update},
    },
    pii::{Cipher, PiiError, Place},
};

/// A UTC day, in microseconds.
const DAY_MICROS: i64 = 86_400_000_000;

/// One lifecycle event to apply, with who and why.
pub struct Change<'a> {
    pub organization: &'a str,
    pub identity_id: &'a str,
    pub event: Event,
    /// `operator:NAME`, `provider:NAME` or `client`.
    pub actor: &'a str,
    /// Recorded in the audit trail and sent as the event's `status_reason`.
    pub reason: Option<&'a str>,
}

/// How a transfer not yet handed to a chain is failed when its identity can
/// no longer transact: the settlement for its chain.
pub type UnsentFailure<'a> = &'a (dyn Fn(Chain) -> Settlement + Sync);

impl Store {
    /// Applies one lifecycle event (see the module doc). A refused event is
    /// [`StoreError::Conflict`] naming the state and the reason; nothing is
    /// written. `unsent` fails the accounts' transfers not yet handed to a
    /// chain when the identity can no longer transact.
    pub async fn change_identity(
        &self,
        change: &Change<'_>,
        unsent: UnsentFailure<'_>,
    ) -> Result<Transition, StoreError> {
        let mut tx = self.begin().await?;
        let transition = apply_in(&mut tx, self.cipher().ok(), change, Some(unsent)).await?;
        tx.commit().await?;
        Ok(transition)
    }

    /// Records KYC/KYB data and starts the compliance checks, in one
    /// transaction: the data is kept only if the lifecycle accepts it.
    pub async fn submit_compliance(
        &self,
        organization: &str,
        identity_id: &str,
        data: &Value,
    ) -> Result<Transition, StoreError> {
        let cipher = self.cipher()?;
        let mut tx = self.begin().await?;
        let change = Change {
            organization,
            identity_id,
            event: Event::ComplianceSubmitted,
            actor: "client",
            reason: None,
        };
        // Counted under the identity's row lock, before anything changes:
        // submissions racing for the day's last one are judged one at a time.
        lock_row(&mut tx, organization, identity_id).await?;
        let now = now_micros();
        let day = now - now.rem_euclid(DAY_MICROS);
        let today: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM compliance_submissions
             WHERE organization_id = $1 AND identity_id = $2 AND created_at >= $3",
        )
        .bind(organization)
        .bind(identity_id)
        .bind(day)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if !compliance::may_submit(today) {
            return Err(StoreError::TooMany {
                message: format!(
                    "identity {identity_id} had {} compliance submissions accepted today (UTC), the most a day \
                     takes; submit again after midnight UTC",
                    compliance::MAX_SUBMISSIONS_PER_DAY
                ),
                retry_after: ((day + DAY_MICROS - now + 999_999) / 1_000_000).max(1) as u64,
            });
        }
        let transition = apply_in(&mut tx, Some(cipher), &change, None).await?;
        let kind = if data.get("kyc").is_some() { "KYC" } else { "KYB" };
        let id = uuid::Uuid::new_v4().to_string();
        let plaintext = zeroize::Zeroizing::new(data.to_string());
        let sealed = cipher
            .seal(plaintext.as_bytes(), Place { column: SUBMISSION, row: &[organization, identity_id, &id] });
        sqlx::query(
            "INSERT INTO compliance_submissions (id, organization_id, identity_id, kind, data, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&id)
        .bind(organization)
        .bind(identity_id)
        .bind(kind)
        .bind(sealed)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(transition)
    }
}

/// [`Store::change_identity`] inside `tx`. `cipher` opens the label an
/// `identity_status_update` carries; without it such a change is refused.
pub(super) async fn apply_in(
    tx: &mut Transaction<'static, Any>,
    cipher: Option<&Cipher>,
    change: &Change<'_>,
    unsent: Option<UnsentFailure<'_>>,
) -> Result<Transition, StoreError> {
    let row = lock_row(tx, change.organization, change.identity_id).await?;
    let kind = kind_of(&row)?;
    let state = state_of(&row, kind)?;
    let transition = apply(kind, state, change.event)
        .map_err(|refusal| StoreError::Conflict(format!("identity {}: {refusal}", change.identity_id)))?;
    let now = now_micros();
    let next = transition.next;
    sqlx::query(
        "UPDATE identities SET status = $3, sub_status = $4, rfi_step = $5, updated_at = $6
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(change.organization)
    .bind(change.identity_id)
    .bind(next.status().as_str())
    .bind(next.sub_status().map(SubStatus::as_str))
    .bind(next.rfi_step().map(SubStatus::as_str))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let accounts = update_accounts(tx, change, &transition).await?;
    if transition.emits_event() {
        let mut identity = identity_from_row(&row, cipher.ok_or(PiiError::Locked)?)?;
        identity.status = transition.status();
        identity.sub_status = transition.sub_status();
        let data = status_update(&identity, &transition, &accounts, change.reason);
        let id = uuid::Uuid::new_v4().to_string();
        let event =
            NewEvent::new(change.organization, IDENTITY_STATUS_UPDATE, change.identity_id, id, &data)?;
        events::append(tx, std::slice::from_ref(&event), now).await?;
    }
    let event = format!("{:?}", change.event);
    audit(
        tx,
        change.organization,
        change.identity_id,
        &event,
        change.actor,
        change.reason,
        Some(state),
        next,
        now,
    )
    .await?;
    if !next.can_transact()
        && let Some(unsent) = unsent
    {
        fail_unsent(tx, change, unsent).await?;
    }
    Ok(transition)
}

/// Writes the accounts' derived status when it changed; the identity's
/// accounts, by id.
async fn update_accounts(
    tx: &mut Transaction<'static, Any>,
    change: &Change<'_>,
    transition: &Transition,
) -> Result<Vec<String>, StoreError> {
    if transition.account_status() != transition.previous_account_status() {
        sqlx::query("UPDATE accounts SET status = $3 WHERE organization_id = $1 AND identity_id = $2")
            .bind(change.organization)
            .bind(change.identity_id)
            .bind(transition.account_status().as_str())
            .execute(&mut **tx)
            .await?;
    }
    let rows =
        sqlx::query("SELECT id FROM accounts WHERE organization_id = $1 AND identity_id = $2 ORDER BY id")
            .bind(change.organization)
            .bind(change.identity_id)
            .fetch_all(&mut **tx)
            .await?;
    Ok(rows.iter().map(|r| r.try_get("id")).collect::<Result<_, _>>()?)
}

/// Fails, with their holds released and their events, the identity's
/// accounts' transfers still `ACCEPTED` with no transaction recorded: none
/// has reached a chain, and none may now. Each is judged under its row lock,
/// as a sender recording a transaction judges it, so a transfer a sender
/// recorded first is left to finish.
async fn fail_unsent(
    tx: &mut Transaction<'static, Any>,
    change: &Change<'_>,
    unsent: UnsentFailure<'_>,
) -> Result<(), StoreError> {
    let candidates = sqlx::query(&format!(
        "SELECT t.id, t.chain FROM transfers t JOIN accounts a ON a.id = t.account_id
         WHERE a.organization_id = $1 AND a.identity_id = $2 AND t.status = 'ACCEPTED'
           AND t.route NOT IN {}
         ORDER BY t.created_at, t.id",
        super::PLATFORM_ROUTES
    ))
    .bind(change.organization)
    .bind(change.identity_id)
    .fetch_all(&mut **tx)
    .await?;
    for row in candidates {
        let id: String = row.try_get("id")?;
        let chain: Chain = parse_column(&row.try_get::<String, _>("chain")?, "transfers.chain")?;
        if super::transfer_lineage::lock_unsent(tx, &id).await? {
            tracing::warn!(transfer = %id, identity = %change.identity_id, "transfer failed: its account is no longer active");
            settle_in(tx, &id, &unsent(chain)).await?;
        }
    }
    Ok(())
}
