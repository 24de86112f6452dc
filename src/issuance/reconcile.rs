//! `issuance reconcile`: per chain and stablecoin, the books must balance.
//!
//! - **Fiat**: the dollars the bank credited = what confirmed mint
//!   transactions minted + what failed mints owe back + what is still on
//!   its way (waiting for approval, or minting with nothing confirmed).
//!   Each side comes from another record: the fiat from the mint's status,
//!   the minted amount from the chain (its transfer `CONFIRMED`, or its
//!   deposit `CONFIRMED`), so a mint whose status and chain disagree shows.
//! - **Supply**: what confirmed mint transactions minted, less what was
//!   burned (nothing yet), is the stablecoin's supply on chain since its
//!   first mint (it is deployed with none), give or take the mint
//!   transactions still being sent.
//!
//! - **Decimals**: the contract's (the mint's) are what amounts mean. A
//!   chain file that says otherwise is a difference, and the books are
//!   balanced with the contract's: a file wrong about them would mint
//!   another amount than the wire, and balancing with its number would hide
//!   that on both sides.
//!
//! - **People**: each mint's recorder and approver are in the audit log
//!   (see [`super::logged`]).
//!
//! Pure but for [`books`]: the store reads the rows, the caller what the
//! chain says.

use alloy::primitives::U256;
use serde::Serialize;

use super::{rows::MintRow, state::Status, supply::OnChain};
use crate::amount::Cents;
use crate::{amount::Amount, chain::Chain};

impl MintRow {
    /// Whether the bank credited its dollars, they are owed back, or they
    /// are on their way (nothing confirmed minted yet).
    fn fiat(&self) -> (bool, bool, bool) {
        // Credited: settled, unless it failed with nothing owed (the bank
        // rejected or returned the wire).
        let got = match self.status {
            Status::Received => false,
            Status::Failed => self.fiat_owed,
            _ => true,
        };
        let owed = self.status == Status::Failed && self.fiat_owed;
        let waiting =
            matches!(self.status, Status::AwaitingApproval | Status::Minting) && self.minted.is_none();
        (got, owed, waiting)
    }

    /// The fee it kept: its fee once something was minted, else nothing
    /// (a failed mint owes the whole wire back).
    fn fee_kept(&self) -> i64 {
        if self.minted.is_some() { self.fee_cents } else { 0 }
    }

    /// Whether its dollars received (in a stablecoin of `decimals`) are
    /// what it minted and kept as a fee, owes back or has on its way.
    pub fn balances(&self, decimals: u8) -> bool {
        let scale = U256::from(10u8).pow(U256::from(decimals.saturating_sub(2)));
        let units = |cents: i64| U256::from(cents.max(0) as u64) * scale;
        let (got, owed, waiting) = self.fiat();
        let left = if got { units(self.cents) } else { U256::ZERO };
        let pending = if owed || waiting { units(self.cents) } else { U256::ZERO };
        left == self.minted.unwrap_or_default() + units(self.fee_kept()) + pending
    }
}

/// The books of one stablecoin on one chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Books {
    pub chain: Chain,
    pub stablecoin_symbol: String,
    /// USD, as the bank credited it.
    pub fiat_received: String,
    /// Stablecoin major units minted by confirmed mint transactions.
    pub minted: String,
    /// USD kept as on-ramp fees by the mints that minted.
    pub fees: String,
    pub fiat_returned: String,
    pub fiat_in_flight: String,
    /// Stablecoin major units in mint transactions being sent.
    pub being_sent: String,
    /// The supply on chain, major units; `None` when it could not be read.
    pub supply: Option<String>,
    pub agrees: bool,
    pub differences: Vec<Difference>,
}

/// A difference, and the mints that explain it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub message: String,
    pub mints: Vec<String>,
}

