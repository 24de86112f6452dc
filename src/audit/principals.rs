//! The principals' rows held against the log, pure. Operators, their
//! roles, operator keys and tenants' API keys open doors; each is made and
//! changed only together with its audit entry. [`Logged`] replays the log
//! (the entries that carry a [`Detail`], and the revocations, disablings
//! and pairings) into what it says each principal is; [`Logged::findings`]
//! names every row that the log does not explain: a row with no entry that
//! made it (an SQL `INSERT`), roles the log never gave, an operator
//! enabled or a key live that the log took away, a key moved to another
//! owner, a key left unpaired that the log paired.
//!
//! Rows made before the log recorded these details are adopted once, when
//! a store is first started by this release (see [`super::adopt`]).

use std::collections::HashMap;

use super::{Detail, chain::Entry};

/// An operator's row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorRow {
    pub id: String,
    /// Sorted.
    pub roles: Vec<String>,
    pub enabled: bool,
}

/// A key's row as stored: an operator key (`owner` its operator) or an
/// API key (`owner` its organization).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub id: String,
    pub owner: String,
    pub live: bool,
    /// API keys: paired with a public key.
    pub paired: bool,
    /// API keys: the SHA-256 of the public key paired.
    pub fingerprint: Option<String>,
    /// Operator keys: when it expires (microseconds), `None` never.
    pub expires_at: Option<i64>,
}

/// The principals' rows of a store.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    pub operators: Vec<OperatorRow>,
    pub operator_keys: Vec<KeyRow>,
    pub api_keys: Vec<KeyRow>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct LoggedOperator {
    roles: Vec<String>,
    enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct LoggedKey {
    owner: String,
    live: bool,
    paired: bool,
    fingerprint: Option<String>,
    /// The expiry the log gave it, if any.
    expires_at: Option<i64>,
}

/// What the log says of each principal, replayed entry by entry.
#[derive(Debug, Clone, Default)]
pub struct Logged {
    operators: HashMap<String, LoggedOperator>,
    operator_keys: HashMap<String, LoggedKey>,
    api_keys: HashMap<String, LoggedKey>,
    /// A principal's entry of this release was read: adoption happened
    /// before it or never, so an `*.adopted` entry after it explains
    /// nothing.
    adoption_closed: bool,
}

/// A row the log does not explain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `operator`, `operator key`, `API key`.
    pub kind: &'static str,
    pub id: String,
    pub why: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.id, self.why)
    }
}

