use super::*;

pub(super) fn entry(action: &str, target: &str, org: Option<&str>, detail: Option<Detail>) -> Entry {
    Entry {
        seq: 0,
        at: 0,
        actor: "system".into(),
        actor_name: None,
        action: action.into(),
        target_kind: "operator".into(),
        target_id: target.into(),
        organization_id: org.map(str::to_string),
        reason: None,
        request_id: None,
        detail: detail.map(|d| d.text()),
        prev_hash: String::new(),
        hash: String::new(),
        mac: None,
    }
}

fn roles(roles: &[&str]) -> Vec<String> {
    roles.iter().map(|r| r.to_string()).collect()
}

fn with_roles(list: &[&str], key: Option<&str>) -> Option<Detail> {
    Some(Detail { roles: Some(roles(list)), key_id: key.map(str::to_string), ..Detail::default() })
}

/// A log: an admin bootstrapped with key k1, a treasury operator with
/// k2, a key k3 made for the admin then revoked, an API key paired.
fn log() -> Logged {
    let mut logged = Logged::default();
    for entry in [
        entry("operator.bootstrapped", "op_a", None, with_roles(&["admin"], Some("k1"))),
        entry("operator.created", "op_t", None, with_roles(&["treasury"], Some("k2"))),
        entry("operator.roles_set", "op_t", None, with_roles(&["compliance", "treasury"], None)),
        entry("operator_key.created", "op_a", None, Some(Detail::key("k3"))),
        entry("operator_key.revoked", "op_a", None, Some(Detail::key("k3"))),
        entry(
            "api_key.created",
            "key_1",
            Some("acme"),
            Some(Detail { live: Some(true), ..Detail::default() }),
        ),
        entry(
            "api_key.paired",
            "key_1",
            Some("acme"),
            Some(Detail { public_key_sha256: Some("ab".repeat(32)), ..Detail::default() }),
        ),
        entry("operator.created", "op_gone", None, with_roles(&["compliance"], Some("k4"))),
        entry("operator.disabled", "op_gone", None, None),
    ] {
        logged.read(&entry);
    }
    logged
}

fn rows() -> Rows {
    let operator =
        |id: &str, list: &[&str], enabled| OperatorRow { id: id.into(), roles: roles(list), enabled };
    let key = |id: &str, owner: &str, live, paired: bool| KeyRow {
        id: id.into(),
        owner: owner.into(),
        live,
        paired,
        fingerprint: paired.then(|| "ab".repeat(32)),
        expires_at: None,
    };
    Rows {
        operators: vec![
            operator("op_a", &["admin"], true),
            operator("op_t", &["compliance", "treasury"], true),
            operator("op_gone", &["compliance"], false),
        ],
        operator_keys: vec![
            key("k1", "op_a", true, false),
            key("k2", "op_t", true, false),
            key("k3", "op_a", false, false),
            key("k4", "op_gone", true, false),
        ],
        api_keys: vec![key("key_1", "acme", true, true)],
    }
}

#[test]
fn rows_made_with_their_entries_are_explained() {
    assert_eq!(log().findings(&rows()), vec![]);
}

