//! The OpenAPI document as clients' tools take it: served by a real API
//! server, checked by `openapi-spec-validator`, and turned by
//! `openapi-python-client` into a client that lists a real deposit and
//! creates and reads a transfer on anvil.

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
    time::Duration,
};

use alloy::{primitives::U256, transports::http::reqwest::Method};
use common::{
    CHAIN,
    anvil::Mined,
    api::{send, spawn_app},
    db::Backend,
    eventually,
    python::{self, ok},
    transfers::Setup,
};
use custody_indexer::{api::RateLimit, config::Chains};
use serde_json::{Value, json};

const METHODS: [&str; 8] = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

/// Every operation of `doc`: (method, path, operation).
fn operations(doc: &Value) -> Vec<(&str, &str, &Value)> {
    let mut found = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if let Some(operation) = item.get(method) {
                found.push((method, path.as_str(), operation));
            }
        }
    }
    found
}

/// Each operation without an `operationId`, and each id given to more than one.
fn operation_id_faults(doc: &Value) -> Vec<String> {
    let mut by_id: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut faults = Vec::new();
    for (method, path, operation) in operations(doc) {
        match operation["operationId"].as_str() {
            Some(id) => by_id.entry(id).or_default().push(format!("{method} {path}")),
            None => faults.push(format!("{method} {path} has no operationId")),
        }
    }
    for (id, users) in by_id.into_iter().filter(|(_, users)| users.len() > 1) {
        faults.push(format!("operationId {id} is used by {}", users.join(", ")));
    }
    faults
}

/// Each example whose fields do not fit its schema: a field the schema
/// lacks, or a required one missing. The validator does not look at examples.
fn example_faults(doc: &Value) -> Vec<String> {
    let mut faults = Vec::new();
    for (method, path, operation) in operations(doc) {
        let responses = operation["responses"].as_object().unwrap().iter().map(|(s, r)| (s.as_str(), r));
        let bodies = responses.chain([("request", &operation["requestBody"])]);
        for (status, body) in bodies {
            let Some(content) = body["content"]["application/json"].as_object() else { continue };
            let Some(name) = content.get("schema").and_then(|s| s["$ref"].as_str()) else { continue };
            let schema = &doc["components"]["schemas"][name.trim_start_matches("#/components/schemas/")];
            let examples = content.get("examples").and_then(Value::as_object).into_iter().flatten();
            let values = examples.map(|(_, e)| &e["value"]).chain(content.get("example"));
            for value in values {
                let fields: BTreeSet<&String> = value.as_object().unwrap().keys().collect();
                let known: BTreeSet<&String> = schema["properties"].as_object().unwrap().keys().collect();
                let required = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str);
                for field in fields.difference(&known) {
                    faults.push(format!("{method} {path} {status}: example field {field} is not in {name}"));
                }
                for field in required.filter(|r| !value.as_object().unwrap().contains_key(*r)) {
                    faults
                        .push(format!("{method} {path} {status}: example lacks {field}, required by {name}"));
                }
            }
        }
    }
    faults
}