/// The books of every issued stablecoin of `chains` (of `chain`, if given)
/// and of every chain and stablecoin the store's mints name, each balanced
/// against the supply read from the chain.
pub async fn books(
    store: &crate::store::Store,
    chain: Option<Chain>,
    chains: &crate::config::Chains,
) -> Result<Vec<Books>, crate::store::StoreError> {
    let rows = store.mint_books(chain).await?;
    let mut books = Vec::new();
    for config in chains.iter().filter(|c| chain.is_none_or(|only| only == c.chain)) {
        for asset in config.assets.iter().filter(|a| a.issued) {
            let mine: Vec<MintRow> = rows
                .iter()
                .filter(|r| r.chain == config.chain && r.symbol == asset.symbol)
                .cloned()
                .collect();
            let supply = super::supply::supply(config, asset).await;
            books.push(reconcile(config.chain, &asset.symbol, asset.decimals, &mine, supply));
        }
    }
    // Mints of a stablecoin no chain file issues cannot be balanced.
    let mut unlisted: Vec<&MintRow> = rows
        .iter()
        .filter(|r| !books.iter().any(|b| b.chain == r.chain && b.stablecoin_symbol == r.symbol))
        .collect();
    unlisted.dedup_by(|a, b| a.chain == b.chain && a.symbol == b.symbol);
    for row in unlisted {
        let mine: Vec<MintRow> =
            rows.iter().filter(|r| r.chain == row.chain && r.symbol == row.symbol).cloned().collect();
        let missing = Err(format!("no chain file lists {} on {} as issued", row.symbol, row.chain));
        books.push(reconcile(row.chain, &row.symbol, 2, &mine, missing));
    }
    // Mints whose people the audit log does not hold.
    for (mint, why) in super::logged::unlogged(store, chain).await? {
        let book = books.iter_mut().find(|b| b.chain == mint.chain && b.stablecoin_symbol == mint.symbol);
        if let Some(book) = book {
            let message = format!("mint {}: {why}", mint.id);
            book.differences.push(Difference { message, mints: vec![mint.id] });
            book.agrees = false;
        }
    }
    Ok(books)
}

/// Balances `rows` (all of one chain and stablecoin, which the chain file
/// says has `decimals`) against what the chain says of the stablecoin (its
/// supply in the smallest unit and its decimals), or the error that kept
/// it from being read.
pub fn reconcile(
    chain: Chain,
    symbol: &str,
    decimals: u8,
    rows: &[MintRow],
    on_chain: Result<OnChain, String>,
) -> Books {
    let mut differences = Vec::new();
    let decimals = kept_in(chain, symbol, decimals, &on_chain, &mut differences);
    let supply = on_chain.map(|read| read.supply);
    let (mut received, mut returned, mut in_flight, mut fees) = (0i64, 0i64, 0i64, 0i64);
    let (mut minted, mut sending) = (U256::ZERO, U256::ZERO);
    let mut unbalanced = Vec::new();
    for row in rows {
        let (got, owed, waiting) = row.fiat();
        received += if got { row.cents } else { 0 };
        returned += if owed { row.cents } else { 0 };
        in_flight += if waiting { row.cents } else { 0 };
        fees += row.fee_kept();
        minted += row.minted.unwrap_or_default();
        sending += row.sending.unwrap_or_default();
        if !row.balances(decimals) {
            unbalanced.push(row.id.clone());
        }
    }
    let major = |raw: U256| Amount::from_raw(raw, decimals).to_string();
    if !unbalanced.is_empty() {
        differences.push(Difference {
            message: format!(
                "fiat received {} USD is not minted {} + fees {} USD + returned {} USD + in flight {} USD",
                Cents(received),
                major(minted),
                Cents(fees),
                Cents(returned),
                Cents(in_flight)
            ),
            mints: unbalanced,
        });
    }
    let supply = supply_read(rows, supply, (minted, sending), decimals, &mut differences);
    Books {
        chain,
        stablecoin_symbol: symbol.to_string(),
        fiat_received: Cents(received).to_string(),
        minted: major(minted),
        fees: Cents(fees).to_string(),
        fiat_returned: Cents(returned).to_string(),
        fiat_in_flight: Cents(in_flight).to_string(),
        being_sent: major(sending),
        supply,
        agrees: differences.is_empty(),
        differences,
    }
}

