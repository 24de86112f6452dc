//! A mint on chain: the issuance worker beside each chain's sender
//! ([`super::start_mints`]) starts the transfers of its `MINTING` mints
//! (route `MINT`, signed by the issuer), which the sender sends as any
//! transfer, exactly once under kills and several instances; the
//! issuance worker then moves each mint on with its transfer's settlement
//! and completes it once the deposit it made is `CONFIRMED`. Every step
//! holds the mint's row lock and changes it only from the status it read,
//! with its `mint_update` event, in one transaction.

use alloy::primitives::U256;
use tracing::{debug, error, info};

use super::state::{Event, Status, apply};
use crate::{
    config::ChainConfig,
    store::{
        Store, StoreError,
        mint_transfers::{self, NewMintTransfer},
        mints,
    },
    transfers::{SendError, resource::TransferStatus},
};

/// An issued stablecoin a chain's sender mints: its symbol and decimals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub symbol: String,
    pub decimals: u8,
}

/// The stablecoins the platform issues on `config`'s chain.
fn issued(config: &ChainConfig) -> Vec<Issued> {
    config
        .assets
        .iter()
        .filter(|a| a.issued)
        .map(|a| Issued { symbol: a.symbol.clone(), decimals: a.decimals })
        .collect()
}

/// Creates the transfers of the chain's `MINTING` mints that have none,
/// from the `issuer` address; nothing on a chain that issues no
/// stablecoin. Returns how many it created.
pub async fn start_mints(store: &Store, config: &ChainConfig, issuer: &str) -> Result<usize, SendError> {
    let issued = issued(config);
    if issued.is_empty() {
        return Ok(0);
    }
    // Until the chain confirms an issued stablecoin's decimals, no mint of
    // the chain starts (see [`super::decimals`]).
    if config.assets.iter().any(|a| a.issued && super::decimals::waiting(config.chain, &a.contract_address)) {
        return Ok(0);
    }
    let mut started = 0;
    for id in store.mints_to_start(config.chain).await? {
        // One mint that cannot start (its stablecoin no longer issued
        // here) keeps the others, and the chain's transfers, moving.
        match start_mint(store, &id, issuer, &issued).await {
            Ok(true) => started += 1,
            Ok(false) => {}
            Err(StoreError::Unconfigured(reason)) => {
                error!(mint = %id, chain = %config.chain, reason, "a mint cannot be sent: it waits");
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(started)
}

/// Creates mint `id`'s transfer in one transaction holding the mint's row,
/// so two instances create it once: from `issuer` to the mint's
/// destination, the mint's dollars in the stablecoin's smallest unit.
async fn start_mint(store: &Store, id: &str, issuer: &str, issued: &[Issued]) -> Result<bool, StoreError> {
    let mut tx = store.begin().await?;
    let Some(mint) = mint_transfers::lock_minting(&mut tx, id).await? else { return Ok(false) };
    let decimals = issued.iter().find(|i| i.symbol == mint.symbol).map(|i| i.decimals).ok_or_else(|| {
        StoreError::Unconfigured(format!("mint {id}: {} is not an issued asset here", mint.symbol))
    })?;
    let amount_raw = mint_amount(mint.minted_cents, decimals)?;
    let transfer = uuid::Uuid::new_v4().to_string();
    let new = NewMintTransfer { mint: id, id: &transfer, issuer, amount_raw, decimals };
    mint_transfers::insert_transfer(&mut tx, &mint, &new).await?;
    tx.commit().await?;
    info!(mint = id, %transfer, "mint transaction to send");
    Ok(true)
}

/// The stablecoin's smallest units of `cents` dollars, at `decimals` (two
/// or more).
fn mint_amount(cents: i64, decimals: u8) -> Result<U256, StoreError> {
    let cents =
        u64::try_from(cents).map_err(|_| StoreError::Corrupt(format!("negative mint amount {cents}")))?;
    let scale = decimals.checked_sub(2).ok_or_else(|| {
        StoreError::Unconfigured(format!("a stablecoin of {decimals} decimals cannot hold cents"))
    })?;
    Ok(U256::from(cents) * U256::from(10u8).pow(U256::from(scale)))
}

/// Moves every `MINTING` mint whose transfer settled on with it:
/// `CONFIRMED` makes it `MINTED` with the transaction's hash; `FAILED` or
/// `DROPPED` (nothing minted) makes it `FAILED`, its dollars owed back.
/// Returns how many it moved.
pub async fn follow_mints(store: &Store) -> Result<usize, StoreError> {
    let mut moved = 0;
    for (id, status, hash) in store.mints_sent().await? {
        let event = match status {
            TransferStatus::Confirmed => Event::Final,
            TransferStatus::Failed | TransferStatus::Dropped => Event::TransactionFailed,
            TransferStatus::Accepted | TransferStatus::Submitted => continue,
        };
        let mut tx = store.begin().await?;
        let Some(now) = mint_transfers::lock_mint(&mut tx, &id).await? else { continue };
        match apply(now, event) {
            Ok(transition) => {
                if let Some(hash) = hash.as_deref().filter(|_| event == Event::Final) {
                    mints::set_hash(&mut tx, &id, hash).await?;
                }
                mints::change(&mut tx, &id, transition, None).await?;
                tx.commit().await?;
                moved += 1;
            }
            // Completed by its deposit meanwhile, or moved by another instance.
            Err(refusal) if now != Status::Minting => {
                debug!(mint = %id, %refusal, "the mint moved on already")
            }
            Err(refusal) => error!(mint = %id, %refusal, "a mint's transfer settled against its status"),
        }
    }
    Ok(moved)
}

/// Completes the mints whose deposit is `CONFIRMED` (see
/// [`Store::mints_deposited`]). Returns how many it completed.
pub async fn complete_mints(store: &Store) -> Result<usize, StoreError> {
    let mut completed = 0;
    for (id, deposit, hash) in store.mints_deposited().await? {
        let mut tx = store.begin().await?;
        let Some(status) = mint_transfers::lock_mint(&mut tx, &id).await? else { continue };
        let Ok(transition) = apply(status, Event::DepositConfirmed) else { continue };
        mint_transfers::set_deposit(&mut tx, &id, &deposit, &hash).await?;
        mints::change(&mut tx, &id, transition, None).await?;
        tx.commit().await?;
        completed += 1;
    }
    Ok(completed)
}
