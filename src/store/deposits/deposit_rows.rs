//! Deposit rows as the store reads them back: the columns, the mapping to
//! a [`Deposit`], and a deposit as a statement left it
//! ([`ChangedDeposit`]) for the scan commit and the outbox to announce.

use foldhash::{HashMap, HashMapExt};
use sqlx::{Any, Row, Transaction, any::AnyRow};

use crate::store::{
    StoreError,
    params::{Params, recurs},
    parse_column, time,
};
use crate::{
    amount::Amount,
    deposits::resource::{Deposit, DepositStatus, SourceType},
};

pub(in crate::store) const DEPOSIT_COLUMNS: &str = "id, dedup_key, chain, tx_hash, account_id, account_address, source_address, \
     source_type, source_account_id, currency_symbol, amount_raw, decimals, status, created_at, confirmed_at";

/// A deposit as a statement of the current transaction left it: read back
/// with [`changed_columns`], or as the upsert inserted it.
pub(in crate::store) struct ChangedDeposit {
    pub deposit: Deposit,
    pub organization: String,
    /// What the deposit's last event announced before this transaction
    /// (`None`: it has had no event yet).
    pub announced_before: Option<DepositStatus>,
    /// The `announced_status` column as the statement left it.
    pub announced_column: Option<DepositStatus>,
    /// How many events of each status ([`Announced::of`]) the deposit had
    /// before: what its next event's id is derived from.
    pub announced: Announced,
}

/// How many events of each status a deposit has had (`events_pending`,
/// `events_confirmed`, `events_failed`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(in crate::store) struct Announced {
    pub pending: u32,
    pub confirmed: u32,
    pub failed: u32,
}

impl Announced {
    /// How many events announced `status`.
    pub fn of(&self, status: DepositStatus) -> u32 {
        match status {
            DepositStatus::Pending => self.pending,
            DepositStatus::Confirmed => self.confirmed,
            DepositStatus::Failed => self.failed,
        }
    }

    /// One more event of `status`.
    pub fn add(&mut self, status: DepositStatus) {
        match status {
            DepositStatus::Pending => self.pending += 1,
            DepositStatus::Confirmed => self.confirmed += 1,
            DepositStatus::Failed => self.failed += 1,
        }
    }

    fn read(row: &AnyRow) -> Result<Self, StoreError> {
        let count = |column: &str| -> Result<u32, StoreError> {
            let n: i64 = row.try_get(column)?;
            u32::try_from(n).map_err(|_| StoreError::Corrupt(format!("deposits.{column} = {n}")))
        };
        Ok(Self {
            pending: count("events_pending")?,
            confirmed: count("events_confirmed")?,
            failed: count("events_failed")?,
        })
    }
}

/// The columns a changed deposit is announced from.
pub(in crate::store) fn changed_columns() -> String {
    format!(
        "{}, announced_status, events_pending, events_confirmed, events_failed,
         (SELECT organization_id FROM accounts a WHERE a.id = deposits.account_id) AS organization_id",
        DEPOSIT_COLUMNS
    )
}

impl ChangedDeposit {
    /// `inserted`: the statement created the row, setting `announced_status`
    /// to the status the event this transaction writes will announce.
    pub(in crate::store) fn from_row(row: &AnyRow, inserted: bool) -> Result<Self, StoreError> {
        let announced: Option<String> = row.try_get("announced_status")?;
        let announced_column: Option<DepositStatus> =
            announced.map(|s| parse_column(&s, "deposits.announced_status")).transpose()?;
        Ok(Self {
            deposit: deposit_from_row(row)?,
            organization: row.try_get("organization_id")?,
            announced_before: if inserted { None } else { announced_column },
            announced_column,
            announced: Announced::read(row)?,
        })
    }
}

/// The deposits of `ids` as the current transaction left them, in the
/// order of `ids` (an id with no row is skipped), for announcing changes
/// whose statements returned only ids.
pub(in crate::store) async fn read_changed(
    tx: &mut Transaction<'static, Any>,
    ids: &[&str],
) -> Result<Vec<ChangedDeposit>, StoreError> {
    let mut changed = Vec::with_capacity(ids.len());
    let mut params = Params::of(tx);
    let size = params.rows_per_statement(1);
    for chunk in ids.chunks(size) {
        let sql = format!(
            "SELECT {} FROM deposits WHERE id IN ({})",
            changed_columns(),
            params.restart().take(chunk.len())
        );
        let query = sqlx::query(&sql).persistent(recurs(chunk.len(), size));
        let rows = chunk.iter().fold(query, |q, id| q.bind(*id)).fetch_all(&mut **tx).await?;
        let mut found: HashMap<String, ChangedDeposit> = HashMap::with_capacity(rows.len());
        for row in &rows {
            let deposit = ChangedDeposit::from_row(row, false)?;
            found.insert(deposit.deposit.id.clone(), deposit);
        }
        changed.extend(chunk.iter().filter_map(|id| found.remove(*id)));
    }
    Ok(changed)
}

pub(in crate::store) fn deposit_from_row(row: &AnyRow) -> Result<Deposit, StoreError> {
    let raw: String = row.try_get("amount_raw")?;
    let decimals: i64 = row.try_get("decimals")?;
    let raw = alloy::primitives::U256::from_str_radix(&raw, 10)
        .map_err(|_| StoreError::Corrupt(format!("deposits.amount_raw = {raw:?}")))?;
    let decimals =
        u8::try_from(decimals).map_err(|_| StoreError::Corrupt(format!("deposits.decimals = {decimals}")))?;
    let source_type = match row.try_get::<String, _>("source_type")?.as_str() {
        "ACCOUNT" => SourceType::Account,
        "ON_CHAIN" => SourceType::OnChain,
        other => {
            return Err(StoreError::Corrupt(format!("deposits.source_type = {other:?}")));
        }
    };
    Ok(Deposit {
        id: row.try_get("id")?,
        dedup_key: row.try_get("dedup_key")?,
        account_id: row.try_get("account_id")?,
        account_address: row.try_get("account_address")?,
        source_address: row.try_get("source_address")?,
        source_type,
        source_account_id: row.try_get("source_account_id")?,
        currency_symbol: row.try_get("currency_symbol")?,
        amount: Amount::from_raw(raw, decimals).to_string(),
        destination_chain: parse_column(&row.try_get::<String, _>("chain")?, "deposits.chain")?,
        transaction_hash: row.try_get("tx_hash")?,
        status: parse_column(&row.try_get::<String, _>("status")?, "deposits.status")?,
        confirmed_at: row.try_get::<Option<i64>, _>("confirmed_at")?.map(time).transpose()?,
        created_at: time(row.try_get("created_at")?)?,
    })
}
