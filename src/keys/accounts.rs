//! A segregated account whose keys the service holds, made where they
//! live: its key number is reserved against the account's id first, the
//! signer then finds or makes the keys for that number (one per family of
//! the chains), outside every store lock, and the account's row is written
//! last with the addresses answered. A retry of the same creation (the
//! same account id: `accounts create --account-id`, or the API's
//! `request_id`, from which the account's id is derived) finds the same
//! number and so the same keys instead of making others.

use super::{KeyError, KeyRef, Signer};
use crate::{
    account::Account,
    chain::Chain,
    family::keys::account_addresses,
    store::{
        NewAccount, Store, StoreError,
        account_keys::{self, MAX_UNFINISHED},
        accounts::insert_accounts,
        now_micros,
    },
};

/// Why an account with keys was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The signer did not answer or refused the keys: nothing was written
    /// but the reservation, which a retry uses.
    #[error("the account's keys: {0}")]
    Key(#[from] KeyError),
}

impl CreateError {
    /// Whether the same creation, tried again, can succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            CreateError::Store(error) => error.retryable(),
            CreateError::Key(error) => error.is_retryable(),
        }
    }
}

/// The account's id for a creation through the API: the same for every
/// retry of one organization's `request_id`, so that the retry of a
/// creation interrupted after its keys were made finds them.
pub fn id_for_request(organization: &str, request_id: &str) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6c0e_7c1a_2f4b_4d8e_9a55_3b1f_0d2e_8c47);
    // Length-prefixed: no two (organization, request) pairs share a name.
    let name = format!("{}:{organization}{request_id}", organization.len());
    uuid::Uuid::new_v5(&NAMESPACE, name.as_bytes()).to_string()
}

/// Creates `new` (a segregated account; its addresses are the keys') with
/// keys `signer` holds for `chains`.
pub async fn create(
    store: &Store,
    signer: &dyn Signer,
    chains: impl IntoIterator<Item = Chain>,
    mut new: NewAccount,
) -> Result<Account, CreateError> {
    let index = reserve_account_key(store, &new).await?;
    let chains: Vec<Chain> = chains.into_iter().collect();
    // The signer may take a while (an HSM, a KMS): other tasks move off
    // this worker meanwhile.
    let lookup = || account_addresses(signer, chains.iter().copied(), KeyRef::Account(index));
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    let looked_up = if multi_thread { tokio::task::block_in_place(lookup) } else { lookup() };
    let made = match looked_up {
        Ok(addresses) => {
            new.addresses = addresses;
            add_keyed_account(store, new.clone(), index).await.map_err(CreateError::from)
        }
        Err(error) => Err(error.into()),
    };
    if made.is_err() {
        // A retry may claim the reservation at once (a crash lets it go
        // after its minute).
        let _ = release_account_key(store, &new.id).await;
    }
    made
}

/// Registers an account and its addresses in one transaction. Each address
/// must be valid for the family of every chain it is listed on, and an
/// address is watched for one account per chain.
pub async fn add_account(store: &Store, new: NewAccount) -> Result<Account, StoreError> {
    add_accounts(store, std::slice::from_ref(&new)).await?;
    store.account(&new.id).await
}

/// Registers many accounts in one transaction: all or none.
pub async fn add_accounts(store: &Store, accounts: &[NewAccount]) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    insert_accounts(&mut tx, accounts).await?;
    tx.commit().await?;
    Ok(())
}

/// The key number reserved for account `new`, claimed for this creation
/// for a minute: the one an earlier attempt reserved, or the next free one
/// (from [`super::FIRST_ACCOUNT_INDEX`] up), in a transaction of its own
/// that commits before any key is made, so the signer is never asked
/// inside the store's locks and a retry of the creation finds the keys it
/// made. Checked first, as the account itself will be: its organization,
/// its identity (which must open accounts), the organization's limit of
/// accounts and of unfinished creations. A reservation another creation
/// holds, or another organization's, is a conflict.
async fn reserve_account_key(store: &Store, new: &NewAccount) -> Result<u32, StoreError> {
    let mut tx = store.begin().await?;
    store.claim_account(&mut tx, &new.organization).await?;
    account_keys::check_new(&mut tx, new).await?;
    let now = now_micros();
    let index = match account_keys::reservation(&mut tx, &new.id).await? {
        Some(found) if found.organization != new.organization => {
            return Err(StoreError::taken(
                format!("account:{}", new.id),
                format!("account id {} is another organization's", new.id),
            ));
        }
        Some(found) if found.claimed_until.is_some_and(|until| until > now) => {
            return Err(StoreError::Waiting(format!(
                "account {} is being created by another request: retry in a minute",
                new.id
            )));
        }
        Some(found) => found.index,
        None => {
            let unfinished = account_keys::unfinished(&mut tx, &new.organization, now).await?;
            if unfinished >= MAX_UNFINISHED {
                return Err(StoreError::Waiting(format!(
                    "organization {} has {unfinished} account creations unfinished: retry them, or wait an hour",
                    new.organization
                )));
            }
            account_keys::reserve_next(&mut tx, new, now).await?
        }
    };
    account_keys::claim_reservation(&mut tx, &new.id, now).await?;
    tx.commit().await?;
    Ok(index)
}

/// Lets account `account_id`'s reservation go: its creation failed, and a
/// retry may claim it at once.
async fn release_account_key(store: &Store, account_id: &str) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    account_keys::release(&mut tx, account_id).await?;
    tx.commit().await?;
    Ok(())
}

/// Registers a segregated account whose keys the service holds, with the
/// addresses of the keys made for the number `index` reserved for it
/// ([`reserve_account_key`]), and records the number beside the account, in
/// one transaction. Refused when the number is not the one reserved for
/// the account, or the organization holds its limit of accounts.
async fn add_keyed_account(store: &Store, new: NewAccount, index: u32) -> Result<Account, StoreError> {
    let mut tx = store.begin().await?;
    store.claim_account(&mut tx, &new.organization).await?;
    if account_keys::reserved(&mut tx, &new.id).await? != Some(index) {
        return Err(StoreError::Raced(format!(
            "key number {index} is not the one reserved for account {}",
            new.id
        )));
    }
    insert_accounts(&mut tx, std::slice::from_ref(&new)).await?;
    account_keys::record(&mut tx, &new.id, index).await?;
    tx.commit().await?;
    store.account(&new.id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_one_account_id_per_organization() {
        let id = id_for_request("acme", "r-1");
        assert_eq!(id, id_for_request("acme", "r-1"), "a retry finds the same id");
        assert_ne!(id, id_for_request("acme", "r-2"));
        assert_ne!(id, id_for_request("globex", "r-1"), "another organization's request");
        assert_ne!(id_for_request("a\nb", "c"), id_for_request("a", "b\nc"), "no two pairs share a name");
        assert!(uuid::Uuid::parse_str(&id).is_ok());
    }
}
