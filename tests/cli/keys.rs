//! `keys init`, `keys import-local` and keyed account creation with the
//! keys in a SoftHSM2 token: each platform key made once, an issuer key
//! never made beside a stablecoin another key mints, keys moved from the
//! mnemonic at the same addresses, an account's key made before its row
//! and found again by a retry; in production, an admin's key and the
//! audit log.

use crate::common;

use std::process::{Command, Output};

use common::{chain_toml, cli::Env, softhsm::Token, transfers::MNEMONIC};
use serde_json::Value;

/// Another valid phrase (BIP-39's test vector), whose keys are not the
/// platform's.
const OTHER_MNEMONIC: &str = "legal winner thank year wave sausage worth useful legal winner thank yellow";

fn env() -> Env {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    std::fs::write(env.chains.join("solana.toml"), include_str!("../../chains/solana-devnet.toml")).unwrap();
    env
}

fn with_token<'a>(
    env: &Env,
    token: &Token,
    args: &[&str],
    command: &'a mut Option<Command>,
) -> &'a mut Command {
    let made = command.insert(env.command(args));
    made.envs(token.vars())
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The token's private keys' labels, sorted.
fn labels(token: &Token) -> Vec<String> {
    let listed = token.private_keys();
    let mut labels: Vec<String> = listed
        .lines()
        .filter_map(|l| l.trim().strip_prefix("label:").map(|l| l.trim().to_string()))
        .collect();
    labels.sort();
    labels
}

/// `(label, address, state)` of each key a command printed as JSON.
fn states(answer: &Value) -> Vec<(String, String, String)> {
    answer
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let text = |f: &str| k[f].as_str().unwrap_or_default().to_string();
            (text("label"), text("address"), text("state"))
        })
        .collect()
}

#[test]
fn keys_init_makes_each_platform_key_once_in_the_token() {
    let env = env();
    let token = Token::new("init");
    let mut command = None;
    let first = json(&with_token(&env, &token, &["keys", "init", "--json"], &mut command).output().unwrap());
    let first = states(&first);
    assert_eq!(first.len(), 8, "four keys on each family: {first:?}");
    assert!(first.iter().all(|(_, address, state)| state == "made" && !address.is_empty()), "{first:?}");
    let mut made: Vec<String> = first.iter().map(|(label, ..)| label.clone()).collect();
    made.sort();
    assert_eq!(labels(&token), made, "each key is in the token under its label");
    assert!(made.contains(&"custody-indexer:issuer:platform:solana".to_string()), "{made:?}");
    let private = token.private_keys();
    let access = private.lines().filter(|l| l.contains("Access:") && l.contains("never extractable")).count();
    let usage = private
        .lines()
        .filter(|l| l.trim().strip_prefix("Usage:").is_some_and(|u| u.trim() == "sign"))
        .count();
    assert_eq!((access, usage), (8, 8), "made in the token, never leaving it, signing alone: {private}");

    // Again: nothing made, the same addresses.
    let again = json(&with_token(&env, &token, &["keys", "init", "--json"], &mut command).output().unwrap());
    let again = states(&again);
    for ((label, address, _), (label2, address2, state)) in first.iter().zip(&again) {
        assert_eq!((label, address, state.as_str()), (label2, address2, "exists"));
    }
    assert_eq!(labels(&token).len(), 8, "no key made twice");

    // `wallets list` answers the same addresses from the token.
    let wallets =
        json(&with_token(&env, &token, &["wallets", "list", "--json"], &mut command).output().unwrap());
    let listed = wallets.to_string();
    assert!(first.iter().all(|(_, address, _)| listed.contains(address.as_str())), "{listed}");
}

#[test]
fn no_issuer_key_is_made_beside_a_stablecoin_another_key_mints() {
    let issued = "[[assets]]\nsymbol = \"USDP\"\ncontract_address = \"0x5FbDB2315678afecb367f032d93F642f64180aa3\"\n\
                  decimals = 6\nissued = true\n";
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:9".into()], None, issued));
    let token = Token::new("issued");
    let mut command = None;
    let out = with_token(&env, &token, &["keys", "init"], &mut command).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "a refused key fails the command: {stdout}");
    assert!(stdout.contains("custody-indexer:issuer:platform:evm") && stdout.contains("refused"), "{stdout}");
    assert!(stdout.contains("keys import-local"), "it names the way: {stdout}");
    let labels = labels(&token);
    assert_eq!(labels.len(), 3, "sponsor, omnibus, settlement: {labels:?}");
    assert!(!labels.iter().any(|l| l.contains("issuer")), "{labels:?}");
}

