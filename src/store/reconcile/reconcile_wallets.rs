//! The rows a reconciliation reads and keeps for the platform's own
//! wallets: which they are, what the platform moved into them, and the
//! funding found reaching them from outside.

use sqlx::Row;

use crate::store::{Store, StoreError, Tx, now_micros, to_i64};
use crate::{
    chain::Chain,
    reconcile::{Term, TermKind, Watched},
};

/// A transfer found reaching a platform wallet from outside the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Funding {
    pub tx_hash: String,
    pub position: String,
    pub asset: String,
    pub block: u64,
    pub amount: alloy::primitives::U256,
}

impl Store {
    /// The platform wallets of `family` (`evm`, `solana`) whose addresses
    /// no account of `chain` watches (an omnibus account's address is
    /// reconciled as that account's), in role order.
    pub async fn reconcile_wallets(&self, chain: Chain, family: &str) -> Result<Vec<Watched>, StoreError> {
        let rows = sqlx::query(
            "SELECT role, address FROM platform_keys k WHERE family = $1
               AND NOT EXISTS (SELECT 1 FROM account_addresses a
                               WHERE a.chain = $2 AND (a.address = k.address
                                     OR ($3 = 1 AND LOWER(a.address) = LOWER(k.address))))
             ORDER BY role",
        )
        .bind(family)
        .bind(chain.as_str())
        .bind(any_case(chain))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Watched {
                    address: r.try_get("address")?,
                    account_id: String::new(),
                    wallet: Some(r.try_get("role")?),
                    watch_from: None,
                    catching_up: false,
                })
            })
            .collect()
    }

    /// The credits of a platform wallet's ledger beyond what it sent: the
    /// platform's transfers mined into it (a collect into the omnibus, an
    /// off-ramp's stablecoin into the settlement wallet, a mint to it; the
    /// native value as the transaction moved it, or the transfer's amount
    /// where the transaction names none, as on Solana) and the funding recorded,
    /// each funding row only with its audit entry ([`funding_target`]): a
    /// row written beside the hash-chained log counts for nothing.
    pub async fn wallet_credit_terms(
        &self,
        chain: Chain,
        address: &str,
        native: &str,
    ) -> Result<Vec<Term>, StoreError> {
        let rows = sqlx::query(
            "SELECT t.currency_symbol AS asset,
                    CASE WHEN t.currency_symbol = $3 AND x.value <> '0' THEN x.value ELSE t.amount_raw END AS amount_raw,
                    x.block_number AS block_number
             FROM transfers t JOIN transfer_transactions x ON x.transfer_id = t.id
             WHERE t.chain = $1 AND (t.destination_address = $2 OR ($4 = 1 AND LOWER(t.destination_address) = LOWER($2)))
               AND x.role = 'TRANSFER' AND x.state = 'MINED' AND x.block_number IS NOT NULL
             UNION ALL SELECT asset, amount_raw, block_number FROM wallet_funding f
             WHERE chain = $1 AND address = $2
               AND EXISTS (SELECT 1 FROM audit_log a WHERE a.action = 'reconcile.wallet_funded'
                           AND a.target_id = f.chain || ':' || f.address || ':' || f.tx_hash || ':' || f.position
                               || ':' || f.asset || ':' || f.amount_raw || ':' || CAST(f.block_number AS TEXT))",
        )
        .bind(chain.as_str())
        .bind(address)
        .bind(native)
        .bind(any_case(chain))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| crate::store::reconcile::term(r, "asset", "amount_raw", TermKind::Own)).collect()
    }

    /// Which of `hashes` are transactions the platform signed on `chain`.
    pub async fn platform_transactions(
        &self,
        chain: Chain,
        hashes: &[String],
    ) -> Result<Vec<String>, StoreError> {
        self.hashes_found(
            "SELECT hash FROM transfer_transactions WHERE chain = $1 AND hash = $2
             UNION ALL SELECT hash FROM nonce_fillers WHERE chain = $1 AND hash = $2",
            chain,
            hashes,
        )
        .await
    }

    /// Which of `hashes` are transactions the platform's senders recorded
    /// on `chain` (before broadcasting them) that the ledger does not count
    /// yet: exactly those [`Store::ledger_terms`] leaves out (a transfer's
    /// transaction not `MINED` or `REVERTED` with its block and fee, a nonce
    /// filler not `MINED` with its fee).
    pub async fn unsettled_platform_transactions(
        &self,
        chain: Chain,
        hashes: &[String],
    ) -> Result<Vec<String>, StoreError> {
        self.hashes_found(
            "SELECT hash FROM transfer_transactions WHERE chain = $1 AND hash = $2
               AND NOT (state IN ('MINED', 'REVERTED') AND block_number IS NOT NULL AND fee_raw IS NOT NULL)
             UNION ALL SELECT hash FROM nonce_fillers WHERE chain = $1 AND hash = $2
               AND NOT (state = 'MINED' AND fee_raw IS NOT NULL)",
            chain,
            hashes,
        )
        .await
    }

    /// The `hashes` for which `query` (bound to the chain and one hash)
    /// answers a row, in their order.
    async fn hashes_found(
        &self,
        query: &str,
        chain: Chain,
        hashes: &[String],
    ) -> Result<Vec<String>, StoreError> {
        let mut found = Vec::new();
        for hash in hashes {
            let row = sqlx::query(query).bind(chain.as_str()).bind(hash).fetch_optional(&self.pool).await?;
            if row.is_some() {
                found.push(hash.clone());
            }
        }
        Ok(found)
    }
}

/// 1 where `chain`'s addresses are the same in any case (EVM's hex),
/// 0 where case tells two apart (Solana's base58): a customer's withdrawal
/// to a case-variant of a platform wallet's address is not the wallet's.
fn any_case(chain: Chain) -> i64 {
    i64::from(crate::family::rules::any_case(chain.family()))
}

/// The audit entry's target of a funding row: every column the ledger
/// counts, so that a row rewritten afterwards matches no entry.
pub fn funding_target(chain: Chain, address: &str, f: &Funding) -> String {
    format!("{chain}:{address}:{}:{}:{}:{}:{}", f.tx_hash, f.position, f.asset, f.amount, f.block)
}

/// Records funding found reaching the platform wallet `address`, in `tx`
/// (with its audit entry); `false` when it was recorded already.
pub async fn record_funding(
    tx: &mut Tx,
    chain: Chain,
    address: &str,
    f: &Funding,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO wallet_funding (chain, tx_hash, position, address, asset, amount_raw, block_number, recorded_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (chain, tx_hash, position) DO NOTHING",
    )
    .bind(chain.as_str())
    .bind(&f.tx_hash)
    .bind(&f.position)
    .bind(address)
    .bind(&f.asset)
    .bind(f.amount.to_string())
    .bind(to_i64(f.block)?)
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}
