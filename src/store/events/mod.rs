//! The outbox: events are appended in the transaction of the change that
//! causes them, with a delivery per active webhook of the organization, and
//! read back in commit order by the pull API.

pub(crate) mod deliveries;
pub mod delivery_log;
pub(crate) mod sinks;
pub(in crate::store) mod wake;
pub(in crate::store) mod webhook_keys;
pub(in crate::store) mod webhooks;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use serde::Serialize;
use sqlx::{Any, Row, Transaction};

use super::{
    Store, StoreError,
    arrays::{ColumnArrays, Kind, unnest},
    clock::database_now,
    deposit_rows::{Announced, ChangedDeposit, read_changed},
    params::{ARRAY_ROWS, Params, recurs},
    time,
};
use crate::{
    deposits::{
        ids,
        resource::{Deposit, DepositStatus},
    },
    events::{DEPOSIT_V2, Event},
};

/// Announces the deposits of `ids` (read back here), for changes whose
/// statements return only ids.
pub(super) async fn announce_deposits<'a>(
    tx: &mut Transaction<'static, Any>,
    ids: impl IntoIterator<Item = &'a str>,
    now: i64,
) -> Result<(), StoreError> {
    let mut seen = HashSet::new();
    let ids: Vec<&str> = ids.into_iter().filter(|id| seen.insert(*id)).collect();
    let changed = read_changed(tx, &ids).await?;
    announce_changed(tx, changed, now).await
}

/// Announces each deposit whose status differs from the one its last event
/// announced. A deposit's first event is always its `PENDING`, its id the
/// deposit's `dedup_key`: a deposit first seen final gets that and then its
/// final status's. Every later event's id is derived from the `dedup_key`,
/// the status it announces and how many events of that status came before
/// ([`crate::deposits::ids::event_id`]), counted on the deposit's row: a
/// deposit found again after a restore announces what it announced before
/// under the same ids. Called inside the transaction that changed them, so
/// a rolled-back change announces nothing and a committed one always has
/// its event. A deposit changed by several statements (in their order)
/// gets one event, for where it ended. Works in batches: a backfill
/// announces thousands at once.
pub(super) async fn announce_changed(
    tx: &mut Transaction<'static, Any>,
    changed: Vec<ChangedDeposit>,
    now: i64,
) -> Result<(), StoreError> {
    let changed = merge(changed);
    let mut events = Vec::new();
    let mut marks: HashMap<Announced, Vec<&str>> = HashMap::new();
    for c in &changed {
        let added = deposit_events(c, &mut events)?;
        if c.announced_column != Some(c.deposit.status) || added != Announced::default() {
            marks.entry(added).or_default().push(c.deposit.id.as_str());
        }
    }
    if !events.is_empty() {
        append(tx, &events, now).await?;
    }
    for (added, ids) in marks {
        mark_announced(tx, added, &ids).await?;
    }
    Ok(())
}

/// The events `c` announces, pushed onto `events`: none when its status is
/// the one last announced. Answers how many of each status it added.
fn deposit_events<'a>(
    c: &'a ChangedDeposit,
    events: &mut Vec<NewEvent<'a>>,
) -> Result<Announced, StoreError> {
    let (deposit, status) = (&c.deposit, c.deposit.status);
    let mut added = Announced::default();
    if c.announced_before == Some(status) {
        return Ok(added);
    }
    let event =
        |id: String, data: &Deposit| NewEvent::new(&c.organization, DEPOSIT_V2, &deposit.id, id, data);
    if c.announced_before.is_none() {
        if status != DepositStatus::Pending {
            let first = Deposit { status: DepositStatus::Pending, confirmed_at: None, ..deposit.clone() };
            events.push(event(deposit.dedup_key.clone(), &first)?);
        }
        added.pending += 1;
    }
    let id = match c.announced_before {
        None if status == DepositStatus::Pending => deposit.dedup_key.clone(),
        _ => ids::event_id(&deposit.dedup_key, status, c.announced.of(status)),
    };
    events.push(event(id, deposit)?);
    if status != DepositStatus::Pending || c.announced_before.is_some() {
        added.add(status);
    }
    Ok(added)
}

/// Marks the deposits `ids` announced in `tx`: `announced_status` their
/// status, their counts of events raised by `added`.
async fn mark_announced(
    tx: &mut Transaction<'static, Any>,
    added: Announced,
    ids: &[&str],
) -> Result<(), StoreError> {
    let mut params = Params::of(tx);
    let size = params.rows_per_statement(1);
    for chunk in ids.chunks(size) {
        let query = format!(
            "UPDATE deposits SET announced_status = status, events_pending = events_pending + {},
                events_confirmed = events_confirmed + {}, events_failed = events_failed + {}
             WHERE id IN ({})",
            added.pending,
            added.confirmed,
            added.failed,
            params.restart().take(chunk.len())
        );
        let query = sqlx::query(&query).persistent(recurs(chunk.len(), size));
        chunk.iter().fold(query, |q, id| q.bind(*id)).execute(&mut **tx).await?;
    }
    Ok(())
}

