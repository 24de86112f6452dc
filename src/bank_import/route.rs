//! Where a bank's credit goes, decided from the credit alone and what the
//! platform knows of the account it was credited to: pure, with a table
//! test of every case.

use crate::bank::Credit;

/// The platform's account a credit names, as the import found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creditor {
    /// The file names no account.
    Unnamed,
    /// The platform's receiving account (mint instructions show it).
    Receiving,
    /// The number of an `ACTIVE` virtual account.
    VirtualAccount,
    /// Another account: not one the platform takes wires at.
    Other(String),
}

/// The wing a credit is applied in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Issuance: a wire quoting a mint instruction's memo.
    Mint { memo: String },
    /// The on-ramp: a wire quoting a virtual account's deposit message.
    OnRamp { message: String },
}

/// Where `credit`, credited to `creditor`, goes, or why it goes nowhere:
/// the account is none the platform takes wires at; its remittance names
/// both a memo and a deposit message (which is meant cannot be told);
/// several of one kind; or none. `memo` and `message` read the one memo
/// and the one deposit message among the remittance's words.
pub fn route(
    credit: &Credit,
    creditor: &Creditor,
    memo: impl Fn(&Credit) -> Result<String, String>,
    message: impl Fn(&Credit) -> Result<String, String>,
) -> Result<Route, String> {
    if let Creditor::Other(account) = creditor {
        return Err(format!(
            "credited to account {account}, which is neither the platform's receiving account nor an ACTIVE virtual account's"
        ));
    }
    let several = |why: &String| why.starts_with("several");
    match (memo(credit), message(credit)) {
        (Ok(memo), Ok(message)) => Err(format!(
            "its remittance information names both a memo_id ({memo}) and a deposit message ({message})"
        )),
        (Ok(memo), Err(why)) if !several(&why) => Ok(Route::Mint { memo }),
        (Err(why), Ok(message)) if !several(&why) => Ok(Route::OnRamp { message }),
        (Err(why), _) | (_, Err(why)) if several(&why) => Err(why),
        _ => Err("no memo_id or deposit message in its remittance information".to_string()),
    }
}

/// An account number as banks write it and as it is compared: without
/// spaces, upper case (an IBAN's letters).
pub fn account_key(number: &str) -> String {
    number.chars().filter(|c| !c.is_whitespace()).map(|c| c.to_ascii_uppercase()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{conversions::virtual_account::deposit_message_in, issuance::memo_in};

    const MEMO: &str = "CI0123456789";
    const MESSAGE: &str = "VA0123456789";

    fn credit(remittance: &str) -> Credit {
        Credit {
            reference: "FT-1".into(),
            cents: 25_000,
            currency: "USD".into(),
            remittance: remittance.into(),
            account: None,
        }
    }

    #[test]
    fn each_credit_goes_to_the_one_wing_its_remittance_and_account_name() {
        let mint = || -> Result<Route, &str> { Ok(Route::Mint { memo: MEMO.into() }) };
        let on_ramp = || -> Result<Route, &str> { Ok(Route::OnRamp { message: MESSAGE.into() }) };
        let cases: [(&str, Creditor, Result<Route, &str>); 11] = [
            ("memo, no account named", Creditor::Unnamed, mint()),
            ("memo, the receiving account", Creditor::Receiving, mint()),
            ("message, the receiving account", Creditor::Receiving, on_ramp()),
            ("message, a virtual account", Creditor::VirtualAccount, on_ramp()),
            ("memo, a virtual account", Creditor::VirtualAccount, mint()),
            ("memo, another account", Creditor::Other("DE89 3704".into()), Err("neither the platform's")),
            ("message, another account", Creditor::Other("1".into()), Err("account 1, which is neither")),
            ("both", Creditor::Receiving, Err("names both a memo_id (CI0123456789) and a deposit message")),
            ("neither", Creditor::Unnamed, Err("no memo_id or deposit message")),
            ("two memos", Creditor::Unnamed, Err("several memo_ids")),
            ("two messages", Creditor::Unnamed, Err("several deposit messages")),
        ];
        for (case, creditor, expected) in cases {
            let remittance = match case {
                c if c.starts_with("memo") => format!("INVOICE 7 /REF/{MEMO}"),
                c if c.starts_with("message") => format!("payroll {}", MESSAGE.to_lowercase()),
                "both" => format!("{MEMO} {MESSAGE}"),
                "two memos" => format!("{MEMO} CI0123456780"),
                "two messages" => format!("{MESSAGE} VA0123456780"),
                _ => "invoice 42".to_string(),
            };
            let routed = route(&credit(&remittance), &creditor, memo_in, deposit_message_in);
            match (routed, expected) {
                (Ok(route), Ok(expected)) => assert_eq!(route, expected, "{case}"),
                (Err(why), Err(expected)) => assert!(why.contains(expected), "{case}: {why}"),
                (got, expected) => panic!("{case}: {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn account_numbers_compare_without_spaces_and_in_any_case() {
        assert_eq!(account_key("de89 3704 0044 0532 0130 00"), "DE89370400440532013000");
        assert_eq!(account_key("000123456789"), "000123456789");
    }
}
