//! Issuance: dollars wired to the platform become stablecoins minted on
//! chain to a client's address.
//!
//! A client registers its identity's bank accounts and asks for mint
//! instructions: the platform's receiving bank and a `memo_id` naming the
//! instruction. A wire that arrives quoting the memo is minted as the
//! instruction's stablecoin to the address it names. Bank details are
//! checked as a bank would ([`bank`]); only an `ACTIVE`, fiat-enabled
//! identity may register them or ask for instructions.

pub mod bank;
pub mod decimals;
pub mod deploy;
pub mod logged;
pub mod onchain;
pub mod receiving;
pub mod reconcile;
pub mod requested;
pub mod resource;
pub mod returns;
pub mod rows;
pub mod state;
pub mod supply;
pub mod wires;
mod worker;

pub use resource::{BankAccount, FIAT_CURRENCY, MINT_UPDATE, Mint, MintInstruction, PAYMENT_RAIL};
pub use worker::{settle_due, settle_once, start_mints};

use crate::{
    amount::Cents,
    identity::{Identity, Status},
};

/// Why an identity may not start fiat operations now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Not `ACTIVE` (checked first): `ACCOUNT_NOT_ACTIVE`.
    NotActive(Status),
    /// `ACTIVE` without the fiat entitlement: `FIAT_NOT_ENABLED`.
    FiatNotEnabled,
}

/// Whether `identity` may register a bank account or a mint instruction.
pub fn gate(identity: &Identity) -> Result<(), Gate> {
    gate_of(identity.status, identity.fiat_operations_enabled)
}

/// Whether an identity in `status`, fiat-enabled or not, may start fiat
/// operations (a wire arriving for it included).
pub fn gate_of(status: Status, fiat_operations_enabled: bool) -> Result<(), Gate> {
    if status != Status::Active {
        return Err(Gate::NotActive(status));
    }
    if !fiat_operations_enabled {
        return Err(Gate::FiatNotEnabled);
    }
    Ok(())
}

/// When a settled wire's mint waits for a second operator's approval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approval {
    /// Every mint (`production`).
    pub always: bool,
    /// Per chain and stablecoin, the cents a UTC day's mints may reach
    /// without approval.
    pub daily_caps: std::collections::BTreeMap<(crate::chain::Chain, String), i64>,
}

impl Approval {
    /// Every mint when `always`, else above the issued assets' `daily_mint_cap`.
    pub fn new(always: bool, chains: &crate::config::Chains) -> Self {
        let daily_caps = chains
            .iter()
            .flat_map(|c| c.assets.iter().map(move |a| (c.chain, a)))
            .filter_map(|(chain, a)| {
                let cap = Cents::parse(a.daily_mint_cap.as_deref()?).ok()?.0;
                Some(((chain, a.symbol.clone()), cap))
            })
            .collect();
        Self { always, daily_caps }
    }

    /// The cap of `symbol` on `chain`, if any.
    pub fn cap(&self, chain: crate::chain::Chain, symbol: &str) -> Option<i64> {
        self.daily_caps.get(&(chain, symbol.to_string())).copied()
    }

    /// Whether a mint of `cents`, after `today` cents minted (or minting)
    /// this UTC day, waits for approval.
    pub fn needed(&self, cap: Option<i64>, today: i64, cents: i64) -> bool {
        self.always || cap.is_some_and(|cap| today.saturating_add(cents) > cap)
    }
}

/// Crockford's base 32, the alphabet of memos and deposit messages.
pub const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// The prefix of every `memo_id`.
pub const MEMO_PREFIX: &str = "CI";

/// A new `memo_id`: `CI` and 10 characters of Crockford's base 32 (50
/// random bits), short enough to type into a wire's memo and free of
/// letters read alike (no I, L, O, U).
pub fn new_memo_id() -> String {
    let mut bytes = [0u8; 10];
    getrandom::fill(&mut bytes).expect("a random source");
    let body: String = bytes.iter().map(|b| ALPHABET[usize::from(b % 32)] as char).collect();
    format!("{MEMO_PREFIX}{body}")
}

/// A bank's wire reference as it is kept and looked up: without the
/// whitespace around and inside it, upper-case. The same wire typed again
/// in another case or with stray spaces is the same wire.
pub fn normalize_reference(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).map(|c| c.to_ascii_uppercase()).collect()
}

/// A `memo_id` as a bank may pass it on (lower case, spaced, dashed, or
/// with the letters Crockford's base 32 reads as digits: I and L as 1, O
/// as 0), back in the form it was issued in.
pub fn normalize_memo(text: &str) -> String {
    let cleaned: String =
        text.chars().filter(|c| !c.is_whitespace() && *c != '-').map(|c| c.to_ascii_uppercase()).collect();
    let Some(body) = cleaned
        .strip_prefix("CI")
        .or_else(|| cleaned.strip_prefix("C1"))
        .or_else(|| cleaned.strip_prefix("CL"))
    else {
        return cleaned;
    };
    let body: String = body
        .chars()
        .map(|c| match c {
            'I' | 'L' => '1',
            'O' => '0',
            c => c,
        })
        .collect();
    format!("{MEMO_PREFIX}{body}")
}

