//! Identities: registration, reads and pages, the audit trail, and the
//! row locks their changes take (the changes themselves are
//! [`crate::identity::change`]).

use sqlx::{Any, Row, Transaction, any::AnyRow};

use crate::store::{
    Store, StoreError, Tx, now_micros, params::placeholders, parse_column, pii::LABEL, quotas::Quota, time,
};
use crate::{
    identity::{Identity, State, Status, SubStatus, Type},
    pii::{Cipher, Masked, Place},
};

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

/// What [`Store::register_identity_in`] found or wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registering {
    /// Inserted, with its first trail entry.
    Inserted,
    /// The identity (its id) registered under the same `request_id` before.
    Replay(String),
    /// A concurrent request with this `request_id`, or the id, was first.
    Raced,
}

/// What [`crate::identity::register::create_identity`] did.
#[derive(Debug, Clone)]
pub enum Registered {
    New(Identity),
    /// The `request_id` was used before for the same type and label.
    Existing(Identity),
}

/// An entry of an identity's trail: the statuses before and after, and
/// who decided as the audit log names them (its entry's `seq`), or as the
/// trail recorded a client's own action.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Action {
    pub event: String,
    pub actor: String,
    pub audit_seq: Option<i64>,
    pub reason: Option<String>,
    pub previous_status: String,
    pub previous_sub_status: Option<String>,
    pub status: String,
    pub sub_status: Option<String>,
    #[serde(serialize_with = "crate::deposits::resource::rfc3339")]
    pub created_at: chrono::DateTime<chrono::Utc>,
}

const IDENTITY_COLUMNS: &str = "organization_id, id, request_id, type, label, status, sub_status, rfi_step, \
     fiat_operations_enabled, created_at, updated_at";

impl Store {
    /// Inserts `new` inside `tx`, after the organization's row lock and
    /// within its limit of identities: [`Registering::Replay`] when its
    /// `request_id` holds an identity already, [`Registering::Raced`] when
    /// an identity (or its `request_id`) was inserted meanwhile.
    pub(crate) async fn register_identity_in(
        &self,
        tx: &mut Tx,
        new: &NewIdentity,
    ) -> Result<Registering, StoreError> {
        check(new)?;
        let cipher = self.cipher()?;
        // Locked before the replay is looked up: a replay racing the request
        // that took the last slot waits for it, then answers its identity.
        self.lock_organization(tx, &new.organization, Quota::Identities).await?;
        if let Some(request_id) = &new.request_id
            && let Some(found) = identity_by_request(tx, &new.organization, request_id).await?
        {
            return Ok(Registering::Replay(found));
        }
        self.check_room(tx, &new.organization, Quota::Identities).await?;
        Ok(match insert(tx, cipher, new, now_micros()).await? {
            Some(_) => Registering::Inserted,
            None => Registering::Raced,
        })
    }

