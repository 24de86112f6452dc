//! Bank accounts and mint instructions. Both are created once per
//! `request_id`: a replay with the same request answers what the first
//! created, one with another request is a conflict. Bank account details
//! are personal data: sealed at rest, compared opened.

pub mod mint_transfers;
pub mod mints;

use serde_json::Value;
use sqlx::{Row, any::AnyRow};

use super::{Store, StoreError, Tx, now_micros, parse_column, pii::BANK_DETAILS};
use crate::{
    chain::Chain,
    issuance::{BankAccount, FIAT_CURRENCY, MintInstruction, PAYMENT_RAIL},
    pii::{Cipher, Masked, Place},
};

/// What a create did: made it, or found the same request's.
#[derive(Debug, Clone, PartialEq)]
pub enum Made<T> {
    New(T),
    Existing(T),
}

impl<T> Made<T> {
    pub fn into_inner(self) -> T {
        match self {
            Made::New(value) | Made::Existing(value) => value,
        }
    }

    pub fn get(&self) -> &T {
        match self {
            Made::New(value) | Made::Existing(value) => value,
        }
    }

    /// The same outcome (made or found) of what `f` makes of the value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Made<U> {
        match self {
            Made::New(value) => Made::New(f(value)),
            Made::Existing(value) => Made::Existing(f(value)),
        }
    }
}

/// A mint instruction to create; `memo_id` freshly drawn.
#[derive(Debug, Clone)]
pub struct NewMintInstruction {
    pub organization: String,
    pub instruction: MintInstruction,
    /// The address of `mint_destination_address_id` on the chain.
    pub destination_address: String,
}

const BANK_COLUMNS: &str = "organization_id, id, identity_id, request_id, details, created_at";
const INSTRUCTION_COLUMNS: &str = "organization_id, id, identity_id, request_id, stablecoin_symbol, chain, \
    account_id, destination_address, memo_id, bank_details, label, created_at";

impl Store {
    /// Inserts `account` of `organization` under `request_id`, its details
    /// sealed: `false` when the request (or the id) is taken already.
    pub(crate) async fn insert_bank_account(
        &self,
        tx: &mut Tx,
        organization: &str,
        request_id: &str,
        account: &BankAccount,
    ) -> Result<bool, StoreError> {
        let cipher = self.cipher()?;
        let plaintext = zeroize::Zeroizing::new(account.bank_account_details.expose().to_string());
        let place = Place { column: BANK_DETAILS, row: &[organization, &account.id] };
        let sealed = cipher.seal(plaintext.as_bytes(), place);
        let inserted = sqlx::query(&format!(
            "INSERT INTO bank_accounts ({BANK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING"
        ))
        .bind(organization)
        .bind(&account.id)
        .bind(&account.identity_id)
        .bind(request_id)
        .bind(sealed)
        .bind(now_micros())
        .execute(&mut **tx)
        .await?;
        Ok(inserted.rows_affected() == 1)
    }

    pub async fn bank_account(&self, organization: &str, id: &str) -> Result<BankAccount, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {BANK_COLUMNS} FROM bank_accounts WHERE organization_id = $1 AND id = $2"
        ))
        .bind(organization)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("bank account {id}")))?;
        bank_account_from_row(&row, self.cipher()?)
    }

    /// Up to `limit` of the organization's bank accounts (of `identity`
    /// only, when given) whose id sorts after `after`, by id.
    pub async fn bank_account_page(
        &self,
        organization: &str,
        identity: Option<&str>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<BankAccount>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {BANK_COLUMNS} FROM bank_accounts WHERE organization_id = $1
             AND ($2 IS NULL OR identity_id = $2) AND ($3 IS NULL OR id > $3) ORDER BY id LIMIT $4"
        ))
        .bind(organization)
        .bind(identity)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let cipher = self.cipher()?;
        rows.iter().map(|row| bank_account_from_row(row, cipher)).collect()
    }

    /// The bank account registered under `request_id`, if any.
    pub async fn bank_account_by_request(
        &self,
        organization: &str,
        request_id: &str,
    ) -> Result<Option<BankAccount>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {BANK_COLUMNS} FROM bank_accounts WHERE organization_id = $1 AND request_id = $2"
        ))
        .bind(organization)
        .bind(request_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| bank_account_from_row(&row, self.cipher()?)).transpose()
    }

    /// Up to `limit` of the organization's mint instructions (of `identity`
    /// only, when given) whose id sorts after `after`, by id.
    pub async fn mint_instruction_page(
        &self,
        organization: &str,
        identity: Option<&str>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<MintInstruction>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {INSTRUCTION_COLUMNS} FROM mint_instructions WHERE organization_id = $1
             AND ($2 IS NULL OR identity_id = $2) AND ($3 IS NULL OR id > $3) ORDER BY id LIMIT $4"
        ))
        .bind(organization)
        .bind(identity)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(instruction_from_row).collect()
    }

    /// The mint instruction created under `request_id`, if any.
    pub async fn mint_instruction_by_request(
        &self,
        organization: &str,
        request_id: &str,
    ) -> Result<Option<MintInstruction>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {INSTRUCTION_COLUMNS} FROM mint_instructions WHERE organization_id = $1 AND request_id = $2"
        ))
        .bind(organization)
        .bind(request_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(instruction_from_row).transpose()
    }
}

