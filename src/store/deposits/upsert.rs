//! The deposits of a committed scan, written in multi-row upserts that
//! return the keys of the rows they changed: an inserted row is announced
//! from what was bound, and only updated ones are read back.

use foldhash::{HashMap, HashMapExt};

use sqlx::{
    Any, Row, Transaction,
    any::{AnyArguments, AnyRow},
    query::Query,
};

use crate::store::{
    StoreError,
    arrays::{ColumnArrays, Kind, unnest},
    deposit_rows::{ChangedDeposit, read_changed},
    params::{ARRAY_ROWS, Params, recurs},
    scan::ScanCommit,
    time, to_i64,
};
use crate::{
    chain::Chain,
    deposits::{
        ids,
        resource::{Deposit, DepositStatus, Detected, SourceType},
    },
};

/// Parameters per row of the upsert.
const PARAMS: usize = 20;

/// Upserts a scan's `deposits` on their natural key and returns the rows the
/// statements inserted or changed, in the scan's order. A re-seen deposit
/// takes its (new) block; a CONFIRMED one is never rewritten, and a FAILED
/// one whose transaction came back is revived rather than lost. A new row
/// is inserted with `announced_status` already set to the status its first
/// event (written in the same transaction) announces.
///
/// The statements return only each changed row's key: a row they inserted
/// holds what was bound, so it is announced from that, and only the rows
/// they updated (a reorg, a revival) are read back.
pub(in crate::store) async fn upsert_deposits(
    tx: &mut Transaction<'static, Any>,
    scan: &ScanCommit,
    deposits: &[&Detected],
    now: i64,
) -> Result<Vec<ChangedDeposit>, StoreError> {
    let deposits = distinct(deposits);
    let organizations = organizations(tx, &deposits).await?;
    let mut changed = Vec::new();
    let mut params = Params::of(tx);
    let size = if params.arrays() { ARRAY_ROWS } else { params.rows_per_statement(PARAMS) };
    for chunk in deposits.chunks(size) {
        let rows = chunk
            .iter()
            .map(|(d, p)| NewRow::new(scan, d, p, &organizations, now))
            .collect::<Result<Vec<_>, _>>()?;
        let returned = upsert_rows(tx, &mut params, &rows).await?;
        changed.extend(changed_rows(tx, &rows, &returned, &organizations).await?);
    }
    Ok(changed)
}

