//! What an off-ramp's payout pays, by its bank account's corridor: a US
//! wire in dollars less the off-ramp fee (no quote), or a quote's price,
//! checked against what the request asks.

use crate::{
    amount::Cents,
    conversions::{
        quote::{Corridor, corridor, fee_cents},
        resource::Quote,
    },
    issuance::{BankAccount, FIAT_CURRENCY},
    store::{NewQuote, Store, StoreError, quotes},
};

/// What the payout pays: the currency, the cents when known now, the fee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priced {
    pub currency: String,
    pub cents: Option<i64>,
    pub fee_cents: i64,
}

/// What a request asks to pay out.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub organization: &'a str,
    /// The stablecoin's symbol.
    pub currency: &'a str,
    pub cents: i64,
    pub quote_id: Option<&'a str>,
}

/// Why a request cannot be priced.
#[derive(Debug, thiserror::Error)]
pub enum PricingError {
    /// The request, naming the field.
    #[error("{0}")]
    Invalid(String),
    /// The quote has expired.
    #[error("quote {0} has expired")]
    QuoteExpired(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Persists `new` under a new id: the quote as the API shows it.
pub async fn create_quote(store: &Store, new: &NewQuote) -> Result<Quote, StoreError> {
    let mut tx = store.begin().await?;
    let id = quotes::insert(&mut tx, new).await?;
    tx.commit().await?;
    store.quote(&new.organization, &id).await
}

/// The payout of what `asked` asks to `bank`, the off-ramp fee `fee_bps`
/// on a US wire.
pub async fn price(
    store: &Store,
    asked: Asked<'_>,
    bank: &BankAccount,
    fee_bps: u32,
) -> Result<Priced, PricingError> {
    let invalid = |message: String| Err(PricingError::Invalid(message));
    match corridor(bank.bank_account_details.expose()) {
        Corridor::UsWire => us_wire(asked, &bank.id, fee_bps),
        Corridor::None => invalid(format!(
            "payment_instructions_id: bank account {} has no rail the platform pays out on",
            bank.id
        )),
        Corridor::Quoted(_) => {
            let Some(id) = asked.quote_id else {
                return invalid(format!(
                    "quote_id: bank account {} is paid internationally: take a quote (GET /v2/conversions/quotes) and name it",
                    bank.id
                ));
            };
            let quote = store.quote(asked.organization, id).await?;
            quoted(&quote, asked, &bank.id, chrono::Utc::now())?;
            Ok(Priced {
                currency: quote.destination.currency.clone(),
                cents: None,
                fee_cents: quote.fee_cents,
            })
        }
    }
}

/// A US wire of `asked` to bank account `bank`: dollars less the fee.
fn us_wire(asked: Asked<'_>, bank: &str, fee_bps: u32) -> Result<Priced, PricingError> {
    if asked.quote_id.is_some() {
        return Err(PricingError::Invalid(format!(
            "quote_id: bank account {bank} is a US account, paid by a US wire that takes no quote"
        )));
    }
    let fee = fee_cents(asked.cents, fee_bps);
    if asked.cents - fee <= 0 {
        return Err(PricingError::Invalid(format!(
            "amount: {} does not cover the off-ramp fee of {}",
            Cents(asked.cents),
            Cents(fee)
        )));
    }
    Ok(Priced { currency: FIAT_CURRENCY.to_string(), cents: Some(asked.cents - fee), fee_cents: fee })
}

/// Whether `quote` prices what `asked` asks to bank account `bank`, and has
/// not expired by `now`.
fn quoted(
    quote: &Quote,
    asked: Asked<'_>,
    bank: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), PricingError> {
    let invalid = |message: String| Err(PricingError::Invalid(message));
    if quote.payment_instructions_id != bank {
        return invalid(format!(
            "quote_id: quote {} prices a payout to bank account {}, not {bank}",
            quote.id, quote.payment_instructions_id
        ));
    }
    if quote.source.currency != asked.currency {
        return invalid(format!(
            "source.currency: quote {} prices {}, not {}",
            quote.id, quote.source.currency, asked.currency
        ));
    }
    if quote.source.amount != Cents(asked.cents).to_string() {
        return invalid(format!(
            "amount: {} is not the quoted source.amount {} of quote {}",
            Cents(asked.cents),
            quote.source.amount,
            quote.id
        ));
    }
    if quote.expires_at <= now {
        return Err(PricingError::QuoteExpired(quote.id.clone()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversions::resource::Money;

    fn asked(cents: i64, quote_id: Option<&str>) -> Asked<'_> {
        Asked { organization: "acme", currency: "USDC", cents, quote_id }
    }

    #[test]
    fn a_us_wire_pays_dollars_less_the_fee_and_takes_no_quote() {
        let paid = us_wire(asked(10_000, None), "bank-1", 100).unwrap();
        assert_eq!(paid, Priced { currency: "USD".into(), cents: Some(9_900), fee_cents: 100 });
        let free = us_wire(asked(10_000, None), "bank-1", 0).unwrap();
        assert_eq!((free.cents, free.fee_cents), (Some(10_000), 0));
        for (cents, quote, mentions) in [
            (10_000, Some("q-1"), "quote_id: bank account bank-1 is a US account"),
            (1, None, "amount: 0.01 does not cover the off-ramp fee of 0.01"),
        ] {
            let error = us_wire(asked(cents, quote), "bank-1", 100).unwrap_err().to_string();
            assert!(error.starts_with(mentions), "{error}");
        }
    }

    #[test]
    fn a_quote_prices_only_what_it_quoted_until_it_expires() {
        let now = chrono::Utc::now();
        let money = |currency: &str, amount: &str| Money { currency: currency.into(), amount: amount.into() };
        let quote = Quote {
            id: "q-1".into(),
            source: money("USDC", "100.00"),
            destination: money("EUR", "91.00"),
            exchange_rate: "0.91".into(),
            fee: money("USDC", "1.00"),
            payment_instructions_id: "bank-1".into(),
            expires_at: now + chrono::Duration::seconds(60),
            created_at: now,
            organization: "acme".into(),
            fee_cents: 100,
        };
        assert!(quoted(&quote, asked(10_000, Some("q-1")), "bank-1", now).is_ok());
        for (cents, bank, at, mentions) in [
            (10_000, "bank-2", now, "quote_id: quote q-1 prices a payout to bank account bank-1, not bank-2"),
            (9_999, "bank-1", now, "amount: 99.99 is not the quoted source.amount 100.00"),
            (10_000, "bank-1", now + chrono::Duration::seconds(60), "quote q-1 has expired"),
        ] {
            let error = quoted(&quote, asked(cents, Some("q-1")), bank, at).unwrap_err().to_string();
            assert!(error.starts_with(mentions), "{error}");
        }
    }
}
