//! A platform wallet's funding: money found reaching it from outside the
//! platform, recorded with an audit entry per transfer in one
//! transaction. The ledger counts a funding row only beside its entry
//! (`store/reconcile/reconcile_wallets.rs`), so a row written with plain SQL, or
//! rewritten afterwards, explains nothing.

use super::{Term, TermKind, Watched};
use crate::{
    audit::{self, Actor, Record},
    chain::Chain,
    store::{
        Store, StoreError,
        reconcile_wallets::{Funding, funding_target, record_funding as record_row},
    },
};

/// Records `funding` of the platform wallet `watched`, each transfer with
/// its audit entry (`reconcile.wallet_funded`), under this handle's fence.
pub async fn record_funding(
    store: &Store,
    chain: Chain,
    watched: &Watched,
    funding: &[Funding],
) -> Result<(), StoreError> {
    let address = &watched.address;
    let wallet = watched.wallet.as_deref().unwrap_or("platform");
    let mut tx = store.begin().await?;
    for f in funding {
        if !record_row(&mut tx, chain, address, f).await? {
            continue;
        }
        let target = funding_target(chain, address, f);
        let record = Record {
            actor: &Actor::System,
            action: "reconcile.wallet_funded",
            target_kind: "wallet",
            target_id: &target,
            organization_id: None,
            reason: None,
            request_id: None,
            detail: None,
        };
        audit::append(&mut tx, None, record).await?;
        tracing::info!(%chain, address, wallet, asset = f.asset, block = f.block, transaction = f.tx_hash,
            amount = %f.amount, "a platform wallet was funded from outside the platform");
    }
    tx.commit().await?;
    Ok(())
}

/// `terms` with `funding` counted: what the platform's own transfers into
/// the wallet are, a credit at its block.
pub fn with_funding(terms: &[Term], funding: &[Funding]) -> Vec<Term> {
    let mut all = terms.to_vec();
    all.extend(funding.iter().map(|f| Term {
        asset: f.asset.clone(),
        block: f.block,
        amount: f.amount,
        kind: TermKind::Own,
    }));
    all
}