#[test]
fn each_row_written_outside_the_log_is_named() {
    type Tamper = fn(&mut Rows);
    let cases: [(&str, Tamper, &str, &str, &str); 12] = [
        (
            "another public key",
            |r| r.api_keys[0].fingerprint = Some("cd".repeat(32)),
            "API key",
            "key_1",
            "is paired with another public key than the log paired it with",
        ),
        (
            "an admin disabled",
            |r| r.operators[0].enabled = false,
            "operator",
            "op_a",
            "is disabled, the log left it enabled",
        ),
        (
            "a key revoked",
            |r| r.operator_keys[1].live = false,
            "operator key",
            "k2",
            "is revoked, the log left it live",
        ),
        (
            "an operator inserted",
            |r| {
                r.operators.push(OperatorRow {
                    id: "op_x".into(),
                    roles: roles(&["treasury"]),
                    enabled: true,
                })
            },
            "operator",
            "op_x",
            "no audit entry made it",
        ),
        (
            "a role added",
            |r| r.operators[1].roles = roles(&["admin", "compliance", "treasury"]),
            "operator",
            "op_t",
            "holds the roles \"admin,compliance,treasury\", the log gave \"compliance,treasury\"",
        ),
        (
            "a disabled operator enabled",
            |r| r.operators[2].enabled = true,
            "operator",
            "op_gone",
            "is enabled, the log disabled it",
        ),
        (
            "an operator key inserted",
            |r| {
                r.operator_keys.push(KeyRow {
                    id: "k9".into(),
                    owner: "op_a".into(),
                    live: true,
                    paired: false,
                    fingerprint: None,
                    expires_at: None,
                })
            },
            "operator key",
            "k9",
            "no audit entry made it",
        ),
        (
            "a revoked key revived",
            |r| r.operator_keys[2].live = true,
            "operator key",
            "k3",
            "is live, the log revoked it",
        ),
        (
            "a key moved to the admin",
            |r| r.operator_keys[1].owner = "op_a".into(),
            "operator key",
            "k2",
            "belongs to op_a, the log made it for op_t",
        ),
        (
            "an API key inserted",
            |r| {
                r.api_keys.push(KeyRow {
                    id: "key_9".into(),
                    owner: "acme".into(),
                    live: true,
                    paired: false,
                    fingerprint: None,
                    expires_at: None,
                })
            },
            "API key",
            "key_9",
            "no audit entry made it",
        ),
        (
            "an API key unpaired",
            |r| r.api_keys[0].paired = false,
            "API key",
            "key_1",
            "is not paired, the log paired it: its requests need no signature",
        ),
        (
            "an API key moved to another tenant",
            |r| r.api_keys[0].owner = "globex".into(),
            "API key",
            "key_1",
            "belongs to globex, the log made it for acme",
        ),
    ];
    // What an authentication refuses too: the row grants more than the log.
    let grants_more = [
        "another public key",
        "a role added",
        "a disabled operator enabled",
        "a revoked key revived",
        "a key moved to the admin",
        "an API key unpaired",
        "an API key moved to another tenant",
    ];
    for (name, tamper, kind, id, why) in cases {
        let mut tampered = rows();
        tamper(&mut tampered);
        let more = grants_more.contains(&name);
        let expected = vec![Finding { kind, id: id.into(), why: why.into(), grants_more: more }];
        assert_eq!(log().findings(&tampered), expected, "{name}");
    }
}

#[test]
fn adopted_rows_are_explained_as_they_were_found() {
    let mut logged = Logged::default();
    let adopted = |live| Some(Detail { live: Some(live), ..Detail::roles_of(&["treasury"]) });
    logged.read(&entry("operator.adopted", "op_old", None, adopted(false)));
    let key = Some(Detail { live: Some(false), ..Detail::key("k_old") });
    logged.read(&entry("operator_key.adopted", "op_old", None, key));
    let api = Some(Detail { live: Some(true), paired: Some(true), ..Detail::default() });
    logged.read(&entry("api_key.adopted", "key_old", Some("acme"), api));
    let rows = Rows {
        operators: vec![OperatorRow { id: "op_old".into(), roles: roles(&["treasury"]), enabled: true }],
        operator_keys: vec![KeyRow {
            id: "k_old".into(),
            owner: "op_old".into(),
            live: true,
            paired: false,
            fingerprint: None,
            expires_at: None,
        }],
        api_keys: vec![KeyRow {
            id: "key_old".into(),
            owner: "acme".into(),
            live: true,
            paired: false,
            fingerprint: None,
            expires_at: None,
        }],
    };
    let whys: Vec<String> = logged.findings(&rows).iter().map(ToString::to_string).collect();
    assert_eq!(
        whys,
        [
            "operator op_old: is enabled, the log disabled it",
            "operator key k_old: is live, the log revoked it",
            "API key key_old: is not paired, the log paired it: its requests need no signature",
        ]
    );
}

