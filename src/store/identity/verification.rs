//! What the compliance provider reads and writes: identities awaiting a
//! review with their newest submission, and identity verification checks
//! (a decision applied with its check is [`crate::identity::review`]).

use std::collections::HashMap;

use serde_json::Value;
use sqlx::{Row, any::AnyRow};

use crate::store::{
    Store, StoreError, Tx, identities::state_of, params::placeholders, parse_column, pii::SUBMISSION, time,
};
use crate::{
    identity::{CheckStatus, IdVerificationCheck, State, Type},
    pii::{Cipher, Masked, Place},
};

/// An identity in onboarding, as the provider reviews it.
#[derive(Debug, Clone)]
pub struct Review {
    pub organization: String,
    pub identity_id: String,
    pub kind: Type,
    pub state: State,
    pub submission_id: String,
    /// The newest submission: `{ "kyc": … }` or `{ "kyb": … }`; personal
    /// data, stored sealed.
    pub submission: Masked<Value>,
    pub submitted_at: i64,
    /// When the open RFI was raised, if one is open.
    pub rfi_opened_at: Option<i64>,
    /// The newest check issued for this submission.
    pub check: Option<IdVerificationCheck>,
    /// The identity's last change: with `identity_id`, the key reviews are
    /// paged on.
    pub updated_at: i64,
}

/// What a provider's decision does to the check beside the lifecycle event.
#[derive(Debug, Clone)]
pub enum CheckStep {
    None,
    /// Issues this check (with `IdvRequested`).
    Issue(Box<IdVerificationCheck>),
    /// Moves the review's check to this status (with `IdvStarted`/`IdvCompleted`).
    Set(CheckStatus),
}

const CHECK_COLUMNS: &str = "id, identity_id, submission_id, request_id, reason, status, verification_url, \
     redirect_url, labels, created_at, updated_at";