/// Inserts `new`: `false` when its request, id or `memo_id` is taken
/// already.
pub(crate) async fn insert_mint_instruction(
    tx: &mut Tx,
    new: &NewMintInstruction,
) -> Result<bool, StoreError> {
    let (organization, wanted) = (&new.organization, &new.instruction);
    let inserted = sqlx::query(&format!(
        "INSERT INTO mint_instructions ({INSTRUCTION_COLUMNS})
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING"
    ))
    .bind(organization)
    .bind(&wanted.id)
    .bind(&wanted.identity_id)
    .bind(&wanted.request_id)
    .bind(&wanted.stablecoin_symbol)
    .bind(wanted.chain.as_str())
    .bind(&wanted.mint_destination_address_id)
    .bind(&new.destination_address)
    .bind(&wanted.memo_id)
    .bind(wanted.bank_account_details.to_string())
    .bind(wanted.label.as_deref())
    .bind(now_micros())
    .execute(&mut **tx)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// The stored account when `wanted` is the same request; else a conflict.
pub(crate) fn same_bank_account(
    found: BankAccount,
    wanted: &BankAccount,
    request_id: &str,
) -> Result<Made<BankAccount>, StoreError> {
    if found.same_request(wanted) {
        Ok(Made::Existing(found))
    } else {
        Err(StoreError::Duplicate(format!(
            "request_id {request_id} was already used by bank account {} with a different request",
            found.id
        )))
    }
}

pub fn same_instruction(
    found: MintInstruction,
    wanted: &MintInstruction,
) -> Result<Made<MintInstruction>, StoreError> {
    if found.same_request(wanted) {
        Ok(Made::Existing(found))
    } else {
        Err(StoreError::Duplicate(format!(
            "request_id {} was already used by mint instruction {} with a different request",
            wanted.request_id, found.id
        )))
    }
}

fn bank_account_from_row(row: &AnyRow, cipher: &Cipher) -> Result<BankAccount, StoreError> {
    let (organization, id): (String, String) = (row.try_get("organization_id")?, row.try_get("id")?);
    let place = Place { column: BANK_DETAILS, row: &[&organization, &id] };
    let text = cipher.open_text(&row.try_get::<String, _>("details")?, place)?;
    let details =
        serde_json::from_str(&text).map_err(|_| StoreError::Corrupt(format!("bank account {id}")))?;
    Ok(BankAccount {
        id,
        identity_id: row.try_get("identity_id")?,
        bank_account_details: Masked::new(details),
    })
}

fn instruction_from_row(row: &AnyRow) -> Result<MintInstruction, StoreError> {
    let id: String = row.try_get("id")?;
    let bank: Value = serde_json::from_str(&row.try_get::<String, _>("bank_details")?)
        .map_err(|_| StoreError::Corrupt(format!("mint instruction {id}")))?;
    Ok(MintInstruction {
        id,
        identity_id: row.try_get("identity_id")?,
        request_id: row.try_get("request_id")?,
        stablecoin_symbol: row.try_get("stablecoin_symbol")?,
        chain: parse_column::<Chain>(&row.try_get::<String, _>("chain")?, "mint_instructions.chain")?,
        mint_destination_address_id: row.try_get("account_id")?,
        payment_rail: PAYMENT_RAIL,
        fiat_currency_symbol: FIAT_CURRENCY,
        memo_id: row.try_get("memo_id")?,
        bank_account_details: bank,
        label: row.try_get("label")?,
    })
}
