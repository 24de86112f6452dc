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
    store::{NewAccount, Store, StoreError},
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
    let index = store.reserve_account_key(&new).await?;
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
            store.add_keyed_account(new.clone(), index).await.map_err(CreateError::from)
        }
        Err(error) => Err(error.into()),
    };
    if made.is_err() {
        // A retry may claim the reservation at once (a crash lets it go
        // after its minute).
        let _ = store.release_account_key(&new.id).await;
    }
    made
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