/// Upserts `rows`: on PostgreSQL in one statement of column arrays, unless
/// a value holds a separator they cannot carry; then, as on SQLite, in
/// statements of bound rows. Returns the changed rows' keys.
async fn upsert_rows(
    tx: &mut Transaction<'static, Any>,
    params: &mut Params,
    rows: &[NewRow<'_>],
) -> Result<Vec<AnyRow>, StoreError> {
    if params.arrays() {
        let mut arrays = ColumnArrays::new(PARAMS);
        rows.iter().for_each(|row| row.columns().push(&mut arrays));
        let sql = upsert_sql(&from_arrays());
        if let Some(query) = arrays.bind(sqlx::query(&sql)) {
            return Ok(query.fetch_all(&mut **tx).await?);
        }
    }
    let size = params.rows_per_statement(PARAMS);
    let mut returned = Vec::new();
    for part in rows.chunks(size) {
        let sql = upsert_sql(&values(params.restart(), part.len()));
        let query = sqlx::query(&sql).persistent(recurs(part.len(), size));
        returned.extend(part.iter().fold(query, |q, row| row.columns().bind(q)).fetch_all(&mut **tx).await?);
    }
    Ok(returned)
}

/// What a chunk's upsert changed, in the scan's order: the rows it inserted
/// as they were bound, the rows it updated read back.
async fn changed_rows(
    tx: &mut Transaction<'static, Any>,
    rows: &[NewRow<'_>],
    returned: &[AnyRow],
    organizations: &HashMap<String, String>,
) -> Result<Vec<ChangedDeposit>, StoreError> {
    let order: HashMap<(&str, &str), usize> =
        rows.iter().enumerate().map(|(i, r)| ((r.detected.tx_hash.as_str(), r.position), i)).collect();
    let mut changed = Vec::with_capacity(returned.len());
    let mut updated: HashMap<String, usize> = HashMap::new();
    for row in returned {
        let (tx_hash, position): (String, String) = (row.try_get("tx_hash")?, row.try_get("position")?);
        let id: String = row.try_get("id")?;
        // Ids are derived from the natural key, so an updated row may hold
        // the bound id too: a row this release stored had its first event
        // in the transaction that inserted it, and an inserted one has had
        // none yet.
        let fresh = row.try_get::<i64, _>("events_pending")? == 0;
        match order.get(&(tx_hash.as_str(), position.as_str())) {
            Some(&at) if rows[at].id == id && fresh => changed.push((at, rows[at].inserted(organizations)?)),
            at => _ = updated.insert(id, at.copied().unwrap_or(usize::MAX)),
        }
    }
    let ids: Vec<&str> = updated.keys().map(String::as_str).collect();
    for c in read_changed(tx, &ids).await? {
        changed.push((updated[&c.deposit.id], c));
    }
    changed.sort_by_key(|(at, _)| *at);
    Ok(changed.into_iter().map(|(_, c)| c).collect())
}

/// One deposit as the upsert binds it.
struct NewRow<'a> {
    chain: Chain,
    detected: &'a Detected,
    position: &'a str,
    block_number: i64,
    /// The block's time, microseconds since the epoch.
    created_at: i64,
    id: String,
    dedup_key: String,
    status: DepositStatus,
    /// The sender's account, when the receiver's organization may see it.
    source: Option<&'a str>,
    confirmed_at: Option<i64>,
    now: i64,
}

impl<'a> NewRow<'a> {
    fn new(
        scan: &ScanCommit,
        detected: &'a Detected,
        position: &'a str,
        organizations: &HashMap<String, String>,
        now: i64,
    ) -> Result<Self, StoreError> {
        let confirmed = scan.confirmed_through.is_some_and(|c| detected.block_number <= c);
        Ok(Self {
            chain: scan.chain,
            detected,
            position,
            block_number: to_i64(detected.block_number)?,
            created_at: to_i64(detected.block_time_ms)?.saturating_mul(1_000),
            id: ids::deposit_id(scan.chain, &detected.tx_hash, position),
            dedup_key: ids::dedup_key(scan.chain, &detected.tx_hash, position),
            status: if confirmed { DepositStatus::Confirmed } else { DepositStatus::Pending },
            source: disclosed_source(detected, organizations),
            confirmed_at: confirmed.then_some(now),
            now,
        })
    }

    fn source_type(&self) -> SourceType {
        if self.source.is_some() { SourceType::Account } else { SourceType::OnChain }
    }

    /// The row's columns, as the upsert writes them.
    fn columns(&self) -> Columns<'_> {
        let d = self.detected;
        Columns {
            id: &self.id,
            dedup_key: &self.dedup_key,
            chain: self.chain.as_str(),
            tx_hash: &d.tx_hash,
            position: self.position,
            account_id: &d.account_id,
            account_address: &d.account_address,
            source_address: &d.source_address,
            source_type: self.source_type().as_str(),
            source_account_id: self.source,
            currency_symbol: &d.currency_symbol,
            amount_raw: d.amount.raw().to_string(),
            decimals: i64::from(d.amount.decimals()),
            status: self.status.as_str(),
            block_number: self.block_number,
            block_hash: &d.block_hash,
            created_at: self.created_at,
            confirmed_at: self.confirmed_at,
            updated_at: self.now,
            // What this transaction's event announces.
            announced_status: self.status.as_str(),
        }
    }

    /// The deposit as the upsert inserted it.
    fn inserted(&self, organizations: &HashMap<String, String>) -> Result<ChangedDeposit, StoreError> {
        let d = self.detected;
        let organization = organizations
            .get(&d.account_id)
            .ok_or_else(|| StoreError::NotFound(format!("account {}", d.account_id)))?;
        let deposit = Deposit {
            id: self.id.clone(),
            dedup_key: self.dedup_key.clone(),
            account_id: d.account_id.clone(),
            account_address: d.account_address.clone(),
            source_address: d.source_address.clone(),
            source_type: self.source_type(),
            source_account_id: self.source.map(str::to_owned),
            currency_symbol: d.currency_symbol.clone(),
            amount: d.amount.to_string(),
            destination_chain: self.chain,
            transaction_hash: d.tx_hash.clone(),
            status: self.status,
            confirmed_at: self.confirmed_at.map(time).transpose()?,
            created_at: time(self.created_at)?,
        };
        Ok(ChangedDeposit {
            deposit,
            organization: organization.clone(),
            announced_before: None,
            announced: Default::default(),
            announced_column: Some(self.status),
        })
    }
}

