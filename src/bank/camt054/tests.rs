//! Documents written here, in the shapes banks send: a version-8 message
//! with one entry per wire, a version-2 batch entry of several wires, and
//! what is not a credit that arrived.

use super::*;

/// A `camt.054.001.08` notification for account `000123456789` holding
/// `entries` (each an `<Ntry>` element).
pub fn document(entries: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.054.001.08">
  <BkToCstmrDbtCdtNtfctn>
    <GrpHdr><MsgId>N-20261126-1</MsgId><CreDtTm>2026-11-26T10:00:00Z</CreDtTm></GrpHdr>
    <Ntfctn>
      <Id>N-1</Id>
      <CreDtTm>2026-11-26T10:00:00Z</CreDtTm>
      <Acct><Id><Othr><Id>000123456789</Id></Othr></Id><Ccy>USD</Ccy></Acct>
      {entries}
    </Ntfctn>
  </BkToCstmrDbtCdtNtfctn>
</Document>"#
    )
}

/// One booked credit entry of `amount` USD with reference `reference` and
/// unstructured remittance `memo`.
pub fn entry(reference: &str, amount: &str, memo: &str) -> String {
    format!(
        r#"<Ntry>
        <NtryRef>{reference}</NtryRef>
        <Amt Ccy="USD">{amount}</Amt>
        <CdtDbtInd>CRDT</CdtDbtInd>
        <Sts><Cd>BOOK</Cd></Sts>
        <BookgDt><Dt>2026-11-26</Dt></BookgDt>
        <ValDt><Dt>2026-11-26</Dt></ValDt>
        <AcctSvcrRef>{reference}</AcctSvcrRef>
        <BkTxCd><Domn><Cd>PMNT</Cd><Fmly><Cd>RCDT</Cd><SubFmlyCd>DMCT</SubFmlyCd></Fmly></Domn></BkTxCd>
        <NtryDtls><TxDtls>
          <Refs><EndToEndId>E2E-{reference}</EndToEndId></Refs>
          <RltdPties><Dbtr><Pty><Nm>Acme Treasury LLC</Nm></Pty></Dbtr></RltdPties>
          <RmtInf><Ustrd>{memo}</Ustrd></RmtInf>
        </TxDtls></NtryDtls>
      </Ntry>"#
    )
}

fn credit(reference: &str, cents: i64, remittance: &str) -> Credit {
    Credit {
        reference: reference.into(),
        cents,
        currency: "USD".into(),
        remittance: remittance.into(),
        account: Some("000123456789".into()),
    }
}

#[test]
fn each_booked_credit_is_read_with_its_reference_amount_and_remittance() {
    let body = document(
        &[entry("FT26330A1", "250.00", "CI0123456789"), entry("FT26330A2", "1000.5", "VA0123456789")]
            .concat(),
    );
    assert_eq!(
        credits(body.as_bytes()).unwrap(),
        vec![credit("FT26330A1", 25_000, "CI0123456789"), credit("FT26330A2", 100_050, "VA0123456789")]
    );
}