/// One entry per deposit, in the order of first change: the last statement's
/// row, with what was announced before the first.
fn merge(changed: Vec<ChangedDeposit>) -> Vec<ChangedDeposit> {
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<ChangedDeposit> = Vec::with_capacity(changed.len());
    for c in changed {
        match at.get(&c.deposit.id) {
            Some(&i) => {
                let before = out[i].announced_before;
                out[i] = ChangedDeposit { announced_before: before, ..c };
            }
            None => {
                at.insert(c.deposit.id.clone(), out.len());
                out.push(c);
            }
        }
    }
    out
}

/// An event to append, its envelope already serialized.
pub(super) struct NewEvent<'a> {
    pub organization: &'a str,
    pub kind: &'a str,
    pub resource_id: &'a str,
    pub id: String,
    /// `{"data": …, "id": …, "type": …}`, as the pull API and webhooks serve
    /// it: only [`NewEvent::new`] writes it, so it is always valid JSON,
    /// whose strings escape every control character.
    payload: String,
}

/// The envelope of an event's payload, its keys in sorted order as before;
/// `data`'s fields come in the order of their type's declaration. Webhooks
/// sign and send the stored text as it is, and the pull API serves it
/// parsed, so neither depends on the order.
#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    data: &'a T,
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
}

impl<'a> NewEvent<'a> {
    /// Serializes `data` straight into the envelope: a backfill announces
    /// thousands of deposits a range, and a `Value` per event cost as much
    /// as writing it.
    pub(super) fn new(
        organization: &'a str,
        kind: &'a str,
        resource_id: &'a str,
        id: String,
        data: &impl Serialize,
    ) -> Result<Self, StoreError> {
        let envelope = Envelope { data, id: &id, kind };
        let payload = serde_json::to_string(&envelope).map_err(|e| StoreError::Invalid(e.to_string()))?;
        Ok(Self { organization, kind, resource_id, id, payload })
    }
}