/// The scan's deposits with their position keys, one per natural key (the
/// last wins, as it would written one by one): PostgreSQL refuses to update
/// a row twice in one statement.
fn distinct<'a>(deposits: &[&'a Detected]) -> Vec<(&'a Detected, String)> {
    let mut at: HashMap<(&str, String), usize> = HashMap::new();
    let mut out: Vec<(&Detected, String)> = Vec::with_capacity(deposits.len());
    for &deposit in deposits {
        let position = deposit.position.key();
        match at.get(&(deposit.tx_hash.as_str(), position.clone())) {
            Some(&i) => out[i].0 = deposit,
            None => {
                at.insert((deposit.tx_hash.as_str(), position.clone()), out.len());
                out.push((deposit, position));
            }
        }
    }
    out
}

/// The organization of each deposit's account, and of its sender's when the
/// sender is a watched address too.
async fn organizations(
    tx: &mut Transaction<'static, Any>,
    deposits: &[(&Detected, String)],
) -> Result<HashMap<String, String>, StoreError> {
    let mut ids: Vec<&str> = deposits
        .iter()
        .flat_map(|(d, _)| [Some(d.account_id.as_str()), d.source_account_id.as_deref()])
        .flatten()
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut out = HashMap::new();
    let mut params = Params::of(tx);
    let size = params.rows_per_statement(1);
    for chunk in ids.chunks(size) {
        let sql = format!(
            "SELECT id, organization_id FROM accounts WHERE id IN ({})",
            params.restart().take(chunk.len())
        );
        let query = sqlx::query(&sql).persistent(recurs(chunk.len(), size));
        let rows = chunk.iter().fold(query, |q, id| q.bind(*id)).fetch_all(&mut **tx).await?;
        for row in rows {
            out.insert(row.try_get("id")?, row.try_get("organization_id")?);
        }
    }
    Ok(out)
}

/// The sender's account as the deposit may name it: only an account of the
/// receiver's organization. A deposit from another organization's account
/// is `ON_CHAIN` for its receiver and says nothing of the sender's account.
fn disclosed_source<'a>(deposit: &'a Detected, organizations: &HashMap<String, String>) -> Option<&'a str> {
    let source = deposit.source_account_id.as_deref()?;
    let receiver = organizations.get(&deposit.account_id)?;
    (organizations.get(source) == Some(receiver)).then_some(source)
}

/// A deposit's columns in the upsert's order (`orphaned_at_block`, always
/// NULL, left out).
struct Columns<'a> {
    id: &'a str,
    dedup_key: &'a str,
    chain: &'a str,
    tx_hash: &'a str,
    position: &'a str,
    account_id: &'a str,
    account_address: &'a str,
    source_address: &'a str,
    source_type: &'a str,
    source_account_id: Option<&'a str>,
    currency_symbol: &'a str,
    amount_raw: String,
    decimals: i64,
    status: &'a str,
    block_number: i64,
    block_hash: &'a str,
    created_at: i64,
    confirmed_at: Option<i64>,
    updated_at: i64,
    announced_status: &'a str,
}

impl<'a> Columns<'a> {
    /// Binds the row's parameters, in the order of [`values`].
    fn bind(self, query: Query<'a, Any, AnyArguments<'a>>) -> Query<'a, Any, AnyArguments<'a>> {
        query
            .bind(self.id)
            .bind(self.dedup_key)
            .bind(self.chain)
            .bind(self.tx_hash)
            .bind(self.position)
            .bind(self.account_id)
            .bind(self.account_address)
            .bind(self.source_address)
            .bind(self.source_type)
            .bind(self.source_account_id)
            .bind(self.currency_symbol)
            .bind(self.amount_raw)
            .bind(self.decimals)
            .bind(self.status)
            .bind(self.block_number)
            .bind(self.block_hash)
            .bind(self.created_at)
            .bind(self.confirmed_at)
            .bind(self.updated_at)
            .bind(self.announced_status)
    }

