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

/// Whether `op_a` is suspended at `now` once `tail` is replayed after its
/// creation, the log authenticated at entry `since` (later entries carry
/// no MAC that verifies).
fn suspended_at(since: i64, tail: Vec<Entry>, now: i64) -> bool {
    let authority = Authority::Keyed { since: Some(since) };
    let mut logged = Logged::default();
    let made = entry(1, "operator.created", "op_a", Some(Detail::roles_of(&["admin", "treasury"])));
    for entry in std::iter::once(&made).chain(tail.iter()) {
        logged.replay(&authority, entry);
    }
    logged.suspended("op_a", now).is_some()
}

#[test]
fn a_suspension_holds_until_its_own_change_applies_or_its_time_passes() {
    use crate::operators::suspension::lapses_at;
    let at = 1_700_000_000_000_000;
    let change = |id: &str| Detail { change_id: Some(id.into()), ..Detail::default() };
    let suspended = |detail: Detail| Entry { at, ..entry(2, "operator.suspended", "op_a", Some(detail)) };
    let demoted = |id: &str| {
        let detail = Detail { change_id: Some(id.into()), ..Detail::roles_of(&["treasury"]) };
        entry(3, "operator.roles_set", "op_a", Some(detail))
    };
    let far = Detail { expires_at: Some(i64::MAX), ..change("c1") };
    // (case, authenticated up to, tail, now, suspended)
    let cases: Vec<(&str, i64, Vec<Entry>, i64, bool)> = vec![
        ("suspended", 9, vec![suspended(change("c1"))], at + 1, true),
        ("lapsed", 9, vec![suspended(change("c1"))], lapses_at(at), false),
        ("never longer than the rule", 9, vec![suspended(far)], lapses_at(at), false),
        ("a writer's suspension suspends", 1, vec![suspended(change("c1"))], at + 1, true),
        ("its demotion applied", 9, vec![suspended(change("c1")), demoted("c1")], at + 1, false),
        ("another change's demotion", 9, vec![suspended(change("c1")), demoted("c2")], at + 1, true),
        ("a writer's demotion ends nothing", 2, vec![suspended(change("c1")), demoted("c1")], at + 1, true),
        (
            "disabled",
            9,
            vec![suspended(change("c1")), entry(3, "operator.disabled", "op_a", None)],
            at + 1,
            false,
        ),
        (
            "a writer's later, shorter suspension shortens nothing",
            1,
            vec![
                suspended(change("c1")),
                Entry { seq: 3, ..suspended(Detail { expires_at: Some(at + 1), ..change("c9") }) },
            ],
            at + 2,
            true,
        ),
        (
            "its change ended by the service",
            9,
            vec![suspended(change("c1")), entry(3, "operator.suspension_ended", "op_a", Some(change("c1")))],
            at + 1,
            false,
        ),
        (
            "a writer's end ends nothing",
            2,
            vec![suspended(change("c1")), entry(3, "operator.suspension_ended", "op_a", Some(change("c1")))],
            at + 1,
            true,
        ),
        (
            "another change's end",
            9,
            vec![suspended(change("c1")), entry(3, "operator.suspension_lapsed", "op_a", Some(change("c2")))],
            at + 1,
            true,
        ),
        (
            "a writer's enabling ends nothing",
            2,
            vec![suspended(change("c1")), entry(3, "operator.enabled", "op_a", None)],
            at + 1,
            true,
        ),
    ];
    for (case, since, tail, now, expected) in cases {
        assert_eq!(suspended_at(since, tail, now), expected, "{case}");
    }
}
