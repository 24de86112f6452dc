//! Quotes: what an off-ramp of a stablecoin pays out in another currency.
//! Pure: a [`Prices`] source gives the mid rate, [`price`] applies the
//! spread and the fee in exact integers, and [`corridor`] says which
//! currencies a bank account can be paid in.
//!
//! A rate is an exact decimal with up to 8 places ([`Rate`]); amounts are
//! cents. The destination amount is rounded down: the platform never pays
//! out more than the rate gives.

use std::collections::BTreeMap;

use serde_json::Value;

/// An exchange rate: units of the destination currency per unit of the
/// source, in hundred-millionths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rate(pub i64);

const SCALE: i64 = 100_000_000;

impl Rate {
    /// A positive decimal with at most 8 places (`17.25`, `0.92`).
    pub fn parse(text: &str) -> Result<Rate, String> {
        let invalid = || format!("{text:?} is not a positive rate with at most 8 decimals, such as 17.25");
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || !digits(whole)
            || !digits(fraction)
            || fraction.len() > 8
            || text.ends_with('.')
        {
            return Err(invalid());
        }
        let whole: i64 = whole.parse().map_err(|_| invalid())?;
        let fraction: i64 = format!("{fraction:0<8}").parse().map_err(|_| invalid())?;
        let rate = whole.checked_mul(SCALE).and_then(|r| r.checked_add(fraction)).ok_or_else(invalid)?;
        if rate == 0 { Err(invalid()) } else { Ok(Rate(rate)) }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fraction = format!("{:08}", self.0 % SCALE);
        let fraction = fraction.trim_end_matches('0');
        if fraction.is_empty() {
            write!(f, "{}", self.0 / SCALE)
        } else {
            write!(f, "{}.{fraction}", self.0 / SCALE)
        }
    }
}

/// Where rates come from.
pub trait Prices: Send + Sync {
    /// The mid rate of one US dollar (a dollar stablecoin) in `currency`.
    fn mid(&self, currency: &str) -> Option<Rate>;
    /// The currencies it prices.
    fn currencies(&self) -> Vec<String>;
}

/// A fixed table of rates: the sandbox's (deterministic, by default
/// [`SANDBOX_RATES`]), or one an operator sets (`--conversion-rates`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table(BTreeMap<String, Rate>);

/// The sandbox's rates per US dollar unless configured.
pub const SANDBOX_RATES: &str = "EUR=0.92,GBP=0.79,MXN=17.25,BRL=5.4,INR=83.2,COP=3950";

impl Table {
    /// `CUR=RATE,CUR=RATE…`, each currency three capitals.
    pub fn parse(spec: &str) -> Result<Table, String> {
        let mut rates = BTreeMap::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (currency, rate) =
                entry.split_once('=').ok_or_else(|| format!("{entry:?}: expected CURRENCY=RATE"))?;
            let currency = currency.trim();
            if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) || currency == "USD" {
                return Err(format!("{currency:?} is not a currency to price (three capitals, not USD)"));
            }
            rates.insert(
                currency.to_string(),
                Rate::parse(rate.trim()).map_err(|e| format!("{currency}: {e}"))?,
            );
        }
        if rates.is_empty() {
            return Err("no rate given".into());
        }
        Ok(Table(rates))
    }
}

impl Prices for Table {
    fn mid(&self, currency: &str) -> Option<Rate> {
        self.0.get(currency).copied()
    }

