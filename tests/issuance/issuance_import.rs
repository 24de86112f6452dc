//! `issuance wires import FILE`: a bank's camt.054 credit notification,
//! written here, recorded as `wires record` would record each credit
//! quoting a memo (the same approval rule: its importer cannot approve the
//! mint), once per entry reference however often the file is imported,
//! with what could not be matched listed.

use crate::common;

use common::{camt054::notification, chain_toml, cli::Env, issuance::instructed};
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
        "unmatched FT26330-0003: 10.00 USD \"invoice 42\": no memo_id in its remittance information"
    );
    assert!(lines[3].starts_with("unmatched FT26330-0004: 12.00 USD \"CI0000000000\": "), "{out}");
    assert!(lines[3].contains("mint instruction with memo_id CI0000000000 not found"), "{out}");
    assert_eq!(lines[4], "2 recorded, 2 unmatched", "the debit is no credit");

    // Imported again: the same mints, nothing twice.
    assert_eq!(env.ok(&import), out, "the same file again");
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
    assert_eq!(String::from_utf8_lossy(&served.stdout), out, "through the service, the same answer");
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
