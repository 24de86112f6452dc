//! From a parsed `camt.054` document to [`Credit`]s: pure, by local
//! element names (see the table of [`super`]).

use roxmltree::{Document, Node};

use super::Camt054Error;
use crate::{amount::Amount, bank::Credit};

/// The booked credits of `document`.
pub fn credits(document: &Document<'_>) -> Result<Vec<Credit>, Camt054Error> {
    let root = document.root_element();
    let message = child(root, "BkToCstmrDbtCdtNtfctn").ok_or(Camt054Error::NotCamt054)?;
    let message_id = path(message, &["GrpHdr", "MsgId"]).map(text).unwrap_or_default();
    let mut credits = Vec::new();
    for notification in children(message, "Ntfctn") {
        let account = path(notification, &["Acct", "Id", "IBAN"])
            .or_else(|| path(notification, &["Acct", "Id", "Othr", "Id"]))
            .map(text);
        for (n, entry) in children(notification, "Ntry").enumerate() {
            if booked_credit(entry) {
                credits.extend(entry_credits(entry, (&message_id, n), account.as_deref())?);
            }
        }
    }
    Ok(credits)
}

/// Whether `entry` is a credit the bank booked, not reversed.
fn booked_credit(entry: Node<'_, '_>) -> bool {
    let status = path(entry, &["Sts", "Cd"]).or_else(|| child(entry, "Sts")).map(text);
    child(entry, "CdtDbtInd").map(text).as_deref() == Some("CRDT")
        && status.as_deref() == Some("BOOK")
        && !reversal(entry)
}

/// Whether `node` is marked a reversal (`RvslInd`, `true` or `1`).
fn reversal(node: Node<'_, '_>) -> bool {
    matches!(child(node, "RvslInd").map(text).as_deref(), Some("true" | "1"))
}

/// Whether a transaction of a credit entry is itself a credit that arrived:
/// not a debit (its own `CdtDbtInd`, from camt.054.001.04) and not a
/// returned payment (`RtrInf`).
fn credited(tx: Node<'_, '_>) -> bool {
    child(tx, "CdtDbtInd").map(text).as_deref() != Some("DBIT") && child(tx, "RtrInf").is_none()
}

/// The credits of one booked entry (the `n`th of message `message_id`).
/// Its reference: its `AcctSvcrRef`, else its `NtryRef` within the message
/// (`<MsgId>/<NtryRef>`: an entry's own reference is unique only there).
fn entry_credits(
    entry: Node<'_, '_>,
    (message_id, n): (&str, usize),
    account: Option<&str>,
) -> Result<Vec<Credit>, Camt054Error> {
    let entry_ref = child(entry, "AcctSvcrRef")
        .map(text)
        .or_else(|| child(entry, "NtryRef").map(|r| format!("{message_id}/{}", text(r))));
    let name = entry_ref.clone().unwrap_or_else(|| format!("#{}", n + 1));
    let problem = |problem: String| Camt054Error::Entry { entry: name.clone(), problem };
    let details: Vec<Node<'_, '_>> =
        children(entry, "NtryDtls").flat_map(|d| children(d, "TxDtls").collect::<Vec<_>>()).collect();
    if details.is_empty() {
        let reference = entry_ref.clone().ok_or_else(|| problem("no AcctSvcrRef or NtryRef".into()))?;
        let (cents, currency) = amount(entry).map_err(problem)?;
        return Ok(vec![credit(reference, (cents, currency), entry, account)]);
    }
    let mut credits = Vec::new();
    for (i, tx) in details.iter().enumerate().filter(|(_, tx)| credited(**tx)) {
        let own = path(*tx, &["Refs", "AcctSvcrRef"]).or_else(|| path(*tx, &["Refs", "UETR"])).map(text);
        let reference = match (own, &entry_ref, i) {
            (Some(own), _, _) => own,
            (None, Some(entry_ref), 0) => entry_ref.clone(),
            (None, Some(entry_ref), i) => format!("{entry_ref}/{}", i + 1),
            (None, None, _) => return Err(problem("no AcctSvcrRef or NtryRef".into())),
        };
        let amounted = child(*tx, "Amt").map(|_| *tx).or_else(|| path(*tx, &["AmtDtls", "TxAmt"]));
        let amounted = match amounted {
            Some(node) => node,
            None if details.len() == 1 => entry,
            None => return Err(problem(format!("transaction {} has no Amt of its own", i + 1))),
        };
        credits.push(credit(reference, amount(amounted).map_err(problem)?, *tx, account));
    }
    Ok(credits)
}

fn credit(
    reference: String,
    (cents, currency): (i64, String),
    remitted: Node<'_, '_>,
    account: Option<&str>,
) -> Credit {
    Credit {
        reference,
        cents,
        currency,
        remittance: remittance(remitted),
        account: account.map(str::to_string),
    }
}

/// The `Amt` of `node` in its currency's smallest unit (2 decimals).
fn amount(node: Node<'_, '_>) -> Result<(i64, String), String> {
    let amt = child(node, "Amt").ok_or("no Amt")?;
    let currency = amt.attribute("Ccy").ok_or("Amt has no Ccy")?.to_string();
    let value = text(amt);
    let raw = Amount::parse(&value, 2).map_err(|e| format!("Amt {value:?}: {e}"))?;
    let cents = i64::try_from(raw.raw()).map_err(|_| format!("Amt {value:?} is too large"))?;
    if cents <= 0 {
        return Err(format!("Amt {value:?} is not positive"));
    }
    Ok((cents, currency))
}

/// The remittance information under `node`: unstructured lines first,
/// then structured creditor references, joined by spaces.
fn remittance(node: Node<'_, '_>) -> String {
    let info: Vec<Node<'_, '_>> = node.descendants().filter(|n| is(*n, "RmtInf")).collect();
    let unstructured = info.iter().flat_map(|i| children(*i, "Ustrd").map(text).collect::<Vec<_>>());
    let structured = info
        .iter()
        .flat_map(|i| children(*i, "Strd").collect::<Vec<_>>())
        .filter_map(|s| path(s, &["CdtrRefInf", "Ref"]).map(text));
    unstructured.chain(structured).collect::<Vec<_>>().join(" ")
}

fn is(node: Node<'_, '_>, name: &str) -> bool {
    node.is_element() && node.tag_name().name() == name
}

fn children<'a, 'i>(node: Node<'a, 'i>, name: &'static str) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children().filter(move |n| is(*n, name))
}

fn child<'a, 'i>(node: Node<'a, 'i>, name: &'static str) -> Option<Node<'a, 'i>> {
    children(node, name).next()
}

fn path<'a, 'i>(node: Node<'a, 'i>, names: &[&'static str]) -> Option<Node<'a, 'i>> {
    names.iter().try_fold(node, |at, name| child(at, name))
}

fn text(node: Node<'_, '_>) -> String {
    node.text().unwrap_or_default().trim().to_string()
}