/// The decimals the books are kept in: the contract's, said as a
/// difference when the chain file says otherwise.
fn kept_in(
    chain: Chain,
    symbol: &str,
    decimals: u8,
    on_chain: &Result<OnChain, String>,
    differences: &mut Vec<Difference>,
) -> u8 {
    match on_chain {
        Ok(read) if read.decimals != decimals => {
            differences.push(Difference {
                message: format!(
                    "the chain file says {symbol} has {decimals} decimals, and the contract on {chain} has {}: \
                     the books are balanced with the contract's; correct the chain file",
                    read.decimals
                ),
                mints: vec![],
            });
            read.decimals
        }
        _ => decimals,
    }
}

/// The supply read, in the major unit, checked against what confirmed
/// mints minted and what is being sent; a difference when it is outside
/// that, or unread.
fn supply_read(
    rows: &[MintRow],
    supply: Result<U256, String>,
    (minted, sending): (U256, U256),
    decimals: u8,
    differences: &mut Vec<Difference>,
) -> Option<String> {
    let major = |raw: U256| Amount::from_raw(raw, decimals).to_string();
    match supply {
        Ok(supply) => {
            if supply < minted || supply > minted + sending {
                let mints = rows.iter().filter(|r| r.sending.is_some()).map(|r| r.id.clone()).collect();
                differences.push(Difference {
                    message: format!(
                        "the supply on chain {} is not what confirmed mints minted {} (burned 0, being sent {})",
                        major(supply),
                        major(minted),
                        major(sending)
                    ),
                    mints,
                });
            }
            Some(major(supply))
        }
        Err(error) => {
            differences
                .push(Difference { message: format!("cannot read the supply: {error}"), mints: vec![] });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: U256 = U256::from_limbs([1_000_000, 0, 0, 0]);

    fn row(
        id: &str,
        cents: i64,
        status: Status,
        owed: bool,
        minted: Option<u64>,
        sending: Option<u64>,
    ) -> MintRow {
        MintRow {
            id: id.into(),
            chain: Chain::EthereumTestnet,
            symbol: "USDC".into(),
            cents,
            fee_cents: 0,
            status,
            fiat_owed: owed,
            minted: minted.map(U256::from),
            sending: sending.map(U256::from),
        }
    }

    fn books(rows: &[MintRow], supply: u64) -> Books {
        reconcile(
            Chain::EthereumTestnet,
            "USDC",
            6,
            rows,
            Ok(OnChain { supply: U256::from(supply), decimals: 6 }),
        )
    }

    /// Every status as the books count it; the rows that balance and the
    /// ones that do not.
    #[test]
    fn each_mint_balances_by_its_status_and_its_chain_record() {
        use Status as S;
        let cases: &[(MintRow, bool)] = &[
            (row("received", 100, S::Received, false, None, None), true),
            (row("approval", 100, S::AwaitingApproval, false, None, None), true),
            (row("minting", 100, S::Minting, false, None, Some(1_000_000)), true),
            (row("minted", 100, S::Minted, false, Some(1_000_000), None), true),
            (row("completed", 100, S::Completed, false, Some(1_000_000), None), true),
            (row("rejected", 100, S::Failed, false, None, None), true),
            (row("owed", 100, S::Failed, true, None, None), true),
            // Minted without a confirmed transaction, failed but minted,
            // minted another amount, minted though the bank never credited.
            (row("unbacked", 100, S::Completed, false, None, None), false),
            (row("double", 100, S::Failed, true, Some(1_000_000), None), false),
            (row("short", 100, S::Minted, false, Some(999_999), None), false),
            (row("uncredited", 100, S::Received, false, Some(1_000_000), None), false),
        ];
        for (row, balances) in cases {
            let minted = row.minted.unwrap_or_default().to::<u64>();
            let books = books(std::slice::from_ref(row), minted);
            assert_eq!(books.agrees, *balances, "{}: {books:?}", row.id);
            let named = books.differences.iter().any(|d| d.mints.contains(&row.id));
            assert_eq!(named, !balances, "{}: {books:?}", row.id);
        }
    }

    #[test]
    fn the_fiat_equation_in_dollars() {
        use Status as S;
        let rows = [
            row("a", 25_000, S::Completed, false, Some(250 * M.to::<u64>()), None),
            row("b", 1_050, S::Failed, true, None, None),
            row("c", 199, S::Minting, false, None, Some(1_990_000)),
        ];
        let books = books(&rows, 250_000_000);
        assert!(books.agrees, "{books:?}");
        assert_eq!(
            (books.fiat_received.as_str(), books.minted.as_str(), books.fiat_returned.as_str()),
            ("262.49", "250", "10.50")
        );
        assert_eq!((books.fiat_in_flight.as_str(), books.being_sent.as_str()), ("1.99", "1.99"));
    }

    #[test]
    fn an_on_ramp_fee_is_kept_once_minted_and_owed_back_with_the_wire_when_not() {
        use Status as S;
        let fee = |mut row: MintRow| {
            row.fee_cents = 150;
            row
        };
        let minted = fee(row("minted", 10_000, S::Completed, false, Some(98_500_000), None));
        let failed = fee(row("failed", 10_000, S::Failed, true, None, None));
        let kept_too_much = fee(row("short", 10_000, S::Completed, false, Some(98_000_000), None));
        assert!(minted.balances(6) && failed.balances(6) && !kept_too_much.balances(6));
        let books = books(&[minted, failed], 98_500_000);
        assert!(books.agrees, "{books:?}");
        assert_eq!(
            (
                books.fiat_received.as_str(),
                books.minted.as_str(),
                books.fees.as_str(),
                books.fiat_returned.as_str()
            ),
            ("200.00", "98.5", "1.50", "100.00")
        );
    }

    #[test]
    fn the_supply_must_be_what_confirmed_mints_minted_give_or_take_those_being_sent() {
        use Status as S;
        let rows = [
            row("done", 100, S::Completed, false, Some(1_000_000), None),
            row("sending", 200, S::Minting, false, None, Some(2_000_000)),
        ];
        for (supply, agrees) in [(1_000_000, true), (3_000_000, true), (999_999, false), (3_000_001, false)] {
            let books = books(&rows, supply);
            assert_eq!(books.agrees, agrees, "{supply}: {books:?}");
            if !agrees {
                assert!(books.differences[0].message.contains("supply on chain"), "{books:?}");
                assert_eq!(books.differences[0].mints, ["sending"]);
            }
        }
        let unread = reconcile(Chain::EthereumTestnet, "USDC", 6, &rows, Err("connection refused".into()));
        assert!(!unread.agrees && unread.supply.is_none());
        assert!(unread.differences[0].message.contains("connection refused"));
    }

    /// A chain file saying 18 decimals for a 6-decimal contract minted
    /// 10^12 times the wire: its own number made both sides agree.
    #[test]
    fn the_contracts_decimals_balance_the_books_not_the_chain_files() {
        // 100 USD minted with 18 decimals.
        let minted = U256::from(100u64) * U256::from(10u64).pow(U256::from(18u64));
        let rows =
            [MintRow { minted: Some(minted), ..row("wrong", 10_000, Status::Completed, false, None, None) }];
        let file = reconcile(
            Chain::EthereumTestnet,
            "USDC",
            18,
            &rows,
            Ok(OnChain { supply: minted, decimals: 18 }),
        );
        assert!(file.agrees, "with the file's number alone the books agree: {file:?}");
        let read =
            reconcile(Chain::EthereumTestnet, "USDC", 18, &rows, Ok(OnChain { supply: minted, decimals: 6 }));
        assert!(!read.agrees, "{read:?}");
        assert!(read.differences[0].message.contains("says USDC has 18 decimals"), "{read:?}");
        assert!(read.differences[0].message.contains("has 6"), "{read:?}");
        assert_eq!(read.differences[1].mints, ["wrong"], "the mint that minted too much");
    }
}
