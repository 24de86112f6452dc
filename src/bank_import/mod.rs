//! The one door of a bank's file: every credit of a `camt.054`
//! notification goes to the wing it belongs to, whichever command or route
//! brought the file (`bank import`, `POST /operator/v1/bank/imports`, and
//! the older `issuance wires import` and `conversions wires import`, which
//! are names of this door).
//!
//! Each credit is routed by [`route::route`]: a mint instruction's memo to
//! issuance ([`crate::issuance::wires::arrive`]), a virtual account's
//! deposit message to the on-ramp ([`crate::conversions::on_ramp::record_wire`]),
//! the same doors a recorded or simulated wire takes. Its bank entry
//! reference starts at most one mint or conversion across both wings: a
//! credit imported again is `already_applied`. A credit that cannot be
//! applied (see [`route`]; another currency; an unknown memo or message;
//! a wing refusing it) is `unmatched` with its reason and the rest of the
//! file is applied; a failure of the store stops the import, and what it
//! applied stays applied (importing the file again finds it).

pub mod route;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    amount::Cents,
    bank::{Credit, Unmatched},
    conversions::{on_ramp, virtual_account::deposit_message_in},
    issuance::{
        Approval, FIAT_CURRENCY, memo_in, normalize_reference,
        wires::{self, Reporter, credited},
    },
    store::{Made, NewVirtualWire, Store, StoreError},
};
use route::{Creditor, Route, account_key};

/// The wing a credit was applied in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Wing {
    /// A mint instruction's memo: the wire mints.
    Issuance,
    /// A virtual account's deposit message: the wire starts an `ON_RAMP`
    /// conversion.
    OnRamp,
}

/// A credit applied, by this import or an earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppliedCredit {
    /// The bank's entry reference.
    pub reference: String,
    /// In the major unit of `currency` (`"250.00"`).
    pub amount: String,
    pub currency: String,
    pub wing: Wing,
    /// The mint instruction's memo (`ISSUANCE`).
    pub memo_id: Option<String>,
    /// The virtual account (`ON_RAMP`).
    pub virtual_account_id: Option<String>,
    /// The mint the wire started (`ISSUANCE`).
    pub mint_id: Option<String>,
    /// The conversion the wire started (`ON_RAMP`).
    pub conversion_id: Option<String>,
    /// The mint's or the conversion's status now.
    pub status: String,
}

/// What an import of a bank's file did, each credit in one list, in the
/// file's order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BankImport {
    /// Credits this import applied.
    pub applied: Vec<AppliedCredit>,
    /// Credits applied before, by an earlier import or an operator's
    /// record of the same reference: nothing started twice.
    pub already_applied: Vec<AppliedCredit>,
    /// Credits left out, each once with why.
    pub unmatched: Vec<Unmatched>,
}

/// Where the platform takes wires: its receiving account's numbers (its
/// account number and its IBAN, as banks may write either), when it has
/// one.
#[derive(Debug, Clone, Default)]
pub struct Accounts {
    pub receiving: Vec<String>,
}

impl Accounts {
    /// The account numbers of the receiving bank `details` (a Bank account
    /// details object): its `account_number` and its `iban`.
    pub fn of(details: Option<&serde_json::Value>) -> Self {
        let numbers = ["account_number", "iban"].iter().filter_map(|field| details?[field].as_str());
        Accounts { receiving: numbers.map(account_key).collect() }
    }
}

/// Applies each credit of a bank's file once, in the wing it belongs to,
/// as `by` reports it; `approval` is issuance's (a mint's second operator).
/// A credit whose entry reference was applied before is answered from what
/// it started, before anything else is judged: a virtual account closed or
/// a receiving account changed since never makes it look unapplied.
pub async fn import(
    store: &Store,
    credits: &[Credit],
    accounts: &Accounts,
    by: Reporter<'_>,
    approval: &Approval,
) -> Result<BankImport, StoreError> {
    let mut done = BankImport::default();
    for credit in credits {
        let applied = match before(store, credit).await? {
            Some(found) => found.map(Made::Existing),
            None => apply(store, credit, accounts, by, approval).await?,
        };
        match applied {
            Ok(Made::New(applied)) => done.applied.push(applied),
            Ok(Made::Existing(applied)) => done.already_applied.push(applied),
            Err(why) => done.unmatched.push(Unmatched::of(&(credit.clone(), why))),
        }
    }
    Ok(done)
}

/// `credit` routed by what it names and applied in its wing.
async fn apply(
    store: &Store,
    credit: &Credit,
    accounts: &Accounts,
    by: Reporter<'_>,
    approval: &Approval,
) -> Result<Applied, StoreError> {
    let creditor = creditor(store, credit, accounts).await?;
    Ok(match route::route(&creditor, memo_in(credit), deposit_message_in(credit)) {
        Ok(Route::Mint { memo }) => mint(store, credit, &memo, by, approval).await?,
        Ok(Route::OnRamp { message }) => on_ramp(store, credit, (&message, &creditor), by).await?,
        Err(why) => Err(why),
    })
}