#[test]
fn an_adoption_after_the_first_entry_of_this_release_explains_nothing() {
    let mut logged = log();
    let adopted = Some(Detail { live: Some(true), ..Detail::key("k9") });
    logged.read(&entry("operator_key.adopted", "op_a", None, adopted));
    let mut rows = rows();
    rows.operator_keys.push(KeyRow {
        id: "k9".into(),
        owner: "op_a".into(),
        live: true,
        paired: false,
        fingerprint: None,
        expires_at: None,
    });
    let whys: Vec<String> = logged.findings(&rows).iter().map(ToString::to_string).collect();
    assert_eq!(whys, ["operator key k9: no audit entry made it"]);
}

#[test]
fn entries_without_a_detail_of_an_older_release_explain_no_row() {
    let mut logged = Logged::default();
    logged.read(&entry("operator.created", "op_a", None, None));
    logged.read(&entry("api_key.created", "key_1", Some("acme"), None));
    let rows = Rows {
        operators: vec![OperatorRow { id: "op_a".into(), roles: roles(&["admin"]), enabled: true }],
        api_keys: vec![KeyRow {
            id: "key_1".into(),
            owner: "acme".into(),
            live: true,
            paired: false,
            fingerprint: None,
            expires_at: None,
        }],
        ..Rows::default()
    };
    assert_eq!(logged.findings(&rows).len(), 2);
}

#[test]
fn an_expiry_the_log_set_is_never_moved_later_by_an_expiry_set() {
    let mut logged = Logged::default();
    let created = Detail { expires_at: Some(10), ..Detail::key("k1") };
    logged.read(&entry("operator_key.created", "op_a", None, Some(created)));
    logged.read(&entry(
        "operator_key.expiry_set",
        "op_a",
        None,
        Some(Detail { expires_at: Some(99), ..Detail::key("k1") }),
    ));
    let row = |expires_at| Rows {
        operator_keys: vec![KeyRow {
            id: "k1".into(),
            owner: "op_a".into(),
            live: true,
            paired: false,
            fingerprint: None,
            expires_at,
        }],
        ..Rows::default()
    };
    assert!(logged.findings(&row(Some(10))).iter().all(|f| f.kind != "operator key"));
    let moved = logged.findings(&row(Some(99)));
    assert!(moved.iter().any(|f| f.why.contains("expires later than the log set it")), "{moved:?}");
    assert!(!logged.findings(&row(None)).is_empty(), "an expiry taken away");
    // A key of an older release had none: its first expiry_set holds.
    let mut old = Logged::default();
    old.read(&entry("operator_key.created", "op_a", None, Some(Detail::key("k1"))));
    old.read(&entry(
        "operator_key.expiry_set",
        "op_a",
        None,
        Some(Detail { expires_at: Some(99), ..Detail::key("k1") }),
    ));
    assert!(old.findings(&row(Some(99))).is_empty());
}

/// A production log past its authentication (entry 3) and genesis: the
/// grants in `tail` (after it) as the four-eyes rule judges them, the
/// finding about `op_x` if any.
fn four_eyes(tail: &[Entry]) -> Option<String> {
    let mut logged = Logged::four_eyes_after(3);
    let head = [
        entry("operator.bootstrapped", "op_a", None, with_roles(&["admin"], Some("k1"))),
        entry("operator.genesis_created", "op_b", None, with_roles(&["admin"], None)),
        entry("audit_log.authenticated", "audit_log", None, None),
        entry("operator.genesis_ended", "genesis", None, None),
    ];
    for (seq, mut entry) in head.into_iter().chain(tail.iter().cloned()).enumerate() {
        entry.seq = seq as i64 + 1;
        logged.read(&entry);
    }
    let row = OperatorRow { id: "op_x".into(), roles: roles(&["admin", "treasury"]), enabled: true };
    let rows = Rows { operators: vec![row], ..Rows::default() };
    let finding = logged.findings(&rows).into_iter().find(|f| f.grants_more)?;
    Some(finding.why)
}

fn by(actor: &str, action: &str, target: &str) -> Entry {
    Entry { actor: actor.into(), ..entry(action, target, None, None) }
}

fn applying(action: &str, change: Option<&str>, list: &[&str]) -> Entry {
    let detail = Detail { change_id: change.map(str::to_string), ..with_roles(list, None).unwrap() };
    by("operator:op_b", action, "op_x").with_detail(detail)
}

