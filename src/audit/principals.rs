//! The principals' rows held against the log, pure. Operators, their
//! roles, operator keys and tenants' API keys open doors; each is made and
//! changed only together with its audit entry. [`Logged`] replays the log
//! (the entries that carry a [`Detail`], and the revocations, disablings
//! and pairings) into what it says each principal is; [`Logged::findings`]
//! names every row that the log does not explain: a row with no entry that
//! made it (an SQL `INSERT`), roles the log never gave, an operator
//! enabled or a key live that the log took away, a key moved to another
//! owner, a key left unpaired that the log paired, and an operator
//! granted after genesis without another admin's approval (see
//! [`approvals`]).
//!
//! Rows made before the log recorded these details are adopted once, when
//! a store is first started by this release (see [`super::adopt`]).

use std::collections::HashMap;

use super::{Detail, chain::Entry};

mod approvals;

use approvals::Approvals;

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
    /// A grant to it that applied no approved change (see [`approvals`]).
    unapproved: Option<String>,
    /// Its suspension not yet completed, whatever its time.
    suspended: Option<Suspension>,
}

/// An operator suspended (see [`crate::operators::suspension`]) by the
/// entry `seq`, until `until` (microseconds) unless its change `change_id`
/// is applied or the operator disabled before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspension {
    pub seq: i64,
    pub until: i64,
    change_id: Option<String>,
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
    approvals: Approvals,
}

/// A row the log does not explain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `operator`, `operator key`, `API key`.
    pub kind: &'static str,
    pub id: String,
    pub why: String,
    /// The row grants what the log took away or never gave a principal it
    /// knows (a key it revoked live, an operator it disabled enabled, a
    /// role it did not give): refused at authentication too.
    pub grants_more: bool,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.id, self.why)
    }
}

/// The actions that only take power away: an operator disabled or
/// suspended, a key revoked, a person removed or given a second factor,
/// genesis ended.
const TAKING_AWAY: [&str; 7] = [
    "operator.disabled",
    "operator.suspended",
    "operator_key.revoked",
    "api_key.revoked",
    "console_user.removed",
    "console_user.second_factor_added",
    "operator.genesis_ended",
];

impl Logged {
    /// A replay that holds the grants in entries after `seq` (the log's
    /// authentication) to four eyes once genesis has ended.
    pub fn four_eyes_after(seq: i64) -> Self {
        Self { approvals: Approvals::after(seq), ..Self::default() }
    }

    /// Takes `entry` into account as `authority` stands: wholly when it
    /// explains it (see [`crate::store::keyring::Authority::explains`]),
    /// and otherwise only for the power it takes away, whatever its MAC (a
    /// revocation, a disabling, a role removed): a writer who strips such
    /// an entry's MAC (its hash, and so the checkpoints, stay as they
    /// were) gives nothing back by it, and one who appends one destroys,
    /// which a writer may.
    pub fn replay(&mut self, authority: &crate::store::keyring::Authority, entry: &Entry) {
        if authority.explains(entry) || TAKING_AWAY.contains(&entry.action.as_str()) {
            self.read(entry);
        } else if entry.action == "operator.roles_set"
            && let Some(Detail { roles: Some(roles), .. }) = entry.detail.as_deref().and_then(Detail::parse)
            && let Some(operator) = self.operators.get_mut(&entry.target_id)
        {
            operator.roles.retain(|role| roles.contains(role));
        }
    }

    /// Takes `entry` into account (entries in `seq` order).
    pub fn read(&mut self, entry: &Entry) {
        self.approvals.read(entry);
        let detail = entry.detail.as_deref().and_then(Detail::parse);
        let target = entry.target_id.clone();
        if entry.action.ends_with(".adopted") {
            if self.adoption_closed {
                return;
            }
        } else if detail.is_some() && !entry.action.starts_with("key_hashes.") {
            self.adoption_closed = true;
        }
        let action = entry.action.as_str();
        if action.starts_with("operator.") {
            self.read_operator(entry, target, detail);
        } else if action.starts_with("operator_key.") {
            self.read_operator_key(action, target, detail);
        } else if action.starts_with("api_key.") {
            let owner = entry.organization_id.clone().unwrap_or_default();
            self.read_api_key(action, (target, owner), detail);
        }
    }

