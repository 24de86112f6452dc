//! Where a bank's credit goes, decided from what its remittance names and
//! what the platform knows of the account it was credited to: pure, with a
//! table test of every case.

use crate::bank::Found;

/// The platform's account a credit names, as the import found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creditor {
    /// The file names no account.
    Unnamed,
    /// The platform's receiving account (mint instructions show it).
    Receiving,
    /// The number of the `ACTIVE` virtual account of this id.
    VirtualAccount(String),
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

/// Where a credit to `creditor` whose remittance names `memo` and
/// `message` goes, or why it goes nowhere: the account is none the
/// platform takes wires at; a memo credited to a virtual account's number
/// (a mint's wire goes to the receiving account); both a memo and a
/// deposit message (which is meant cannot be told); several of a kind; or
/// none. Whether a deposit message credited to a virtual account's number
/// is that account's is the flow's to check, once it knows the message's
/// account.
pub fn route(creditor: &Creditor, memo: Found, message: Found) -> Result<Route, String> {
    if let Creditor::Other(account) = creditor {
        return Err(format!(
            "credited to account {account}, which is neither the platform's receiving account nor an ACTIVE virtual account's"
        ));
    }
    match (memo, message) {
        (Found::Several(one, other), _) => {
            Err(format!("several memo_ids in its remittance information ({one}, {other})"))
        }
        (_, Found::Several(one, other)) => {
            Err(format!("several deposit messages in its remittance information ({one}, {other})"))
        }
        (Found::One(memo), Found::One(message)) => Err(format!(
            "its remittance information names both a memo_id ({memo}) and a deposit message ({message})"
        )),
        (Found::One(memo), Found::Nothing) => match creditor {
            Creditor::VirtualAccount(id) => Err(format!(
                "credited to virtual account {id}'s number but quoting memo_id {memo}: a mint's wire goes to the receiving account"
            )),
            _ => Ok(Route::Mint { memo }),
        },
        (Found::Nothing, Found::One(message)) => Ok(Route::OnRamp { message }),
        (Found::Nothing, Found::Nothing) => {
            Err("no memo_id or deposit message in its remittance information".to_string())
        }
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
    use crate::{bank::Credit, conversions::virtual_account::deposit_message_in, issuance::memo_in};

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
        let virtual_account = || Creditor::VirtualAccount("va-1".into());
        let cases: [(&str, Creditor, Result<Route, &str>); 12] = [
            ("memo, no account named", Creditor::Unnamed, mint()),
            ("memo, the receiving account", Creditor::Receiving, mint()),
            ("message, the receiving account", Creditor::Receiving, on_ramp()),
            ("message, a virtual account", virtual_account(), on_ramp()),
            ("message, no account named", Creditor::Unnamed, on_ramp()),
            (
                "memo, a virtual account",
                virtual_account(),
                Err("virtual account va-1's number but quoting memo_id"),
            ),
            ("memo, another account", Creditor::Other("DE89 3704".into()), Err("neither the platform's")),
            ("message, another account", Creditor::Other("1".into()), Err("account 1, which is neither")),
            ("both", Creditor::Receiving, Err("names both a memo_id (CI0123456789) and a deposit message")),
            ("neither", Creditor::Unnamed, Err("no memo_id or deposit message")),
            ("two memos and a message", Creditor::Unnamed, Err("several memo_ids")),
            ("two messages", Creditor::Unnamed, Err("several deposit messages")),
        ];
        for (case, creditor, expected) in cases {
            let remittance = match case {
                c if c.starts_with("memo") => format!("INVOICE 7 /REF/{MEMO}"),
                c if c.starts_with("message") => format!("payroll {}", MESSAGE.to_lowercase()),
                "both" => format!("{MEMO} {MESSAGE}"),
                "two memos and a message" => format!("{MEMO} CI0123456780 {MESSAGE}"),
                "two messages" => format!("{MESSAGE} VA0123456780"),
                _ => "invoice 42".to_string(),
            };
            let credit = credit(&remittance);
            let routed = route(&creditor, memo_in(&credit), deposit_message_in(&credit));
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
