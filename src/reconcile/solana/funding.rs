//! A Solana platform wallet's funding: in a slot where its balance rose by
//! more than its ledger explains, the transactions from outside the
//! platform that credited it, when they name that rise exactly (otherwise
//! nothing is recorded and the difference stays reported).

use alloy::primitives::{I256, U256};

use super::Moved;
use crate::{reconcile::locate::Change, store::reconcile_wallets::Funding};

/// The position a Solana funding row names: the wallet's balance change
/// of the asset in the transaction (one transaction may fund several
/// wallets, or one in several assets).
fn position(address: &str, asset: &str) -> String {
    format!("balance_change:{address}:{asset}")
}

/// The transactions that credited the wallet, to ask which are the
/// platform's.
pub(super) fn credits(moved: &[Moved]) -> Vec<String> {
    moved.iter().filter(|m| m.change > 0).map(|m| m.signature.clone()).collect()
}

/// For each slot where the difference rose, the credits of transactions
/// not in `own` when they sum to the rise exactly, as funding of `asset`.
pub(super) fn outside(
    changes: &[Change],
    moved: &[Moved],
    own: &[String],
    (address, asset): (&str, &str),
) -> Vec<Funding> {
    let mut found = Vec::new();
    for change in changes.iter().filter(|c| c.by.is_positive()) {
        let credits: Vec<&Moved> = moved
            .iter()
            .filter(|m| m.slot == change.block && m.change > 0 && !own.contains(&m.signature))
            .collect();
        let sum =
            credits.iter().fold(I256::ZERO, |sum, m| sum + I256::try_from(m.change).unwrap_or(I256::MAX));
        if sum != change.by {
            continue;
        }
        found.extend(credits.into_iter().map(|m| Funding {
            tx_hash: m.signature.clone(),
            position: position(address, asset),
            asset: asset.to_string(),
            block: m.slot,
            amount: U256::from(m.change.unsigned_abs()),
        }));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(signature: &str, slot: u64, change: i128) -> Moved {
        Moved { signature: signature.into(), slot, change }
    }

    fn change(block: u64, by: i64) -> Change {
        Change { block, by: I256::try_from(by).unwrap() }
    }

    #[test]
    fn only_outside_credits_that_name_a_rise_exactly_are_funding() {
        let own = vec!["own".to_string()];
        type Case<'a> = (&'a str, Vec<Change>, Vec<Moved>, Vec<(&'a str, u64)>);
        let cases: [Case; 6] = [
            ("one credit, the rise", vec![change(5, 100)], vec![moved("a", 5, 100)], vec![("a", 100)]),
            (
                "two credits summing to it",
                vec![change(5, 100)],
                vec![moved("a", 5, 60), moved("b", 5, 40)],
                vec![("a", 60), ("b", 40)],
            ),
            ("less than the rise", vec![change(5, 100)], vec![moved("a", 5, 60)], vec![]),
            ("the platform's own credit", vec![change(5, 100)], vec![moved("own", 5, 100)], vec![]),
            ("a fall is no funding", vec![change(5, -100)], vec![moved("a", 5, -100)], vec![]),
            ("another slot's credit", vec![change(5, 100)], vec![moved("a", 6, 100)], vec![]),
        ];
        for (what, changes, moved, expected) in cases {
            let found = outside(&changes, &moved, &own, ("Sp0nsor", "SOL"));
            let got: Vec<(&str, u64)> =
                found.iter().map(|f| (f.tx_hash.as_str(), f.amount.to::<u64>())).collect();
            assert_eq!(got, expected, "{what}");
            assert!(
                found
                    .iter()
                    .all(|f| f.asset == "SOL" && f.position == "balance_change:Sp0nsor:SOL" && f.block == 5),
                "{what}"
            );
        }
    }

    #[test]
    fn the_credits_asked_about_are_the_rising_ones() {
        let all = [moved("in", 5, 3), moved("out", 5, -3), moved("none", 6, 0)];
        assert_eq!(credits(&all), ["in"]);
    }
}
