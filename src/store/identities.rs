//! Identities and their lifecycle. Every change goes through
//! [`crate::identity::apply`] inside one transaction that also writes the
//! derived status of the identity's accounts, its `identity_status_update`
//! (when the status or sub-status changed), the audit trail entry and, when
//! the identity can no longer transact, the failure of its accounts'
//! transfers not yet handed to a chain.

use serde_json::Value;
use sqlx::{Any, Row, Transaction, any::AnyRow};

use super::{
    Settlement, Store, StoreError,
    events::{self, NewEvent},
    gas_ledger::settle_in,
    now_micros,
    params::placeholders,
    parse_column,
    pii::{LABEL, SUBMISSION},
    quotas::Quota,
    time,
};
use crate::{
    chain::Chain,
    identity::{
        Event, Identity, State, Status, SubStatus, Transition, Type, apply, compliance,
        resource::IDENTITY_STATUS_UPDATE, resource::status_update,
    },
    pii::{Cipher, Masked, PiiError, Place},
};

/// A UTC day, in microseconds.
const DAY_MICROS: i64 = 86_400_000_000;

/// An identity to register: created by a client (`State::CREATED`, with a
/// `request_id`) or registered by an operator as onboarded elsewhere.
#[derive(Debug, Clone)]
pub struct NewIdentity {
    pub organization: String,
    pub id: String,
    pub request_id: Option<String>,
    pub kind: Type,
    /// Personal data: stored sealed (see [`crate::pii`]).
    pub label: Masked<String>,
    pub state: State,
    /// Who registered it, for the audit trail.
    pub actor: String,
}

/// What [`Store::create_identity`] did.
#[derive(Debug, Clone)]
pub enum Registered {
    New(Identity),
    /// The `request_id` was used before for the same type and label.
    Existing(Identity),
}

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

/// An entry of the audit trail.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Action {
    pub event: String,
    pub actor: String,
    pub reason: Option<String>,
    pub previous_status: String,
    pub previous_sub_status: Option<String>,
    pub status: String,
    pub sub_status: Option<String>,
    #[serde(serialize_with = "crate::deposit::rfc3339")]
    pub created_at: chrono::DateTime<chrono::Utc>,
}

const IDENTITY_COLUMNS: &str = "organization_id, id, request_id, type, label, status, sub_status, rfi_step, \
     fiat_operations_enabled, created_at, updated_at";

