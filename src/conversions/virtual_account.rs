//! A virtual account's own numbers and the deposit instructions it shows.
//! Whether the bank opens it is the bank's answer (see
//! [`crate::bank::Bank::open_virtual_account`]); in `production` the
//! number one treasury operator records from the bank waits for a second
//! operator's confirmation.

use super::VirtualAccount;
use crate::{
    audit::{self, Actor, Record},
    environment::Environment,
    operators::{Refused, rules::second_pair},
    store::{Made, NewVirtualAccount, Store, StoreError, now_micros, virtual_accounts as rows},
};

/// Creates `new` under its `request_id`, `PENDING`. A replay of the same
/// request answers what the first created; another request under the same
/// `request_id` is a conflict.
pub async fn create_virtual_account(
    store: &Store,
    new: &NewVirtualAccount,
) -> Result<Made<VirtualAccount>, StoreError> {
    let account = &new.account;
    if let Some(found) = store.virtual_account_by_request(&account.organization, &account.request_id).await? {
        return rows::same_request(found, account);
    }
    let mut tx = store.begin().await?;
    let inserted = rows::insert(&mut tx, new, now_micros()).await?;
    tx.commit().await?;
    if !inserted {
        // The same request raced this one in.
        let found = store.virtual_account_by_request(&account.organization, &account.request_id).await?;
        return rows::same_request(
            found.ok_or_else(|| StoreError::Corrupt("a lost virtual account".into()))?,
            account,
        );
    }
    Ok(Made::New(store.virtual_account(Some(&account.organization), &account.id).await?))
}

/// Opens (or fails) every `PENDING` virtual account whose bank answer is
/// due by `now`: the count it changed.
pub(crate) async fn open_due(store: &Store, now: i64) -> Result<usize, StoreError> {
    let mut tx = store.begin().await?;
    let opened = rows::open_due(&mut tx, now).await?;
    tx.commit().await?;
    Ok(opened)
}

/// Records an operator's answer of the bank to the `PENDING` virtual
/// account `id` (`Ok(account_number)`: opened; `Err(reason)`: refused, the
/// reason its `failure_reason`), with its audit entry, in one transaction.
/// The same answer again changes nothing.
pub async fn answer(
    store: &Store,
    id: &str,
    answer: Result<&str, &str>,
    actor: &Actor,
    reason: Option<&str>,
) -> Result<VirtualAccount, StoreError> {
    if answer.is_err_and(|r| r.trim().is_empty()) {
        return Err(StoreError::Invalid("reason: a refusal needs the bank's reason".into()));
    }
    let mut tx = store.begin().await?;
    if let Some(organization) = rows::answer(&mut tx, id, answer).await? {
        let record = entry(
            actor,
            if answer.is_ok() { "virtual_account.opened" } else { "virtual_account.refused" },
            (id, &organization),
            reason.or(answer.err()),
        );
        audit::append(&mut tx, store.cipher().ok(), record).await?;
    }
    tx.commit().await?;
    store.virtual_account(None, id).await
}

/// Why a virtual account was not opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("virtual account {id}: {refusal}")]
    FourEyes { id: String, refusal: Refused },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The bank opened the `PENDING` virtual account `id` under `number`, as
/// `actor` read it: in `sandbox` it opens at once; otherwise the number is
/// recorded and the account stays `PENDING` until another operator
/// confirms it ([`confirm`]).
pub async fn open(
    store: &Store,
    environment: Environment,
    (id, number): (&str, &str),
    actor: &Actor,
    reason: Option<&str>,
) -> Result<VirtualAccount, StoreError> {
    if environment == Environment::Sandbox {
        return answer(store, id, Ok(number), actor, reason).await;
    }
    let mut tx = store.begin().await?;
    if let Some(organization) = rows::propose_number(&mut tx, id, number, &actor.recorded()).await? {
        let text = reason.map_or_else(|| number.to_string(), |reason| format!("{number}: {reason}"));
        let record = entry(actor, "virtual_account.number_recorded", (id, &organization), Some(&text));
        audit::append(&mut tx, store.cipher().ok(), record).await?;
    }
    tx.commit().await?;
    store.virtual_account(None, id).await
}

