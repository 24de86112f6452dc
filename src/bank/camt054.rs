//! ISO 20022 `camt.054` (`BankToCustomerDebitCreditNotification`): the
//! message a bank sends its customer for each booked movement on its
//! accounts, and the way incoming wires reach the platform from a real
//! bank. Operators import the bank's files with `issuance wires import
//! FILE` and `conversions wires import FILE`; a partner posting the same
//! document is read the same way.
//!
//! What is read, by element (any message version, `camt.054.001.02` on;
//! namespaces are ignored):
//!
//! | element | becomes |
//! |---|---|
//! | `Ntfctn/Acct/Id/(IBAN \| Othr/Id)` | [`Credit::account`]: the platform's account credited |
//! | `Ntry` with `CdtDbtInd` `CRDT` and status `BOOK` | one credit per `NtryDtls/TxDtls` (one for an entry without them) |
//! | `Ntry` with `RvslInd` `true` or `1`, a `DBIT`, or a status other than `BOOK` | nothing: not a credit that arrived |
//! | `TxDtls` with its own `CdtDbtInd` `DBIT`, or with `RtrInf` (a returned payment) | nothing |
//! | `TxDtls/Refs/AcctSvcrRef`, else `TxDtls/Refs/UETR`, else `Ntry/AcctSvcrRef`, else `<MsgId>/<NtryRef>` | [`Credit::reference`] (a later transaction of one entry without its own reference: `<entry>/<n>`) |
//! | `TxDtls/Amt`, else `TxDtls/AmtDtls/TxAmt/Amt`, else (one transaction) `Ntry/Amt`, and its `Ccy` | [`Credit::cents`] and [`Credit::currency`] |
//! | every `RmtInf/Ustrd`, then `RmtInf/Strd/CdtrRefInf/Ref` | [`Credit::remittance`], joined by spaces |
//!
//! A document that is not a `camt.054`, or an entry whose amount or
//! reference cannot be read, is refused whole, naming the entry: an
//! operator fixes the file rather than importing part of it.

mod transformers;

use super::Credit;

/// Why a document cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Camt054Error {
    #[error("not XML: {0}")]
    NotXml(String),
    #[error("not a camt.054 document: its root holds no BkToCstmrDbtCdtNtfctn")]
    NotCamt054,
    #[error("entry {entry}: {problem}")]
    Entry { entry: String, problem: String },
}

/// The booked credits of the `camt.054` document `body`, in document order.
pub fn credits(body: &[u8]) -> Result<Vec<Credit>, Camt054Error> {
    let text = std::str::from_utf8(body).map_err(|e| Camt054Error::NotXml(e.to_string()))?;
    let document = roxmltree::Document::parse(text).map_err(|e| Camt054Error::NotXml(e.to_string()))?;
    transformers::credits(&document)
}

#[cfg(test)]
mod tests;