    fn currencies(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

/// A priced off-ramp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priced {
    /// The rate the client gets: the mid rate less the spread.
    pub rate: Rate,
    /// Cents of the source kept as the fee.
    pub fee_cents: i64,
    /// Cents of the destination currency paid out.
    pub destination_cents: i64,
}

/// The off-ramp fee of `source_cents` at `fee_bps` (at most [`MAX_BPS`]),
/// rounded up to the cent: a quote's, and a US wire's, which takes none.
pub fn fee_cents(source_cents: i64, fee_bps: u32) -> i64 {
    let fee = (i128::from(source_cents) * i128::from(fee_bps.min(MAX_BPS)) + 9_999) / 10_000;
    i64::try_from(fee).unwrap_or(i64::MAX)
}

/// The largest spread or fee: 10% (1,000 basis points).
pub const MAX_BPS: u32 = 1_000;

/// Prices `source_cents` at `mid` less `spread_bps`, keeping `fee_bps` of
/// the source (rounded up to the cent) as the fee. `Err` when nothing would
/// be paid out.
pub fn price(source_cents: i64, mid: Rate, spread_bps: u32, fee_bps: u32) -> Result<Priced, String> {
    let rate = i128::from(mid.0) * i128::from(10_000 - spread_bps.min(MAX_BPS)) / 10_000;
    let fee = i128::from(fee_cents(source_cents, fee_bps));
    let paid = (i128::from(source_cents) - fee) * rate / i128::from(SCALE);
    let (rate, fee, paid) = (i64::try_from(rate), i64::try_from(fee), i64::try_from(paid));
    match (rate, fee, paid) {
        (Ok(rate), Ok(fee_cents), Ok(destination_cents)) if destination_cents > 0 && rate > 0 => {
            Ok(Priced { rate: Rate(rate), fee_cents, destination_cents })
        }
        _ => Err("the amount is too small to pay anything out at this rate".into()),
    }
}

/// How a bank account is paid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Corridor {
    /// An ABA routing number: a US wire in dollars, no quote.
    UsWire,
    /// Paid in one of these currencies, at a quoted rate; `None`: any the
    /// prices offer (SWIFT).
    Quoted(Option<Vec<&'static str>>),
    /// No rail the platform pays out on.
    None,
}

/// The corridor of `details` (a Bank account details object): US first,
/// then CLABE (MXN), IFSC (INR), SWIFT (any priced currency).
pub fn corridor(details: &Value) -> Corridor {
    let has = |key: &str| details[key].as_str().is_some_and(|s| !s.is_empty());
    if has("routing_number") {
        Corridor::UsWire
    } else if has("clabe") {
        Corridor::Quoted(Some(vec!["MXN"]))
    } else if has("ifsc_code") {
        Corridor::Quoted(Some(vec!["INR"]))
    } else if has("swift_or_bic_number") {
        Corridor::Quoted(None)
    } else {
        Corridor::None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rates_are_exact_decimals_of_up_to_eight_places() {
        for (text, rate, shown) in [
            ("17.25", 1_725_000_000, "17.25"),
            ("0.92", 92_000_000, "0.92"),
            ("3950", 395_000_000_000, "3950"),
            ("0.00000001", 1, "0.00000001"),
            ("1.50", 150_000_000, "1.5"),
        ] {
            assert_eq!(Rate::parse(text), Ok(Rate(rate)), "{text}");
            assert_eq!(Rate(rate).to_string(), shown);
        }
        for text in ["0", "-1", "1.123456789", "", ".5", "5.", "1e3", "NaN", "99999999999999999999"] {
            assert!(Rate::parse(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn a_table_names_its_currencies_and_refuses_what_it_cannot_price() {
        let table = Table::parse(SANDBOX_RATES).unwrap();
        assert_eq!(table.mid("MXN"), Some(Rate(1_725_000_000)));
        assert_eq!(table.mid("USD"), None);
        assert_eq!(table.currencies(), ["BRL", "COP", "EUR", "GBP", "INR", "MXN"]);
        for spec in ["", "MXN", "MXN=0", "mxn=1", "USD=1", "MXN=1,EURO=2"] {
            assert!(Table::parse(spec).is_err(), "{spec:?}");
        }
    }

    #[test]
    fn an_off_ramp_fee_is_rounded_up_to_the_cent() {
        assert_eq!(fee_cents(199, 50), 1, "a fraction of a cent is a cent");
        assert_eq!(fee_cents(10_000, 150), 150);
        assert_eq!(fee_cents(10_000, 0), 0);
        assert_eq!(fee_cents(10_000, 5_000), 1_000, "at most 10%");
    }

    #[test]
    fn a_price_takes_the_spread_and_the_fee_and_rounds_the_payout_down() {
        let mxn = Rate(1_725_000_000);
        for (cents, spread, fee, rate, fee_cents, paid) in [
            // 100 USDC at 17.25, nothing taken: 1725.00 MXN.
            (10_000, 0, 0, 1_725_000_000, 0, 172_500),
            // 0.5% spread: 17.16375.
            (10_000, 50, 0, 1_716_375_000, 0, 171_637),
            // 1% fee: 1.00 USDC kept, 99.00 priced.
            (10_000, 0, 100, 1_725_000_000, 100, 170_775),
            // A fee of a fraction of a cent is a cent.
            (1, 0, 1, 1_725_000_000, 1, -1),
        ] {
            match price(cents, mxn, spread, fee) {
                Ok(p) => assert_eq!(
                    (p.rate, p.fee_cents, p.destination_cents),
                    (Rate(rate), fee_cents, paid),
                    "{cents} {spread} {fee}"
                ),
                Err(_) => assert_eq!(paid, -1, "{cents} {spread} {fee}"),
            }
        }
        assert!(price(1, Rate(1), 0, 0).is_err(), "nothing paid out");
    }

    #[test]
    fn a_bank_accounts_rail_decides_its_corridor() {
        assert_eq!(
            corridor(&json!({ "routing_number": "021000021", "swift_or_bic_number": "CHASUS33" })),
            Corridor::UsWire
        );
        assert_eq!(corridor(&json!({ "clabe": "032180000118359719" })), Corridor::Quoted(Some(vec!["MXN"])));
        assert_eq!(corridor(&json!({ "ifsc_code": "HDFC0000001" })), Corridor::Quoted(Some(vec!["INR"])));
        assert_eq!(corridor(&json!({ "swift_or_bic_number": "DEUTDEFF" })), Corridor::Quoted(None));
        assert_eq!(corridor(&json!({ "bank_name": "B" })), Corridor::None);
    }
}