/// A second operator's confirmation of the number recorded for the
/// `PENDING` virtual account `id`: it opens under it. Given `number` (the
/// one the confirming operator read from the bank), it opens only when the
/// number recorded is that one, so that a number recorded again meanwhile
/// is never confirmed unseen. The recorder's own confirmation, or a
/// break-glass one, is refused.
pub async fn confirm(
    store: &Store,
    (id, number): (&str, Option<&str>),
    by: &Actor,
    reason: Option<&str>,
) -> Result<VirtualAccount, OpenError> {
    let mut tx = store.begin().await?;
    let Some((recorded, recorder)) = rows::proposed_number(&mut tx, id).await? else {
        return Err(StoreError::Refused(format!(
            "no account number waits for confirmation on virtual account {id}"
        ))
        .into());
    };
    second_pair(&Actor::from_recorded(&recorder), by)
        .map_err(|refusal| OpenError::FourEyes { id: id.into(), refusal })?;
    if let Some(number) = number.map(str::trim).filter(|n| *n != recorded) {
        return Err(StoreError::Refused(format!(
            "the number recorded for virtual account {id} is not {number}: compare it with the bank's again"
        ))
        .into());
    }
    if let Some(organization) = rows::answer(&mut tx, id, Ok(recorded.as_str())).await? {
        let text = format!(
            "{recorded}, recorded by {recorder}{}",
            reason.map(|r| format!(": {r}")).unwrap_or_default()
        );
        let record = entry(by, "virtual_account.opened", (id, &organization), Some(&text));
        audit::append(&mut tx, store.cipher().ok(), record).await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(store.virtual_account(None, id).await?)
}

fn entry<'a>(
    actor: &'a Actor,
    action: &'a str,
    (id, organization): (&'a str, &'a str),
    reason: Option<&'a str>,
) -> Record<'a> {
    Record {
        actor,
        action,
        target_kind: "virtual_account",
        target_id: id,
        organization_id: Some(organization),
        reason,
        request_id: None,
        detail: None,
    }
}

/// Whether `text` is an ISO 3166-1 alpha-2 code's shape: two capitals.
pub fn is_country(text: &str) -> bool {
    text.len() == 2 && text.bytes().all(|b| b.is_ascii_uppercase())
}

/// A virtual account's bank account number: 12 digits, the first `8`.
pub fn new_account_number() -> String {
    let mut bytes = [0u8; 11];
    getrandom::fill(&mut bytes).expect("a random source");
    let digits: String = bytes.iter().map(|b| char::from(b'0' + b % 10)).collect();
    format!("8{digits}")
}

/// A virtual account's `deposit_message`: `VA` and 10 characters of
/// Crockford's base 32, as a mint instruction's memo.
pub fn new_deposit_message() -> String {
    format!(
        "{DEPOSIT_MESSAGE_PREFIX}{}",
        &crate::issuance::new_memo_id()[crate::issuance::MEMO_PREFIX.len()..]
    )
}

/// The prefix of every deposit message.
pub const DEPOSIT_MESSAGE_PREFIX: &str = "VA";

/// The deposit messages a wire's remittance information carries (a bank's
/// notification of it).
pub fn deposit_message_in(credit: &crate::bank::Credit) -> crate::bank::Found {
    credit.find(|w| {
        let message: String = w.chars().filter(|c| *c != '-').map(|c| c.to_ascii_uppercase()).collect();
        Some(message).filter(|m| crate::issuance::is_issued(m, DEPOSIT_MESSAGE_PREFIX))
    })
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::conversions::resource::{DepositInstructions, PaymentMethod};

    #[test]
    fn numbers_and_messages_are_distinct_and_well_formed() {
        let numbers: std::collections::BTreeSet<String> = (0..1000).map(|_| new_account_number()).collect();
        assert_eq!(numbers.len(), 1000);
        assert!(
            numbers
                .iter()
                .all(|n| n.len() == 12 && n.starts_with('8') && n.bytes().all(|b| b.is_ascii_digit()))
        );
        let message = new_deposit_message();
        assert!(message.starts_with("VA") && message.len() == 12, "{message}");
        for (text, ok) in
            [("US", true), ("MX", true), ("us", false), ("USA", false), ("", false), ("U1", false)]
        {
            assert_eq!(is_country(text), ok, "{text}");
        }
    }

    #[test]
    fn deposit_instructions_show_the_receiving_bank_under_the_accounts_own_number() {
        let bank = crate::bank::sandbox::receiving_account();
        let instructions = DepositInstructions::at(&bank, "812345678901", "VA0123456789", "USDC");
        assert_eq!(instructions.bank_routing_number, "123456780");
        assert_eq!(instructions.bank_account_number, "812345678901");
        assert_eq!(instructions.deposit_message, "VA0123456789");
        assert_eq!(instructions.bank_address, "1 Sandbox Way, New York, NY, 10001, US");
        assert_eq!(
            (instructions.currency.as_str(), instructions.payment_method),
            ("USDC", PaymentMethod::Blockchain)
        );
        assert_eq!(serde_json::to_value(&instructions).unwrap()["payment_method"], "BLOCKCHAIN");
    }
}
