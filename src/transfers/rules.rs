//! Pure rules of transfers: the route a transfer takes, when a topped-up
//! address is free for its next transfer, amounts of different decimals on
//! one scale, whether a balance covers a transfer and which limit a
//! transfer breaks (the store feeds them what it read under the account's
//! row lock), and fees valued in USD (for the gas ledger).

use alloy::primitives::U256;

use super::{
    model::{LimitPolicy, Outgoing, TxRole, TxState},
    resource::{FailureDetails, Route, TransferStatus, failure},
};
use crate::{
    account::{AccountStatus, AccountType},
    amount::Amount,
    chain::{Family, Sponsorship},
    identity::Status,
};

/// How a transfer of an account of `kind` on a chain of `family` reaches
/// the chain: the omnibus wallet pays its own gas; a segregated account's
/// EIP-3009 token (`authorization`) moves by an authorization the sponsor
/// sends, anything else of it after a gas top-up; on Solana the sponsor is
/// the fee payer.
pub fn route(kind: AccountType, family: Family, authorization: bool) -> Route {
    match (kind, crate::family::rules::sponsorship(family)) {
        (AccountType::Omnibus, _) => Route::Omnibus,
        (AccountType::Segregated, Sponsorship::FeePayer) => Route::FeePayer,
        (AccountType::Segregated, Sponsorship::Gas) if authorization => Route::Authorization,
        (AccountType::Segregated, Sponsorship::Gas) => Route::TopUp,
    }
}

/// Whether `t`, a transfer not yet terminal, still has its topped-up source
/// address to itself: the address's next `TOP_UP` transfer waits meanwhile.
/// Its gas budget assumes that nothing else spends from the address while
/// its transaction may still be replaced or cancelled; once one of its
/// transfer transactions (or its cancellation) is included the fee is known
/// and counted, the address's next nonce is free, and the next transfer
/// goes on without waiting for this one to be final.
pub fn holds_address(t: &Outgoing) -> bool {
    let included = |x: &&super::SentTransaction| {
        x.role != TxRole::TopUp && matches!(x.state, TxState::Mined | TxState::Reverted)
    };
    t.route == Route::TopUp
        && match t.status {
            TransferStatus::Accepted => !t.transactions.is_empty(),
            TransferStatus::Submitted => !t.transactions.iter().any(|x| included(&x)),
            _ => false,
        }
}

/// Where a client transfer's source stands when the client's own
/// transaction is about to be recorded (and so signed for good): read under
/// the transfer's row lock by the sender that records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    pub account: AccountStatus,
    pub identity: Status,
    /// For an off-ramp's collect: whether the identity is still enabled for
    /// fiat operations. `None` for any other transfer.
    pub collect_fiat_enabled: Option<bool>,
}