    /// Registers an identity onboarded elsewhere inside `tx` (which the
    /// caller commits with its audit entry): within the organization's
    /// limit; an identity already holding the id is a conflict. Answers its
    /// first trail entry's id.
    pub async fn import_identity_in(&self, tx: &mut Tx, new: &NewIdentity) -> Result<String, StoreError> {
        check(new)?;
        let cipher = self.cipher()?;
        self.lock_organization(tx, &new.organization, Quota::Identities).await?;
        self.check_room(tx, &new.organization, Quota::Identities).await?;
        insert(tx, cipher, new, now_micros()).await?.ok_or_else(|| {
            StoreError::taken(format!("identity:{}", new.id), format!("identity {} already exists", new.id))
        })
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

    /// Up to `limit` identities of every organization in onboarding with
    /// their compliance data submitted (past `CREATED`), oldest first: the
    /// compliance queue.
    pub async fn identities_in_onboarding(&self, limit: i64) -> Result<Vec<Identity>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {IDENTITY_COLUMNS} FROM identities
             WHERE status = 'PENDING_ONBOARDING' AND (sub_status IS NULL OR sub_status <> 'CREATED')
             ORDER BY created_at, organization_id, id LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let cipher = self.cipher()?;
        rows.iter().map(|r| identity_from_row(r, cipher)).collect()
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

    /// The identity's audit trail, oldest first.
    pub async fn identity_actions(&self, organization: &str, id: &str) -> Result<Vec<Action>, StoreError> {
        let rows = sqlx::query(
            "SELECT t.event, t.actor, t.reason, t.previous_status, t.previous_sub_status, t.status, t.sub_status,
                 t.created_at, t.audit_seq, a.actor AS logged_actor, a.actor_name
             FROM identity_actions t LEFT JOIN audit_log a ON a.seq = t.audit_seq
             WHERE t.organization_id = $1 AND t.identity_id = $2 ORDER BY t.created_at, t.id",
        )
        .bind(organization)
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let logged: Option<String> = r.try_get("logged_actor")?;
                let name: Option<String> = r.try_get("actor_name")?;
                let actor = match (logged, name) {
                    (Some(actor), Some(name)) => format!("{actor} ({name})"),
                    (Some(actor), None) => actor,
                    (None, _) => r.try_get("actor")?,
                };
                Ok(Action {
                    event: r.try_get("event")?,
                    actor,
                    audit_seq: r.try_get("audit_seq")?,
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

/// An identity's row, locked until commit (see [`lock_identity`]), with
/// its type and state.
pub struct Locked {
    pub kind: Type,
    pub state: State,
    row: AnyRow,
}

impl Locked {
    /// The identity as it was locked, its label opened with `cipher`.
    pub fn identity(&self, cipher: &Cipher) -> Result<Identity, StoreError> {
        identity_from_row(&self.row, cipher)
    }
}

/// The identity's row, locked until commit (see [`lock_identity`]).
pub async fn lock(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    id: &str,
) -> Result<Locked, StoreError> {
    let row = lock_row(tx, organization, id).await?;
    let kind = kind_of(&row)?;
    Ok(Locked { kind, state: state_of(&row, kind)?, row })
}

/// The identity's type and state, its row locked until commit so that
/// changes of one identity, and accounts opened for it, are judged one at a
/// time.
pub async fn lock_identity(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    id: &str,
) -> Result<(Type, State), StoreError> {
    let row = lock_row(tx, organization, id).await?;
    let kind = kind_of(&row)?;
    Ok((kind, state_of(&row, kind)?))
}

/// The identity's row, locked until commit (see [`lock_identity`]).
pub(in crate::store) async fn lock_row(
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

pub(in crate::store) fn kind_of(row: &AnyRow) -> Result<Type, StoreError> {
    parse_column(&row.try_get::<String, _>("type")?, "identities.type")
}

/// The lifecycle state of a stored identity.
pub(in crate::store) fn state_of(row: &AnyRow, kind: Type) -> Result<State, StoreError> {
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
pub(in crate::store) fn identity_from_row(row: &AnyRow, cipher: &Cipher) -> Result<Identity, StoreError> {
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

/// Appends one entry to the audit trail (`previous`: none for a registration).
#[allow(clippy::too_many_arguments)]
pub async fn audit(
    tx: &mut Transaction<'static, Any>,
    organization: &str,
    identity_id: &str,
    event: &str,
    actor: &str,
    reason: Option<&str>,
    previous: Option<State>,
    next: State,
    now: i64,
) -> Result<String, StoreError> {
    let previous = previous.unwrap_or(next);
    let id = uuid::Uuid::new_v4().to_string();
    sqlx::query(
        "INSERT INTO identity_actions (id, organization_id, identity_id, event, actor, reason, previous_status,
             previous_sub_status, status, sub_status, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&id)
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
    Ok(id)
}

/// Links the trail entry `id` to the audit-log entry `seq` of the same
/// decision.
pub async fn link(tx: &mut Tx, id: &str, seq: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE identity_actions SET audit_seq = $1 WHERE id = $2")
        .bind(seq)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A trail entry not yet linked to the audit log.
#[derive(Debug, Clone)]
pub struct Unlinked {
    pub id: String,
    pub organization: String,
    pub identity_id: String,
    pub event: String,
    pub actor: String,
    pub reason: Option<String>,
    /// Microseconds.
    pub created_at: i64,
}

/// Up to `limit` trail entries of deciders (not a client's own) that name
/// no audit-log entry, oldest first.
pub async fn unlinked(tx: &mut Tx, limit: i64) -> Result<Vec<Unlinked>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, organization_id, identity_id, event, actor, reason, created_at FROM identity_actions
         WHERE audit_seq IS NULL AND actor <> 'client' ORDER BY created_at, id LIMIT $1",
    )
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(Unlinked {
                id: r.try_get("id")?,
                organization: r.try_get("organization_id")?,
                identity_id: r.try_get("identity_id")?,
                event: r.try_get("event")?,
                actor: r.try_get("actor")?,
                reason: r.try_get("reason")?,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect()
}

/// How far apart in time a trail entry and the log's entry of the same
/// decision can be: they were written in one transaction, the log's time by
/// the database's clock, the trail's by the instance's.
const SAME_DECISION_MICROS: i64 = 60_000_000;

/// The audit-log entry of the decision `entry` records, when the log got
/// it before the trail linked to it: of the same action on the identity,
/// named by no trail entry, written within a minute of it (the closest).
pub async fn unclaimed_entry(tx: &mut Tx, entry: &Unlinked, action: &str) -> Result<Option<i64>, StoreError> {
    let row = sqlx::query(
        "SELECT seq FROM audit_log a WHERE target_kind = 'identity' AND organization_id = $1 AND target_id = $2
         AND action = $3 AND a.at BETWEEN $4 AND $5
         AND NOT EXISTS (SELECT 1 FROM identity_actions t WHERE t.audit_seq = a.seq)
         ORDER BY ABS(a.at - $6), seq LIMIT 1",
    )
    .bind(&entry.organization)
    .bind(&entry.identity_id)
    .bind(action)
    .bind(entry.created_at - SAME_DECISION_MICROS)
    .bind(entry.created_at + SAME_DECISION_MICROS)
    .bind(entry.created_at)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| r.try_get("seq")).transpose()?)
}

/// A new identity's id, label and state, checked before anything is written.
fn check(new: &NewIdentity) -> Result<(), StoreError> {
    if new.id.trim().is_empty() || new.label.trim().is_empty() {
        return Err(StoreError::Invalid("identity id and label must not be empty".into()));
    }
    if !new.state.fits(new.kind) {
        return Err(StoreError::Invalid(format!("a {} identity cannot be {}", new.kind, new.state)));
    }
    Ok(())
}

/// Inserts `new` with its first trail entry (whose id it answers); `None`
/// when an identity (or its `request_id`) is already there.
async fn insert(
    tx: &mut Tx,
    cipher: &Cipher,
    new: &NewIdentity,
    now: i64,
) -> Result<Option<String>, StoreError> {
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
    .execute(&mut **tx)
    .await
    .map_err(|e| match e {
        sqlx::Error::Database(d) if d.is_foreign_key_violation() => {
            StoreError::NotFound(format!("organization {}", new.organization))
        }
        e => e.into(),
    })?;
    if inserted.rows_affected() == 0 {
        return Ok(None);
    }
    Ok(Some(
        audit(tx, &new.organization, &new.id, "Registered", &new.actor, None, None, new.state, now).await?,
    ))
}