/// Runs `openapi-spec-validator` on `doc`; its success and what it printed.
fn validate(dir: &Path, name: &str, doc: &Value) -> (bool, String) {
    let file = dir.join(name);
    std::fs::write(&file, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    let output =
        Command::new(python::python()).arg("-m").arg("openapi_spec_validator").arg(&file).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

#[tokio::test]
async fn the_served_document_passes_openapi_spec_validator() {
    let app = spawn_app(Backend::Sqlite, Chains::default(), RateLimit::default()).await;
    let answer = send(Method::GET, &format!("{}/openapi.json", app.base), None).await;
    assert_eq!(answer.status, 200);
    let doc = answer.body;
    assert_eq!(operation_id_faults(&doc), Vec::<String>::new());
    assert_eq!(example_faults(&doc), Vec::<String>::new());
    let examples =
        doc.to_string().matches("\"examples\":").count() + doc.to_string().matches("\"example\":").count();
    assert!(examples > 20, "the shared errors, transfers and deposits carry examples");
    let mut drifted = doc.clone();
    let example = &mut drifted["paths"]["/v2/crypto/deposits"]["get"]["responses"]["200"]["content"]["application/json"]
        ["example"];
    example["next_cursor"] = example["cursor"].take();
    assert_eq!(
        example_faults(&drifted),
        ["get /v2/crypto/deposits 200: example field next_cursor is not in #/components/schemas/DepositList"]
    );

    // Every /v2 operation names the key it needs and answers the shared errors in the API's shape.
    for (method, path, operation) in operations(&doc).into_iter().filter(|(_, p, _)| p.starts_with("/v2/")) {
        assert_eq!(
            operation["security"],
            json!([{ "api_key": [] }, { "api_key": [], "request_signature": [] }]),
            "{method} {path}"
        );
        for status in ["401", "429", "500"] {
            let schema = &operation["responses"][status]["content"]["application/json"]["schema"];
            assert_eq!(schema["$ref"], "#/components/schemas/ErrorBody", "{method} {path} {status}");
        }
    }
    let rate_limited = &doc["paths"]["/v2/assets"]["get"]["responses"]["429"];
    assert_eq!(rate_limited["headers"]["Retry-After"]["schema"]["type"], "integer");
    assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([]), "no credentials needed");

    let dir = tempfile::tempdir().unwrap();
    let (valid, report) = validate(dir.path(), "openapi.json", &doc);
    assert!(valid, "openapi-spec-validator refused /openapi.json:\n{report}");
    assert!(report.contains("OK"), "{report}");

    // The validator catches what made client generators fail: an id used twice.
    let mut repeated = doc.clone();
    repeated["paths"]["/v2/accounts"]["get"]["operationId"] = json!("listDeposits");
    assert_eq!(
        operation_id_faults(&repeated),
        ["operationId listDeposits is used by get /v2/accounts, get /v2/crypto/deposits"]
    );
    let (valid, report) = validate(dir.path(), "repeated.json", &repeated);
    assert!(!valid && report.contains("listDeposits"), "{report}");

    // The sandbox's document adds the simulation, and validates as well.
    let sandbox = serde_json::to_value(custody_indexer::api::openapi(
        custody_indexer::environment::Environment::Sandbox,
    ))
    .unwrap();
    assert!(doc["paths"].get("/v2/simulation/fiat-deposit").is_none(), "production has no simulation");
    assert!(sandbox["paths"]["/v2/simulation/fiat-deposit"]["post"].is_object());
    assert_eq!(operation_id_faults(&sandbox), Vec::<String>::new());
    let (valid, report) = validate(dir.path(), "sandbox.json", &sandbox);
    assert!(valid, "openapi-spec-validator refused the sandbox's document:\n{report}");
}

#[tokio::test]
async fn a_generated_python_client_lists_deposits_and_creates_a_transfer() {
    let python = python::python();
    let s = Setup::new(Backend::Sqlite, "").await;
    let alice = s.create_account("alice", "SEGREGATED");
    let minter = s.anvil.accounts[5];
    let mint = s.anvil.token(s.tusd).mint(alice, U256::from(100_000_000)).from(minter).mined().await;
    let mint = mint.transaction_hash.to_string();
    let _run = s.start("run").await;
    eventually(Duration::from_secs(60), "alice's deposit confirmed", || async {
        s.anvil.mine(1).await;
        let list = s.get("/v2/crypto/deposits?account_id=alice").await.body;
        list["deposits"].as_array().unwrap().iter().any(|d| d["status"] == "CONFIRMED").then_some(())
    })
    .await;

    // What a user runs: generate from the served document, install, import.
    let dir = tempfile::tempdir().unwrap();
    let base = format!("http://127.0.0.1:{}", s.port);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openapi/generator.yaml");
    let client = dir.path().join("client");
    ok(
        Command::new(python)
            .args(["-m", "openapi_python_client", "generate", "--fail-on-warning", "--url"])
            .arg(format!("{base}/openapi.json"))
            .arg("--config")
            .arg(&config)
            .arg("--output-path")
            .arg(&client),
        "openapi-python-client generate",
    );
    let site = dir.path().join("site");
    ok(
        Command::new(python)
            .args(["-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target"])
            .arg(&site)
            .arg(&client),
        "pip install of the generated client",
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openapi/client_flow.py");
    let output = ok(
        Command::new(python).arg(&script).env("PYTHONPATH", &site).envs([
            ("BASE_URL", base.as_str()),
            ("API_KEY", s.key.as_str()),
            ("ACCOUNT_ID", "alice"),
            ("CHAIN", CHAIN.as_str()),
            ("DESTINATION", &s.outside.to_string()),
            ("SYMBOL", "TUSD"),
            ("AMOUNT", "1.5"),
        ]),
        "the generated client's flow",
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();

    // The client saw what the service holds.
    let deposits = seen["deposits"].as_array().unwrap();
    assert_eq!(deposits.len(), 1, "{seen}");
    assert_eq!(
        (&deposits[0]["transaction_hash"], &deposits[0]["amount"], &deposits[0]["currency_symbol"]),
        (&json!(mint), &json!("100"), &json!("TUSD"))
    );
    let id = seen["created"]["id"].as_str().unwrap();
    assert_eq!(seen["read"]["id"], id);
    assert_eq!(seen["created"]["status"], "ACCEPTED");
    let served = s.get(&format!("/v2/crypto/transfers/{id}")).await.body;
    assert_eq!((&served["account_id"], &served["amount"]), (&json!("alice"), &json!("1.5")), "{served}");
    assert_eq!(seen["refused"], json!({ "status": 401, "code": "UNAUTHORIZED" }));
    // One function module per operation: none was skipped or renamed.
    let doc = s.get("/openapi.json").await.body;
    let expected: BTreeSet<String> =
        operations(&doc).iter().map(|(_, _, op)| snake_case(op["operationId"].as_str().unwrap())).collect();
    assert_eq!(modules_of_client(&client), expected);
}

fn snake_case(camel: &str) -> String {
    let mut snake = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
        }
        snake.push(c.to_ascii_lowercase());
    }
    snake
}

/// The endpoint modules the generator wrote.
fn modules_of_client(client: &Path) -> BTreeSet<String> {
    let api = client.join("custody_indexer_client/api");
    let mut found = BTreeSet::new();
    for tag in std::fs::read_dir(api).unwrap().flatten().filter(|e| e.path().is_dir()) {
        for module in std::fs::read_dir(tag.path()).unwrap().flatten() {
            let name = module.file_name().to_string_lossy().trim_end_matches(".py").to_string();
            if name != "__init__" && !name.starts_with("__") {
                found.insert(name);
            }
        }
    }
    found
}

/// The reference's enums are enums in the document: a transfer's
/// `address_destination.chain` a `Chain`, a virtual account's currencies a
/// `StablecoinCurrency` whose values are the stablecoins the serving
/// platform's chain files issue (`USDC` without chain files).
#[tokio::test]
async fn the_references_enums_are_enums_naming_the_platforms_own_stablecoins() {
    let document = serde_json::to_value(custody_indexer::api::openapi(
        custody_indexer::environment::Environment::Sandbox,
    ))
    .unwrap();
    let schemas = &document["components"]["schemas"];
    let chain = &schemas["AddressDestination"]["properties"]["chain"];
    assert_eq!(chain["$ref"], "#/components/schemas/Chain", "{chain}");
    let currency = "#/components/schemas/StablecoinCurrency";
    assert_eq!(schemas["DepositInstructions"]["properties"]["currency"]["$ref"], currency);
    assert_eq!(schemas["VirtualAccountDestination"]["properties"]["currency"]["$ref"], currency);
    assert_eq!(schemas["StablecoinCurrency"]["enum"], json!(["USDC"]));

    let mut chains = Chains::default();
    let issued = "[[assets]]\nsymbol = \"EURX\"\ncontract_address = \"0x00000000000000000000000000000000000000e1\"\n\
                  decimals = 6\nissued = true\n";
    chains.insert(common::chain_config(&["http://127.0.0.1:1".to_string()], None, issued));
    let app = spawn_app(Backend::Sqlite, chains, RateLimit::default()).await;
    let served = send(Method::GET, &format!("{}/openapi.json", app.base), None).await.body;
    assert_eq!(served["components"]["schemas"]["StablecoinCurrency"]["enum"], json!(["EURX"]));
}