/// Whether `text` has the shape of a reference issued with `prefix`:
/// the prefix and 10 characters of Crockford's base 32.
pub fn is_issued(text: &str, prefix: &str) -> bool {
    text.len() == prefix.len() + 10
        && text.starts_with(prefix)
        && text.bytes().skip(prefix.len()).all(|b| ALPHABET.contains(&b))
}

/// The memos a wire's remittance information carries (a bank's
/// notification of it): the words that are one once normalized.
pub fn memo_in(credit: &crate::bank::Credit) -> crate::bank::Found {
    credit.find(|w| Some(normalize_memo(w)).filter(|m| is_issued(m, MEMO_PREFIX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wire_reference_typed_again_in_another_case_or_spacing_is_the_same() {
        for typed in ["FED-20261123-0001", "fed-20261123-0001", " FED-20261123-0001\n", "FED- 20261123-0001"]
        {
            assert_eq!(normalize_reference(typed), "FED-20261123-0001", "{typed:?}");
        }
        assert_ne!(normalize_reference("FED-1"), normalize_reference("FED1"), "dashes are part of it");
    }

    #[test]
    fn memos_read_back_as_issued() {
        for (given, memo) in [
            ("CI7K3M9QX2TB", "CI7K3M9QX2TB"),
            ("ci7k3m9qx2tb", "CI7K3M9QX2TB"),
            (" CI 7K3M-9QX2 TB ", "CI7K3M9QX2TB"),
            ("C17K3M9QX2TB", "CI7K3M9QX2TB"),
            ("CI7K3M9QX2TL", "CI7K3M9QX2T1"),
            ("CIO0I1L", "CI00111"),
            ("REF-1", "REF1"),
        ] {
            assert_eq!(normalize_memo(given), memo, "{given}");
        }
        let memo = new_memo_id();
        assert_eq!(normalize_memo(&memo.to_lowercase()), memo, "an issued memo survives");
    }

    #[test]
    fn approval_is_always_needed_in_production_and_above_the_daily_cap() {
        let sandbox = Approval::default();
        let production = Approval { always: true, ..Approval::default() };
        for (approval, cap, today, cents, needed) in [
            (&sandbox, None, 0, 1, false),
            (&sandbox, None, i64::MAX, 1, false),
            (&sandbox, Some(100_000), 0, 100_000, false),
            (&sandbox, Some(100_000), 99_999, 1, false),
            (&sandbox, Some(100_000), 99_999, 2, true),
            (&sandbox, Some(100_000), 0, 100_001, true),
            (&sandbox, Some(100_000), i64::MAX, 1, true),
            (&production, None, 0, 1, true),
            (&production, Some(100_000), 0, 1, true),
        ] {
            assert_eq!(approval.needed(cap, today, cents), needed, "{cap:?} {today} {cents}");
        }
    }

    #[test]
    fn memo_ids_are_short_distinct_and_unambiguous() {
        let memos: std::collections::BTreeSet<String> = (0..1000).map(|_| new_memo_id()).collect();
        assert_eq!(memos.len(), 1000);
        for memo in &memos {
            assert_eq!(memo.len(), 12);
            assert!(memo.starts_with("CI"));
            assert!(!memo[2..].contains(['I', 'L', 'O', 'U']), "{memo}");
        }
    }

    #[test]
    fn a_memo_is_found_in_remittance_information_as_banks_pass_it_on() {
        let credit = |remittance: &str| crate::bank::Credit {
            reference: "R".into(),
            cents: 1,
            currency: "USD".into(),
            remittance: remittance.into(),
            account: None,
        };
        for (remittance, memo) in [
            ("CI7K3M9QX2TB", Some("CI7K3M9QX2TB")),
            ("invoice 42 ci7k3m9qx2tb thanks", Some("CI7K3M9QX2TB")),
            ("REF:CI-7K3M-9QX2-TB/ACME", Some("CI7K3M9QX2TB")),
            ("CI 7K3M 9QX2 TB", Some("CI7K3M9QX2TB")),
            ("C17K3M9QX2TL", Some("CI7K3M9QX2T1")),
            ("invoice 42", None),
            ("CI7K3M9QX2T", None),
            ("CI7K3M9QX2TBB", None),
            ("VA7K3M9QX2TB", None),
            ("", None),
            ("CI7K3M9QX2TB ci7k3m9qx2tb", Some("CI7K3M9QX2TB")),
            ("CI7K3M9QX2TB CI0000000000", None),
        ] {
            let one = match memo_in(&credit(remittance)) {
                crate::bank::Found::One(one) => Some(one),
                _ => None,
            };
            assert_eq!(one.as_deref(), memo, "{remittance:?}");
        }
        let several = memo_in(&credit("CI7K3M9QX2TB CI0000000000"));
        assert_eq!(several, crate::bank::Found::Several("CI0000000000".into(), "CI7K3M9QX2TB".into()));
        assert_eq!(memo_in(&credit("invoice 42")), crate::bank::Found::Nothing);
    }
}