#[test]
fn keys_import_local_moves_keys_into_the_token_at_the_same_addresses() {
    let env = env();
    env.identity("default", "identity-1");
    let create = ["accounts", "create", "--type", "SEGREGATED", "--identity-id", "identity-1", "--json"];
    let mnemonic = [("CUSTODY_INDEXER_MNEMONIC", MNEMONIC)];
    let account = json(&env.command(&create).envs(mnemonic).output().unwrap());
    let account_id = account["id"].as_str().unwrap();
    let wallets = json(&env.command(&["wallets", "list", "--json"]).envs(mnemonic).output().unwrap());

    let token = Token::new("import");
    let import = ["keys", "import-local", "--all", "--platform", "--json"];
    let mut command = None;
    let other = [("CUSTODY_INDEXER_MNEMONIC", OTHER_MNEMONIC)];
    let refused = with_token(&env, &token, &import, &mut command).envs(other).output().unwrap();
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && error.contains("not the phrase that made it"), "{error}");
    assert!(!error.contains("legal winner") && !error.contains("abandon"), "never the phrase: {error}");
    // The refusal came at the accounts, after the platform keys: start again.
    let token = Token::new("import2");

    let imported = json(&with_token(&env, &token, &import, &mut command).envs(mnemonic).output().unwrap());
    let imported = states(&imported);
    assert_eq!(imported.len(), 10, "eight platform keys and the account's two: {imported:?}");
    assert!(imported.iter().all(|(.., state)| state == "imported"), "{imported:?}");
    let text = account.to_string();
    let of_account: Vec<_> = imported.iter().filter(|(label, ..)| label.contains(":account:")).collect();
    assert!(
        of_account.iter().all(|(_, address, _)| text.contains(address.as_str())),
        "{of_account:?} {text}"
    );
    // Each key in the token is sensitive, cannot leave it, and only signs.
    let private = token.private_keys();
    let lines = |prefix: &str| -> Vec<String> {
        private.lines().filter_map(|l| l.trim().strip_prefix(prefix).map(|v| v.trim().to_string())).collect()
    };
    assert_eq!(lines("Access:").len(), 10, "{private}");
    assert!(
        lines("Access:")
            .iter()
            .all(|a| a.contains("sensitive") && !a.replace("never extractable", "").contains("extractable")),
        "{private}"
    );
    assert!(lines("Usage:").iter().all(|u| u == "sign"), "{private}");

    // From the token alone: the same platform addresses, and nothing more to import.
    let from_token =
        json(&with_token(&env, &token, &["wallets", "list", "--json"], &mut command).output().unwrap());
    assert_eq!(strip_backends(from_token), strip_backends(wallets));
    let again =
        with_token(&env, &token, &["keys", "import-local", "--account", account_id, "--json"], &mut command);
    let again = states(&json(&again.envs(mnemonic).output().unwrap()));
    assert!(again.len() == 2 && again.iter().all(|(.., state)| state == "in the token"), "{again:?}");
}

/// `wallets list --json` without where the keys live.
fn strip_backends(mut wallets: Value) -> Value {
    for wallet in wallets.as_array_mut().unwrap() {
        wallet.as_object_mut().unwrap().remove("backend");
    }
    wallets
}

/// Before the identity was checked ahead of the keys (an attacker review
/// found it), each refused creation made a key pair in the token: a tenant
/// could fill the HSM with made-up identities.
#[test]
fn an_account_creation_makes_keys_only_for_an_identity_that_opens_accounts_and_once() {
    let env = env();
    let token = Token::new("accounts");
    let create = [
        "accounts",
        "create",
        "--account-id",
        "acct-1",
        "--type",
        "SEGREGATED",
        "--identity-id",
        "late",
        "--json",
    ];
    let mut command = None;
    let failed = with_token(&env, &token, &create, &mut command).output().unwrap();
    assert!(!failed.status.success(), "no such identity yet");
    assert!(labels(&token).is_empty(), "no key made for a creation refused");

    env.identity("default", "late");
    let account = json(&with_token(&env, &token, &create, &mut command).output().unwrap());
    let made = labels(&token);
    assert_eq!(made.len(), 2, "an EVM and a Solana key: {made:?}");
    assert_eq!(account["addresses"].as_array().unwrap().len(), 2, "{account}");
    // The same account again: refused, and its keys are found, not made anew.
    let again = with_token(&env, &token, &create, &mut command).output().unwrap();
    assert!(!again.status.success(), "the account exists");
    assert_eq!(labels(&token), made, "no key made twice");
    let other =
        ["accounts", "create", "--account-id", "acct-2", "--type", "SEGREGATED", "--identity-id", "late"];
    assert!(with_token(&env, &token, &other, &mut command).status().unwrap().success());
    assert_eq!(labels(&token).len(), 4, "another account, other keys");
}

