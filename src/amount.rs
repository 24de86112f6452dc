//! Exact amounts: integers in the smallest unit inside, decimal strings in the
//! major unit outside. No floating point anywhere.

use alloy::primitives::U256;

/// An amount of an asset in its smallest unit (wei, lamports, token base units).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Amount {
    raw: U256,
    decimals: u8,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AmountError {
    #[error("amount {0:?} is not a decimal number")]
    Malformed(String),
    #[error("amount {amount:?} has more than {decimals} decimal places")]
    TooPrecise { amount: String, decimals: u8 },
    #[error("amount {0:?} is too large")]
    Overflow(String),
}

impl Amount {
    pub fn from_raw(raw: U256, decimals: u8) -> Self {
        Self { raw, decimals }
    }

    pub fn raw(&self) -> U256 {
        self.raw
    }

    pub fn decimals(&self) -> u8 {
        self.decimals
    }

    pub fn is_zero(&self) -> bool {
        self.raw.is_zero()
    }

    /// Parses a major-unit decimal string (`"1.5"`) into the smallest unit.
    pub fn parse(text: &str, decimals: u8) -> Result<Self, AmountError> {
        let malformed = || AmountError::Malformed(text.to_string());
        let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !digits(whole) || !digits(frac) || (text.contains('.') && frac.is_empty()) {
            return Err(malformed());
        }
        if frac.len() > decimals as usize {
            return Err(AmountError::TooPrecise { amount: text.to_string(), decimals });
        }
        let padded = format!("{whole}{frac:0<width$}", width = decimals as usize);
        let raw = U256::from_str_radix(&padded, 10).map_err(|_| AmountError::Overflow(text.to_string()))?;
        Ok(Self { raw, decimals })
    }
}

/// The major-unit decimal string: `1000000` raw with 6 decimals is `"1"`, one
/// wei is `"0.000000000000000001"`; trailing zeros of the fraction are dropped.
impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digits = self.raw.to_string();
        let decimals = self.decimals as usize;
        if decimals == 0 {
            return f.write_str(&digits);
        }
        let padded = format!("{digits:0>width$}", width = decimals + 1);
        let (whole, frac) = padded.split_at(padded.len() - decimals);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() { f.write_str(whole) } else { write!(f, "{whole}.{frac}") }
    }
}

/// US dollars in cents, as the fiat wings hold every amount; written as the
/// API writes dollars: `250.00`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cents(pub i64);

impl Cents {
    /// The largest amount taken (a wire, a conversion): 10 billion dollars.
    pub const MAX: Cents = Cents(1_000_000_000_000);

    /// A positive decimal string of dollars with at most 2 decimals (`250`,
    /// `250.5`, `250.00`), at most [`Cents::MAX`].
    pub fn parse(text: &str) -> Result<Cents, String> {
        let invalid = || {
            format!("{text:?} is not a positive amount of dollars with at most 2 decimals, such as 250.00")
        };
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || !digits(whole)
            || !digits(fraction)
            || fraction.len() > 2
            || text.ends_with('.')
        {
            return Err(invalid());
        }
        let whole: i64 = whole.parse().map_err(|_| invalid())?;
        let fraction: i64 = format!("{fraction:0<2}").parse().map_err(|_| invalid())?;
        let cents = whole.checked_mul(100).and_then(|c| c.checked_add(fraction)).ok_or_else(invalid)?;
        match cents {
            0 => Err(invalid()),
            c if c > Self::MAX.0 => {
                Err(format!("{text} is more than the largest wire taken ({})", Self::MAX))
            }
            c => Ok(Cents(c)),
        }
    }
}

impl std::fmt::Display for Cents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let cents = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:02}", cents / 100, cents % 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(raw: U256, decimals: u8) -> String {
        Amount::from_raw(raw, decimals).to_string()
    }

    #[test]
    fn formats_in_the_major_unit() {
        assert_eq!(fmt(U256::from(1_000_000u64), 6), "1");
        assert_eq!(fmt(U256::from(1_500_000u64), 6), "1.5");
        assert_eq!(fmt(U256::from(1u64), 18), "0.000000000000000001");
        assert_eq!(fmt(U256::from(1u64), 6), "0.000001");
        assert_eq!(fmt(U256::ZERO, 6), "0");
        assert_eq!(fmt(U256::from(123u64), 0), "123");
        assert_eq!(fmt(U256::from(10u64).pow(U256::from(18)), 18), "1");
    }

    #[test]
    fn formats_amounts_above_u64_and_uint256_max() {
        // 2^64 wei and 123456.789 ETH: both beyond u64.
        assert_eq!(fmt(U256::from(u64::MAX) + U256::from(1u64), 18), "18.446744073709551616");
        let big = U256::from_str_radix("123456789000000000000000", 10).unwrap();
        assert_eq!(fmt(big, 18), "123456.789");
        assert_eq!(
            fmt(U256::MAX, 18),
            "115792089237316195423570985008687907853269984665640564039457.584007913129639935"
        );
        assert_eq!(
            fmt(U256::MAX, 0),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935"
        );
    }

    #[test]
    fn dollars_are_exact_cents_with_at_most_two_decimals() {
        for (text, cents) in
            [("250", 25_000), ("250.5", 25_050), ("250.00", 25_000), ("0.01", 1), ("007.10", 710)]
        {
            assert_eq!(Cents::parse(text), Ok(Cents(cents)), "{text}");
        }
        for text in ["0", "0.00", "-1", "1.234", "1e3", " 1", "1 ", "", ".5", "5.", "1,000.00", "+1", "NaN"] {
            assert!(Cents::parse(text).is_err(), "{text:?}");
        }
        assert!(Cents::parse("10000000000.01").unwrap_err().contains("largest wire"));
        assert_eq!(Cents::parse("10000000000.00"), Ok(Cents::MAX));
        assert!(Cents::parse("99999999999999999999").is_err());
        for cents in [1, 10, 25_000, 25_050, Cents::MAX.0] {
            assert_eq!(Cents::parse(&Cents(cents).to_string()), Ok(Cents(cents)));
        }
        assert_eq!(Cents(25_050).to_string(), "250.50");
        // A difference (a reconciliation's, say) may be negative.
        assert_eq!(Cents(-150).to_string(), "-1.50");
        assert_eq!(Cents(-5).to_string(), "-0.05");
    }

    #[test]
    fn parses_major_units_exactly() {
        assert_eq!(Amount::parse("1", 6).unwrap().raw(), U256::from(1_000_000u64));
        assert_eq!(Amount::parse("0.000001", 6).unwrap().raw(), U256::from(1u64));
        assert_eq!(Amount::parse("12.5", 18).unwrap().to_string(), "12.5");
        let max = "115792089237316195423570985008687907853269984665640564039457.584007913129639935";
        assert_eq!(Amount::parse(max, 18).unwrap().raw(), U256::MAX);
    }

    #[test]
    fn rejects_malformed_and_too_precise_input() {
        for bad in ["", ".5", "1.", "-1", "1e6", "1,5", " 1", "0x10", "1.2.3"] {
            assert!(matches!(Amount::parse(bad, 6), Err(AmountError::Malformed(_))), "{bad:?}");
        }
        assert!(matches!(Amount::parse("0.0000001", 6), Err(AmountError::TooPrecise { .. })));
        assert!(matches!(
            Amount::parse(
                "115792089237316195423570985008687907853269984665640564039457.584007913129639936",
                18
            ),
            Err(AmountError::Overflow(_))
        ));
    }
}
