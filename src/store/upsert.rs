//! The deposits of a committed scan, written in multi-row upserts that
//! return the rows they changed, so announcing them reads nothing back.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use sqlx::{Any, Row, Transaction};

use super::{
    StoreError,
    deposit_rows::{ChangedDeposit, changed_columns},
    params::{Params, recurs},
    scan::ScanCommit,
    to_i64,
};
use crate::deposit::{DepositStatus, Detected, SourceType};

/// Parameters per row of the upsert.
const PARAMS: usize = 20;

/// Upserts a scan's `deposits` on their natural key and returns the rows the
/// statements inserted or changed, in the scan's order. A re-seen deposit
/// takes its (new) block; a CONFIRMED one is never rewritten, and a FAILED
/// one whose transaction came back is revived rather than lost. A new row
/// is inserted with `announced_status` already set to the status its first
/// event (written in the same transaction) announces.
pub(super) async fn upsert_deposits(
    tx: &mut Transaction<'static, Any>,
    scan: &ScanCommit,
    deposits: &[&Detected],
    now: i64,
) -> Result<Vec<ChangedDeposit>, StoreError> {
    let deposits = distinct(deposits);
    let organizations = organizations(tx, &deposits).await?;
    let mut changed = Vec::new();
    let mut params = Params::of(tx);
    let size = params.rows_per_statement(PARAMS);
    for chunk in deposits.chunks(size) {
        let sql = upsert_sql(params.restart(), chunk.len());
        let mut query = sqlx::query(&sql).persistent(recurs(chunk.len(), size));
        let mut new_ids = HashSet::new();
        for (deposit, position) in chunk {
            let confirmed = scan.confirmed_through.is_some_and(|c| deposit.block_number <= c);
            let status = if confirmed { DepositStatus::Confirmed } else { DepositStatus::Pending };
            let source = disclosed_source(deposit, &organizations);
            let id = uuid::Uuid::now_v7().to_string();
            new_ids.insert(id.clone());
            query = query
                .bind(id)
                .bind(uuid::Uuid::now_v7().to_string())
                .bind(scan.chain.as_str())
                .bind(&deposit.tx_hash)
                .bind(position.as_str())
                .bind(&deposit.account_id)
                .bind(&deposit.account_address)
                .bind(&deposit.source_address)
                .bind(if source.is_some() { SourceType::Account } else { SourceType::OnChain }.as_str())
                .bind(source)
                .bind(&deposit.currency_symbol)
                .bind(deposit.amount.raw().to_string())
                .bind(i64::from(deposit.amount.decimals()))
                .bind(status.as_str())
                .bind(to_i64(deposit.block_number)?)
                .bind(&deposit.block_hash)
                .bind(to_i64(deposit.block_time)?.saturating_mul(1_000_000))
                .bind(confirmed.then_some(now))
                .bind(now)
                // announced_status: what this transaction's event announces.
                .bind(status.as_str());
        }
        let rows = query.fetch_all(&mut **tx).await?;
        let order: HashMap<(&str, &str), usize> =
            chunk.iter().enumerate().map(|(i, (d, p))| ((d.tx_hash.as_str(), p.as_str()), i)).collect();
        let mut returned = Vec::with_capacity(rows.len());
        for row in &rows {
            let (tx_hash, position): (String, String) = (row.try_get("tx_hash")?, row.try_get("position")?);
            let at = order.get(&(tx_hash.as_str(), position.as_str())).copied().unwrap_or(usize::MAX);
            let id: String = row.try_get("id")?;
            returned.push((at, ChangedDeposit::from_row(row, new_ids.contains(&id))?));
        }
        returned.sort_by_key(|(at, _)| *at);
        changed.extend(returned.into_iter().map(|(_, c)| c));
    }
    Ok(changed)
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

/// The organization of each account on either side of a deposit between
/// watched addresses.
async fn organizations(
    tx: &mut Transaction<'static, Any>,
    deposits: &[(&Detected, String)],
) -> Result<HashMap<String, String>, StoreError> {
    let mut ids: Vec<&str> = deposits
        .iter()
        .filter_map(|(d, _)| Some([d.account_id.as_str(), d.source_account_id.as_deref()?]))
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

/// `INSERT … ON CONFLICT … RETURNING` for `rows` deposits.
fn upsert_sql(params: &mut Params, rows: usize) -> String {
    // Columns 1–16, orphaned_at_block, then the last four.
    let values: Vec<String> =
        (0..rows).map(|_| format!("({}, NULL, {})", params.take(16), params.take(PARAMS - 16))).collect();
    format!(
        "INSERT INTO deposits (id, dedup_key, chain, tx_hash, position, account_id, account_address,
            source_address, source_type, source_account_id, currency_symbol, amount_raw, decimals,
            status, block_number, block_hash, orphaned_at_block, created_at, confirmed_at, updated_at,
            announced_status)
         VALUES {}
         ON CONFLICT (chain, tx_hash, position) DO UPDATE SET
            block_number = excluded.block_number, block_hash = excluded.block_hash,
            created_at = excluded.created_at, orphaned_at_block = NULL,
            status = excluded.status, confirmed_at = excluded.confirmed_at, updated_at = excluded.updated_at
         WHERE deposits.status <> 'CONFIRMED'
           AND (deposits.block_hash <> excluded.block_hash OR deposits.status <> excluded.status
                OR deposits.orphaned_at_block IS NOT NULL)
         RETURNING position, {}",
        values.join(", "),
        changed_columns()
    )
}
