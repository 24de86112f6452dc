//! [`Logged::replay`]: what an entry the log does not explain (after the
//! authentication, without its MAC) still does: it takes power away, and
//! gives none.

use super::*;
use crate::store::keyring::Authority;

fn entry(seq: i64, action: &str, target: &str, detail: Option<Detail>) -> Entry {
    Entry { seq, ..super::tests::entry(action, target, None, detail) }
}

fn roles(list: &[&str]) -> Option<Detail> {
    Some(Detail { key_id: None, ..Detail::roles_of(list) })
}

/// The findings that refuse, once the log below (authenticated at entry
/// 2, so entries 3 on carry no MAC that verifies) and `tail` are replayed
/// over an operator row holding admin and treasury, enabled, with key k1
/// live.
fn refused(tail: Vec<Entry>) -> Vec<String> {
    let authority = Authority::Keyed { since: Some(2) };
    let mut logged = Logged::default();
    let made = Detail { key_id: Some("k1".into()), ..Detail::roles_of(&["admin", "treasury"]) };
    let head = [
        entry(1, "operator.created", "op_a", Some(made)),
        entry(2, "audit_log.authenticated", "audit_log", None),
    ];
    for entry in head.iter().chain(tail.iter()) {
        logged.replay(&authority, entry);
    }
    let row =
        OperatorRow { id: "op_a".into(), roles: vec!["admin".into(), "treasury".into()], enabled: true };
    let key = KeyRow {
        id: "k1".into(),
        owner: "op_a".into(),
        live: true,
        paired: false,
        fingerprint: None,
        expires_at: None,
    };
    let rows = Rows { operators: vec![row], operator_keys: vec![key], api_keys: Vec::new() };
    logged.findings(&rows).into_iter().filter(|f| f.grants_more).map(|f| f.why).collect()
}

#[test]
fn an_entry_without_its_mac_takes_power_away_and_gives_none() {
    let cases: Vec<(&str, Vec<Entry>, Option<&str>)> = vec![
        ("nothing after", vec![], None),
        ("a disabling", vec![entry(3, "operator.disabled", "op_a", None)], Some("the log disabled it")),
        (
            "a revocation",
            vec![entry(3, "operator_key.revoked", "op_a", Some(Detail::key("k1")))],
            Some("the log revoked it"),
        ),
        (
            "a role removed",
            vec![entry(3, "operator.roles_set", "op_a", roles(&["admin"]))],
            Some("the log gave"),
        ),
        (
            "a role given back after its removal",
            vec![
                entry(3, "operator.roles_set", "op_a", roles(&["admin"])),
                entry(4, "operator.roles_set", "op_a", roles(&["admin", "treasury"])),
            ],
            Some("the log gave"),
        ),
        (
            "an enabling after a disabling",
            vec![entry(3, "operator.disabled", "op_a", None), entry(4, "operator.enabled", "op_a", None)],
            Some("the log disabled it"),
        ),
    ];
    for (case, tail, expected) in cases {
        let found = refused(tail);
        match expected {
            None => assert!(found.is_empty(), "{case}: {found:?}"),
            Some(text) => assert!(found.iter().any(|why| why.contains(text)), "{case}: {found:?}"),
        }
    }
}