impl Store {
    /// Registers an identity. Idempotent by `(organization, request_id)`:
    /// the same request again answers the identity it created; the same
    /// `request_id` with another type or label is a conflict. Refused when
    /// the organization holds its limit of identities (a replay still
    /// answers).
    pub async fn create_identity(&self, new: &NewIdentity) -> Result<Registered, StoreError> {
        if new.id.trim().is_empty() || new.label.trim().is_empty() {
            return Err(StoreError::Invalid("identity id and label must not be empty".into()));
        }
        if !new.state.fits(new.kind) {
            return Err(StoreError::Invalid(format!("a {} identity cannot be {}", new.kind, new.state)));
        }
        let cipher = self.cipher()?;
        let mut tx = self.begin().await?;
        // Locked before the replay is looked up: a replay racing the request
        // that took the last slot waits for it, then answers its identity.
        self.lock_organization(&mut tx, &new.organization, Quota::Identities).await?;
        if let Some(request_id) = &new.request_id
            && let Some(found) = identity_by_request(&mut tx, &new.organization, request_id).await?
        {
            drop(tx);
            let found = self.identity(&new.organization, &found).await?;
            if found.kind != new.kind || found.label != new.label {
                return Err(StoreError::Conflict(format!(
                    "request_id {request_id} was already used by identity {} with a different request",
                    found.id
                )));
            }
            return Ok(Registered::Existing(found));
        }
        self.check_room(&mut tx, &new.organization, Quota::Identities).await?;
        let now = now_micros();
        let label =
            cipher.seal(new.label.as_bytes(), Place { column: LABEL, row: &[&new.organization, &new.id] });
        let inserted = sqlx::query(&format!(
            "INSERT INTO identities ({IDENTITY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $9)
             ON CONFLICT DO NOTHING"
        ))
        .bind(&new.organization)
        .bind(&new.id)
        .bind(new.request_id.as_deref())
        .bind(new.kind.as_str())
        .bind(label)
        .bind(new.state.status().as_str())
        .bind(new.state.sub_status().map(SubStatus::as_str))
        .bind(new.state.rfi_step().map(SubStatus::as_str))
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(d) if d.is_foreign_key_violation() => {
                StoreError::NotFound(format!("organization {}", new.organization))
            }
            e => e.into(),
        })?;
        if inserted.rows_affected() == 0 {
            drop(tx);
            // A concurrent request with this request_id, or the id, was first.
            return match &new.request_id {
                Some(_) => Box::pin(self.create_identity(new)).await,
                None => Err(StoreError::Conflict(format!("identity {} already exists", new.id))),
            };
        }
        audit(&mut tx, &new.organization, &new.id, "Registered", &new.actor, None, None, new.state, now)
            .await?;
        tx.commit().await?;
        Ok(Registered::New(self.identity(&new.organization, &new.id).await?))
    }

    /// An identity of `organization`; another organization's is not found.
    pub async fn identity(&self, organization: &str, id: &str) -> Result<Identity, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {IDENTITY_COLUMNS} FROM identities WHERE organization_id = $1 AND id = $2"
        ))
        .bind(organization)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("identity {id}")))?;
        let mut identities = self.with_accounts(vec![identity_from_row(&row, self.cipher()?)?]).await?;
        Ok(identities.pop().expect("one identity"))
    }

    /// Up to `limit` of the organization's identities whose id sorts after
    /// `after`, by id.
    pub async fn identity_page(
        &self,
        organization: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Identity>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {IDENTITY_COLUMNS} FROM identities WHERE organization_id = $1 AND ($2 IS NULL OR id > $2)
             ORDER BY id LIMIT $3"
        ))
        .bind(organization)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let cipher = self.cipher()?;
        let identities = rows.iter().map(|r| identity_from_row(r, cipher)).collect::<Result<Vec<_>, _>>()?;
        self.with_accounts(identities).await
    }

    async fn with_accounts(&self, mut identities: Vec<Identity>) -> Result<Vec<Identity>, StoreError> {
        let Some(first) = identities.first() else { return Ok(identities) };
        let organization = first.organization.clone();
        let sql = format!(
            "SELECT id, identity_id FROM accounts WHERE organization_id = $1 AND identity_id IN ({}) ORDER BY id",
            placeholders(2, identities.len())
        );
        let query = identities.iter().fold(sqlx::query(&sql).bind(&organization), |q, i| q.bind(&i.id));
        for row in query.fetch_all(&self.pool).await? {
            let identity: String = row.try_get("identity_id")?;
            if let Some(found) = identities.iter_mut().find(|i| i.id == identity) {
                found.account_ids.push(row.try_get("id")?);
            }
        }
        Ok(identities)
    }

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

    /// The identity's audit trail, oldest first.
    pub async fn identity_actions(&self, organization: &str, id: &str) -> Result<Vec<Action>, StoreError> {
        let rows = sqlx::query(
            "SELECT event, actor, reason, previous_status, previous_sub_status, status, sub_status, created_at
             FROM identity_actions WHERE organization_id = $1 AND identity_id = $2 ORDER BY created_at, id",
        )
        .bind(organization)
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Action {
                    event: r.try_get("event")?,
                    actor: r.try_get("actor")?,
                    reason: r.try_get("reason")?,
                    previous_status: r.try_get("previous_status")?,
                    previous_sub_status: r.try_get("previous_sub_status")?,
                    status: r.try_get("status")?,
                    sub_status: r.try_get("sub_status")?,
                    created_at: time(r.try_get("created_at")?)?,
                })
            })
            .collect()
    }
}

async fn identity_by_request(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    request_id: &str,
) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("SELECT id FROM identities WHERE organization_id = $1 AND request_id = $2")
        .bind(organization)
        .bind(request_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.map(|r| r.try_get("id")).transpose()?)
}

/// The identity's type and state, its row locked until commit so that
/// changes of one identity, and accounts opened for it, are judged one at a
/// time.
pub(super) async fn lock_identity(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    id: &str,
) -> Result<(Type, State), StoreError> {
    let row = lock_row(tx, organization, id).await?;
    let kind = kind_of(&row)?;
    Ok((kind, state_of(&row, kind)?))
}

