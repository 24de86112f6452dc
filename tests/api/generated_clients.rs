//! OpenAPI Generator's Python and TypeScript clients, generated from the
//! sandbox's document as docs/http-api.md shows: every object the interface
//! reference describes is a typed model (compliance bodies, bank account
//! details with their address, the simulation's enums, a conversion's
//! type), never an untyped map.

use crate::common;

use std::{path::Path, process::Command};

use common::python::{self, ok};
use custody_indexer::environment::Environment;

/// The Java runtime OpenAPI Generator's jar runs on: `JAVA_BIN`, or a
/// `java` on the `PATH` (`scripts/install-java.sh` installs one and
/// `scripts/test.sh` names it).
fn java() -> std::path::PathBuf {
    let java = common::binary("JAVA_BIN", "no-cached-java", "java")
        .expect("java not found: run scripts/install-java.sh (or set JAVA_BIN)");
    ok(Command::new(&java).arg("-version"), &format!("{} -version", java.display()));
    java
}

/// Runs OpenAPI Generator (`openapi-generator-cli generate …`) through its
/// Python wrapper, on the Java runtime of [`java`].
fn generate(doc: &Path, generator: &str, out: &Path, extra: &[&str]) {
    let run = "import sys, openapi_generator_cli as g; sys.exit(g.run(sys.argv[1:]).returncode)";
    let java = java();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(java.parent().expect("java's directory").to_path_buf())
        .chain(std::env::split_paths(&path));
    ok(
        Command::new(python::python())
            .env("PATH", std::env::join_paths(dirs).unwrap())
            .args(["-c", run, "generate", "--generator-name", generator, "--input-spec"])
            .arg(doc)
            .arg("--output")
            .arg(out)
            .args(extra),
        &format!("openapi-generator-cli generate -g {generator}"),
    );
}

/// The field declarations of a generated pydantic model: `    name: Type…`.
fn fields_of(source: &str) -> impl Iterator<Item = &str> {
    source.lines().filter(|line| {
        let field = line.strip_prefix("    ").unwrap_or_default();
        field
            .split_once(": ")
            .is_some_and(|(name, _)| name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            && !field.is_empty()
    })
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn openapi_generator_clients_have_typed_models_for_the_reference_objects() {
    let dir = tempfile::tempdir().unwrap();
    // `GENERATED_CLIENTS_DIR` keeps the clients there, to read them.
    let kept = std::env::var_os("GENERATED_CLIENTS_DIR").map(std::path::PathBuf::from);
    let dir = kept.as_deref().unwrap_or(dir.path());
    let doc = dir.join("openapi.json");
    let sandbox = custody_indexer::api::openapi(Environment::Sandbox);
    std::fs::write(&doc, serde_json::to_vec_pretty(&sandbox).unwrap()).unwrap();

    let python = dir.join("python");
    generate(&doc, "python", &python, &["--package-name", "custody_client"]);
    let models = python.join("custody_client/models");
    let model = |name: &str| read(&models.join(format!("{name}.py")));
    // (model, typed fields it must declare)
    let typed: [(&str, &[&str]); 8] = [
        (
            "kyc",
            &[
                "occupation: Occupation",
                "source_of_funds: SourceOfFunds",
                "addresses: List[ComplianceAddress]",
            ],
        ),
        ("kyb", &["business_type: BusinessType", "account_purpose: AccountPurpose"]),
        ("compliance_request", &["kyc: Optional[Kyc]", "kyb: Optional[Kyb]"]),
        ("bank_account", &["bank_account_details: BankAccountDetails"]),
        ("bank_account_details", &["address: Optional[BankAddress]", "type: Optional[BankAccountType]"]),
        ("bank_account_request", &["bank_account_details: BankAccountDetails"]),
        ("fiat_deposit_request", &["currency: FiatCurrency", "payment_rail: FiatPaymentRail"]),
        ("conversion_request", &["type: ConversionType"]),
    ];
    for (name, fields) in typed {
        let source = model(name);
        for field in fields {
            assert!(source.contains(field), "{name}.py lacks `{field}`:\n{source}");
        }
        let untyped = fields_of(&source).find(|field| field.contains("Dict[str, Any]"));
        assert_eq!(untyped, None, "{name}.py has an untyped field");
    }
    for (name, value) in [("occupation", "EMPLOYED"), ("fiat_currency", "USD"), ("fiat_payment_rail", "WIRE")]
    {
        assert!(model(name).contains(&format!("'{value}'")), "{name}.py lacks {value}");
    }
    ok(
        Command::new(python::python()).args(["-m", "compileall", "-q"]).arg(&python),
        "python -m compileall of the generated client",
    );

    let typescript = dir.join("typescript");
    generate(&doc, "typescript-fetch", &typescript, &[]);
    let ts = |name: &str| read(&typescript.join(format!("models/{name}.ts")));
    for (name, field) in [
        ("Kyc", "occupation: Occupation;"),
        ("Kyb", "businessType: BusinessType;"),
        ("BankAccount", "bankAccountDetails: BankAccountDetails;"),
        ("BankAccountDetails", "address?: BankAddress"),
        ("FiatDepositRequest", "paymentRail: FiatPaymentRail;"),
        ("ConversionRequest", "type: ConversionType;"),
    ] {
        let source = ts(name);
        assert!(source.contains(field), "{name}.ts lacks `{field}`:\n{source}");
        assert!(!source.contains("{ [key: string]: any; }"), "{name}.ts has an untyped map:\n{source}");
    }
}