impl Logged {
    /// Takes `entry` into account (entries in `seq` order).
    pub fn read(&mut self, entry: &Entry) {
        let detail = entry.detail.as_deref().and_then(Detail::parse);
        let target = entry.target_id.clone();
        if entry.action.ends_with(".adopted") {
            if self.adoption_closed {
                return;
            }
        } else if detail.is_some() && !entry.action.starts_with("key_hashes.") {
            self.adoption_closed = true;
        }
        match (entry.action.as_str(), detail) {
            (
                "operator.bootstrapped"
                | "operator.created"
                | "operator.genesis_created"
                | "operator.adopted",
                Some(detail),
            ) => {
                let enabled = detail.live.unwrap_or(true);
                let roles = detail.roles.unwrap_or_default();
                if let Some(key) = detail.key_id {
                    let key_owner = LoggedKey {
                        owner: target.clone(),
                        live: true,
                        paired: false,
                        fingerprint: None,
                        expires_at: detail.expires_at,
                    };
                    self.operator_keys.insert(key, key_owner);
                }
                self.operators.insert(target, LoggedOperator { roles, enabled });
            }
            ("operator.roles_set", Some(Detail { roles: Some(roles), .. })) => {
                if let Some(operator) = self.operators.get_mut(&target) {
                    operator.roles = roles;
                }
            }
            ("operator.disabled" | "operator.enabled", _) => {
                if let Some(operator) = self.operators.get_mut(&target) {
                    operator.enabled = entry.action == "operator.enabled";
                }
            }
            (
                "operator_key.created" | "operator_key.adopted",
                Some(Detail { key_id: Some(key), live, expires_at, .. }),
            ) => {
                let live = live.unwrap_or(true);
                let logged = LoggedKey { owner: target, live, paired: false, fingerprint: None, expires_at };
                self.operator_keys.insert(key, logged);
            }
            // An expiry given to a key that had none; one the log set
            // already is never moved later.
            ("operator_key.expiry_set", Some(Detail { key_id: Some(key), expires_at: Some(at), .. })) => {
                if let Some(logged) = self.operator_keys.get_mut(&key).filter(|k| k.expires_at.is_none()) {
                    logged.expires_at = Some(at);
                }
            }
            ("operator_key.revoked", Some(Detail { key_id: Some(key), .. })) => {
                if let Some(logged) = self.operator_keys.get_mut(&key) {
                    logged.live = false;
                }
            }
            // An older release's `api_key.created` has no detail: its key
            // is adopted instead.
            ("api_key.created" | "api_key.adopted", Some(detail)) => {
                let owner = entry.organization_id.clone().unwrap_or_default();
                let logged = LoggedKey {
                    owner,
                    live: detail.live.unwrap_or(true),
                    paired: detail.paired.unwrap_or(false),
                    fingerprint: detail.public_key_sha256,
                    expires_at: None,
                };
                self.api_keys.insert(target, logged);
            }
            ("api_key.revoked" | "api_key.paired" | "api_key.unpaired", detail) => {
                if let Some(logged) = self.api_keys.get_mut(&target) {
                    match entry.action.as_str() {
                        "api_key.revoked" => logged.live = false,
                        action => {
                            logged.paired = action == "api_key.paired";
                            logged.fingerprint = detail.and_then(|d| d.public_key_sha256);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// Every row of `rows` the log does not explain.
    pub fn findings(&self, rows: &Rows) -> Vec<Finding> {
        let mut findings = Vec::new();
        for row in &rows.operators {
            let finding = |why: String| Finding { kind: "operator", id: row.id.clone(), why };
            match self.operators.get(&row.id) {
                None => findings.push(finding("no audit entry made it".into())),
                Some(logged) => {
                    if logged.roles != row.roles {
                        let why = format!(
                            "holds the roles {:?}, the log gave {:?}",
                            row.roles.join(","),
                            logged.roles.join(",")
                        );
                        findings.push(finding(why));
                    }
                    if row.enabled && !logged.enabled {
                        findings.push(finding("is enabled, the log disabled it".into()));
                    }
                    if !row.enabled && logged.enabled {
                        findings.push(finding("is disabled, the log left it enabled".into()));
                    }
                }
            }
        }
        keys(&mut findings, "operator key", &rows.operator_keys, &self.operator_keys);
        keys(&mut findings, "API key", &rows.api_keys, &self.api_keys);
        findings
    }
}

fn keys(
    findings: &mut Vec<Finding>,
    kind: &'static str,
    rows: &[KeyRow],
    logged: &HashMap<String, LoggedKey>,
) {
    for row in rows {
        let finding = |why: String| Finding { kind, id: row.id.clone(), why };
        let Some(logged) = logged.get(&row.id) else {
            findings.push(finding("no audit entry made it".into()));
            continue;
        };
        if logged.owner != row.owner {
            findings.push(finding(format!("belongs to {}, the log made it for {}", row.owner, logged.owner)));
        }
        if row.live && !logged.live {
            findings.push(finding("is live, the log revoked it".into()));
        }
        if !row.live && logged.live {
            findings.push(finding("is revoked, the log left it live".into()));
        }
        if let Some(expiry) = logged.expires_at
            && row.expires_at.is_none_or(|at| at > expiry)
        {
            findings.push(finding("expires later than the log set it".into()));
        }
        if logged.paired && !row.paired {
            findings.push(finding("is not paired, the log paired it: its requests need no signature".into()));
        }
        if let (true, Some(logged)) = (row.paired, &logged.fingerprint)
            && row.fingerprint.as_ref() != Some(logged)
        {
            findings.push(finding("is paired with another public key than the log paired it with".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(action: &str, target: &str, org: Option<&str>, detail: Option<Detail>) -> Entry {
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
        for (name, tamper, kind, id, why) in cases {
            let mut tampered = rows();
            tamper(&mut tampered);
            let expected = vec![Finding { kind, id: id.into(), why: why.into() }];
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
}
