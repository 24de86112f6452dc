//! Operators in a real browser, on a `production` service: a compliance
//! operator approves an identity from the queue; the treasury operator who
//! recorded a wire finds no approve action and a direct POST of the
//! approval is refused, while a second treasury operator's approval mints
//! it; the audit log with its chain verified.

use alloy::transports::http::reqwest::Method;
use custody_indexer::deposits::commit;
use custody_indexer::{
    audit::Actor,
    environment::Environment,
    identity::{State, Step, Type},
    operators::{NewOperator, Role, manage},
    people::totp,
    store::{NewIdentity, now_micros},
};
use serde_json::json;

use super::{
    browser::Browser,
    common::{
        api::{App, send_json},
        db::Backend,
        issuance::{ADDRESS, account, app, identity, us_bank},
    },
};

const PASSWORD: &str = "operator console password";

/// An operator made by the bootstrap: its id, enrol link and key.
async fn operator(app: &App, name: &str, role: Role) -> (String, String, String) {
    let new = NewOperator { name: name.into(), email: format!("{name}@platform.example"), roles: vec![role] };
    let created =
        manage::bootstrap(app.store(), Environment::Sandbox, &Actor::local(None), new).await.unwrap();
    let link = format!("{}{}", app.base, created.enrol_path);
    (created.operator.id, link, created.key.unwrap().token)
}

/// Enrols `name` from `link` with the second factor production requires
/// (the code of the step before, within the allowed skew) and signs in;
/// ends on the queues. Answers the factor's secret.
pub(crate) async fn sign_in(browser: &Browser, base: &str, name: &str, link: &str) -> String {
    browser.visit(link, &format!("enrol-{name}")).await;
    let field = browser.find("input[name=totp_secret]").await;
    let secret = field.attr("value").await.unwrap().unwrap();
    browser.fill("#password", PASSWORD).await;
    browser.fill("#again", PASSWORD).await;
    browser.fill("#code", &super::common::totp::a_step_back(&secret).await).await;
    browser.click("form button[type=submit]").await;
    sign_in_again(browser, base, name, &totp::code(&secret, now_micros()).unwrap()).await;
    secret
}

/// Signs `name` in with `code`; ends on the queues.
pub(crate) async fn sign_in_again(browser: &Browser, base: &str, name: &str, code: &str) {
    browser.client.goto(&format!("{base}/console/sign-in")).await.unwrap();
    browser.fill("#email", &format!("{name}@platform.example")).await;
    browser.fill("#password", PASSWORD).await;
    browser.fill("#code", code).await;
    browser.click("form button[type=submit]").await;
    assert_eq!(browser.client.current_url().await.unwrap().path(), "/console/queues", "{name}");
}

