//! Pure rules of transfers: amounts of different decimals on one scale (for
//! limits) and fees valued in USD (for the gas ledger).

use alloy::primitives::U256;

use super::Route;
use crate::{account::AccountType, chain::Family};

/// How a transfer of an account of `kind` on a chain of `family` reaches
/// the chain: the omnibus wallet pays its own gas; a segregated account's
/// EIP-3009 token (`authorization`) moves by an authorization the sponsor
/// sends, anything else of it after a gas top-up; on Solana the sponsor is
/// the fee payer.
pub fn route(kind: AccountType, family: Family, authorization: bool) -> Route {
    match (kind, family) {
        (AccountType::Omnibus, _) => Route::Omnibus,
        (AccountType::Segregated, Family::Solana) => Route::FeePayer,
        (AccountType::Segregated, Family::Evm) if authorization => Route::Authorization,
        (AccountType::Segregated, Family::Evm) => Route::TopUp,
    }
}

/// Decimal places of USD amounts inside: micro-dollars.
pub const USD_DECIMALS: u8 = 6;

/// The scale every amount is brought to before amounts of one symbol with
/// different decimals (one per chain) are added up.
pub const COMMON_DECIMALS: u32 = 36;

/// `raw` with `decimals` brought to [`COMMON_DECIMALS`].
pub fn scale(raw: U256, decimals: u8) -> U256 {
    raw * U256::from(10).pow(U256::from(COMMON_DECIMALS.saturating_sub(u32::from(decimals))))
}

/// `amount` of a coin with `decimals` at `price` micro-USD per coin, in
/// micro-USD, rounded half up.
pub fn usd_micros(amount: U256, decimals: u8, price: u128) -> i64 {
    let unit = U256::from(10).pow(U256::from(decimals));
    let value = (amount * U256::from(price) + unit / U256::from(2)) / unit;
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usd_values_are_exact_and_rounded_half_up() {
        // 21,000 gas at 1 gwei at 3,000 USD/ETH = 0.063 USD.
        let fee = U256::from(21_000u64 * 1_000_000_000);
        assert_eq!(usd_micros(fee, 18, 3_000_000_000), 63_000);
        // 5,000 lamports at 150 USD/SOL = 0.00075 USD.
        assert_eq!(usd_micros(U256::from(5_000), 9, 150_000_000), 750);
        // Half a micro-dollar rounds up, less rounds down.
        assert_eq!(usd_micros(U256::from(5), 7, 1_000_000), 1);
        assert_eq!(usd_micros(U256::from(4), 7, 1_000_000), 0);
    }

    #[test]
    fn amounts_of_different_decimals_compare_on_one_scale() {
        assert_eq!(scale(U256::from(1_500_000), 6), scale(U256::from(1_500_000_000_000_000_000u128), 18));
    }
}