/// Whether the client's own transaction may be signed now. Until then a
/// suspension, a termination, a frozen or closed account, or (for an
/// off-ramp's collect) a withdrawn fiat entitlement ends the transfer
/// unsent, even after a gas top-up or an authorization's reservation made
/// it no longer "unsent" to the identity's change: `ACCOUNT_NOT_ACTIVE`
/// (the identity first, then the account), then `FIAT_NOT_ENABLED`.
pub fn may_sign(source: Source) -> Result<(), FailureDetails> {
    if source.identity != Status::Active {
        return Err(failure(
            "ACCOUNT_NOT_ACTIVE",
            &format!("the account's identity is {}; the transfer was not sent", source.identity),
        ));
    }
    if source.account != AccountStatus::Active {
        return Err(failure(
            "ACCOUNT_NOT_ACTIVE",
            &format!("the account is {}; the transfer was not sent", source.account),
        ));
    }
    if source.collect_fiat_enabled == Some(false) {
        return Err(failure(
            "FIAT_NOT_ENABLED",
            "the identity is no longer enabled for fiat operations; nothing was collected",
        ));
    }
    Ok(())
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

/// Whether `balance` (what the chain holds for the source) covers `amount`
/// beside what the account's transfers in flight hold (`held`); the
/// available amount when it does not.
pub fn covers(balance: U256, held: U256, amount: U256) -> Result<(), U256> {
    let available = balance.saturating_sub(held);
    if amount > available { Err(available) } else { Ok(()) }
}

/// Which limit of `policy` a transfer of `amount` (on the common scale, see
/// [`scale`]) breaks, said as the refusal says it: the per-transfer limit
/// by the amount alone, or the rolling one by `volume` (the scope's
/// transfers of the last 24 hours that did not fail, on the common scale;
/// read only for a policy with a rolling limit) plus the amount. `Err`
/// holds a limit of the policy that is no amount.
pub fn limit_broken(
    policy: &LimitPolicy,
    amount: U256,
    volume: Option<U256>,
) -> Result<Option<String>, String> {
    let limit = |text: &str| {
        Amount::parse(text, COMMON_DECIMALS as u8).map(|a| a.raw()).map_err(|_| text.to_string())
    };
    if let Some(max) = &policy.max_per_transfer
        && amount > limit(max)?
    {
        return Ok(Some(format!("at most {max} {} per transfer", policy.currency_symbol)));
    }
    if let (Some(max), Some(volume)) = (&policy.max_rolling_24h, volume)
        && volume.saturating_add(amount) > limit(max)?
    {
        return Ok(Some(format!("at most {max} {} in any 24 hours", policy.currency_symbol)));
    }
    Ok(None)
}

/// `amount` of a coin with `decimals` at `price` micro-USD per coin, in
/// micro-USD, rounded half up.
pub fn usd_micros(amount: U256, decimals: u8, price: u128) -> i64 {
    let unit = U256::from(10).pow(U256::from(decimals));
    let value = (amount * U256::from(price) + unit / U256::from(2)) / unit;
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The time (microseconds) before which an accepted transfer has waited
/// longer than `window` to be submitted, at `now`: the spans in which the
/// signer did not answer (`outages`, each `since` and `until`, still open
/// when `None`) do not count, as nothing could have been signed then.
/// Overlapping spans count once.
pub fn unsent_cutoff(now: i64, window: i64, outages: &[(i64, Option<i64>)]) -> i64 {
    let mut spans: Vec<(i64, i64)> = outages
        .iter()
        .map(|&(since, until)| (since.min(now), until.unwrap_or(now).min(now)))
        .filter(|(since, until)| since < until)
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
    for (since, until) in spans {
        match merged.last_mut() {
            Some(last) if since <= last.1 => last.1 = last.1.max(until),
            _ => merged.push((since, until)),
        }
    }
    // Walk back from now through the time the signer answered until the
    // window is used up.
    let (mut at, mut left) = (now, window.max(0));
    for &(since, until) in merged.iter().rev() {
        let answered = at - until;
        if answered >= left {
            break;
        }
        left -= answered;
        at = since;
    }
    at.saturating_sub(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_submit_window_does_not_count_while_the_signer_does_not_answer() {
        let none: &[(i64, Option<i64>)] = &[];
        for (outages, cutoff, why) in [
            (none, 70, "no outage: the window back from now"),
            (&[(90, None)][..], 60, "open for 10: the window starts 10 earlier"),
            (&[(0, None)][..], -30, "open since before every transfer"),
            (&[(80, Some(90))][..], 60, "closed, inside the window"),
            (&[(10, Some(20))][..], 70, "closed before the window"),
            (&[(65, Some(75))][..], 60, "closed across the window's start: 25 up after it, 5 up before"),
            (&[(80, Some(90)), (85, Some(95))][..], 55, "overlapping spans count once"),
            (&[(85, Some(95)), (80, Some(90)), (40, Some(50))][..], 55, "in any order"),
            (&[(50, Some(60)), (80, Some(90))][..], 60, "the second span ends where the window does"),
            (&[(95, Some(120))][..], 65, "a span's end past now counts up to now"),
            (
                &[(60, Some(70)), (80, Some(90))][..],
                50,
                "up 10 after the second span, 10 between, 10 before the first",
            ),
            (&[(90, Some(90))][..], 70, "an empty span"),
        ] {
            assert_eq!(unsent_cutoff(100, 30, outages), cutoff, "{why}");
        }
    }

    #[test]
    fn a_balance_covers_what_the_transfers_in_flight_leave() {
        let u = U256::from;
        for (balance, held, amount, answer) in [
            (100, 0, 100, Ok(())),
            (100, 40, 60, Ok(())),
            (100, 40, 61, Err(u(60))),
            (100, 150, 1, Err(u(0))),
            (0, 0, 0, Ok(())),
        ] {
            assert_eq!(covers(u(balance), u(held), u(amount)), answer, "{balance} {held} {amount}");
        }
    }

    #[test]
    fn a_policy_breaks_on_the_amount_alone_or_with_the_day_before_it() {
        let policy = |per: Option<&str>, day: Option<&str>| LimitPolicy {
            id: "p".into(),
            account_id: Some("a".into()),
            identity_id: None,
            currency_symbol: "USDC".into(),
            max_per_transfer: per.map(String::from),
            max_rolling_24h: day.map(String::from),
            created_at: chrono::DateTime::UNIX_EPOCH,
        };
        let usdc = |units: u64| scale(U256::from(units), 6);
        let per = "at most 100 USDC per transfer".to_string();
        let day = "at most 250.5 USDC in any 24 hours".to_string();
        for (p, amount, volume, broken) in [
            (policy(Some("100"), None), usdc(100_000_000), None, None),
            (policy(Some("100"), None), usdc(100_000_001), None, Some(per.clone())),
            (policy(None, Some("250.5")), usdc(100_000_000), Some(usdc(150_500_000)), None),
            (policy(None, Some("250.5")), usdc(100_000_000), Some(usdc(150_500_001)), Some(day.clone())),
            (policy(None, Some("250.5")), usdc(250_500_001), Some(U256::ZERO), Some(day.clone())),
            // The per-transfer limit speaks first.
            (
                policy(Some("100"), Some("250.5")),
                usdc(200_000_000),
                Some(usdc(100_000_000)),
                Some(per.clone()),
            ),
            (
                policy(Some("100"), Some("250.5")),
                usdc(100_000_000),
                Some(usdc(200_000_000)),
                Some(day.clone()),
            ),
        ] {
            assert_eq!(limit_broken(&p, amount, volume), Ok(broken), "{p:?} {amount} {volume:?}");
        }
        assert_eq!(limit_broken(&policy(Some("ten"), None), usdc(1), None), Err("ten".into()));
    }

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
    fn a_topped_up_address_is_held_until_its_transfer_is_included() {
        use TxRole::{Cancel, TopUp, Transfer};
        use TxState::{Mined, Rejected, Reverted, Sent};
        let tx = |role, state| crate::transfers::SentTransaction {
            hash: String::new(),
            role,
            sender: String::new(),
            nonce: 0,
            gas_limit: 21_000,
            value: U256::ZERO,
            max_fee_per_gas: 1,
            max_priority_fee_per_gas: 1,
            raw: String::new(),
            state,
            block_number: None,
            block_hash: None,
            fee: None,
            created_at: 0,
        };
        let accepted = TransferStatus::Accepted;
        let submitted = TransferStatus::Submitted;
        let cases = [
            (Route::TopUp, accepted, vec![], false),
            (Route::TopUp, accepted, vec![tx(TopUp, Sent)], true),
            (Route::TopUp, accepted, vec![tx(TopUp, Mined)], true),
            (Route::TopUp, accepted, vec![tx(TopUp, Rejected)], true),
            (Route::TopUp, submitted, vec![tx(TopUp, Mined), tx(Transfer, Sent)], true),
            (
                Route::TopUp,
                submitted,
                vec![tx(TopUp, Mined), tx(Transfer, Rejected), tx(Transfer, Sent)],
                true,
            ),
            (Route::TopUp, submitted, vec![tx(TopUp, Mined), tx(Transfer, Mined)], false),
            (Route::TopUp, submitted, vec![tx(TopUp, Mined), tx(Transfer, Reverted)], false),
            (Route::TopUp, submitted, vec![tx(TopUp, Mined), tx(Transfer, Sent), tx(Cancel, Mined)], false),
            (Route::TopUp, submitted, vec![tx(TopUp, Mined), tx(Transfer, Sent), tx(Cancel, Sent)], true),
            (Route::Omnibus, submitted, vec![tx(Transfer, Sent)], false),
            (Route::Authorization, submitted, vec![tx(Transfer, Sent)], false),
        ];
        for (route, status, transactions, held) in cases {
            let t = Outgoing {
                id: "t".into(),
                organization: "o".into(),
                account_id: "a".into(),
                chain: crate::chain::Chain::EthereumTestnet,
                source_address: "0x1".into(),
                destination_address: "0x2".into(),
                currency_symbol: "TUSD".into(),
                amount: U256::from(1),
                decimals: 6,
                status,
                route,
                key_index: Some(2),
                authorization_nonce: None,
                window_ends_at: None,
                created_at: 0,
                retries: 0,
                retry_at: None,
                transactions: transactions.clone(),
            };
            let states: Vec<_> = transactions.iter().map(|x| (x.role, x.state)).collect();
            assert_eq!(holds_address(&t), held, "{route:?} {status:?} {states:?}");
        }
    }

    #[test]
    fn only_an_active_identity_and_account_sign_and_a_collect_needs_fiat() {
        use AccountStatus::{Active as Open, Closed, Frozen};
        use Status::{Active, PendingOnboarding, Rejected, Suspended, Terminated};
        let cases = [
            (Open, Active, None, None),
            (Open, Active, Some(true), None),
            (Open, Active, Some(false), Some("FIAT_NOT_ENABLED")),
            (Frozen, Active, None, Some("ACCOUNT_NOT_ACTIVE")),
            (Closed, Active, Some(true), Some("ACCOUNT_NOT_ACTIVE")),
            (Frozen, Suspended, None, Some("ACCOUNT_NOT_ACTIVE")),
            (Closed, Terminated, Some(false), Some("ACCOUNT_NOT_ACTIVE")),
            // The identity decides even while the account's derived status lags.
            (Open, Suspended, None, Some("ACCOUNT_NOT_ACTIVE")),
            (Open, Terminated, Some(true), Some("ACCOUNT_NOT_ACTIVE")),
            (Open, PendingOnboarding, None, Some("ACCOUNT_NOT_ACTIVE")),
            (Open, Rejected, None, Some("ACCOUNT_NOT_ACTIVE")),
        ];
        for (account, identity, collect_fiat_enabled, code) in cases {
            let source = Source { account, identity, collect_fiat_enabled };
            assert_eq!(may_sign(source).err().map(|f| f.code), code.map(String::from), "{source:?}");
        }
        let message = may_sign(Source { account: Frozen, identity: Suspended, collect_fiat_enabled: None });
        assert!(message.unwrap_err().message.contains("SUSPENDED"), "the identity's status is named");
    }

    #[test]
    fn amounts_of_different_decimals_compare_on_one_scale() {
        assert_eq!(scale(U256::from(1_500_000), 6), scale(U256::from(1_500_000_000_000_000_000u128), 18));
    }
}
