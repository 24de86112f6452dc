//! Provider quorum's rows: the pending deposits to ask each provider
//! about, their settlement with the disputes found, and the disputes
//! listed for operators.

use sqlx::{Row, any::AnyRow};

use crate::store::{Store, StoreError, Tx, deposits::settle_rows, now_micros, parse_column, to_i64};
use crate::{
    chain::Chain,
    deposits::{
        quorum::{Claimed, Dispute, Outcome, UrlAnswer},
        resource::{DepositStatus, format_time},
    },
};

/// What a quorum step decided, committed at once: deposits to confirm and
/// to fail, each by id and the block hash the providers were asked about.
#[derive(Debug, Default)]
pub struct QuorumSettlement {
    pub confirmed: Vec<(String, String)>,
    pub failed: Vec<(String, String)>,
    pub disputes: Vec<Dispute>,
}

impl Store {
    /// The pending deposits of `chain` in blocks up to `through`, as
    /// recorded, oldest block first; orphaned ones are the reorg's.
    pub async fn claimed_through(&self, chain: Chain, through: u64) -> Result<Vec<Claimed>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, tx_hash, position, account_id, account_address, currency_symbol, amount_raw,
                    block_number, block_hash
             FROM deposits
             WHERE chain = $1 AND status = 'PENDING' AND orphaned_at_block IS NULL AND block_number <= $2
             ORDER BY block_number, id",
        )
        .bind(chain.as_str())
        .bind(to_i64(through)?)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Claimed {
                    id: r.try_get("id")?,
                    chain,
                    tx_hash: r.try_get("tx_hash")?,
                    position: r.try_get("position")?,
                    account_id: r.try_get("account_id")?,
                    address: r.try_get("account_address")?,
                    symbol: r.try_get("currency_symbol")?,
                    amount_raw: r.try_get("amount_raw")?,
                    block_number: r.try_get::<i64, _>("block_number")?.max(0) as u64,
                    block_hash: r.try_get("block_hash")?,
                })
            })
            .collect()
    }

    /// Confirms and fails what a quorum step decided and records its
    /// disputes, in `tx`; a deposit no longer pending, or no
    /// longer in the block the providers were asked about (a backfill or a
    /// rescan moved it meanwhile), is left alone. A dispute still open
    /// ends with its deposit. Returns the deposits changed and the
    /// disputes seen for the first time.
    pub async fn settle_on_quorum(
        &self,
        tx: &mut Tx,
        settlement: &QuorumSettlement,
    ) -> Result<(Vec<(String, DepositStatus)>, Vec<String>), StoreError> {
        let now = now_micros();
        let pinned = |ids: &[(String, String)]| {
            ids.iter().map(|(id, block)| (id.clone(), Some(block.clone()))).collect::<Vec<_>>()
        };
        let changed =
            settle_rows(tx, &pinned(&settlement.confirmed), &pinned(&settlement.failed), now).await?;
        let mut new = Vec::new();
        // Recorded open, with the latest answers; closed below with the
        // deposits this transaction settled.
        for dispute in &settlement.disputes {
            let answers = serde_json::to_string(&dispute.answers)
                .map_err(|e| StoreError::Invalid(format!("a dispute's answers: {e}")))?;
            let inserted = sqlx::query(
                "INSERT INTO provider_disputes (deposit_id, chain, account_id, address, asset, tx_hash,
                     block_number, block_hash, answers, outcome, first_seen_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
                 ON CONFLICT (deposit_id) DO NOTHING",
            )
            .bind(&dispute.deposit_id)
            .bind(dispute.chain.as_str())
            .bind(&dispute.account_id)
            .bind(&dispute.address)
            .bind(&dispute.asset)
            .bind(&dispute.transaction_hash)
            .bind(to_i64(dispute.block_number)?)
            .bind(&dispute.block_hash)
            .bind(&answers)
            .bind(Outcome::Open.as_str())
            .bind(now)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            if inserted == 1 {
                new.push(dispute.deposit_id.clone());
                continue;
            }
            sqlx::query(
                "UPDATE provider_disputes SET answers = $1, updated_at = $2 WHERE deposit_id = $3 AND outcome = 'OPEN'",
            )
            .bind(&answers)
            .bind(now)
            .bind(&dispute.deposit_id)
            .execute(&mut **tx)
            .await?;
        }
        for (id, status) in &changed {
            let outcome = match status {
                DepositStatus::Confirmed => Outcome::Confirmed,
                _ => Outcome::NotOnQuorum,
            };
            sqlx::query(
                "UPDATE provider_disputes SET outcome = $1, updated_at = $2 WHERE deposit_id = $3 AND outcome = 'OPEN'",
            )
            .bind(outcome.as_str())
            .bind(now)
            .bind(id)
            .execute(&mut **tx)
            .await?;
        }
        Ok((changed, new))
    }

    /// Disputes, newest first: of one chain, or open ones only, when asked.
    pub async fn disputes(
        &self,
        chain: Option<Chain>,
        open_only: bool,
        limit: i64,
    ) -> Result<Vec<Dispute>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM provider_disputes
             WHERE ($1 IS NULL OR chain = $1) AND ($2 = 0 OR outcome = 'OPEN')
             ORDER BY first_seen_at DESC, deposit_id LIMIT $3",
        )
        .bind(chain.map(|c| c.as_str()))
        .bind(i64::from(open_only))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(dispute_from_row).collect()
    }
}

fn dispute_from_row(row: &AnyRow) -> Result<Dispute, StoreError> {
    let answers: String = row.try_get("answers")?;
    let answers: Vec<UrlAnswer> = serde_json::from_str(&answers)
        .map_err(|_| StoreError::Corrupt(format!("provider_disputes.answers = {answers:?}")))?;
    let outcome: String = row.try_get("outcome")?;
    let at = |column: &str| -> Result<String, StoreError> {
        Ok(format_time(&crate::store::time(row.try_get::<i64, _>(column)?)?))
    };
    Ok(Dispute {
        deposit_id: row.try_get("deposit_id")?,
        chain: parse_column(&row.try_get::<String, _>("chain")?, "provider_disputes.chain")?,
        account_id: row.try_get("account_id")?,
        address: row.try_get("address")?,
        asset: row.try_get("asset")?,
        transaction_hash: row.try_get("tx_hash")?,
        block_number: row.try_get::<i64, _>("block_number")?.max(0) as u64,
        block_hash: row.try_get("block_hash")?,
        answers,
        outcome: Outcome::parse(&outcome)
            .ok_or_else(|| StoreError::Corrupt(format!("provider_disputes.outcome = {outcome:?}")))?,
        first_seen_at: at("first_seen_at")?,
        updated_at: at("updated_at")?,
    })
}