/// The identity's status and fiat entitlement, its row locked until
/// commit: what a wire's mint is judged on cannot change (a suspension, a
/// fiat withdrawal) until the mint's change commits.
pub(super) async fn lock_entitlement(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    id: &str,
) -> Result<(Status, bool), StoreError> {
    let row = lock_row(tx, organization, id).await?;
    let status = parse_column(&row.try_get::<String, _>("status")?, "identities.status")?;
    Ok((status, row.try_get::<i64, _>("fiat_operations_enabled")? != 0))
}

/// The identity's row, locked until commit (see [`lock_identity`]).
async fn lock_row(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    id: &str,
) -> Result<AnyRow, StoreError> {
    sqlx::query(&format!(
        "UPDATE identities SET updated_at = updated_at WHERE organization_id = $1 AND id = $2
         RETURNING {IDENTITY_COLUMNS}"
    ))
    .bind(organization)
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or_else(|| StoreError::NotFound(format!("identity {id}")))
}

fn kind_of(row: &AnyRow) -> Result<Type, StoreError> {
    parse_column(&row.try_get::<String, _>("type")?, "identities.type")
}

/// The lifecycle state of a stored identity.
pub(super) fn state_of(row: &AnyRow, kind: Type) -> Result<State, StoreError> {
    let status: Status = parse_column(&row.try_get::<String, _>("status")?, "identities.status")?;
    let optional = |column: &str| -> Result<Option<SubStatus>, StoreError> {
        row.try_get::<Option<String>, _>(column)?
            .map(|s| parse_column(&s, &format!("identities.{column}")))
            .transpose()
    };
    State::from_parts(kind, status, optional("sub_status")?, optional("rfi_step")?)
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// An identity of its row, its label opened with `cipher`.
fn identity_from_row(row: &AnyRow, cipher: &Cipher) -> Result<Identity, StoreError> {
    let kind = kind_of(row)?;
    let state = state_of(row, kind)?;
    let (organization, id): (String, String) = (row.try_get("organization_id")?, row.try_get("id")?);
    let label = cipher.open_text(
        &row.try_get::<String, _>("label")?,
        Place { column: LABEL, row: &[&organization, &id] },
    )?;
    Ok(Identity {
        id,
        organization,
        request_id: row.try_get("request_id")?,
        kind,
        label: Masked::new(label),
        account_ids: Vec::new(),
        fiat_operations_enabled: row.try_get::<i64, _>("fiat_operations_enabled")? != 0,
        status: state.status(),
        sub_status: state.sub_status(),
        created_at: time(row.try_get("created_at")?)?,
        updated_at: time(row.try_get("updated_at")?)?,
    })
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

/// Appends one entry to the audit trail (`previous`: none for a registration).
#[allow(clippy::too_many_arguments)]
async fn audit(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    identity_id: &str,
    event: &str,
    actor: &str,
    reason: Option<&str>,
    previous: Option<State>,
    next: State,
    now: i64,
) -> Result<(), StoreError> {
    let previous = previous.unwrap_or(next);
    sqlx::query(
        "INSERT INTO identity_actions (id, organization_id, identity_id, event, actor, reason, previous_status,
             previous_sub_status, status, sub_status, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(organization)
    .bind(identity_id)
    .bind(event)
    .bind(actor)
    .bind(reason)
    .bind(previous.status().as_str())
    .bind(previous.sub_status().map(SubStatus::as_str))
    .bind(next.status().as_str())
    .bind(next.sub_status().map(SubStatus::as_str))
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
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
        super::transfers::PLATFORM_ROUTES
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

/// The status of an identity whose accounts cannot send (anything but
/// `ACTIVE`, open RFI or not); `None` when they can. Read inside the
/// transaction holding the account's row, which an identity's change also
/// takes, so a transfer is judged against the identity's committed state.
pub(super) async fn not_transacting(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    identity_id: &str,
) -> Result<Option<Status>, StoreError> {
    let row = sqlx::query("SELECT status FROM identities WHERE organization_id = $1 AND id = $2")
        .bind(organization)
        .bind(identity_id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("identity {identity_id}")))?;
    let status: Status = parse_column(&row.try_get::<String, _>("status")?, "identities.status")?;
    Ok((status != Status::Active).then_some(status))
}