    /// An operator made (with its first key), its roles set, disabled or
    /// enabled; a grant after genesis held to four eyes.
    fn read_operator(&mut self, entry: &Entry, target: String, detail: Option<Detail>) {
        let action = entry.action.as_str();
        let change_id = detail.as_ref().and_then(|d| d.change_id.clone());
        let approved = |approvals: &mut Approvals| {
            (!approvals.grant(entry, change_id.as_deref())).then(|| approvals::unapproved(entry))
        };
        match (action, detail) {
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
                let unapproved =
                    if action == "operator.adopted" { None } else { approved(&mut self.approvals) };
                let logged = LoggedOperator { roles, enabled, unapproved, suspended: None };
                self.operators.insert(target, logged);
            }
            ("operator.roles_set", Some(Detail { roles: Some(roles), .. })) => {
                if let Some(operator) = self.operators.get_mut(&target) {
                    if roles.iter().any(|role| !operator.roles.contains(role)) {
                        operator.unapproved =
                            operator.unapproved.take().or_else(|| approved(&mut self.approvals));
                    }
                    // A demotion's own change applied ends its suspension.
                    if change_id.is_some()
                        && operator.suspended.as_ref().is_some_and(|s| s.change_id == change_id)
                    {
                        operator.suspended = None;
                    }
                    operator.roles = roles;
                }
            }
            ("operator.suspended", detail) => {
                if let Some(operator) = self.operators.get_mut(&target) {
                    let lapses = crate::operators::suspension::lapses_at(entry.at);
                    let until = detail.and_then(|d| d.expires_at).map_or(lapses, |at| at.min(lapses));
                    // A later entry extends a suspension, never shortens it:
                    // one a writer appends only takes more away.
                    if operator.suspended.as_ref().is_none_or(|held| until > held.until) {
                        operator.suspended = Some(Suspension { seq: entry.seq, until, change_id });
                    }
                }
            }
            // Read only when explained (made by the service): the
            // suspension's change ended otherwise than by its completion.
            ("operator.suspension_ended" | "operator.suspension_lapsed", _) => {
                if let Some(operator) = self.operators.get_mut(&target)
                    && change_id.is_some()
                    && operator.suspended.as_ref().is_some_and(|held| held.change_id == change_id)
                {
                    operator.suspended = None;
                }
            }
            ("operator.disabled" | "operator.enabled", _) => {
                if let Some(operator) = self.operators.get_mut(&target) {
                    operator.suspended = None;
                    operator.enabled = action == "operator.enabled";
                    if operator.enabled {
                        operator.unapproved =
                            operator.unapproved.take().or_else(|| approved(&mut self.approvals));
                    }
                }
            }
            _ => {}
        }
    }

    /// An operator key made, given an expiry, revoked.
    fn read_operator_key(&mut self, action: &str, target: String, detail: Option<Detail>) {
        match (action, detail) {
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
            _ => {}
        }
    }

    /// A tenant's API key made (by organization `owner`), revoked, paired
    /// or unpaired.
    fn read_api_key(&mut self, action: &str, (target, owner): (String, String), detail: Option<Detail>) {
        match (action, detail) {
            // An older release's `api_key.created` has no detail: its key
            // is adopted instead.
            ("api_key.created" | "api_key.adopted", Some(detail)) => {
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
                    match action {
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

    /// The suspension of operator `id` in force at `now` (microseconds),
    /// if any: never longer than the rule's time from its entry, whatever
    /// the entry's detail says.
    pub fn suspended(&self, id: &str, now: i64) -> Option<&Suspension> {
        let suspension = self.operators.get(id)?.suspended.as_ref()?;
        (now < suspension.until).then_some(suspension)
    }

    /// What the log says operator `id` is: (enabled, holding `admin`).
    pub fn operator_state(&self, id: &str) -> (bool, bool) {
        self.operators.get(id).map_or((false, false), |o| (o.enabled, o.roles.iter().any(|r| r == "admin")))
    }

    /// Every row of `rows` the log does not explain.
    pub fn findings(&self, rows: &Rows) -> Vec<Finding> {
        let mut findings = Vec::new();
        for row in &rows.operators {
            let finding =
                |why: String, grants_more| Finding { kind: "operator", id: row.id.clone(), why, grants_more };
            match self.operators.get(&row.id) {
                None => findings.push(finding("no audit entry made it".into(), false)),
                Some(logged) => {
                    if logged.roles != row.roles {
                        let why = format!(
                            "holds the roles {:?}, the log gave {:?}",
                            row.roles.join(","),
                            logged.roles.join(",")
                        );
                        let more = row.roles.iter().any(|role| !logged.roles.contains(role));
                        findings.push(finding(why, more));
                    }
                    if row.enabled && !logged.enabled {
                        findings.push(finding("is enabled, the log disabled it".into(), true));
                    }
                    if !row.enabled && logged.enabled {
                        findings.push(finding("is disabled, the log left it enabled".into(), false));
                    }
                    if let Some(why) = &logged.unapproved {
                        findings.push(finding(why.clone(), true));
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
        let finding =
            |why: &str| Finding { kind, id: row.id.clone(), why: why.to_string(), grants_more: true };
        let Some(logged) = logged.get(&row.id) else {
            findings.push(Finding { grants_more: false, ..finding("no audit entry made it") });
            continue;
        };
        if logged.owner != row.owner {
            findings
                .push(finding(&format!("belongs to {}, the log made it for {}", row.owner, logged.owner)));
        }
        if row.live && !logged.live {
            findings.push(finding("is live, the log revoked it"));
        }
        if !row.live && logged.live {
            findings.push(Finding { grants_more: false, ..finding("is revoked, the log left it live") });
        }
        if let Some(expiry) = logged.expires_at
            && row.expires_at.is_none_or(|at| at > expiry)
        {
            findings.push(finding("expires later than the log set it"));
        }
        if logged.paired && !row.paired {
            findings.push(finding("is not paired, the log paired it: its requests need no signature"));
        }
        if let (true, Some(logged)) = (row.paired, &logged.fingerprint)
            && row.fingerprint.as_ref() != Some(logged)
        {
            findings.push(finding("is paired with another public key than the log paired it with"));
        }
    }
}

#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod tests;
