//! `bank import FILE` (and `issuance wires import`, its older name): a
//! bank's camt.054 credit notification, written here, each credit quoting
//! a memo recorded as `wires record` would record it (the same approval
//! rule: its importer cannot approve the mint), once per entry reference
//! however often the file is imported, with what could not be matched
//! listed with why: no reference, both a memo and a deposit message, an
//! account the platform takes no wires at.

use crate::common;

use common::{
    camt054::{notification, notification_to},
    chain_toml,
    cli::Env,
    issuance::instructed,
};
use serde_json::Value;

#[tokio::test]
async fn a_banks_credit_notification_records_each_wire_quoting_a_memo_once() {
    let (env, memo) = instructed().await;
    // As senders type a memo: inside other words, lower case, in groups.
    let grouped = format!("{} {} {}", &memo[..4], &memo[4..8], &memo[8..]).to_lowercase();
    let file = env.dir.path().join("camt054.xml");
    let credits = [
        ("FT26330-0001", "250.00", format!("INVOICE 7 /REF/{memo}")),
        ("FT26330-0002", "1000.5", grouped),
        ("FT26330-0003", "10.00", "invoice 42".to_string()),
        ("FT26330-0004", "12.00", "CI0000000000".to_string()),
    ];
    let credits: Vec<(&str, &str, &str)> = credits.iter().map(|(r, a, m)| (*r, *a, m.as_str())).collect();
    std::fs::write(&file, notification(&credits)).unwrap();
    let import =
        ["issuance", "wires", "import", file.to_str().unwrap(), "--by", "ann", "--reason", "statement"];

    let out = env.ok(&import);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(lines[0].starts_with(&format!("wire FT26330-0001: 250.00 USD for memo {memo}: mint ")), "{out}");
    assert!(lines[0].ends_with(" AWAITING_APPROVAL"), "{out}");
    assert!(lines[1].starts_with(&format!("wire FT26330-0002: 1000.50 USD for memo {memo}: mint ")), "{out}");
    assert_eq!(
        lines[2],
        "unmatched FT26330-0003: 10.00 USD \"invoice 42\": no memo_id or deposit message in its remittance information"
    );
    assert!(lines[3].starts_with("unmatched FT26330-0004: 12.00 USD \"CI0000000000\": "), "{out}");
    assert!(lines[3].contains("mint instruction with memo_id CI0000000000 not found"), "{out}");
    assert_eq!(lines[4], "2 applied, 0 applied before, 2 unmatched", "the debit is no credit");

    // Imported again, by `bank import`: the same mints, applied before,
    // nothing twice.
    let bank = ["bank", "import", file.to_str().unwrap(), "--by", "ann", "--reason", "statement"];
    let again = env.ok(&bank);
    let expected: Vec<String> =
        [format!("{} (applied before)", lines[0]), format!("{} (applied before)", lines[1])]
            .into_iter()
            .chain([lines[2].to_string(), lines[3].to_string()])
            .chain(["0 applied, 2 applied before, 2 unmatched".to_string()])
            .collect();
    assert_eq!(again.lines().collect::<Vec<_>>(), expected, "the same file again");
    assert_eq!(env.ok(&import), again, "the older name is the same door");
    // Through the service, as a treasury operator: the file is the body,
    // and the answer prints alike.
    let port = common::dead_port();
    let _serve = env.listen("serve", common::CHAIN, port, &[("CUSTODY_INDEXER_ENVIRONMENT", "sandbox")]);
    common::platform::api_up(port).await;
    let create =
        ["operators", "create", "--name", "Ann", "--email", "ann@example.com", "--role", "admin,treasury"];
    let key = env.ok(&create).lines().last().unwrap().to_string();
    let through = [&import[..3], &[file.to_str().unwrap(), "--reason", "statement"]].concat();
    let served = env
        .command(&through)
        .env("CUSTODY_INDEXER_SERVER", format!("http://127.0.0.1:{port}"))
        .env("CUSTODY_INDEXER_OPERATOR_KEY", &key)
        .output()
        .unwrap();
    assert!(served.status.success(), "{}", String::from_utf8_lossy(&served.stderr));
    assert_eq!(String::from_utf8_lossy(&served.stdout), again, "through the service, the same answer");
    let mints: Vec<Value> = serde_json::from_str(&env.ok(&["issuance", "mints", "list", "--json"])).unwrap();
    let mut amounts: Vec<&str> = mints.iter().map(|m| m["amount"].as_str().unwrap()).collect();
    amounts.sort();
    assert_eq!(amounts, ["1000.50", "250.00"]);

    // The importer recorded the wires: another operator approves.
    let refused = env.output(&["issuance", "wires", "approve", "FT26330-0001", "--by", "ann"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("another operator"), "{refused:?}");
    assert!(env.ok(&["issuance", "wires", "approve", "FT26330-0001", "--by", "bo"]).contains("MINTING"));
}

#[tokio::test]
async fn a_file_that_is_not_a_credit_notification_is_refused_whole() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:1".to_string()], None, ""));
    let file = env.dir.path().join("statement.xml");
    for (body, expected) in [
        ("<Document><BkToCstmrStmt/></Document>".to_string(), "not a camt.054 document"),
        ("%PDF-1.7".to_string(), "not XML"),
        (notification(&[("FT-9", "12.345", "x")]), "entry FT-9: Amt \"12.345\""),
    ] {
        std::fs::write(&file, body).unwrap();
        let out = env.output(&[
            "issuance",
            "wires",
            "import",
            file.to_str().unwrap(),
            "--by",
            "a",
            "--reason",
            "r",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("statement.xml") && stderr.contains(expected),
            "{stderr}"
        );
    }
    let missing =
        env.output(&["issuance", "wires", "import", "/nonexistent.xml", "--by", "a", "--reason", "r"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read /nonexistent.xml"));
}

#[tokio::test]
async fn a_credit_is_applied_only_at_an_account_the_platform_takes_wires_at_and_in_one_wing() {
    let (env, memo) = instructed().await;
    let file = env.dir.path().join("camt054.xml");
    let import = ["bank", "import", file.to_str().unwrap(), "--by", "ann", "--reason", "statement"];

    // Credited to an account that is not the platform's: left out, naming it.
    std::fs::write(&file, notification_to("DE89 3704 0044 0532 0130 00", &[("FT-A", "5.00", &memo)]))
        .unwrap();
    assert_eq!(
        env.ok(&import),
        format!(
            "unmatched FT-A: 5.00 USD \"{memo}\": credited to account DE89 3704 0044 0532 0130 00, which is \
             neither the platform's receiving account nor an ACTIVE virtual account's\n\
             0 applied, 0 applied before, 1 unmatched\n"
        )
    );

    // The receiving account written in groups is the receiving account. A
    // credit naming a memo and a deposit message is left out; the rest of
    // the file is applied.
    let both = format!("{memo} VA0123456789");
    let credits = [("FT-B", "6.00", both.as_str()), ("FT-C", "7.00", memo.as_str())];
    std::fs::write(&file, notification_to("0001 2345 6789", &credits)).unwrap();
    let out = env.ok(&import);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with(&format!("wire FT-C: 7.00 USD for memo {memo}: mint ")), "{out}");
    assert_eq!(
        lines[1],
        format!(
            "unmatched FT-B: 6.00 USD \"{both}\": its remittance information names both a memo_id ({memo}) \
             and a deposit message (VA0123456789)"
        )
    );
    assert_eq!(lines[2], "1 applied, 0 applied before, 1 unmatched");
    // The same entry again in a file naming another account: applied
    // before, whatever the account now; another amount under its reference
    // is left out, naming what the reference started.
    let again = [("FT-C", "7.00", memo.as_str()), ("ft-c", "8.00", memo.as_str())];
    std::fs::write(&file, notification_to("999", &again)).unwrap();
    let out = env.ok(&import);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("wire FT-C: 7.00 USD for memo ") && lines[0].ends_with("(applied before)"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("unmatched ft-c: 8.00 USD") && lines[1].contains("reference FT-C started mint "),
        "{out}"
    );
    assert!(lines[1].ends_with("for 7.00 USD"), "{out}");
    let mints: Vec<Value> = serde_json::from_str(&env.ok(&["issuance", "mints", "list", "--json"])).unwrap();
    let amounts: Vec<&str> = mints.iter().map(|m| m["amount"].as_str().unwrap()).collect();
    assert_eq!(amounts, ["7.00"], "one mint, for the one credit applied");
}