/// `serve` started: `Ok` once it answers (then stopped), or its standard
/// error when it exits first.
fn serve(env: &Env, token: &Token) -> Result<(), String> {
    let log = env.dir.path().join(format!("serve-{}.err", uuid::Uuid::new_v4()));
    let mut command = env.command(&["serve"]);
    let mut child = command
        .envs(token.vars())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    for _ in 0..300 {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success());
            return Err(std::fs::read_to_string(&log).unwrap());
        }
        if std::fs::read_to_string(&log).unwrap().contains("listening") {
            child.kill().unwrap();
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    panic!("serve neither answered nor exited: {}", std::fs::read_to_string(&log).unwrap());
}

#[test]
fn a_replaced_token_stops_the_service_until_its_keys_are_accepted() {
    let env = Env::with_chain_file(&chain_toml(&["http://127.0.0.1:9".into()], None, ""));
    let first = Token::new("first");
    let mut command = None;
    assert!(with_token(&env, &first, &["keys", "init"], &mut command).status().unwrap().success());

    // Another token (empty, or another deployment's): its keys are refused.
    let second = Token::new("second");
    let out = with_token(&env, &second, &["keys", "init"], &mut command).output().unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && error.contains("--accept-new-keys"), "{error}");
    let refused = serve(&env, &second).expect_err("the service does not start with replaced keys");
    assert!(refused.contains("the sponsor key on evm chains was 0x"), "{refused}");

    // Accepted by an admin (the service made the store production's):
    // recorded, audited, and then the first token is the stranger.
    let admin = env.production_operator("Keeper", "admin");
    let accept = ["keys", "init", "--accept-new-keys"];
    let accepted =
        with_token(&env, &second, &accept, &mut command).env("CUSTODY_INDEXER_OPERATOR_KEY", &admin).output();
    let accepted = accepted.unwrap();
    assert!(accepted.status.success(), "{}", String::from_utf8_lossy(&accepted.stderr));
    let listed = env.ok(&["audit", "list", "--json"]);
    assert_eq!(listed.matches("\"key.accepted\"").count(), 4, "{listed}");
    let refused = serve(&env, &first).expect_err("the old keys are refused now");
    assert!(refused.contains("key on evm chains was"), "{refused}");
    serve(&env, &second).expect("the accepted keys start");
}

#[test]
fn in_production_keys_commands_take_an_admins_key_and_are_audited() {
    let env = env();
    let admin = env.production_operator("Keeper", "admin");
    let treasurer = env.break_glass_key();
    let token = Token::new("production");
    let mut command = None;
    let init = ["keys", "init", "--json"];
    let alone = with_token(&env, &token, &init, &mut command).env_remove("CUSTODY_INDEXER_OPERATOR_KEY");
    let error = String::from_utf8_lossy(&alone.output().unwrap().stderr).into_owned();
    assert!(error.contains("CUSTODY_INDEXER_OPERATOR_KEY"), "{error}");
    let wrong = with_token(&env, &token, &init, &mut command).env("CUSTODY_INDEXER_OPERATOR_KEY", &treasurer);
    let error = String::from_utf8_lossy(&wrong.output().unwrap().stderr).into_owned();
    assert!(error.contains("admin"), "a treasurer is refused: {error}");
    assert!(labels(&token).is_empty(), "nothing made before the admin's key");

    let by_admin = with_token(&env, &token, &init, &mut command).env("CUSTODY_INDEXER_OPERATOR_KEY", &admin);
    let made = states(&json(&by_admin.output().unwrap()));
    let listed = env.ok(&["audit", "list", "--json"]);
    let log: Vec<Value> = listed.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let entries: Vec<&Value> = log.iter().filter(|e| e["action"] == "key.made").collect();
    assert_eq!(entries.len(), made.len(), "one entry per key made: {entries:?}");
    for (label, ..) in &made {
        let entry = entries.iter().find(|e| e["target_id"] == label.as_str()).expect(label);
        assert!(entry["actor"].as_str().unwrap().starts_with("operator:op_"), "{entry}");
        assert_eq!(entry["actor_name"], "Keeper", "{entry}");
    }
    assert!(env.output(&["audit", "verify"]).status.success(), "the log still verifies");
}