pub(crate) async fn sign_out(browser: &Browser) {
    browser.click("header form button").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_decide_from_the_queues_with_four_eyes_on_wires() {
    let app = app(Backend::Postgres, Environment::Production, Some(us_bank("000555555555"))).await;
    custody_indexer::operators::tenants::create_bare_organization(app.store(), "acme", None).await.unwrap();
    identity(&app, "acme", "ada", true, true).await;
    account(&app, "acme", "ada", "ada-usdc", &[ADDRESS]).await;
    identity(&app, "acme", "cal", false, false).await;
    let checks = State::Onboarding { step: Step::ComplianceChecks, rfi: false };
    let bea = NewIdentity {
        organization: "acme".into(),
        id: "bea".into(),
        request_id: None,
        kind: Type::Individual,
        label: "Bea Checked".into(),
        state: checks,
        actor: "client".into(),
    };
    custody_indexer::identity::register::create_identity(app.store(), &bea).await.unwrap();
    let key = app.key("acme").await;
    let body = json!({ "request_id": "ada-mint", "identity_id": "ada", "stablecoin_symbol": "USDC",
                       "chain": "ETHEREUM_TESTNET", "mint_destination_address_id": "ada-usdc" });
    let instruction = app.post("/v2/issuance/mint-instructions", &key, &body).await;
    assert_eq!(instruction.status, 201, "{instruction:?}");
    let memo = instruction.body["memo_id"].as_str().unwrap();

    let (cleo, cleo_link, _) = operator(&app, "cleo", Role::Compliance).await;
    let (_, tom_link, tom_key) = operator(&app, "tom", Role::Treasury).await;
    let (_, tess_link, _) = operator(&app, "tess", Role::Treasury).await;
    let wire = json!({ "memo_id": memo, "amount": "250.00", "reference": "FED-77", "reason": "arrived" });
    let url = format!("{}/operator/v1/issuance/wires", app.base);
    let recorded = send_json(Method::POST, &url, Some(&tom_key), Some(&wire)).await;
    assert_eq!(recorded.body["status"], "AWAITING_APPROVAL", "{recorded:?}");
    let mint = recorded.body["id"].as_str().unwrap().to_string();
    let second = json!({ "memo_id": memo, "amount": "40.00", "reference": "FED-78", "reason": "arrived" });
    let refused_wire = send_json(Method::POST, &url, Some(&tom_key), Some(&second)).await;
    assert_eq!(refused_wire.body["status"], "AWAITING_APPROVAL", "{refused_wire:?}");
    let refused_wire = refused_wire.body["id"].as_str().unwrap().to_string();

    let request = json!({ "request_id": "va-1", "destination": { "account_id": "ada-usdc", "currency": "USDC",
                          "chain": "ETHEREUM_TESTNET" }, "source": { "banking_country": "US" } });
    let va = app.post("/v2/identities/ada/virtual-accounts", &key, &request).await;
    assert_eq!(va.status, 201, "{va:?}");
    let va = va.body["id"].as_str().unwrap().to_string();
    let other = json!({ "request_id": "va-2", "destination": { "account_id": "ada-usdc", "currency": "USDC",
                        "chain": "ETHEREUM_TESTNET" }, "source": { "banking_country": "US" } });
    let refused_va = app.post("/v2/identities/ada/virtual-accounts", &key, &other).await;
    assert_eq!(refused_va.status, 201, "{refused_va:?}");
    let refused_va = refused_va.body["id"].as_str().unwrap().to_string();

    let browser = Browser::start("operators").await;
    sign_in(&browser, &app.base, "cleo", &cleo_link).await;
    assert!(browser.text("header .environment").await.contains("PRODUCTION"));
    browser.check("queues-compliance").await;
    let queue = browser.text("#identities tbody").await;
    assert!(queue.contains("Bea Checked") && queue.contains("COMPLIANCE_CHECKS_IN_PROGRESS"), "{queue}");
    assert!(!queue.contains("cal") && !queue.contains("ada"), "only identities with their data in: {queue}");
    browser.fill("#reason-1", "documents checked").await;
    browser.click("#identities button[type=submit]").await;
    assert_eq!(app.store().identity("acme", "bea").await.unwrap().status.as_str(), "ACTIVE");
    browser.check("queues-decided").await;
    browser.visit(&format!("{}/console/audit", app.base), "audit").await;
    assert!(browser.text("#verified").await.starts_with("The chain is intact"));
    let log = browser.text("tbody").await;
    // People by name and e-mail beside their ids.
    let named = format!("cleo <cleo@platform.example> (operator:{cleo})");
    assert!(log.contains(&named) && log.contains("identity.approved"), "{log}");
    seed_reconciliation(&app).await;
    browser.visit(&format!("{}/console/chains", app.base), "chains").await;
    let differences = browser.text("#differences tbody").await;
    assert!(
        differences.contains("0x00000000000000000000000000000000000000a1")
            && differences.contains("-0.5")
            && differences.contains("-0.5 in block 9"),
        "{differences}"
    );
    let disputes = browser.text("#disputes tbody").await;
    assert!(
        disputes.contains("dep-forged")
            && disputes.contains("OPEN")
            && disputes.contains("https://b.example/: the block without the deposit"),
        "{disputes}"
    );
    // No watcher runs here: `health`'s answer, and books that cannot read the supply.
    let health = browser.text("#health").await;
    assert!(health.starts_with("UNHEALTHY") && health.contains("no chain has recorded a scan"), "{health}");
    let books = browser.text("#books tbody").await;
    assert!(
        books.contains("USDC") && books.contains("received 290.00 USD") && books.contains("DIFFER"),
        "{books}"
    );
    sign_out(&browser).await;

    // The recorder: no approve action, and the service refuses it anyway.
    let tom_secret = sign_in(&browser, &app.base, "tom", &tom_link).await;
    browser.check("queues-recorder").await;
    let row = browser.text("#wires tbody").await;
    assert!(row.contains(&mint) && row.contains("you recorded it"), "{row}");
    assert!(browser.client.find(fantoccini::Locator::Css("#wires form")).await.is_err(), "no approve form");
    let post = format!(
        "const done = arguments[0];
         fetch('/console/queues/wires/{mint}/approve', {{ method: 'POST',
           headers: JSON.parse(document.body.getAttribute('hx-headers')), body: new URLSearchParams({{ reason: 'mine' }}) }})
           .then(r => done(r.status));"
    );
    assert_eq!(browser.client.execute_async(&post, vec![]).await.unwrap(), 403, "four eyes");
    browser.visit(&format!("{}/console/audit", app.base), "audit-refused").await;
    assert_eq!(browser.text("h1").await, "403", "the log is not treasury's");
    browser.client.goto(&format!("{}/console/queues", app.base)).await.unwrap();
    sign_out(&browser).await;

    // A second treasury operator approves: the mint goes on.
    sign_in(&browser, &app.base, "tess", &tess_link).await;
    let row = browser.text("#wires tbody").await;
    assert!(row.contains("tom <tom@platform.example> (operator:"), "the recorder by name: {row}");
    browser.click(&format!("#wires form[action='/console/queues/wires/{mint}/approve'] button")).await;
    let status = app.store().mint(None, &mint).await.unwrap().status;
    assert_ne!(status.as_str(), "AWAITING_APPROVAL", "approved: {status:?}");
    browser.check("queues-approved").await;
    // The other wire refused from the queue: nothing is minted, its
    // dollars are owed back.
    browser.click(&format!("#wires form[action='/console/queues/wires/{refused_wire}/refuse'] button")).await;
    let refused = app.store().mint(None, &refused_wire).await.unwrap();
    assert_eq!(refused.status.as_str(), "FAILED", "refused: {refused:?}");
    assert!(!browser.text("#wires tbody").await.contains(&refused_wire), "out of the queue");
    let owed = app.store().fiat_returns(false).await.unwrap();
    assert!(owed.iter().any(|r| r.mint.id == refused_wire), "its dollars owed back");

    // A virtual account the bank refused, with its reason.
    browser.fill("#refusal-2", "the bank declined the applicant").await;
    browser
        .click(&format!(
            "#virtual-accounts form[action='/console/queues/virtual-accounts/{refused_va}/refuse'] button"
        ))
        .await;
    let refused = app.get("/v2/identities/ada/virtual-accounts", &key).await;
    let refused = refused.body["virtual_accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == refused_va.as_str())
        .cloned()
        .unwrap();
    assert_eq!(
        (&refused["status"], &refused["failure_reason"]),
        (&json!("VIRTUAL_ACCOUNT_STATUS_FAILED"), &json!("the bank declined the applicant")),
        "{refused}"
    );

    // A virtual account waiting for the bank: its number recorded by one
    // operator, opened when another confirms the same number.
    let row = browser.text("#virtual-accounts tbody").await;
    assert!(row.contains(&va), "{row}");
    browser.fill("#number-1", "900100200300").await;
    browser.click("#virtual-accounts form[action$='/open'] button").await;
    let status = |listed: serde_json::Value| {
        let found =
            listed["virtual_accounts"].as_array().unwrap().iter().find(|v| v["id"] == va.as_str()).cloned();
        found.unwrap()["status"].as_str().unwrap().to_string()
    };
    let listed = app.get("/v2/identities/ada/virtual-accounts", &key).await;
    assert_eq!(status(listed.body), "VIRTUAL_ACCOUNT_STATUS_PENDING", "one operator alone opens nothing");
    sign_out(&browser).await;
    sign_in_again(&browser, &app.base, "tom", &totp::code(&tom_secret, now_micros() + 30_000_000).unwrap())
        .await;
    browser.fill("#confirm-1", "900100200300").await;
    browser.click("#virtual-accounts form[action$='/confirm'] button").await;
    let listed = app.get("/v2/identities/ada/virtual-accounts", &key).await;
    assert_eq!(status(listed.body), "VIRTUAL_ACCOUNT_STATUS_ACTIVE");
    assert!(browser.text("#virtual-accounts caption").await.starts_with("0 "));
}

/// A reconciliation that found money gone from an address, and a deposit
/// two providers disagreed about, as `run` keeps them.
async fn seed_reconciliation(app: &App) {
    use custody_indexer::{
        chain::Chain,
        deposits::quorum::{Answer, Claimed, Decision, Dispute},
        reconcile::Run,
        store::{QuorumSettlement, reconcile_runs},
    };
    let address = "0x00000000000000000000000000000000000000a1";
    let claimed = Claimed {
        id: "dep-forged".into(),
        chain: Chain::EthereumTestnet,
        tx_hash: format!("0x{}", "ab".repeat(32)),
        position: "native".into(),
        account_id: "alice".into(),
        address: address.into(),
        symbol: "ETH".into(),
        amount_raw: "7".into(),
        block_number: 8,
        block_hash: "0xaa".into(),
    };
    let answers = [
        ("https://a.example/".to_string(), Answer::Serves { hash: "0xaa".into(), holds: true }),
        ("https://b.example/".to_string(), Answer::Serves { hash: "0xaa".into(), holds: false }),
    ];
    let disputes = vec![Dispute::new(&claimed, "0xaa", &answers, Decision::Fail)];
    commit::settle_on_quorum(app.store(), &QuorumSettlement { disputes, ..Default::default() })
        .await
        .unwrap();
    let line = json!({
        "account_id": "alice", "address": address, "asset": "ETH", "difference": "-0.5",
        "divergent_blocks": [{ "block": 9, "change": "-0.5" }],
    });
    let run = Run {
        chain: "ETHEREUM_TESTNET".into(),
        at: String::new(),
        at_micros: now_micros(),
        started_micros: now_micros() - 1_500_000,
        took_ms: 1500,
        slices: 1,
        every_ms: 3_600_000,
        period_ms: None,
        at_block: 12,
        lines: 3,
        differ: 1,
        failed: 0,
        skipped: 0,
        detail: json!({ "differences": [line], "failed": [] }),
    };
    let mut tx = app.store().begin().await.unwrap();
    reconcile_runs::record_run(&mut tx, &run).await.unwrap();
    tx.commit().await.unwrap();
}