impl Store {
    /// A check of the organization's identity; any other is not found.
    pub async fn idv_check(
        &self,
        organization: &str,
        identity_id: &str,
        id: &str,
    ) -> Result<IdVerificationCheck, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {CHECK_COLUMNS}, expires_at FROM id_verification_checks
             WHERE organization_id = $1 AND identity_id = $2 AND id = $3"
        ))
        .bind(organization)
        .bind(identity_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("identity verification check {id}")))?;
        check_from_row(&row)
    }

    /// The identity's checks, newest first.
    pub async fn idv_checks(
        &self,
        organization: &str,
        identity_id: &str,
    ) -> Result<Vec<IdVerificationCheck>, StoreError> {
        self.idv_check_page(organization, identity_id, None, u32::MAX).await
    }

    /// Up to `limit` of the identity's checks, newest first (by creation
    /// time, then id, both descending), after the check `after` names
    /// (its creation time in microseconds and its id).
    pub async fn idv_check_page(
        &self,
        organization: &str,
        identity_id: &str,
        after: Option<(i64, &str)>,
        limit: u32,
    ) -> Result<Vec<IdVerificationCheck>, StoreError> {
        // No check is created at i64::MAX: the first page takes them all.
        let (at, id) = after.unwrap_or((i64::MAX, ""));
        let rows = sqlx::query(&format!(
            "SELECT {CHECK_COLUMNS}, expires_at FROM id_verification_checks
             WHERE organization_id = $1 AND identity_id = $2
               AND (created_at < $3 OR (created_at = $3 AND id < $4))
             ORDER BY created_at DESC, id DESC LIMIT $5"
        ))
        .bind(organization)
        .bind(identity_id)
        .bind(at)
        .bind(id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(check_from_row).collect()
    }

    /// Up to `limit` identities in onboarding past `CREATED` that are due
    /// for a review, each with its newest submission and that submission's
    /// newest check: what the provider has to decide on. Due: never
    /// answered "wait" on, changed since (see [`wait_on`]), or whose
    /// `review_after` passed by `until`. Ordered by (`updated_at`, id) and
    /// taken after `after` (the last review of the previous page), so that a
    /// caller pages through all of them. Only identities changed at or
    /// before `until` are taken, so that one decided during the pass is not
    /// met again in it. Two statements per page, however many identities
    /// wait on their client.
    pub async fn reviews(
        &self,
        after: Option<&Review>,
        until: i64,
        limit: u32,
    ) -> Result<Vec<Review>, StoreError> {
        let (after_at, after_id) = after.map_or((i64::MIN, ""), |r| (r.updated_at, r.identity_id.as_str()));
        let rows = sqlx::query(
            "SELECT i.organization_id, i.id, i.type, i.status, i.sub_status, i.rfi_step, i.updated_at,
                 s.id AS submission_id, s.data, s.created_at AS submitted_at,
                 (SELECT MAX(x.created_at) FROM identity_actions x WHERE x.organization_id = i.organization_id
                     AND x.identity_id = i.id AND x.sub_status = 'RFI_REQUIRED'
                     AND (x.previous_sub_status IS NULL OR x.previous_sub_status <> 'RFI_REQUIRED')) AS rfi_opened_at
             FROM identities i JOIN compliance_submissions s
                 ON s.organization_id = i.organization_id AND s.identity_id = i.id
             WHERE i.status = 'PENDING_ONBOARDING' AND i.sub_status <> 'CREATED'
               AND (i.reviewed_version IS NULL OR i.reviewed_version <> i.updated_at OR i.review_after <= $3)
               AND s.created_at = (SELECT MAX(t.created_at) FROM compliance_submissions t
                   WHERE t.organization_id = i.organization_id AND t.identity_id = i.id)
               AND (i.updated_at > $1 OR (i.updated_at = $1 AND i.id > $2)) AND i.updated_at <= $3
             ORDER BY i.updated_at, i.id LIMIT $4",
        )
        .bind(after_at)
        .bind(after_id)
        .bind(until)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let submissions: Vec<String> =
            rows.iter().map(|r| r.try_get("submission_id")).collect::<Result<_, _>>()?;
        let mut checks = self.newest_checks(&submissions).await?;
        let cipher = self.cipher()?;
        rows.iter().map(|row| review_from_row(row, cipher, &mut checks)).collect()
    }

    /// The newest check of each of `submissions` that has one, in one statement.
    async fn newest_checks(
        &self,
        submissions: &[String],
    ) -> Result<HashMap<String, IdVerificationCheck>, StoreError> {
        if submissions.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT {CHECK_COLUMNS}, expires_at FROM id_verification_checks WHERE submission_id IN ({})
             ORDER BY created_at DESC, id",
            placeholders(1, submissions.len())
        );
        let mut query = sqlx::query(&sql);
        for submission in submissions {
            query = query.bind(submission);
        }
        let mut newest = HashMap::new();
        for row in query.fetch_all(&self.pool).await? {
            let check = check_from_row(&row)?;
            newest.entry(check.submission_id.clone()).or_insert(check);
        }
        Ok(newest)
    }

    /// The checks not completed by their `expires_at` (before `now`): each
    /// check's id, organization and identity, the first to expire first.
    pub async fn checks_past_expiry(&self, now: i64) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, organization_id, identity_id FROM id_verification_checks
             WHERE status IN ('NOT_STARTED', 'IN_PROGRESS') AND expires_at <= $1 ORDER BY expires_at, id",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("id")?, row.try_get("organization_id")?, row.try_get("identity_id")?)))
            .collect()
    }
}

/// Records that the provider waits on each of `reviews` (it answered no
/// decision): none is read again until it changes (its `updated_at` moves)
/// or `review_after` passes. One statement; an identity changed since its
/// review is left due.
pub(crate) async fn wait_on(tx: &mut Tx, reviews: &[&Review], review_after: i64) -> Result<(), StoreError> {
    if reviews.is_empty() {
        return Ok(());
    }
    let each: Vec<String> = (0..reviews.len())
        .map(|i| {
            let n = 3 * i + 2;
            format!("(organization_id = ${n} AND id = ${} AND updated_at = ${})", n + 1, n + 2)
        })
        .collect();
    let sql = format!(
        "UPDATE identities SET reviewed_version = updated_at, review_after = $1 WHERE {}",
        each.join(" OR ")
    );
    let mut query = sqlx::query(&sql).bind(review_after);
    for review in reviews {
        query = query.bind(&review.organization).bind(&review.identity_id).bind(review.updated_at);
    }
    query.execute(&mut **tx).await?;
    Ok(())
}