/// Appends events, in order, and queues each for every active webhook of its
/// organization. Taking the sequence numbers locks the counter row until
/// commit, so events are numbered in commit order.
pub(super) async fn append(
    tx: &mut Transaction<'static, Any>,
    events: &[NewEvent<'_>],
    now: i64,
) -> Result<(), StoreError> {
    let last: i64 =
        sqlx::query("UPDATE store_meta SET value = value + $1 WHERE key = 'event_seq' RETURNING value")
            .bind(events.len() as i64)
            .fetch_one(&mut **tx)
            .await?
            .try_get("value")?;
    let first = last - events.len() as i64 + 1;
    wake::on_commit(tx).await?;
    let mut webhooks: HashMap<&str, Vec<String>> = HashMap::new();
    for event in events {
        if !webhooks.contains_key(event.organization) {
            let rows =
                sqlx::query("SELECT id FROM webhooks WHERE organization_id = $1 AND status = 'ACTIVE'")
                    .bind(event.organization)
                    .fetch_all(&mut **tx)
                    .await?;
            let ids = rows.iter().map(|r| r.try_get("id")).collect::<Result<_, _>>()?;
            webhooks.insert(event.organization, ids);
        }
    }
    let numbered: Vec<(i64, &NewEvent)> = (first..).zip(events).collect();
    if Params::of(tx).arrays() {
        insert_arrays(tx, &numbered, now).await?;
    } else {
        insert_values(tx, &numbered, now).await?;
    }
    let deliveries: Vec<(i64, &str, &str)> = numbered
        .iter()
        .flat_map(|(seq, e)| webhooks[e.organization].iter().map(move |w| (*seq, w.as_str(), e.resource_id)))
        .collect();
    queue_deliveries(tx, &deliveries, now).await
}

/// Inserts `(event seq, webhook, resource)` deliveries, due at once. On
/// PostgreSQL they are due by the database's clock, which the claims compare
/// with: a writer whose clock runs ahead would otherwise queue them in the
/// future, and a worker woken by their commit would find nothing due.
async fn queue_deliveries(
    tx: &mut Transaction<'static, Any>,
    deliveries: &[(i64, &str, &str)],
    now: i64,
) -> Result<(), StoreError> {
    let due = database_now(tx);
    let mut params = Params::of(tx);
    let size = params.rows_per_statement(if due.is_some() { 6 } else { 7 });
    for chunk in deliveries.chunks(size) {
        params.restart();
        let values: Vec<String> = chunk
            .iter()
            .map(|_| match due {
                Some(due) => format!("({}, 'PENDING', 0, {due}, {})", params.take(4), params.take(2)),
                None => format!("({}, 'PENDING', 0, {})", params.take(4), params.take(3)),
            })
            .collect();
        let sql = format!(
            "INSERT INTO deliveries (id, event_seq, webhook_id, resource_id, state, attempts, next_attempt_at,
                created_at, updated_at) VALUES {}",
            values.join(", ")
        );
        let mut query = sqlx::query(&sql).persistent(recurs(chunk.len(), size));
        for (seq, webhook, resource) in chunk {
            query = query.bind(uuid::Uuid::now_v7().to_string()).bind(*seq).bind(*webhook).bind(*resource);
            if due.is_none() {
                query = query.bind(now);
            }
            query = query.bind(now).bind(now);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

const INSERT_EVENTS: &str =
    "INSERT INTO events (seq, id, organization_id, type, resource_id, payload, created_at)";

/// Inserts the events in statements of bound rows.
async fn insert_values(
    tx: &mut Transaction<'static, Any>,
    numbered: &[(i64, &NewEvent<'_>)],
    now: i64,
) -> Result<(), StoreError> {
    let mut params = Params::of(tx);
    let size = params.rows_per_statement(7);
    for chunk in numbered.chunks(size) {
        params.restart();
        let values: Vec<String> = chunk.iter().map(|_| params.row(7)).collect();
        let sql = format!("{INSERT_EVENTS} VALUES {}", values.join(", "));
        let mut query = sqlx::query(&sql).persistent(recurs(chunk.len(), size));
        for (seq, event) in chunk {
            query = query
                .bind(*seq)
                .bind(event.id.as_str())
                .bind(event.organization)
                .bind(event.kind)
                .bind(event.resource_id)
                .bind(event.payload.as_str())
                .bind(now);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Inserts the events on PostgreSQL, each statement's rows as column arrays
/// (see [`Params::arrays`]): a payload goes as the text it is, neither
/// escaped here nor unescaped by the server. Rows with a value the arrays
/// cannot carry go as bound rows.
async fn insert_arrays(
    tx: &mut Transaction<'static, Any>,
    numbered: &[(i64, &NewEvent<'_>)],
    now: i64,
) -> Result<(), StoreError> {
    use Kind::{Bigint, Text};
    let columns = [
        ("seq", Bigint),
        ("id", Text),
        ("organization_id", Text),
        ("type", Text),
        ("resource_id", Text),
        ("payload", Text),
        ("created_at", Bigint),
    ];
    let sql = format!("{INSERT_EVENTS} SELECT * FROM {}", unnest(&columns));
    for chunk in numbered.chunks(ARRAY_ROWS) {
        let mut arrays = ColumnArrays::new(columns.len());
        for (seq, e) in chunk {
            arrays.bigint(*seq).text(&e.id).text(e.organization).text(e.kind).text(e.resource_id);
            arrays.text(&e.payload).bigint(now);
        }
        match arrays.bind(sqlx::query(&sql)) {
            Some(query) => _ = query.execute(&mut **tx).await?,
            None => insert_values(tx, chunk, now).await?,
        }
    }
    Ok(())
}

impl Store {
    /// Up to `limit` of the organization's events after the event `after`
    /// (from the first when `None`), in commit order.
    pub async fn events_after(
        &self,
        organization: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        let after_seq = match after {
            None => 0,
            Some(id) => sqlx::query("SELECT seq FROM events WHERE id = $1 AND organization_id = $2")
                .bind(id)
                .bind(organization)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("event {id}")))?
                .try_get("seq")?,
        };
        let rows = sqlx::query(
            "SELECT seq, payload, created_at FROM events WHERE organization_id = $1 AND seq > $2
             ORDER BY seq LIMIT $3",
        )
        .bind(organization)
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let payload: String = r.try_get("payload")?;
                let seq = r.try_get::<i64, _>("seq")? as u64;
                Ok(Event {
                    seq,
                    // The error names the row, never the payload's content.
                    envelope: serde_json::from_str(&payload).map_err(|error| {
                        StoreError::Corrupt(format!("events.payload of seq {seq}: {error}"))
                    })?,
                    created_at: time(r.try_get("created_at")?)?,
                })
            })
            .collect()
    }

    /// How many events the outbox holds.
    pub async fn event_count(&self) -> Result<u64, StoreError> {
        let n: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM events").fetch_one(&self.pool).await?.try_get("n")?;
        Ok(n as u64)
    }
}
