//! The pure sums of a reconciliation: the ledger at a height, the signed
//! difference, and what `reconcile` exits with.

use alloy::primitives::{I256, U256};

use super::{Anchor, Debit, Line, Report, Term};
use crate::amount::Amount;

/// The ledger of one asset at the end of block `height`: the anchor's
/// balance plus the terms after its block, up to `height`. Signed: a
/// ledger that sent more than it received says so instead of wrapping.
pub fn ledger_at(anchor: Anchor, terms: &[Term], height: u64) -> I256 {
    terms.iter().filter(|t| t.block > anchor.block && t.block <= height).fold(
        signed(anchor.balance),
        |sum, t| {
            if t.kind.is_credit() { sum + signed(t.amount) } else { sum - signed(t.amount) }
        },
    )
}

/// What the credits a decoder found in `block` add beyond the ledger's own
/// credits there: what a repair would record. A repair records them only
/// when this equals the rise of the difference in that block exactly.
pub fn unrecorded(terms: &[Term], block: u64, decoded: &[U256]) -> I256 {
    let counted = terms
        .iter()
        .filter(|t| t.block == block && t.kind.is_credit())
        .fold(I256::ZERO, |sum, t| sum + signed(t.amount));
    decoded.iter().fold(I256::ZERO, |sum, raw| sum + signed(*raw)) - counted
}

/// `onchain − ledger` at `height`.
pub fn difference(onchain: U256, anchor: Anchor, terms: &[Term], height: u64) -> I256 {
    signed(onchain) - ledger_at(anchor, terms, height)
}

/// A balance as a signed number. Balances are far below 2^255.
pub fn signed(value: U256) -> I256 {
    I256::from_raw(value)
}

/// A signed amount in the asset's unit: `-1.5`, `0`, `2`.
pub fn decimal(value: I256, decimals: u8) -> String {
    let text = Amount::from_raw(value.unsigned_abs(), decimals).to_string();
    if value.is_negative() { format!("-{text}") } else { text }
}

/// 0 when everything agrees, 1 when something differs, 2 when a read
/// failed (what was read is still reported).
pub fn exit_code(report: &Report) -> u8 {
    if !report.failed.is_empty() {
        2
    } else if report.lines.iter().any(|line| line.difference != "0") {
        1
    } else {
        0
    }
}

/// The blocks of `line` where its balance fell by more than its ledger
/// explains: money that left the address without the platform, with the
/// transactions seen leaving it there.
pub fn unexplained_debits(line: &Line) -> Vec<Debit> {
    line.divergent_blocks
        .iter()
        .filter(|d| d.change.starts_with('-'))
        .map(|d| Debit {
            chain: line.chain.clone(),
            address: line.address.clone(),
            asset: line.asset.clone(),
            block: d.block,
            account_id: line.account_id.clone(),
            wallet: line.wallet.clone(),
            change: d.change.clone(),
            transactions: line
                .movements
                .iter()
                .filter(|m| m.block == d.block && m.direction == "out")
                .map(|m| m.transaction_hash.clone())
                .collect(),
        })
        .collect()
}

/// How long a debit by the platform's own unsettled transactions waits
/// for the sender to record them before it is alarmed all the same.
pub const DEFER_AT_MOST: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether a debit waits for a later pass instead of an alarm: every
/// transaction it names is one the platform's senders recorded (before
/// broadcasting it) and whose inclusion they have not recorded yet
/// (`unsettled`), so the ledger does not count it yet; and it has waited
/// (`waited`, since a pass first deferred it) less than [`DEFER_AT_MOST`].
/// A debit naming none, or any other transaction, is alarmed at once.
pub fn deferred(debit: &Debit, unsettled: &[String], waited: std::time::Duration) -> bool {
    !debit.transactions.is_empty()
        && debit.transactions.iter().all(|tx| unsettled.contains(tx))
        && waited < DEFER_AT_MOST
}

/// What missed credits (`raw` amount, decimals, the micro-dollars a whole
/// unit is worth) are worth in micro-dollars, each rounded up so that a
/// repair at the threshold's edge waits for a second operator. `None` when
/// a credit has no price (the chain file gives its asset none): such a
/// repair counts as above any threshold.
pub fn repair_worth(credits: &[(U256, u8, Option<u128>)]) -> Option<u128> {
    credits.iter().try_fold(0u128, |sum, &(raw, decimals, price)| {
        let price = price?;
        let unit = U256::from(10u8).pow(U256::from(decimals));
        let micros = raw.saturating_mul(U256::from(price)).div_ceil(unit);
        Some(sum.saturating_add(u128::try_from(micros).unwrap_or(u128::MAX)))
    })
}