#[test]
fn a_batch_entry_gives_one_credit_per_transaction() {
    // camt.054.001.02: status as text, the entry's own reference only
    // (unique within its message), three wires in one booking with their
    // amounts under AmtDtls, remittance structured and not.
    let body = r#"<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.054.001.02"><BkToCstmrDbtCdtNtfctn>
      <GrpHdr><MsgId>B-1</MsgId><CreDtTm>2026-11-26T10:00:00</CreDtTm></GrpHdr>
      <Ntfctn><Id>B-1</Id><Acct><Id><IBAN>US00SAND0000123456789</IBAN></Id></Acct>
        <Ntry><NtryRef>BATCH-7</NtryRef><Amt Ccy="USD">600.00</Amt><CdtDbtInd>CRDT</CdtDbtInd><Sts>BOOK</Sts>
          <NtryDtls>
            <TxDtls><Refs><AcctSvcrRef>BATCH-7-A</AcctSvcrRef></Refs>
              <AmtDtls><TxAmt><Amt Ccy="USD">100.00</Amt></TxAmt></AmtDtls>
              <RmtInf><Ustrd>invoice 42</Ustrd><Ustrd>ci-0123-4567-89</Ustrd></RmtInf></TxDtls>
            <TxDtls><AmtDtls><TxAmt><Amt Ccy="USD">200.00</Amt></TxAmt></AmtDtls>
              <RmtInf><Strd><CdtrRefInf><Ref>VA0123456789</Ref></CdtrRefInf></Strd></RmtInf></TxDtls>
            <TxDtls><AmtDtls><TxAmt><Amt Ccy="USD">300.00</Amt></TxAmt></AmtDtls></TxDtls>
          </NtryDtls></Ntry>
      </Ntfctn></BkToCstmrDbtCdtNtfctn></Document>"#;
    let read = credits(body.as_bytes()).unwrap();
    let seen: Vec<(&str, i64, &str)> =
        read.iter().map(|c| (c.reference.as_str(), c.cents, c.remittance.as_str())).collect();
    assert_eq!(
        seen,
        vec![
            ("BATCH-7-A", 10_000, "invoice 42 ci-0123-4567-89"),
            ("B-1/BATCH-7/2", 20_000, "VA0123456789"),
            ("B-1/BATCH-7/3", 30_000, ""),
        ]
    );
    assert!(read.iter().all(|c| c.account.as_deref() == Some("US00SAND0000123456789")));
}

#[test]
fn debits_reversals_and_unbooked_entries_are_not_credits() {
    let booked = entry("OK-1", "10.00", "CI0123456789");
    let debit = entry("D-1", "10.00", "x").replace("CRDT", "DBIT");
    let pending = entry("P-1", "10.00", "x").replace("<Cd>BOOK</Cd>", "<Cd>PDNG</Cd>");
    let reversed = entry("R-1", "10.00", "x").replace("<CdtDbtInd>", "<RvslInd>true</RvslInd><CdtDbtInd>");
    let reversed_too = entry("R-2", "10.00", "x").replace("<CdtDbtInd>", "<RvslInd>1</RvslInd><CdtDbtInd>");
    // Inside a credit entry: a transaction that is a debit of its own, and
    // a returned payment.
    let debit_tx =
        entry("T-1", "10.00", "x").replace("<RltdPties>", "<CdtDbtInd>DBIT</CdtDbtInd><RltdPties>");
    let returned =
        entry("T-2", "10.00", "x").replace("<RmtInf>", "<RtrInf><Rsn><Cd>AC04</Cd></Rsn></RtrInf><RmtInf>");
    let body = document(&[debit, pending, booked, reversed, reversed_too, debit_tx, returned].concat());
    let read = credits(body.as_bytes()).unwrap();
    assert_eq!(read.iter().map(|c| c.reference.as_str()).collect::<Vec<_>>(), ["OK-1"]);
}

#[test]
fn a_document_that_cannot_be_read_is_refused_whole_naming_the_entry() {
    for (body, expected) in [
        ("not xml".to_string(), "not XML"),
        ("<Document><Other/></Document>".to_string(), "not a camt.054 document"),
        (document(&entry("BAD-1", "12.345", "CI0123456789")), "entry BAD-1: Amt \"12.345\""),
        (document(&entry("BAD-2", "-5.00", "m")), "entry BAD-2: Amt \"-5.00\""),
        (document(&entry("BAD-3", "0.00", "m")), "entry BAD-3: Amt \"0.00\" is not positive"),
        (document(&entry("BAD-4", "5.00", "m").replace(" Ccy=\"USD\"", "")), "entry BAD-4: Amt has no Ccy"),
    ] {
        let error = credits(body.as_bytes()).unwrap_err().to_string();
        assert!(error.starts_with(expected), "{error}");
    }
}
