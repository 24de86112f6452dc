//! A client's bank accounts and mint instructions written, each once per
//! `request_id`: a replay with the same request answers what the first
//! created, one with another request is a conflict.

use crate::{
    issuance::{BankAccount, MintInstruction},
    store::{
        Made, NewMintInstruction, Store, StoreError,
        issuance::{self as rows, same_bank_account},
        same_instruction,
    },
};

/// Registers `account` of `organization` under `request_id`.
pub async fn create_bank_account(
    store: &Store,
    organization: &str,
    request_id: &str,
    account: &BankAccount,
) -> Result<Made<BankAccount>, StoreError> {
    if let Some(found) = store.bank_account_by_request(organization, request_id).await? {
        return same_bank_account(found, account, request_id);
    }
    let mut tx = store.begin().await?;
    let inserted = store.insert_bank_account(&mut tx, organization, request_id, account).await?;
    tx.commit().await?;
    if inserted {
        return Ok(Made::New(account.clone()));
    }
    // The same request_id raced this one in and won.
    let found = store.bank_account_by_request(organization, request_id).await?;
    same_bank_account(
        found.ok_or_else(|| StoreError::Corrupt("a lost bank account".into()))?,
        account,
        request_id,
    )
}

/// Creates `new`, or answers the same request's instruction. `None`: its
/// `memo_id` is taken (draw another and call again).
pub async fn create_mint_instruction(
    store: &Store,
    new: &NewMintInstruction,
) -> Result<Option<Made<MintInstruction>>, StoreError> {
    let (organization, wanted) = (&new.organization, &new.instruction);
    if let Some(found) = store.mint_instruction_by_request(organization, &wanted.request_id).await? {
        return same_instruction(found, wanted).map(Some);
    }
    let mut tx = store.begin().await?;
    let inserted = rows::insert_mint_instruction(&mut tx, new).await?;
    tx.commit().await?;
    if inserted {
        return Ok(Some(Made::New(wanted.clone())));
    }
    match store.mint_instruction_by_request(organization, &wanted.request_id).await? {
        Some(found) => same_instruction(found, wanted).map(Some),
        None => Ok(None),
    }
}