/// What the credit's entry reference started before, if anything: the same
/// amount is the same credit, applied; another amount under it is left out,
/// naming what the reference started. A credit in another currency than
/// the wires' is nothing a wire started (its wing refuses it).
async fn before(store: &Store, credit: &Credit) -> Result<Option<Result<AppliedCredit, String>>, StoreError> {
    if credit.currency != FIAT_CURRENCY {
        return Ok(None);
    }
    let reference = normalize_reference(&credit.reference);
    if let Some((conversion, cents)) = store.conversion_by_wire(&reference).await? {
        if cents != credit.cents {
            let started = format!("conversion {} for {} USD", conversion.id, Cents(cents));
            return Ok(Some(Err(format!("reference {reference} started {started}"))));
        }
        return Ok(Some(Ok(AppliedCredit {
            wing: Wing::OnRamp,
            virtual_account_id: conversion.payment_instructions_id.clone(),
            conversion_id: Some(conversion.id.clone()),
            status: conversion.status.to_string(),
            ..applied(credit)
        })));
    }
    let Some((mint, _)) = store.mint_by_reference(&reference).await? else { return Ok(None) };
    if mint.amount != Cents(credit.cents).to_string() {
        let started = format!("mint {} for {} USD", mint.id, mint.amount);
        return Ok(Some(Err(format!("reference {reference} started {started}"))));
    }
    Ok(Some(Ok(AppliedCredit {
        wing: Wing::Issuance,
        memo_id: Some(mint.memo_id),
        mint_id: Some(mint.id),
        status: mint.status.to_string(),
        ..applied(credit)
    })))
}

/// The account `credit` names, as the platform knows it.
async fn creditor(store: &Store, credit: &Credit, accounts: &Accounts) -> Result<Creditor, StoreError> {
    let Some(named) = credit.account.as_deref() else { return Ok(Creditor::Unnamed) };
    let key = account_key(named);
    if accounts.receiving.contains(&key) {
        return Ok(Creditor::Receiving);
    }
    if let Some(id) = store.active_virtual_account_by_number(&key).await? {
        return Ok(Creditor::VirtualAccount(id));
    }
    Ok(Creditor::Other(named.to_string()))
}

/// What a wing answered for a credit: applied (new or before), or why it
/// was left out; any other failure of the store stops the import.
type Applied = Result<Made<AppliedCredit>, String>;

fn refused<T>(answer: Result<T, StoreError>) -> Result<Result<T, String>, StoreError> {
    match answer {
        Ok(made) => Ok(Ok(made)),
        Err(error) if error.is_refusal() => Ok(Err(error.to_string())),
        Err(error) => Err(error),
    }
}

/// `credit` through issuance's door, quoting `memo`.
async fn mint(
    store: &Store,
    credit: &Credit,
    memo: &str,
    by: Reporter<'_>,
    approval: &Approval,
) -> Result<Applied, StoreError> {
    let wire = match credited(credit, memo, by) {
        Ok(wire) => wire,
        Err(why) => return Ok(Err(why)),
    };
    let made = match refused(wires::arrive(store, &wire, approval).await)? {
        Ok(made) => made,
        Err(why) => return Ok(Err(why)),
    };
    Ok(Ok(made.map(|mint| AppliedCredit {
        wing: Wing::Issuance,
        memo_id: Some(mint.memo_id),
        mint_id: Some(mint.id),
        status: mint.status.to_string(),
        ..applied(credit)
    })))
}

/// `credit` through the on-ramp's door, at the virtual account whose
/// deposit message is `message`: the one it was credited to, when the bank
/// names a virtual account's number.
async fn on_ramp(
    store: &Store,
    credit: &Credit,
    (message, creditor): (&str, &Creditor),
    by: Reporter<'_>,
) -> Result<Applied, StoreError> {
    let Some(account) = store.virtual_account_by_message(message).await? else {
        return Ok(Err(format!("no virtual account has deposit message {message}")));
    };
    if let Creditor::VirtualAccount(credited) = creditor
        && *credited != account
    {
        return Ok(Err(format!(
            "credited to virtual account {credited}'s number but quoting virtual account {account}'s deposit message"
        )));
    }
    let wire = match credited(credit, "", by) {
        Ok(wire) => wire,
        Err(why) => return Ok(Err(why)),
    };
    let new = NewVirtualWire { organization: None, virtual_account_id: &account, wire };
    let made = match refused(on_ramp::record_wire(store, &new).await)? {
        Ok(made) => made,
        Err(why) => return Ok(Err(why)),
    };
    Ok(Ok(made.map(|conversion| AppliedCredit {
        wing: Wing::OnRamp,
        virtual_account_id: Some(account.clone()),
        conversion_id: Some(conversion.id),
        status: conversion.status.to_string(),
        ..applied(credit)
    })))
}

/// What `credit` is, before a wing says what it started.
fn applied(credit: &Credit) -> AppliedCredit {
    AppliedCredit {
        reference: credit.reference.clone(),
        amount: Cents(credit.cents).to_string(),
        currency: credit.currency.clone(),
        wing: Wing::Issuance,
        memo_id: None,
        virtual_account_id: None,
        mint_id: None,
        conversion_id: None,
        status: String::new(),
    }
}