    /// Appends the row to column arrays, in the order of [`from_arrays`].
    fn push(self, arrays: &mut ColumnArrays) {
        arrays
            .text(self.id)
            .text(self.dedup_key)
            .text(self.chain)
            .text(self.tx_hash)
            .text(self.position)
            .text(self.account_id)
            .text(self.account_address)
            .text(self.source_address)
            .text(self.source_type)
            .optional_text(self.source_account_id)
            .text(self.currency_symbol)
            .text(&self.amount_raw)
            .bigint(self.decimals)
            .text(self.status)
            .bigint(self.block_number)
            .text(self.block_hash)
            .bigint(self.created_at)
            .optional_bigint(self.confirmed_at)
            .bigint(self.updated_at)
            .text(self.announced_status);
    }
}

/// `VALUES` of `rows` rows of bound parameters.
fn values(params: &mut Params, rows: usize) -> String {
    // Columns 1–16, orphaned_at_block, then the last four.
    let rows: Vec<String> =
        (0..rows).map(|_| format!("({}, NULL, {})", params.take(16), params.take(PARAMS - 16))).collect();
    format!("VALUES {}", rows.join(", "))
}

/// The rows of the column arrays [`Columns::push`] fills.
fn from_arrays() -> String {
    use Kind::{Bigint, Text};
    let columns = [
        ("id", Text),
        ("dedup_key", Text),
        ("chain", Text),
        ("tx_hash", Text),
        ("position", Text),
        ("account_id", Text),
        ("account_address", Text),
        ("source_address", Text),
        ("source_type", Text),
        ("source_account_id", Text),
        ("currency_symbol", Text),
        ("amount_raw", Text),
        ("decimals", Bigint),
        ("status", Text),
        ("block_number", Bigint),
        ("block_hash", Text),
        ("created_at", Bigint),
        ("confirmed_at", Bigint),
        ("updated_at", Bigint),
        ("announced_status", Text),
    ];
    format!(
        "SELECT id, dedup_key, chain, tx_hash, position, account_id, account_address, source_address,
            source_type, source_account_id, currency_symbol, amount_raw, decimals, status, block_number,
            block_hash, CAST(NULL AS BIGINT), created_at, confirmed_at, updated_at, announced_status
         FROM {}",
        unnest(&columns)
    )
}

/// `INSERT … ON CONFLICT … RETURNING` of the deposits `rows` yields. On a
/// compact position (`log:`, `spl:`: a digest of what the transfer moves) a
/// conflict updates only a row that moves the same amount of the same asset
/// to the same address (what the digest covers, whichever account holds the
/// address now): the key says so already, unless its 128 bits collided, and
/// then the stored deposit is left as it is rather than moved to another
/// transfer's block.
fn upsert_sql(rows: &str) -> String {
    format!(
        "INSERT INTO deposits (id, dedup_key, chain, tx_hash, position, account_id, account_address,
            source_address, source_type, source_account_id, currency_symbol, amount_raw, decimals,
            status, block_number, block_hash, orphaned_at_block, created_at, confirmed_at, updated_at,
            announced_status)
         {rows}
         ON CONFLICT (chain, tx_hash, position) DO UPDATE SET
            block_number = excluded.block_number, block_hash = excluded.block_hash,
            created_at = excluded.created_at, orphaned_at_block = NULL,
            status = excluded.status, confirmed_at = excluded.confirmed_at, updated_at = excluded.updated_at
         WHERE deposits.status <> 'CONFIRMED'
           AND (deposits.position NOT LIKE 'log:%' AND deposits.position NOT LIKE 'spl:%'
                OR deposits.account_address = excluded.account_address AND deposits.currency_symbol = excluded.currency_symbol
                   AND deposits.amount_raw = excluded.amount_raw)
           AND (deposits.block_hash <> excluded.block_hash OR deposits.status <> excluded.status
                OR deposits.orphaned_at_block IS NOT NULL)
         RETURNING id, tx_hash, position, events_pending"
    )
}