impl Entry {
    fn with_detail(self, detail: Detail) -> Self {
        Entry { detail: Some(detail.text()), ..self }
    }
}

#[test]
fn after_genesis_a_grant_applies_a_change_another_admin_approved_once() {
    let proposed = || by("operator:op_a", "operator_change.proposed", "chg_1");
    let approved = |actor: &str| by(actor, "operator_change.approved", "chg_1");
    let made = |change| applying("operator.created", change, &["admin", "treasury"]);
    let cases: Vec<(&str, Vec<Entry>, Option<&str>)> = vec![
        ("approved by another admin", vec![proposed(), approved("operator:op_b"), made(Some("chg_1"))], None),
        ("no change named", vec![proposed(), approved("operator:op_b"), made(None)], Some("entry 7")),
        (
            "approved by its proposer",
            vec![proposed(), approved("operator:op_a"), made(Some("chg_1"))],
            Some("entry 7"),
        ),
        ("never approved", vec![proposed(), made(Some("chg_1"))], Some("entry 6")),
        (
            "approved before proposed",
            vec![approved("operator:op_b"), proposed(), made(Some("chg_1"))],
            Some("entry 7"),
        ),
        (
            "another change's approval",
            vec![proposed(), approved("operator:op_b"), made(Some("chg_2"))],
            Some("entry 7"),
        ),
        (
            "one approval applied twice",
            vec![
                proposed(),
                approved("operator:op_b"),
                applying("operator.created", Some("chg_1"), &["admin"]),
                applying("operator.roles_set", Some("chg_1"), &["admin", "treasury"]),
            ],
            Some("entry 8 (operator.roles_set)"),
        ),
        (
            "a role removed needs no approval",
            vec![
                proposed(),
                approved("operator:op_b"),
                applying("operator.created", Some("chg_1"), &["admin", "compliance", "treasury"]),
                applying("operator.roles_set", None, &["admin", "treasury"]),
            ],
            None,
        ),
        (
            "enabled again without a change",
            vec![
                proposed(),
                approved("operator:op_b"),
                made(Some("chg_1")),
                by("operator:op_a", "operator.disabled", "op_x"),
                by("operator:op_a", "operator.enabled", "op_x"),
            ],
            Some("entry 9 (operator.enabled)"),
        ),
    ];
    for (case, tail, expected) in cases {
        let found = four_eyes(&tail);
        match expected {
            None => assert_eq!(found, None, "{case}"),
            Some(text) => {
                assert!(found.as_deref().is_some_and(|why| why.contains(text)), "{case}: {found:?}")
            }
        }
    }
}

#[test]
fn grants_before_the_authentication_or_in_genesis_are_not_held_to_four_eyes() {
    // Before the authentication (entry 9 of this log) nothing is held.
    let mut logged = Logged::four_eyes_after(9);
    let mut seq = 0;
    let mut read = |logged: &mut Logged, mut e: Entry| {
        seq += 1;
        e.seq = seq;
        logged.read(&e);
    };
    read(&mut logged, entry("operator.genesis_created", "op_x", None, with_roles(&["admin"], None)));
    read(&mut logged, entry("operator.genesis_ended", "genesis", None, None));
    read(&mut logged, entry("operator.created", "op_y", None, with_roles(&["treasury"], None)));
    let rows = Rows {
        operators: vec![
            OperatorRow { id: "op_x".into(), roles: roles(&["admin"]), enabled: true },
            OperatorRow { id: "op_y".into(), roles: roles(&["treasury"]), enabled: true },
        ],
        ..Rows::default()
    };
    assert!(logged.findings(&rows).is_empty());
    // A log never authenticated holds nothing either.
    let mut plain = Logged::default();
    read(&mut plain, entry("operator.genesis_ended", "genesis", None, None));
    read(&mut plain, entry("operator.created", "op_z", None, with_roles(&["treasury"], None)));
    let rows = Rows {
        operators: vec![OperatorRow { id: "op_z".into(), roles: roles(&["treasury"]), enabled: true }],
        ..Rows::default()
    };
    assert!(plain.findings(&rows).is_empty());
}