/// A review of a row of [`Store::reviews`], with its submission's check
/// taken from `checks`.
fn review_from_row(
    row: &AnyRow,
    cipher: &Cipher,
    checks: &mut HashMap<String, IdVerificationCheck>,
) -> Result<Review, StoreError> {
    let kind: Type = parse_column(&row.try_get::<String, _>("type")?, "identities.type")?;
    let submission_id: String = row.try_get("submission_id")?;
    let (organization, identity): (String, String) = (row.try_get("organization_id")?, row.try_get("id")?);
    let place = Place { column: SUBMISSION, row: &[&organization, &identity, &submission_id] };
    let data = cipher.open(&row.try_get::<String, _>("data")?, place)?;
    let state = state_of(row, kind)?;
    Ok(Review {
        organization: row.try_get("organization_id")?,
        identity_id: row.try_get("id")?,
        kind,
        rfi_opened_at: if state.rfi_open() { row.try_get("rfi_opened_at")? } else { None },
        state,
        submission: Masked::new(
            serde_json::from_slice(&data)
                .map_err(|_| StoreError::Corrupt("compliance_submissions.data".into()))?,
        ),
        check: checks.remove(&submission_id),
        submission_id,
        submitted_at: row.try_get("submitted_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// The id of the identity's newest compliance submission, inside `tx`.
pub async fn newest_submission(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    organization: &str,
    identity_id: &str,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM compliance_submissions WHERE organization_id = $1 AND identity_id = $2
         ORDER BY created_at DESC, id DESC LIMIT 1",
    )
    .bind(organization)
    .bind(identity_id)
    .fetch_optional(&mut **tx)
    .await?)
}

/// The id of the newest check issued for the identity's newest submission
/// (the one a review sees), inside `tx`.
pub async fn current_check(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    organization: &str,
    identity_id: &str,
) -> Result<Option<String>, StoreError> {
    let Some(submission) = newest_submission(tx, organization, identity_id).await? else { return Ok(None) };
    Ok(sqlx::query_scalar(
        "SELECT id FROM id_verification_checks
         WHERE organization_id = $1 AND identity_id = $2 AND submission_id = $3
         ORDER BY created_at DESC, id DESC LIMIT 1",
    )
    .bind(organization)
    .bind(identity_id)
    .bind(submission)
    .fetch_optional(&mut **tx)
    .await?)
}

pub async fn insert_check(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    organization: &str,
    check: &IdVerificationCheck,
) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "INSERT INTO id_verification_checks ({CHECK_COLUMNS}, organization_id, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
    ))
    .bind(&check.id)
    .bind(&check.identity_id)
    .bind(&check.submission_id)
    .bind(&check.request_id)
    .bind(&check.reason)
    .bind(check.status.as_str())
    .bind(&check.verification_url)
    .bind(check.redirect_url.as_deref())
    .bind(serde_json::to_string(&check.labels).expect("strings serialize"))
    .bind(check.created_at.timestamp_micros())
    .bind(check.updated_at.timestamp_micros())
    .bind(organization)
    .bind(check.expires_at.timestamp_micros())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Moves an open check to `status`; whether it was still open.
pub async fn set_check(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    id: &str,
    status: CheckStatus,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE id_verification_checks SET status = $2, updated_at = $3
         WHERE id = $1 AND status IN ('NOT_STARTED', 'IN_PROGRESS')",
    )
    .bind(id)
    .bind(status.as_str())
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() > 0)
}

fn check_from_row(row: &AnyRow) -> Result<IdVerificationCheck, StoreError> {
    let labels: String = row.try_get("labels")?;
    Ok(IdVerificationCheck {
        id: row.try_get("id")?,
        identity_id: row.try_get("identity_id")?,
        verification_url: row.try_get("verification_url")?,
        reason: row.try_get("reason")?,
        request_id: row.try_get("request_id")?,
        redirect_url: row.try_get("redirect_url")?,
        status: parse_column(&row.try_get::<String, _>("status")?, "id_verification_checks.status")?,
        created_at: time(row.try_get("created_at")?)?,
        updated_at: time(row.try_get("updated_at")?)?,
        labels: serde_json::from_str(&labels)
            .map_err(|_| StoreError::Corrupt("id_verification_checks.labels".into()))?,
        submission_id: row.try_get("submission_id")?,
        expires_at: time(row.try_get("expires_at")?)?,
    })
}