/// Whether a repair worth `worth` waits for a second treasury operator:
/// of no known worth, or above `above_micros` together with what repairs
/// applied by one operator alone recorded on the chain in the last day
/// (`alone`), so that splitting a repair does not get around the threshold.
pub fn needs_second_operator(worth: Option<u128>, alone: u128, above_micros: u128) -> bool {
    worth.is_none_or(|w| w.saturating_add(alone) > above_micros)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::{Baseline, Divergence, Movement, TermKind};

    fn term(block: u64, amount: u64, kind: TermKind) -> Term {
        Term { asset: "ETH".into(), block, amount: U256::from(amount), kind }
    }

    #[test]
    fn the_ledger_counts_the_terms_after_its_anchor_up_to_the_height() {
        let terms = [
            term(5, 7, TermKind::Deposit),
            term(10, 100, TermKind::Deposit),
            term(12, 20, TermKind::Own),
            term(15, 30, TermKind::Sent),
            term(15, 2, TermKind::Fee),
            term(20, 50, TermKind::Deposit),
        ];
        let anchor = Anchor { block: 5, balance: U256::from(1_000) };
        let cases: [(u64, i64); 6] =
            [(5, 1_000), (9, 1_000), (10, 1_100), (12, 1_120), (15, 1_088), (99, 1_138)];
        for (height, ledger) in cases {
            assert_eq!(ledger_at(anchor, &terms, height), I256::try_from(ledger).unwrap(), "at {height}");
        }
        // Before the anchor nothing counts, not even the anchor's own block.
        let late = Anchor { block: 15, balance: U256::from(1_088) };
        assert_eq!(ledger_at(late, &terms, 15), I256::try_from(1_088).unwrap());
        assert_eq!(ledger_at(late, &terms, 20), I256::try_from(1_138).unwrap());
    }

    #[test]
    fn what_a_block_credits_beyond_the_ledger_is_what_a_repair_may_record() {
        let terms = [
            term(10, 100, TermKind::Deposit),
            term(10, 20, TermKind::Own),
            term(10, 3, TermKind::Fee),
            term(11, 50, TermKind::Deposit),
        ];
        let u = |v: &[u64]| v.iter().map(|x| U256::from(*x)).collect::<Vec<_>>();
        let cases: [(u64, Vec<U256>, i64); 5] = [
            // The recorded deposit and top-up, and 11 missed.
            (10, u(&[100, 20, 11]), 11),
            // Nothing missed.
            (10, u(&[100, 20]), 0),
            // A block the ledger holds nothing of.
            (12, u(&[7]), 7),
            // A decoder that finds less than the ledger counts.
            (11, u(&[]), -50),
            // Fees are no credits.
            (10, u(&[120]), 0),
        ];
        for (block, decoded, beyond) in cases {
            assert_eq!(
                unrecorded(&terms, block, &decoded),
                I256::try_from(beyond).unwrap(),
                "{block} {decoded:?}"
            );
        }
    }

    #[test]
    fn more_out_than_in_is_a_negative_ledger_not_a_wrapped_one() {
        let terms = [term(1, 5, TermKind::Sent)];
        let anchor = Anchor { block: 0, balance: U256::ZERO };
        assert_eq!(ledger_at(anchor, &terms, 1), I256::try_from(-5).unwrap());
        assert_eq!(difference(U256::ZERO, anchor, &terms, 1), I256::try_from(5).unwrap());
    }

    #[test]
    fn differences_read_in_the_assets_unit_with_their_sign() {
        let cases: [(i64, u8, &str); 5] = [
            (0, 18, "0"),
            (1_500_000, 6, "1.5"),
            (-1_500_000, 6, "-1.5"),
            (-7, 0, "-7"),
            (1, 18, "0.000000000000000001"),
        ];
        for (raw, decimals, text) in cases {
            assert_eq!(decimal(I256::try_from(raw).unwrap(), decimals), text, "{raw} at {decimals}");
        }
    }

    fn line(difference: &str) -> Line {
        Line {
            chain: "ETHEREUM".into(),
            account_id: Some("a".into()),
            wallet: None,
            address: "0x".into(),
            asset: "ETH".into(),
            at_block: 1,
            onchain: "1".into(),
            ledger: "1".into(),
            difference: difference.into(),
            divergent_block: None,
            divergent_blocks: vec![],
            baseline: Baseline::Archive,
            movements: vec![],
            reads: 0,
        }
    }

    #[test]
    fn a_failed_read_outranks_a_difference_which_outranks_agreement() {
        let report = |lines: Vec<Line>, failed: Vec<String>| Report { lines, failed, ..Report::default() };
        let cases = [
            (report(vec![line("0"), line("0")], vec![]), 0),
            (report(vec![], vec![]), 0),
            (report(vec![line("0"), line("-1")], vec![]), 1),
            (report(vec![line("0")], vec!["balance".into()]), 2),
            (report(vec![line("3")], vec!["balance".into()]), 2),
        ];
        for (report, code) in cases {
            assert_eq!(exit_code(&report), code, "{report:?}");
        }
    }

    #[test]
    fn only_a_fall_the_ledger_does_not_explain_is_an_unexplained_debit() {
        let moved = |block: u64, direction: &'static str, hash: &str| Movement {
            transaction_hash: hash.into(),
            block,
            direction,
            amount: "1".into(),
            how: "top_level",
        };
        let mut missed_then_swept = line("0");
        missed_then_swept.divergent_blocks =
            vec![Divergence { block: 5, change: "2".into() }, Divergence { block: 9, change: "-2".into() }];
        missed_then_swept.movements =
            vec![moved(5, "in", "0xin"), moved(9, "out", "0xout"), moved(9, "in", "0xx")];
        let mut credit_only = line("3");
        credit_only.divergent_blocks = vec![Divergence { block: 4, change: "3".into() }];
        type Found = Vec<(u64, &'static str, Vec<&'static str>)>;
        let cases: [(&str, Line, Found); 3] = [
            ("agreement", line("0"), vec![]),
            ("a missed credit", credit_only, vec![]),
            ("a missed credit swept out later", missed_then_swept, vec![(9, "-2", vec!["0xout"])]),
        ];
        for (what, line, expected) in cases {
            let found: Vec<(u64, String, Vec<String>)> =
                unexplained_debits(&line).into_iter().map(|d| (d.block, d.change, d.transactions)).collect();
            let expected: Vec<(u64, String, Vec<String>)> = expected
                .into_iter()
                .map(|(b, c, t)| (b, c.to_string(), t.into_iter().map(String::from).collect()))
                .collect();
            assert_eq!(found, expected, "{what}");
        }
    }
    #[test]
    fn a_repair_is_worth_its_credits_in_dollars_rounded_up() {
        let eth = |wei: u64| (U256::from(wei), 18u8, Some(3_000_000_000u128)); // 3,000 USD an ether
        let usdc = |raw: u64| (U256::from(raw), 6u8, Some(1_000_000u128));
        let wbtc = |raw: u64| (U256::from(raw), 8u8, None);
        for (credits, worth, why) in [
            (vec![usdc(2_500_000)], Some(2_500_000), "a dollar stablecoin"),
            (vec![eth(1_000_000_000_000_000_000)], Some(3_000_000_000), "one ether"),
            (vec![eth(1)], Some(1), "one wei is worth a micro-dollar, rounded up"),
            (vec![wbtc(1), usdc(1)], None, "a token with no price: no known worth"),
            (vec![usdc(1), usdc(2)], Some(3), "summed"),
            (vec![], Some(0), "nothing"),
            (vec![(U256::MAX, 0, Some(1))], Some(u128::MAX), "saturates, never wraps"),
        ] {
            assert_eq!(repair_worth(&credits), worth, "{why}");
        }
        let above = 10_000_000_000u128; // 10,000 USD
        for (worth, alone, second, why) in [
            (Some(above), 0, false, "at the threshold: one operator"),
            (Some(above + 1), 0, true, "above it: a second"),
            (None, 0, true, "of no known worth: a second"),
            (Some(0), 0, false, "nothing"),
            (Some(1), above, true, "split: the day's repairs by one operator count"),
            (Some(above / 2), above / 2, false, "together at the threshold"),
            (Some(1), u128::MAX, true, "saturates"),
        ] {
            assert_eq!(needs_second_operator(worth, alone, above), second, "{why}");
        }
    }

    #[test]
    fn a_debit_waits_only_while_every_transaction_it_names_is_the_platforms() {
        let debit = |transactions: &[&str]| Debit {
            chain: "solana-devnet".into(),
            address: "alice".into(),
            asset: "SOL".into(),
            block: 7,
            account_id: Some("alice".into()),
            wallet: None,
            change: "-0.1".into(),
            transactions: transactions.iter().map(|t| t.to_string()).collect(),
        };
        let unsettled = vec!["ours-1".to_string(), "ours-2".to_string()];
        let (fresh, long) = (std::time::Duration::ZERO, DEFER_AT_MOST);
        let cases: Vec<(&str, Vec<&str>, std::time::Duration, bool)> = vec![
            ("the platform's transfer not settled yet", vec!["ours-1"], fresh, true),
            ("two of the platform's", vec!["ours-1", "ours-2"], fresh, true),
            ("waited too long: alarmed all the same", vec!["ours-1"], long, false),
            ("the platform's beside a stranger's", vec!["ours-1", "theirs"], fresh, false),
            ("a stranger's (or a settled one of the platform's)", vec!["theirs"], fresh, false),
            ("none named", vec![], fresh, false),
        ];
        for (what, transactions, waited, waits) in cases {
            assert_eq!(deferred(&debit(&transactions), &unsettled, waited), waits, "{what}");
        }
    }
}
