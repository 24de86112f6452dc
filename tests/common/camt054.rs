//! ISO 20022 `camt.054` credit notifications as a bank writes them, for the
//! `bank import` command: written here, in the `camt.054.001.02` shape
//! many banks still send (entries with their own reference, free-text
//! remittance, a debit among the credits).

/// A notification for the platform's receiving account (the sandbox
/// bank's number, which the tests' production bank shares) holding one
/// booked credit per `(reference, amount, remittance)`, then a debit the
/// import leaves alone.
pub fn notification(credits: &[(&str, &str, &str)]) -> String {
    notification_to("000123456789", credits)
}

/// [`notification`] for the account `account`.
pub fn notification_to(account: &str, credits: &[(&str, &str, &str)]) -> String {
    let entries: String = credits
        .iter()
        .map(|(reference, amount, remittance)| entry(reference, amount, "CRDT", remittance))
        .chain(std::iter::once(entry("FEES-NOV", "25.00", "DBIT", "account maintenance")))
        .collect();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.054.001.02" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<BkToCstmrDbtCdtNtfctn>
<GrpHdr><MsgId>CAMT054-TEST-1</MsgId><CreDtTm>2026-11-26T09:30:00</CreDtTm></GrpHdr>
<Ntfctn><Id>NTF-1</Id><CreDtTm>2026-11-26T09:30:00</CreDtTm>
<Acct><Id><Othr><Id>{account}</Id></Othr></Id><Ccy>USD</Ccy><Svcr><FinInstnId><BIC>SBOXUS33</BIC></FinInstnId></Svcr></Acct>
{entries}</Ntfctn>
</BkToCstmrDbtCdtNtfctn>
</Document>
"#
    )
}

fn entry(reference: &str, amount: &str, direction: &str, remittance: &str) -> String {
    format!(
        "<Ntry><NtryRef>{reference}</NtryRef><Amt Ccy=\"USD\">{amount}</Amt><CdtDbtInd>{direction}</CdtDbtInd>\
         <Sts>BOOK</Sts><BookgDt><Dt>2026-11-26</Dt></BookgDt><ValDt><Dt>2026-11-26</Dt></ValDt>\
         <AcctSvcrRef>{reference}</AcctSvcrRef><NtryDtls><TxDtls><Refs><InstrId>I-{reference}</InstrId></Refs>\
         <RmtInf><Ustrd>{remittance}</Ustrd></RmtInf></TxDtls></NtryDtls></Ntry>\n"
    )
}
